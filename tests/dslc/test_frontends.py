"""The two front ends and the two matching paths agree: rules written as .rules text and as UPat/PatternMatcher rewrite random
UOp graphs to the same node (and to the same value, checked with sym_infer as the oracle); the dispatch functions and each
rule run alone (Rule.fn, RULESTATS) pick the same rule with the same result for rules/symbolic.py; and the
matching semantics each construct promises: commutative orders, `!`, `p...`, same name = same node, `for` variables,
guards and helpers that decline.

hypothesis examples per run: 150 graphs for the front ends, 150 graphs for dispatch vs rules alone, 100 for the semantics checks.
"""
from typing import Any
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from runtime import UOp, Ops, dtypes, graph_rewrite, Context
from runtime.helpers import RULESTATS
from dslc import UPat, PatternMatcher
from dslc.compile import compile_rules, exec_module
from rules.symbolic_helpers import fold_alu

def load(text: str) -> dict[str, Any]:
  """The namespace of the module compiled from .rules text: its matchers by rule set name, its rules by id."""
  ns: dict[str, Any] = {}
  exec_module(compile_rules("test.rules", source=text), "test.py", ns)
  return ns

def rewrite(text: str, u: UOp, name: str = "t") -> UOp: return graph_rewrite(u, load(text)[name])

# ---- random int expression graphs: constants, variables, shared subexpressions ----

VARS = [UOp.variable("a", 0, 10), UOp.variable("b", -5, 5), UOp.variable("c", 1, 100)]
BINARY = [Ops.ADD, Ops.SUB, Ops.MUL, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.CMPLT, Ops.CMPNE, Ops.AND, Ops.OR, Ops.XOR]

def _binary(op: Ops, a: UOp, b: UOp) -> UOp:
  if op in (Ops.CMPLT, Ops.CMPNE): return (a.alu(op, b)).where(a, b)  # comparisons feed a WHERE, to stay int
  return a.alu(op, b)

leaves = st.one_of(st.sampled_from(VARS), st.integers(-3, 12).map(lambda v: UOp.const(dtypes.int, v)))
def _extend(children):
  return st.one_of(st.builds(_binary, st.sampled_from(BINARY), children, children),
                   st.builds(lambda x: -x, children),
                   children.flatmap(lambda x: st.sampled_from(_shapes(x))))

def _shapes(x: UOp) -> list[UOp]:
  """Shapes the rules look for: the same node twice, identities, constant chains, bool conditions, casts."""
  return [x + x, x * x, x - x, x + 0, x * 1, (x + 1) + 2, (x * 2) * 3, x // 1, x.maximum(x), (x < 3).where(x, 0),
          ((x < 3) & x.ne(5)).where(x, 1), (x < 3).logical_not().where(1, x), x.cast(dtypes.int64).cast(dtypes.int)]
graphs = st.recursive(leaves, _extend, max_leaves=12)
assignments = st.fixed_dictionaries({"a": st.integers(0, 10), "b": st.integers(-5, 5), "c": st.integers(1, 100)})

def examples(n: int) -> settings:
  return settings(max_examples=n, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

# ---- the same rules in both front ends ----

RULES_TEXT = """
from rules.symbolic_helpers import fold_alu
ruleset t
u@(ADD|SUB|MUL|MAX (CONST) (CONST)) -> fold_alu(u)
(ADD x 0) -> x
(MUL x 1) -> x
(MUL x 0) -> 0
(SUB x x) -> 0
(MAX x x) -> x
(IDIV x 1) -> x
(ADD (ADD x c1@(CONST)) c2@(CONST)) -> (ADD x (ADD c1 c2))
(MUL (MUL x c1@(CONST)) c2@(CONST)) -> (MUL x (MUL c1 c2))
(ADD x x) -> (MUL x 2)
(NEG (NEG x)) -> x
"""

def reassociate(op: Ops):
  return lambda x, c1, c2: x.alu(op, c1.alu(op, c2))

x_, c1_, c2_ = UPat.var("x"), UPat.cvar("c1", vec=False), UPat.cvar("c2", vec=False)
PM = PatternMatcher([
  (UPat((Ops.ADD, Ops.SUB, Ops.MUL, Ops.MAX), src=(UPat(Ops.CONST), UPat(Ops.CONST)), name="u"), fold_alu),
  (x_ + 0, lambda x: x),
  (x_ * 1, lambda x: x),
  (x_ * 0, lambda x: x.const_like(0)),
  (UPat(Ops.SUB, src=(x_, x_)), lambda x: x.const_like(0)),
  (UPat(Ops.MAX, src=(x_, x_)), lambda x: x),
  (x_ // 1, lambda x: x),
  ((x_ + c1_) + c2_, reassociate(Ops.ADD)),
  ((x_ * c1_) * c2_, reassociate(Ops.MUL)),
  (UPat(Ops.ADD, src=(x_, x_)), lambda x: x * 2),
  (-(-x_), lambda x: x),
])
RULES = load(RULES_TEXT)["t"]

@examples(150)
@given(graphs, assignments)
def test_rules_text_and_upats_agree(g, vals):
  a, b = graph_rewrite(g, RULES), graph_rewrite(g, PM)
  assert a is b, f"{g.render()}: .rules gives {a.render()}, UPats give {b.render()}"
  # the oracle: the rewrite keeps the value (the rules are identities)
  assert a.sym_infer(vals) == g.sym_infer(vals)

def test_both_front_ends_fold_the_seed_example():
  x = UOp.variable("a", 0, 10)
  g = (x + 3) + 4
  assert graph_rewrite(g, RULES) is graph_rewrite(g, PM) is x + 7

# ---- dispatch functions vs each rule alone (RULESTATS) on rules/symbolic.py ----

@examples(150)
@given(graphs)
def test_symbolic_dispatch_agrees_with_standalone_rules(g):
  from rules.symbolic import symbolic
  fast, alone = symbolic.table, symbolic.stats_table()
  for n in g.toposort():
    f, s = fast[n.op], alone[n.op]
    r1 = f(n, None) if f is not None else None
    r2 = s(n, None) if s is not None else None
    # the same rule fires (the first in file order that matches), with the same result
    assert (r1 is None) == (r2 is None), (n.render(), r1, r2)
    if r1 is not None: assert r1[0] is r2[0] and r1[1] is r2[1], (n.render(), r1[0], r2[0])
  with Context(RULESTATS=1): slow = graph_rewrite(g, symbolic)
  assert not RULESTATS.value
  assert graph_rewrite(g, symbolic) is slow

def test_rulestats_counts_each_rule():
  # under RULESTATS=1 graph_rewrite runs each rule alone and counts per rule; each counted rule names its line
  from rules.symbolic import symbolic
  x = UOp.variable("a", 0, 10)
  before = {r.id: (r.attempts, r.hits) for r in symbolic.rules}
  with Context(RULESTATS=1): assert graph_rewrite((x + 0) * 1, symbolic) is x
  fired = [r for r in symbolic.rules if r.hits > before[r.id][1]]
  assert fired and all(r.attempts > before[r.id][0] for r in fired)
  lines = open("rules/symbolic.rules").read().split("\n")
  for r in fired:
    assert r.origin == f"rules/symbolic.rules:{r.line}"
    assert r.text.startswith(lines[r.line - 1].split("#")[0].strip())

# ---- matching semantics, construct by construct ----

X, Y, Z = VARS
C3 = UOp.const(dtypes.int, 3)

def test_commutative_tries_both_orders():
  text = "ruleset t\n(ADD x 3) -> x\n"
  assert rewrite(text, X + 3) is X
  assert rewrite(text, C3 + X) is X
  # nested: both commutative nodes try both orders
  text = "ruleset t\n(MUL (ADD x 3) 2) -> x\n"
  for g in ((X + 3) * 2, (C3 + X) * 2, 2 * (X + 3), 2 * (C3 + X)): assert rewrite(text, g) is X, g.render()
  # the UPat front end: a list of sources is any order
  pm = PatternMatcher([(UPat(Ops.ADD, src=[UPat.var("x"), UPat.const(dtypes.int, 3)]), lambda x: x)])
  assert graph_rewrite(C3 + X, pm) is X and graph_rewrite(X + 3, pm) is X

def test_bang_keeps_the_written_order():
  text = "ruleset t\n(ADD! x 3) -> x\n"
  assert rewrite(text, X + 3) is X
  assert rewrite(text, C3 + X) is C3 + X
  # a tuple of UPat sources is the written order
  pm = PatternMatcher([(UPat(Ops.ADD, src=(UPat.var("x"), UPat.const(dtypes.int, 3))), lambda x: x)])
  assert graph_rewrite(C3 + X, pm) is C3 + X and graph_rewrite(X + 3, pm) is X

def test_non_commutative_ops_match_in_order():
  text = "ruleset t\n(SUB x 3) -> x\n"
  assert rewrite(text, X - 3) is X
  assert rewrite(text, C3 - X) is C3 - X

def sink(*src: UOp) -> UOp: return UOp(Ops.SINK, dtypes.void, src)

def test_repeated_pattern():
  text = "ruleset t\n(SINK (CONST)...) -> (NOOP)\n"
  noop = UOp(Ops.NOOP, dtypes.void)
  for g in (sink(), sink(C3), sink(C3, UOp.const(dtypes.int, 4), C3)): assert rewrite(text, g) is noop
  assert rewrite(text, sink(C3, X)) is sink(C3, X)
  # a name inside the repeated pattern is the same node in every source; with no sources it is unbound: no match
  text = "ruleset t\n(SINK x...) -> x\n"
  assert rewrite(text, sink(X, X, X)) is X
  assert rewrite(text, sink(X, Y)) is sink(X, Y)
  assert rewrite(text, sink()) is sink()
  # fixed sources first, then the repeated pattern
  text = "ruleset t\n(SINK y (NEG x)...) -> y\n"
  assert rewrite(text, sink(Y, -X, -X)) is Y and rewrite(text, sink(Y)) is Y and rewrite(text, sink(Y, -X, X)) is sink(Y, -X, X)
  # UPat: a single UPat as src matches every source
  pm = PatternMatcher([(UPat(Ops.SINK, src=UPat(Ops.CONST)), lambda: UOp(Ops.NOOP, dtypes.void))])
  assert graph_rewrite(sink(C3, C3), pm) is noop and graph_rewrite(sink(C3, X), pm) is sink(C3, X)

def test_same_name_is_the_same_node():
  text = "ruleset t\n(ADD x x) -> (MUL x 2)\n"
  assert rewrite(text, X + X) is X * 2
  assert rewrite(text, X + Y) is X + Y
  # across levels, with a guard: (x + y) - x, either order of the ADD
  text = "ruleset t\n(SUB (ADD x y) x) if True -> y\n"
  assert rewrite(text, (X + Y) - X) is Y and rewrite(text, (Y + X) - X) is Y and rewrite(text, (Y + Z) - X) is (Y + Z) - X
  # an arg name used twice is an equal arg
  text = "ruleset t\n(ADD (CONST [c]) (MUL _ (CONST [c]))) -> (CONST [c])\n"
  assert rewrite(text, C3 + X * 3) is C3 and rewrite(text, C3 + X * 4) is C3 + X * 4

# once wrong: for an unconditional rule the emitter merged source orders that differ only in names, though a name
# used again elsewhere in the pattern makes them differ
def test_same_name_across_levels_unconditional():
  # (SUB (ADD x y) x) -> y: the generated code only tries ADD(x, y), so (y + x) - x is left alone
  text = "ruleset t\n(SUB (ADD x y) x) -> y\n"
  assert rewrite(text, (Y + X) - X) is Y

def test_distributive_rule_tries_every_order():
  # x*y + x*z -> x*(y+z): with a guard every order is tried; without one, three of the four orders are missed
  text = "ruleset t\n(ADD (MUL x y) (MUL x z)) -> (MUL x (ADD y z))\n"
  for g in (X * Y + X * Z, Y * X + X * Z, X * Y + Z * X, Y * X + Z * X):
    assert rewrite(text, g) in (X * (Y + Z), X * (Z + Y)), g.render()

def test_repeated_pattern_with_zero_repeats_on_a_fixed_arity_op():
  # (NEG y z...): NEG has one source, so z repeats zero times; the rule must not fire (as (SINK y z...) -> z does not)
  assert rewrite("ruleset t\n(NEG y z...) -> z\n", -X) is -X

def test_for_variables():
  # reassociate to the right; '!' so the result, (op x (op y z)), does not match again in the other order
  text = "ruleset t\nfor op in ADD, MUL {\n  (op! (op! x y) z) -> (op x (op y z))\n}\n"
  assert rewrite(text, (X + Y) + Z) is X + (Y + Z)
  assert rewrite(text, (X * Y) * Z) is X * (Y * Z)
  # the variable is one op throughout the rule: ADD inside MUL does not match
  assert rewrite(text, (X + Y) * Z) is (X + Y) * Z
  ns = load(text)
  (rule,) = ns["t"].rules
  assert rule.ops == (Ops.ADD, Ops.MUL)
  # an op group: each op of the group in turn
  text = "ruleset t\nfor op in Binary {\n  (op x 0) if {op is not Ops.MUL} -> (op x 1)\n}\n"
  assert rewrite(text, X - 0) is X - 1 and rewrite(text, X.maximum(0)) is X.maximum(1) and rewrite(text, X * 0) is X * 0

def test_a_false_guard_lets_later_rules_fire():
  text = "ruleset t\n(ADD x c@(CONST)) if c.arg > 100 -> x\n(ADD x (CONST)) -> (NEG x)\n"
  assert rewrite(text, X + 1000) is X
  assert rewrite(text, X + 3) is -X
  # guards on range analysis: vmin/vmax
  text = "ruleset t\n(MAX x y) if x.vmin >= y.vmax -> x\n(MAX x y) -> y\n"
  assert rewrite(text, UOp.variable("big", 20, 30).maximum(X)) is UOp.variable("big", 20, 30)
  assert rewrite(text, X.maximum(Y)) is Y

def test_a_helper_returning_none_lets_later_rules_fire():
  text = "ruleset t\n(ADD x c@(CONST)) -> {x if c.arg == 0 else None}\n(ADD x (CONST)) -> (NEG x)\n"
  assert rewrite(text, X + 0) is X
  assert rewrite(text, X + 3) is -X
  # an imported helper: fold_alu declines a float shift (None); a number result becomes a CONST of the node's dtype
  text = "from rules.symbolic_helpers import fold_alu\nruleset t\nu@(ALU (CONST)...) -> fold_alu(u)\n(ADD x (CONST)) -> (NEG x)\n"
  assert rewrite(text, C3 + 4) is UOp.const(dtypes.int, 7)
  assert rewrite(text, X + 4) is -X
  # a number result is a constant of the root's dtype
  assert rewrite("ruleset t\n(ADD x c@(CONST)) -> {c.arg * 2}\n", X + 4) is UOp.const(dtypes.int, 8)
  # UPat: a function returning None
  pm = PatternMatcher([(UPat(Ops.ADD, src=(UPat.var("x"), UPat.cvar("c"))), lambda x, c: x if c.arg == 0 else None),
                       (UPat(Ops.ADD, src=(UPat.var("x"), UPat.cvar())), lambda x: -x)])
  assert graph_rewrite(X + 0, pm) is X and graph_rewrite(X + 3, pm) is -X

def test_first_rule_in_file_order_wins():
  text = "ruleset t\n(ADD x 3) -> (NEG x)\n(ADD x (CONST)) -> x\n"
  assert rewrite(text, X + 3) is -X and rewrite(text, X + 4) is X

def test_dtypes_and_arg_patterns():
  text = "ruleset t\n(ADD x:bool y) -> (OR x y)\n(CAST:float32 x:ints) -> (CAST:float32 (CAST:float64 x))\n"
  p, q = UOp.variable("p", 0, 1, dtypes.bool), UOp.variable("q", 0, 1, dtypes.bool)
  assert rewrite(text, p + q) is p | q and rewrite(text, X + Y) is X + Y
  assert rewrite(text, X.cast(dtypes.float32)) is X.cast(dtypes.float64).cast(dtypes.float32)
  assert rewrite(text, p.cast(dtypes.float32)) is p.cast(dtypes.float32)

def test_compose_and_alias():
  ns = load("ruleset a\n(ADD x 0) -> x\nruleset b\n(MUL x 1) -> x\nruleset both = a + b\nruleset same = a\n")
  assert graph_rewrite((X + 0) * 1, ns["both"]) is X
  assert graph_rewrite((X + 0) * 1, ns["same"]) is X * 1
  assert [r.text for r in ns["both"].rules] == ["(ADD x 0) -> x", "(MUL x 1) -> x"]

def test_let_patterns():
  text = "ruleset t\nlet Zero = (CONST [0])\n(ADD x Zero) -> x\n(MUL _ z@Zero) -> z\n"
  assert rewrite(text, X + 0) is X and rewrite(text, X * 0) is UOp.const(dtypes.int, 0)

@pytest.mark.parametrize("bottom_up", [False, True])
def test_upat_and_rules_agree_bottom_up(bottom_up):
  g = ((X + 0) * 1 + 2) + 3
  assert graph_rewrite(g, RULES, bottom_up=bottom_up) is graph_rewrite(g, PM, bottom_up=bottom_up) is X + 5

# ---- UPat front end: its diagnostics, and alternatives ----

def test_upat_alternatives():
  pm = PatternMatcher([(UPat.any(UPat.var("a") * 1, UPat.var("a") + 0), lambda a: a)])
  assert graph_rewrite(X * 1 + (Y + 0), pm) is X + Y

def test_upat_alternatives_with_different_names():
  pm = PatternMatcher([(UPat.any(UPat.var("a") * 1, UPat.var("b") + 0), lambda a=None, b=None: a if a is not None else b)])
  assert graph_rewrite(X * 1, pm) is X and graph_rewrite(Y + 0, pm) is Y

def test_upat_diagnostics_name_the_python_line():
  from dslc.diagnostics import DslError
  import sys
  line = sys._getframe().f_lineno + 2
  with pytest.raises(DslError) as info:
    PatternMatcher([(UPat.var("_f0") + 0, lambda _f0: _f0)])
  (d,) = info.value.diagnostics
  assert (d.file, d.line) == (__file__, line) and "capture names can't start with '_'" in d.message
  assert str(info.value).split("\n")[1].strip() == 'PatternMatcher([(UPat.var("_f0") + 0, lambda _f0: _f0)])'
  # a parameter that is no capture, and a capture that would hide the emitter's own `len`
  with pytest.raises(DslError, match="parameter 'zz' is not a capture"): PatternMatcher([(UPat.var("a") + 0, lambda zz: zz)])
  with pytest.raises(DslError, match="'len' can't be a capture name"): PatternMatcher([(UPat.var("len") + 0, lambda len: len)])
