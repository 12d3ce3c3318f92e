"""Named patterns that carry guards and take parameters (`let Pos(x) = x if x.vmin > 0`), and args compared with named
constants (`[Invalid]`, `[pi]`).

The oracle: the same rules with every named pattern written out in place, its guard added to the rule's. On random
expression graphs the two rule sets must pick the same result for every node.
"""
import math
import pytest
from hypothesis import given, settings, strategies as st
from dslc.compile import compile_rules, exec_module
from runtime import UOp, dtypes

LETS = """
from math import pi
let NonNeg(x) = x if x.vmin >= 0
let Small(x) = NonNeg(x) if {x.vmax < 10}
let Casted(x) = (CAST? x)
let Zero = z@(CONST [0]) if z.dtype == dtypes.int32
ruleset t
# two uses of one named pattern with parameters bind different names
(ADD NonNeg(a) NonNeg(b)) if a is not b -> (MAX a b)
# a named pattern inside another: both guards apply
(MUL Small(a) Zero) -> z
(MAX Casted(a) 1) if a.vmax < 3 -> 1
# an arg compared with a named constant
(MUL x (CONST [pi])) -> (ADD x x)
"""

EXPANDED = """
from math import pi
ruleset t
(ADD a b) if a.vmin >= 0 and b.vmin >= 0 and a is not b -> (MAX a b)
(MUL a z@(CONST [0])) if a.vmin >= 0 and {a.vmax < 10} and z.dtype == dtypes.int32 -> z
(MAX (CAST a) 1) if a.vmax < 3 -> 1
(MAX a 1) if a.vmax < 3 -> 1
(MUL x c@(CONST)) if c.arg == pi -> (ADD x x)
"""

def load(text: str) -> dict:
  ns: dict = {}
  exec_module(compile_rules("t.rules", "t.rules", source=text), "t.rules", ns)
  return ns

@pytest.fixture(scope="module")
def both():
  return load(LETS)["t"], load(EXPANDED)["t"]

I32, F32 = dtypes.int32, dtypes.float32
VARS = [UOp.variable("a", 0, 9, I32), UOp.variable("b", -9, 9, I32), UOp.variable("c", 0, 30, I32)]
leaves = st.one_of(st.sampled_from(VARS), st.builds(lambda v: UOp.const(I32, v), st.integers(-2, 3)))

def _combine(kind, x, y):
  return {"add": x + y, "mul": x * y, "max": x.maximum(y)}[kind]

graphs = st.recursive(leaves, lambda t: st.one_of(
  st.builds(_combine, st.sampled_from(["add", "mul", "max"]), t, t),
  st.builds(lambda x: x.cast(dtypes.int64).cast(I32), t)), max_leaves=8)

@settings(max_examples=200, deadline=None)
@given(graphs)
def test_named_patterns_agree_with_the_rules_written_out(both, g):
  lets, expanded = both
  for u in g.toposort(): assert lets.rewrite(u) is expanded.rewrite(u), u.render()

def test_each_rule_fires_where_its_guards_hold(both):
  lets, _ = both
  a, b, c = VARS
  assert lets.rewrite(a + c) is a.maximum(c) and lets.rewrite(a + b) is None and lets.rewrite(a + a) is None
  zero = UOp.const(I32, 0)
  assert lets.rewrite(a * 0) is zero and lets.rewrite(c * 0) is None and lets.rewrite(b * 0) is None
  x = UOp.variable("x", 0, 5, dtypes.float64)  # a float32 constant would be pi rounded
  assert lets.rewrite(x * math.pi) is x + x and lets.rewrite(x * 3.0) is None

def test_an_imported_constant_from_runtime():
  ns = load("from runtime.rewrite import N_OPS\nruleset t\n(CONST [N_OPS]) -> 0\n")
  from runtime.rewrite import N_OPS
  assert ns["t"].rewrite(UOp.const(I32, N_OPS)) is UOp.const(I32, 0) and ns["t"].rewrite(UOp.const(I32, 1)) is None
