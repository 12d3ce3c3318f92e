"""Pattern alternation: `(A x | CAST (A x))` alternatives of whole bodies, and the optional node `(CAST? x)`.

The oracle: the same rules with every alternative written out as a rule of its own (in the order the alternatives are
written). On random expression graphs, the two rule sets must pick the same result for every node.
"""
import pytest
from hypothesis import given, settings, strategies as st
from dslc.compile import compile_rules, exec_module
from runtime import UOp, Ops, dtypes

ALT = """
ruleset t
# at the root, with a name over both alternatives
u@(MUL x 3 | CAST (MUL x 3)) if x.vmin >= 0 -> (MAX u 0)
# in a source, under a commutative op: the alternatives bind the same names
(ADD (NEG x | CAST (NEG x)) y) -> (SUB y x)
# an optional node: x, or a CAST of x (an int32 max, so the result's dtype is the node's)
(MAX:int32 (CAST? x:ints) 0) if x.vmin >= 0 -> (CAST:int32 x)
# a bare op before '|' still lists ops; a bare op last is an alternative of its own
(CMPLT (ADD|SUB x 1) (CAST (CONST) | CONST)) -> (CMPLT x 5)
# in a repeated pattern
(SINK (NEG _ | CAST (NEG _))...) -> (NOOP)
"""

EXPANDED = """
ruleset t
u@(MUL x 3) if x.vmin >= 0 -> (MAX u 0)
u@(CAST (MUL x 3)) if x.vmin >= 0 -> (MAX u 0)
(ADD (NEG x) y) -> (SUB y x)
(ADD (CAST (NEG x)) y) -> (SUB y x)
(MAX:int32 (CAST x:ints) 0) if x.vmin >= 0 -> (CAST:int32 x)
(MAX:int32 x:ints 0) if x.vmin >= 0 -> (CAST:int32 x)
(CMPLT (ADD|SUB x 1) (CAST (CONST))) -> (CMPLT x 5)
(CMPLT (ADD|SUB x 1) (CONST)) -> (CMPLT x 5)
(SINK rest*) if {all(s.op is Ops.NEG or s.op is Ops.CAST and s.src[0].op is Ops.NEG for s in rest)} -> (NOOP)
"""

def load(text: str) -> dict:
  ns: dict = {}
  exec_module(compile_rules("t.rules", "t.rules", source=text), "t.rules", ns)
  return ns

@pytest.fixture(scope="module")
def both():
  return load(ALT)["t"], load(EXPANDED)["t"]

I32, I64 = dtypes.int32, dtypes.int64
VARS = [UOp.variable("a", 0, 9, I32), UOp.variable("b", -9, 9, I32), UOp.variable("c", 0, 9, I64)]

leaves = st.one_of(st.sampled_from(VARS), st.builds(lambda v: UOp.const(I32, v), st.integers(-2, 5)))

def _combine(kind, x, y):
  if x.dtype is not y.dtype: y = y.cast(x.dtype)
  if kind == "add": return x + y
  if kind == "sub": return x - y
  if kind == "mul": return x * y
  if kind == "max": return x.maximum(y)
  if kind == "lt": return (x < y).cast(x.dtype)
  raise ValueError(kind)

graphs = st.recursive(leaves, lambda t: st.one_of(
  st.builds(_combine, st.sampled_from(["add", "sub", "mul", "max", "lt"]), t, t),
  st.builds(lambda x: -x, t),
  st.builds(lambda x, d: x.cast(d), t, st.sampled_from([I32, I64])),
  st.builds(lambda xs: UOp(Ops.SINK, dtypes.void, tuple(xs)), st.lists(t, max_size=3))), max_leaves=10)

@settings(max_examples=300, deadline=None)
@given(graphs)
def test_alternatives_agree_with_the_rules_written_out(both, g):
  alt, expanded = both
  for u in g.toposort():
    assert alt.rewrite(u) is expanded.rewrite(u), u.render() if u.op is not Ops.SINK else u

def test_each_alternative_fires(both):
  alt, _ = both
  a, b, c = VARS
  three = UOp.const(I32, 3)
  assert alt.rewrite(a * 3) is (a * 3).maximum(0) and alt.rewrite((a * 3).cast(I64)) is (a * 3).cast(I64).maximum(0)
  assert alt.rewrite(b * 3) is None
  assert alt.rewrite(-a + b) is b - a and alt.rewrite(b + (-a).cast(I32)) is b - a
  # a constructor builds the node it names, even a cast to the dtype a value has
  assert alt.rewrite(c.cast(I32).maximum(0)) is c.cast(I32) and alt.rewrite(a.maximum(0)) is UOp(Ops.CAST, I32, (a,))
  assert alt.rewrite((a - 1) < three) is (a < 5) and alt.rewrite((a + 1) < three.cast(I32)) is (a < 5)
  assert alt.rewrite(UOp(Ops.SINK, dtypes.void, (-a, (-b).cast(I64)))) is UOp(Ops.NOOP, dtypes.void)
  assert alt.rewrite(UOp(Ops.SINK, dtypes.void, (-a, b))) is None

def test_a_root_alternative_is_only_in_its_ops_function():
  # the MUL alternative of the first rule is not tried in the CAST function, nor the CAST one in MUL's
  code = compile_rules("t.rules", "t.rules", source=ALT)
  fns = {block.split("(", 1)[0]: block for block in code.split("\ndef ")[1:]}
  assert "_u.op is CAST" not in fns["t_MUL"] and "_u.op is MUL" not in fns["t_CAST"]
  assert "_u_0.op is MUL" in fns["t_CAST"]

def test_a_repeated_alternation_picks_per_source(both):
  # each source of the SINK may take either alternative (and a commutative node either order)
  alt, _ = both
  a, b, _c = VARS
  assert alt.rewrite(UOp(Ops.SINK, dtypes.void, ((-b).cast(I64), -a, (-a).cast(I32)))) is UOp(Ops.NOOP, dtypes.void)
  ns = load("ruleset t\n(SINK (ADD x 1)...) -> x\n")
  assert ns["t"].rewrite(UOp(Ops.SINK, dtypes.void, (a + 1, 1 + a))) is a

def test_a_bar_after_a_dtype_list_starts_an_alternative():
  # `x:ints|bool` lists dtypes; a `|` before an op (or `(`, `_`) starts the next alternative
  ns = load("ruleset t\n(ADD x:int32|bool 1 | CAST (ADD x:int32|bool 1)) -> x\n")
  a, p = VARS[0], UOp.variable("p", 0, 1, dtypes.bool)
  assert ns["t"].rewrite(a + 1) is a and ns["t"].rewrite((a + 1).cast(I64)) is a
  assert ns["t"].rewrite(p + UOp.const(dtypes.bool, True)) is p and ns["t"].rewrite(VARS[2] + 1) is None
