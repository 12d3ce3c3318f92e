"""Comprehensions: in results (`(VECTORIZE (ADD (GEP ...) (GEP ...)) for i in range(n))`, per-source tuples) and in args
and guards (`[tuple(inner[i] for i in outer)]`).

Oracles: numpy's transpose for merged permutations; Python integers (wrapped to int32) for lane-wise arithmetic.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from dslc.compile import compile_rules, exec_module
from runtime import UOp, Ops, dtypes, graph_rewrite

RULES = """
ruleset t
# permute of a permute is one permute, its order computed from both
(PERMUTE [outer] (PERMUTE [inner] x)) -> (PERMUTE:x.dtype [tuple(inner[i] for i in outer)] x)
# a vector ADD lane by lane: a VECTORIZE of scalar ADDs of the lanes (its dtype: one lane per source)
(ADD x:ints y) if x.dtype.count > 1 -> (VECTORIZE (ADD (GEP:x.dtype.scalar [(i,)] x) (GEP:y.dtype.scalar [(i,)] y)) for i in range(x.dtype.count))
# a lane of a VECTORIZE is its source
(GEP [lanes] (VECTORIZE rest*)) if len(lanes) == 1 -> {rest[lanes[0]]}
# a SINK keeps the sources that are not constants, with a filter
(SINK rest*) if any(s.op is Ops.CONST for s in rest) -> (SINK s for s in rest if s.op is not Ops.CONST)
ruleset grad(ctx: UOp) returns per-source
# one entry per source, however many
(SINK rest*) -> (ctx for _ in rest)
(VECTORIZE rest*) -> ((GEP:ctx.dtype.scalar [(i,)] ctx) for i in range(len(rest)))
"""

@pytest.fixture(scope="module")
def ns():
  out: dict = {}
  exec_module(compile_rules("t.rules", "t.rules", source=RULES), "t.rules", out)
  return out

@settings(max_examples=100, deadline=None)
@given(st.integers(1, 5).flatmap(lambda n: st.tuples(st.permutations(range(n)), st.permutations(range(n)))))
def test_merged_permute_agrees_with_numpy(ns, perms):
  inner, outer = (tuple(p) for p in perms)
  x = UOp.variable("x", 0, 9)
  merged = ns["t"].rewrite(UOp(Ops.PERMUTE, x.dtype, (UOp(Ops.PERMUTE, x.dtype, (x,), inner),), outer))
  assert merged.op is Ops.PERMUTE and merged.src == (x,)
  a = np.arange(np.prod(range(2, 2 + len(inner)))).reshape(tuple(range(2, 2 + len(inner))))
  assert np.array_equal(np.transpose(np.transpose(a, inner), outer), np.transpose(a, merged.arg))

@settings(max_examples=60, deadline=None)
@given(st.integers(2, 8).flatmap(lambda n: st.tuples(st.lists(st.integers(-2**31, 2**31 - 1), min_size=n, max_size=n),
                                                      st.lists(st.integers(-2**31, 2**31 - 1), min_size=n, max_size=n))))
def test_lanewise_add_agrees_with_python_ints(ns, lanes):
  xs, ys = lanes
  n = len(xs)
  vx, vy = (UOp(Ops.VECTORIZE, dtypes.int32.vec(n), tuple(UOp.const(dtypes.int32, v) for v in vals)) for vals in (xs, ys))
  out = graph_rewrite(vx + vy, ns["t"])
  assert out.op is Ops.VECTORIZE and out.dtype is dtypes.int32.vec(n) and len(out.src) == n
  for lane, a, b in zip(out.src, xs, ys):
    assert lane.sym_infer({}) == (a + b + 2**31) % 2**32 - 2**31

def test_a_filter_keeps_some_sources(ns):
  a, b = UOp.variable("a", 0, 9), UOp.variable("b", 0, 9)
  sink = UOp(Ops.SINK, dtypes.void, (a, UOp.const(dtypes.index, 1), b))
  assert ns["t"].rewrite(sink) is UOp(Ops.SINK, dtypes.void, (a, b))
  assert ns["t"].rewrite(UOp(Ops.SINK, dtypes.void, (a, b))) is None

@pytest.mark.parametrize("n", [0, 1, 3, 70])
def test_per_source_comprehension_gives_one_entry_per_source(ns, n):
  g = UOp.variable("g", 0, 9, dtypes.float32)
  srcs = tuple(UOp.variable(f"v{i}", 0, 9) for i in range(n))
  assert ns["grad"].rewrite(UOp(Ops.SINK, dtypes.void, srcs), g) == (g,) * n
  if n:
    gv = UOp.variable("h", 0, 9, dtypes.float32.vec(n)) if n > 1 else g
    got = ns["grad"].rewrite(UOp(Ops.VECTORIZE, dtypes.float32.vec(n), srcs), gv)
    assert got == tuple(UOp(Ops.GEP, dtypes.float32, (gv,), (i,)) for i in range(n))
