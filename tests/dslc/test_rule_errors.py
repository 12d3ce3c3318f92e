"""Errors at rewrite time name the rule: whatever a rule's guard, helper or result raises comes out of graph_rewrite (and
Matcher.rewrite) as one RuleError naming the .rules file:line, the rule's text and the node it was matching, with the
original exception as its __cause__. Also under RULESTATS (each rule run alone) and in a bottom-up rewrite."""
import pytest
from dslc.compile import compile_rules, exec_module
from runtime import UOp, Ops, dtypes, graph_rewrite, RuleError, RewriteLoopError, Context

RULES = """from runtime.ops import exec_alu
ruleset t
# fine rules before the faulty ones: the error must not blame them
(ADD x:ints 0) -> x
(MUL x:ints 1) -> x
# a guard that divides by zero when the constant is 0
(IDIV x:ints c@(CONST)) if x.vmax // c.arg > 1000 -> x
# a helper that raises for an op with no meaning on the dtype
(MAX x:ints c@(CONST)) if c.arg == 7 -> (CONST [exec_alu(Ops.AND, dtypes.float32, [1.0, 2.0])])
# a result that raises while it is built
(MOD x:ints c@(CONST)) -> (CONST [x.vmax % (c.arg - 3)])
# a {python} result that is not a node
(SHL x:ints c@(CONST)) if c.arg == 5 -> {"not a node"}
"""
LINES = {name: i + 1 for i, line in enumerate(RULES.split("\n")) for name in ("IDIV", "MAX", "MOD", "SHL") if line.startswith(f"({name} ")}

@pytest.fixture(scope="module")
def t():
  ns: dict = {}
  exec_module(compile_rules("errs.rules", "errs.rules", source=RULES), "errs.rules", ns)
  return ns["t"]

X = UOp.variable("x", 0, 5000, dtypes.int)
def c(v: int) -> UOp: return UOp.const(dtypes.int, v)

CASES = [  # (the node that makes the rule raise, its op's rule, the original exception class)
  ((X + 0) // c(0), "IDIV", ZeroDivisionError),
  (X.maximum(c(7)) * 1, "MAX", ValueError),
  ((X + 0) % c(3), "MOD", ZeroDivisionError),
]

@pytest.mark.parametrize("rulestats", [0, 1])
@pytest.mark.parametrize("bottom_up", [False, True])
@pytest.mark.parametrize("node,op,cause", CASES, ids=["guard", "helper", "result"])
def test_graph_rewrite_names_the_rule(t, node, op, cause, bottom_up, rulestats):
  with Context(RULESTATS=rulestats), pytest.raises(RuleError) as info: graph_rewrite(node, t, bottom_up=bottom_up)
  e = info.value
  assert isinstance(e.__cause__, cause)
  assert e.rule is not None and (e.rule.file, e.rule.line) == ("errs.rules", LINES[op]) and e.rule.text.startswith(f"({op} ")
  assert f"errs.rules:{LINES[op]}: ({op} " in str(e)
  # the node it was matching: the faulty op over x, simplified first unless bottom-up (a node before its sources)
  assert e.node.op is Ops[op] and e.node.src[1].op is Ops.CONST and (bottom_up or e.node.src[0] is X)
  assert f"matching: {op} " in str(e) and type(e.__cause__).__name__ in str(e)

def test_result_not_a_node(t):
  with pytest.raises(RuleError) as info: graph_rewrite(X << c(5), t)
  e = info.value
  assert (e.rule.line, e.node.op) == (LINES["SHL"], Ops.SHL)
  assert "its result is not a node: 'not a node'" in str(e) and isinstance(e.__cause__, AttributeError)

def test_matcher_rewrite_names_the_rule(t):
  with pytest.raises(RuleError) as info: t.rewrite(X // c(0))
  assert info.value.rule.line == LINES["IDIV"] and isinstance(info.value.__cause__, ZeroDivisionError)

def test_nothing_raised_is_unchanged(t):
  # the same rules on nodes where nothing raises: ordinary rewrites, no error
  assert graph_rewrite((X + 0) // c(10), t) is X // c(10)
  assert graph_rewrite((X + 0) // c(2), t) is X
  assert graph_rewrite(X.maximum(c(6)), t) is X.maximum(c(6))

def test_loop_errors_are_not_rewrapped():
  loops = """ruleset t
(ADD x y) -> (ADD y x)
"""
  ns: dict = {}
  exec_module(compile_rules("loop.rules", "loop.rules", source=loops), "loop.rules", ns)
  with pytest.raises(RewriteLoopError) as info: graph_rewrite(X + c(1), ns["t"])
  assert not isinstance(info.value, RuleError)

def test_the_original_class_still_catches_it(t):
  # a helper's deliberate ValueError (a user's error) is still a ValueError, now with the rule named
  with pytest.raises(ValueError, match="has no meaning on") as info: graph_rewrite(X.maximum(c(7)), t)
  assert isinstance(info.value, RuleError) and info.value.rule.line == LINES["MAX"]
  with pytest.raises(ZeroDivisionError): graph_rewrite(X // c(0), t)
