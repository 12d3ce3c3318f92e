"""Emitter regressions: the shared dispatch function of a rule set must agree with each rule run alone."""
from dslc.compile import compile_rules, exec_module
from runtime import UOp, dtypes

CLOBBER = """
ruleset clobber
(ADD (ADD x c@(CONST)) y) if y.op is not Ops.CONST -> (ADD (ADD x y) c)
(ADD (MUL m (CONST)) y:ints) if y.op is not Ops.CONST -> (SUB y m)
"""

def test_a_capture_rebound_in_a_nested_block_is_bound_again():
  # the third source order binds y inside an `if`; the fourth must not trust the y bound before it
  ns: dict = {}
  exec_module(compile_rules("clobber.rules", "clobber.rules", source=CLOBBER), "clobber.rules", ns)
  m = ns["clobber"]
  a, b, z = (UOp.variable(n, 0, 9) for n in "abz")
  u = (a + b) + (UOp.const(dtypes.int, 3) + z)
  first = next(r for r in (rule.fn(u, None) for rule in m.rules) if r is not None)
  assert m.rewrite(u) is first
  assert first.render() == "((z+(a+b))+3)"

def test_upper_case_names_import_and_read_in_guards():
  src = "from runtime.ops import ARITY\nruleset t\n(NEG x) if ARITY[x.op] == 2 -> x\n"
  ns: dict = {}
  exec_module(compile_rules("t.rules", "t.rules", source=src), "t.rules", ns)
  a, b = UOp.variable("a", 0, 9), UOp.variable("b", 0, 9)
  assert ns["t"].rewrite(-(a + b)) is a + b and ns["t"].rewrite(-a) is None
