"""Rule sets parametrised by a capability: `ruleset late(caps)` compiles to a cached function `late(caps) -> Matcher` whose
guards read `caps`; a guard that reads only parameters is computed once per instance.

Oracle: Python integers (sym_infer). Whatever the capabilities, each instance's rewrites keep every value, and an
instance decomposes exactly the ops its capabilities lack.
"""
import itertools
import pytest
from hypothesis import given, settings, strategies as st
from dslc.compile import compile_rules, exec_module
from runtime import UOp, Ops, dtypes, graph_rewrite

LATE = """
ruleset late(caps: frozenset) "Decompositions of the ops a target lacks."
# a*b + c without MULACC
(MULACC a b c) if Ops.MULACC not in caps -> (ADD (MUL a b) c)
# max(x, y) without MAX: a select
(MAX x:ints y) if Ops.MAX not in caps -> (WHERE (CMPLT x y) y x)
# x != y without CMPNE: not (x == y), and the other way round
(CMPNE x y) if Ops.CMPNE not in caps and Ops.CMPEQ in caps -> (XOR (CMPEQ x y) True)
(CMPEQ x y) if Ops.CMPEQ not in caps and Ops.CMPNE in caps -> (XOR (CMPNE x y) True)
ruleset cleanup
(XOR (XOR x True) True) -> x
ruleset both(caps: frozenset) = late + cleanup
"""

@pytest.fixture(scope="module")
def ns():
  out: dict = {}
  exec_module(compile_rules("late.rules", "late.rules", source=LATE), "late.rules", out)
  return out

OPTIONAL = (Ops.MULACC, Ops.MAX, Ops.CMPNE, Ops.CMPEQ)
CAPS = [frozenset(c) for n in range(len(OPTIONAL) + 1) for c in itertools.combinations(OPTIONAL, n)]
A, B, C = (UOp.variable(n, -50, 50, dtypes.int32) for n in "abc")

def programs():
  return [UOp(Ops.MULACC, dtypes.int32, (A, B, C)), A.maximum(B * 3), A.ne(B), A.eq(C), (A.maximum(B) + 1).eq(C)]

@settings(max_examples=40, deadline=None)
@given(st.sampled_from(CAPS), st.tuples(*[st.integers(-50, 50)] * 3))
def test_every_instance_keeps_values_and_removes_what_it_lacks(ns, caps, vals):
  env = dict(zip("abc", vals))
  m = ns["both"](caps)
  for p in programs():
    out = graph_rewrite(p, m)
    assert out.sym_infer(env) == p.sym_infer(env), (caps, p.render())
    left = {u.op for u in out.toposort()}
    for op in (Ops.MULACC, Ops.MAX): assert op in caps or op not in left, (caps, out.render())
    if Ops.CMPEQ in caps and Ops.CMPNE not in caps: assert Ops.CMPNE not in left

def test_instances_are_cached_and_distinct(ns):
  full, none = frozenset(OPTIONAL), frozenset()
  assert ns["late"](full) is ns["late"](frozenset(OPTIONAL)) and ns["late"](full) is not ns["late"](none)
  assert ns["late"](full).rewrite(A.maximum(B)) is None and ns["late"](none).rewrite(A.maximum(B)) is not None
  assert ns["both"](none) is ns["both"](none)

def test_a_guard_on_parameters_runs_once_per_instance():
  code = compile_rules("late.rules", "late.rules", source=LATE)
  late = code.split("def late(caps")[1].split("\n@functools.cache")[0]
  assert "_k0 = MULACC not in caps" in late
  dispatch = [x for x in late.split("  def late_MULACC(")[1].split("\n\n")[0].split("\n") if not x.lstrip().startswith("#")]
  assert not any("caps" in x for x in dispatch) and "    if _k0:" in dispatch

def test_statistics_count_an_instances_rules(ns):
  from runtime.helpers import Context
  m = ns["late"](frozenset())
  with Context(RULESTATS=1): graph_rewrite(A.maximum(B), m)
  assert next(r for r in m.rules if r.text.startswith("(MAX")).hits == 1
