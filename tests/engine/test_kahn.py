"""runtime/kahn.py: the dependency sort the scheduler and the linearizer share, against a brute-force check."""
from __future__ import annotations
from hypothesis import given, strategies as st
from runtime.kahn import dependency_order

@given(st.integers(1, 12).flatmap(lambda n: st.tuples(st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=30),
                                                      st.permutations(range(n)))))
def test_order_respects_dependencies_and_priorities(case):
  n, edges, prio = case
  deps = {i: {j for a, j in edges if a == i and j < i} for i in range(n)}  # only to smaller keys: no cycles
  order = dependency_order(deps, lambda x: prio[x])
  assert sorted(order) == list(range(n))
  at = {x: i for i, x in enumerate(order)}
  assert all(at[d] < at[x] for x, ds in deps.items() for d in ds)
  # greedy: each pick is the smallest-priority key whose dependencies are all placed
  placed: set[int] = set()
  for x in order:
    ready = [y for y in range(n) if y not in placed and deps[y] <= placed]
    assert prio[x] == min(prio[y] for y in ready)
    placed.add(x)

def test_a_cycle_is_left_out():
  order = dependency_order({"a": [], "b": ["c"], "c": ["b"], "d": ["a"]}, ord)
  assert order == ["a", "d"]
