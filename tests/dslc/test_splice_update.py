"""Rest-of-sources capture and splice (`(LOAD (GEP x) rest*) -> (LOAD x rest*)`) and functional update (`x{dtype: ..., arg: ...}`).

Oracles: the node a rule must build, written by hand with the UOp constructor, for every number of further sources;
numpy for the value a cast rule computes; and each rule alone agreeing with the shared dispatch function.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from dslc.compile import compile_rules, exec_module
from runtime import UOp, Ops, dtypes, graph_rewrite

RULES = """
ruleset t
# devectorizer style: a load through a GEP of lane 0 loads from the GEP's source; the other sources stay as they were
(LOAD (GEP [(0,)] x) rest*) -> (LOAD x rest*)
# a SINK's first source goes last (a guard can read the tuple)
(SINK x rest*) if len(rest) > 0 and x.op is Ops.CONST -> (SINK rest* x)
# an index that is always valid loses its guard; the node keeps its op, dtype and arg
u@(INDEX g i (CONST [True])) -> u{src: (g, i)}
# an int constant cast to float32 is a float32 constant
(CAST:float32 c@(CONST:ints)) -> c{dtype: float32, arg: cast_value(c.arg, dtypes.float32)}
# a functional update may change the op (and read captures in every field)
u@(SUB x y) if y.op is Ops.NEG -> u{op: ADD, src: (x, y.src[0])}
# lanes of a VECTORIZE: its dtype is inferred from the spliced sources
(VECTORIZE (NOOP) rest*) -> (VECTORIZE rest*)
"""

@pytest.fixture(scope="module")
def t():
  ns: dict = {}
  exec_module(compile_rules("t.rules", "t.rules", source=RULES), "t.rules", ns)
  return ns["t"]

def alone(m, u):
  """The first rule that fires on u, each rule run alone."""
  return next((r for r in (rule.fn(u, None) for rule in m.rules if u.op in rule.ops) if r is not None), None)

extra = st.lists(st.sampled_from([UOp.variable(n, 0, 9) for n in "abcd"] + [UOp.const(dtypes.bool, True)]), max_size=5)

@settings(max_examples=60, deadline=None)
@given(extra)
def test_the_other_sources_are_spliced_in_place(t, rest):
  a = UOp.variable("a", 0, 9)
  load = UOp(Ops.LOAD, dtypes.int, (UOp(Ops.GEP, dtypes.int, (a,), (0,)), *rest))
  want = UOp(Ops.LOAD, dtypes.int, (a, *rest))
  assert t.rewrite(load) is want and alone(t, load) is want
  # another lane: the pattern's arg does not match
  assert t.rewrite(UOp(Ops.LOAD, dtypes.int, (UOp(Ops.GEP, dtypes.int, (a,), (1,)), *rest))) is None

@settings(max_examples=60, deadline=None)
@given(extra)
def test_a_guard_reads_the_spliced_sources(t, rest):
  c = UOp.const(dtypes.int, 7)
  sink = UOp(Ops.SINK, dtypes.void, (c, *rest))
  want = UOp(Ops.SINK, dtypes.void, (*rest, c)) if rest else None
  assert t.rewrite(sink) is want and alone(t, sink) is want

@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from([UOp.variable(n, 0, 9, dtypes.int32) for n in "abc"]), min_size=1, max_size=6))
def test_splice_gives_vectorize_its_lanes(t, lanes):
  u = UOp(Ops.VECTORIZE, dtypes.int32.vec(len(lanes) + 1), (UOp(Ops.NOOP, dtypes.int32), *lanes))
  want = UOp(Ops.VECTORIZE, dtypes.int32.vec(len(lanes)), tuple(lanes))
  assert t.rewrite(u) is want

def test_update_replaces_only_the_fields_given(t):
  g, i = UOp.variable("g", 0, 9), UOp.variable("i", 0, 9)
  idx = UOp(Ops.INDEX, dtypes.int, (g, i, UOp.const(dtypes.bool, True)), "keep", tag="tagged")
  assert t.rewrite(idx) is UOp(Ops.INDEX, dtypes.int, (g, i), "keep", tag="tagged")
  a, b = UOp.variable("a", 0, 9), UOp.variable("b", 0, 9)
  assert t.rewrite(a - (-b)) is a + b
  assert t.rewrite(a - b) is None

@settings(max_examples=200, deadline=None)
@given(st.integers(-2**31, 2**31 - 1))
def test_update_computes_the_new_arg_as_numpy_casts(t, v):
  got = graph_rewrite(UOp.const(dtypes.int32, v).cast(dtypes.float32), t)
  assert got.op is Ops.CONST and got.dtype is dtypes.float32
  assert got.arg == float(np.float32(v))
