"""dslc/typecheck.py: the static dtypes of results.

The issue's four rules that changed values silently are rejected, each with a message naming the problem. And the check
is sound where it claims something: on random rules over typed variables, whenever it proves a result has the dtype of the
node it replaces (and the rule compiles), rewriting random well-typed graphs never changes a node's dtype.
"""
import pytest
from hypothesis import event, given, settings, strategies as st
from dslc.compile import compile_rules, load_rules, exec_module
from dslc.diagnostics import DslError
from dslc.typecheck import proven_same
from runtime import UOp, dtypes

@pytest.mark.parametrize("rule,message", [
  ("(SUB x:ints y) -> (ADD x True)", "the literal True can't be a constant of one of the ints"),
  ("(MUL x:ints 9) -> 1.5", "the literal 1.5 can't be a constant of one of the ints"),
  ("(ADD x:ints y) -> (CAST:float32 x)", "this result is float32, where one of the ints belongs"),
  ("(CMPLT x x) -> (ADD x 1)", "this result may have another dtype than the node it replaces"),
  ("(ADD x:uint8 y) -> (MUL x 300)", "the literal 300 can't be a constant of uint8"),
  ("(IDIV x:ints y) -> (ADD x (CAST:float32 y))", "this ADD source is float32, where one of the ints belongs"),
  ("(MOD x y) -> x.dtype", "this result is x.dtype, not a node"),
  ("(MAX x:ints y:floats) -> x", "this pattern never matches"),
  ("(WHERE c x:ints y) -> (WHERE x x y)", "this WHERE's condition is one of the ints, where bool belongs"),
])
def test_the_issues_rules_are_rejected(rule, message):
  with pytest.raises(DslError) as info: compile_rules("t.rules", "t.rules", source=f"ruleset t\n{rule}\n")
  assert [d.message for d in info.value.diagnostics if message in d.message], str(info.value)

@pytest.mark.parametrize("rule", [
  "u@(CAST x) if u.dtype is x.dtype -> x",                 # a guard proves it
  "(CAST:bool (CAST x:bool)) -> x",                         # annotations prove it
  "(CMPLT x:bool y) -> (AND (XOR x True) y)",               # a comparison's bool, literals that fit
  "(WHERE c True False) -> c",                              # `True` in a pattern is a bool constant
  "(ADD x:float32 y) -> (MUL (ADD x y) 1.0)",
  "(SINK a b) -> a",                                        # nothing known of either side: no claim
])
def test_well_typed_rules_pass(rule):
  compile_rules("t.rules", "t.rules", source=f"ruleset t\n{rule}\n")

# ---- soundness on random rules ----

VARS = {"i": UOp.variable("i", -5, 5, dtypes.int32), "j": UOp.variable("j", -5, 5, dtypes.int32),
        "f": UOp.variable("f", -5, 5, dtypes.float32), "p": UOp.variable("p", 0, 1, dtypes.bool)}

def graph(draw, d: int) -> UOp:
  if d > 2 or draw(st.integers(0, 3)) == 0: return VARS[draw(st.sampled_from(sorted(VARS)))]
  k = draw(st.sampled_from(["add", "mul", "max", "lt", "ne", "where", "neg", "cast"]))
  x = graph(draw, d + 1)
  if k == "neg": return -x
  if k == "cast": return x.cast(draw(st.sampled_from([dtypes.int32, dtypes.float32, dtypes.bool])))
  y = graph(draw, d + 1)
  if y.dtype is not x.dtype: y = y.cast(x.dtype)
  if k == "where": return (x < y).where(x, y) if x.dtype is not dtypes.bool else x.where(y, y)
  return {"add": x + y, "mul": x * y, "max": x.maximum(y), "lt": x < y, "ne": x.ne(y)}[k]

PATS = ["x", "y", "x:int32", "x:float32", "x:bool", "(NEG x)", "(CAST x)", "(CAST:float32 x)", "(CMPLT x y)", "(ADD x y)", "(MUL x 2)"]
RESULTS = ["x", "y", "(ADD x x)", "(MUL x 1)", "(CAST:float32 x)", "(CMPLT x y)", "(NEG y)", "(WHERE (CMPLT x y) x y)", "(MAX x 0)", "0", "True"]

@st.composite
def cases(draw):
  root = draw(st.sampled_from(["ADD", "MUL", "MAX", "CMPLT", "CMPNE"]))
  a, b = draw(st.sampled_from(PATS)), draw(st.sampled_from(PATS))
  text = f"ruleset t\n({root} {a} {b}) -> {draw(st.sampled_from(RESULTS))}\n"
  return text, [graph(draw, 0) for _ in range(3)]

@settings(max_examples=300, deadline=None)
@given(cases())
def test_a_proven_dtype_holds_when_rewriting(case):
  text, graphs = case
  try: code = compile_rules("t.rules", "t.rules", source=text)
  except DslError:
    event("rejected")
    return
  (rule,) = load_rules("t.rules", source=text).rulesets[0].rules
  if not proven_same(rule):
    event("compiles, dtype not proven")
    return
  event("dtype proven")
  ns: dict = {}
  exec_module(code, "t.rules", ns)
  for g in graphs:
    for u in g.toposort():
      try: out = ns["t"].rewrite(u)
      except (TypeError, ValueError): continue  # a node the rule builds badly for another reason (not a dtype claim)
      if out is not None: assert out.dtype is u.dtype, (text, u.render(), out.render())
