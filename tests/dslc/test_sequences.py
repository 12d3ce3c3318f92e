"""Sequences (`where xs = [T for ...]`, spliced `xs*` or in place `[...]*`), choices (`A if C else B`), folds (an associative
op over any number of sources), `tag` in functional updates, slices in expressions, computed dtypes, and the two emitter
details that came with them (a `rest*` sliced after the structural tests; `_iconst`, UOp.const's node for an int).

Oracles: the node a rule must build, written by hand with the UOp constructor; Python's own sum and all() for folded
values (sym_infer over random values); UOp.const for _iconst over every dtype and the edges of each int range; and each
rule alone agreeing with the shared dispatch function.
"""
import pytest
from hypothesis import given, settings, strategies as st
from dslc.compile import compile_rules, exec_module
from runtime import UOp, Ops, dtypes, graph_rewrite, RuleError
from runtime.dtype import DTYPE_NAMES

RULES = """
ruleset t
# a sequence with a name: each source after the first negated, then the first
(SINK x rest*) if len(rest) > 0 and x.op is not Ops.NEG -> (SINK negs* (NEG x)) where negs = [(NEG s) for s in rest]
# a sequence in place, after the first source; a VECTORIZE gets a lane per source
(VECTORIZE c@(CONST) rest*) if all(s.op is not Ops.ADD for s in rest) -> (VECTORIZE c [(ADD s c) for s in rest]*)
# choices: of a whole result (chained), of a sequence's element; only the chosen branch is built ({[][0]} would raise)
(MAX x:ints (NEG x)) -> x if x.vmin >= 0 else (NEG x) if x.vmax <= 0 else (WHERE (CMPLT x 0) (NEG x) x)
(STORE rest*) if any(s.op is Ops.NEG for s in rest) -> (STORE plain*) where plain = [{s.src[0]} if s.op is Ops.NEG else s for s in rest]
(NOOP x) -> x if x.vmin >= -100 else {[][0]}
# folds: written, spliced, from a comprehension; a comprehension's number is a constant of the operands' dtype
(AND! x:bool (AND y z)) -> (AND x y z)
(GROUP rest*) -> (ADD rest*)
(MUL x:ints c@(CONST)) if 1 < c.arg <= 4 -> (ADD x for _ in range(c.arg))
(IDIV x:ints c@(CONST)) if c.arg == 12 -> (ADD (IDIV x s) for s in (1, 2, 3))
# several `for` clauses, as in Python: each reads the names of those before it
(UNROLL:int rest*) -> (UNROLL:int pairs*) where pairs = [(MUL s t) for k, s in enumerate(rest) for t in rest[k:] if t is not s]
# tag in an update; slices and the empty tuple in expressions; a dtype computed, and a dtype bound by `where`
u@(BARRIER x) if u.tag == "seen" -> u{src: (), tag: None}
u@(BARRIER x rest*) if len(rest) > 1 -> u{src: (x,) + rest[1:]}
(CAST x:int32) if x.vmin > 100 -> (CAST:dtypes.float32.vec(x.dtype.count) x)
(CAST x:int64) -> (NEG w) where wide = {dtypes.int64 if x.vmin < 0 else dtypes.uint64}, w = (CAST:wide x)
"""

@pytest.fixture(scope="module")
def ns():
  out: dict = {}
  exec_module(compile_rules("t.rules", "t.rules", source=RULES), "t.rules", out)
  return out

@pytest.fixture(scope="module")
def t(ns): return ns["t"]

def alone(m, u):
  """The first rule that fires on u, each rule run alone."""
  return next((r for r in (rule.fn(u, None) for rule in m.rules if u.op in rule.ops) if r is not None), None)

def both(t, u):
  got = t.rewrite(u)
  assert got is alone(t, u)
  return got

V = [UOp.variable(n, 0, 9) for n in "abcd"]

@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(V), min_size=1, max_size=6))
def test_a_named_sequence_is_spliced(t, srcs):
  x, *rest = srcs
  want = UOp(Ops.SINK, dtypes.void, (*(-s for s in rest), -x)) if rest else None
  assert both(t, UOp(Ops.SINK, dtypes.void, tuple(srcs))) is want

@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(V), max_size=6))
def test_a_sequence_in_place_and_the_lanes_it_gives(t, rest):
  c = UOp.const(dtypes.int, 3)
  got = both(t, UOp(Ops.VECTORIZE, dtypes.int.vec(len(rest) + 1), (c, *rest)))
  assert got is UOp(Ops.VECTORIZE, dtypes.int.vec(len(rest) + 1), (c, *(s + 3 for s in rest)))

def test_choices_build_only_the_branch_chosen(t):
  a, b = UOp.variable("a", 0, 9), UOp.variable("b", -9, -1)
  m = UOp.variable("m", -5, 5)
  assert both(t, a.maximum(-a)) is a and both(t, (-a).maximum(a)) is a
  assert both(t, b.maximum(-b)) is -b
  assert both(t, m.maximum(-m)) is (m < 0).where(-m, m)
  assert both(t, UOp(Ops.STORE, dtypes.void, (-a, a, -m))) is UOp(Ops.STORE, dtypes.void, (a, a, m))
  assert both(t, UOp(Ops.NOOP, dtypes.int, (a,))) is a
  # the other branch raises when it is built: a RuleError naming the rule
  with pytest.raises(RuleError, match=r"t\.rules:\d+: \(NOOP x\)"): graph_rewrite(UOp(Ops.NOOP, dtypes.int, (UOp.variable("z", -200, 0),)), t)

def test_folds_nest_from_the_left(t):
  p, q, r = (UOp.variable(n, 0, 1, dtypes.bool) for n in "pqr")
  a, b, c = V[:3]
  assert both(t, p & (q & r)) is (p & q) & r
  assert both(t, UOp(Ops.GROUP, dtypes.int, (a, b, c))) is (a + b) + c
  assert both(t, UOp(Ops.GROUP, dtypes.int, (a,))) is a  # one source: itself
  assert both(t, a * 3) is (a + a) + a and both(t, a * 5) is None
  # a comprehension's numbers as constants of the operands' dtype
  assert both(t, a // 12) is ((a // 1) + (a // 2)) + (a // 3)

def test_a_fold_over_nothing_is_an_error_naming_the_rule(t):
  with pytest.raises(RuleError, match=r"t\.rules:\d+: \(GROUP rest\*\) -> \(ADD rest\*\)") as e:
    graph_rewrite(UOp(Ops.GROUP, dtypes.int, ()), t)
  assert isinstance(e.value.__cause__, ValueError)

@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-1000, 1000), min_size=1, max_size=8), st.lists(st.booleans(), min_size=3, max_size=3))
def test_folded_values_are_pythons(t, values, bools):
  vs = [UOp.variable(f"v{i}", -1000, 1000) for i in range(len(values))]
  got = both(t, UOp(Ops.GROUP, dtypes.int, tuple(vs)))
  assert got.sym_infer(dict(zip(vs, values))) == sum(values)
  p, q, r = (UOp.variable(n, 0, 1, dtypes.bool) for n in "pqr")
  assert both(t, p & (q & r)).sym_infer(dict(zip((p, q, r), bools))) == all(bools)

def test_tag_updates_slices_and_computed_dtypes(t):
  a = UOp.variable("a", 0, 9)
  assert both(t, UOp(Ops.BARRIER, dtypes.void, (a,), None, "seen")) is UOp(Ops.BARRIER, dtypes.void)
  assert both(t, UOp(Ops.BARRIER, dtypes.void, (a, V[1], V[2]))) is UOp(Ops.BARRIER, dtypes.void, (a, V[2]))
  big = UOp.variable("big", 101, 200, dtypes.int32)
  assert both(t, big.cast(dtypes.float16)) is big.cast(dtypes.float32)
  s, u = UOp.variable("s", -3, 3, dtypes.int64), UOp.variable("u", 0, 3, dtypes.int64)
  assert both(t, s.cast(dtypes.int8)) is -UOp(Ops.CAST, dtypes.int64, (s,)) and both(t, u.cast(dtypes.int8)) is -u.cast(dtypes.uint64)

def test_a_splice_is_sliced_after_the_structural_tests():
  code = compile_rules("s.rules", source="ruleset s\n(AT (CONST) rest*) -> (SINK rest*)\n")
  lines = [x.strip() for x in code.split("\n")]
  assert lines.index("rest = _u.src[1:]") > lines.index("if _u_0.op is CONST:")

def test_iconst_is_uop_const():
  # (CONST:dt [int]) for a dtype known when it runs: _iconst's node is UOp.const's for every dtype and every edge
  ns: dict = {}
  exec_module(compile_rules("c.rules", source="ruleset c\n(NOOP x) -> (NEG (CONST:x.dtype [0]))\n"), "c.rules", ns)
  iconst = ns["_iconst"]
  for d in {v for v in DTYPE_NAMES.values()} | {dtypes.int32.vec(4), dtypes.float32.vec(2)}:
    if d is dtypes.void: continue
    edges = [0, 1, -1, 7, 2**31, -2**31, 2**63, 2**64 + 5, -2**63 - 1]
    if dtypes.is_int(d.scalar): edges += [dtypes.min(d.scalar), dtypes.max(d.scalar), dtypes.min(d.scalar) - 1, dtypes.max(d.scalar) + 1]
    for v in edges:
      try: want = UOp.const(d, v)
      except (OverflowError, ValueError, TypeError): continue
      assert iconst(d, v) is want, (d, v)

def test_explain_runs_sequences_and_choices():
  # explain interprets the rule IR: a sequence's comprehension reads the rule's captures, as the generated code does
  from dslc.compile import load_rules
  from dslc.explain import explain_on, module_namespace, parse_on
  src = "ruleset t\n(SINK x rest*) if len(rest) > 0 -> (SINK negs* (NEG x)) where negs = [(NEG s) for s in rest if s is not x]\n"
  rf = load_rules("e.rules", source=src)
  lines = explain_on(rf, module_namespace(rf, compile_rules("e.rules", source=src)), parse_on("(SINK a b a)"))
  assert lines[-1].strip() == "FIRES -> (SINK (NEG b) (NEG a))", lines

@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(V), max_size=5))
def test_several_for_clauses_are_pythons(t, rest):
  want = tuple(s * u for k, s in enumerate(rest) for u in rest[k:] if u is not s)
  assert both(t, UOp(Ops.UNROLL, dtypes.int, tuple(rest))) is UOp(Ops.UNROLL, dtypes.int, want)

CONDITIONAL = """
ruleset c
# a conditional expression in a guard and in a comprehension's iterable, as in Python (it binds loosest: no parentheses
# inside `len(rest) if ... else 0`, and `or` keeps its operand whole)
(GROUP x rest*) if (len(rest) if x.op is Ops.CONST else 0) > 1 -> (GROUP t for s in rest for t in (s.src if s.op is Ops.NEG else (s,)))
(NOOP x) if (x.vmin if x.vmin > 0 else 0 if x.vmax < 0 else None) or x.vmax == 7 -> x
"""

def test_conditional_expressions_in_guards_and_iterables():
  out: dict = {}
  exec_module(compile_rules("c.rules", "c.rules", source=CONDITIONAL), "c.rules", out)
  c = out["c"]
  k, a, b = UOp.const(dtypes.int, 1), UOp.variable("a", 0, 9), UOp.variable("b", 0, 9)
  assert c.rewrite(UOp(Ops.GROUP, dtypes.void, (k, -a, b))) is UOp(Ops.GROUP, dtypes.void, (a, b))
  assert c.rewrite(UOp(Ops.GROUP, dtypes.void, (a, -a, b))) is None  # x not a CONST: the guard reads 0
  assert c.rewrite(UOp(Ops.GROUP, dtypes.void, (k, -a))) is None
  for lo, hi, fires in [(1, 9, True), (0, 9, False), (-9, -1, False), (-9, 7, True), (0, 7, True)]:
    x = UOp.variable("x", lo, hi)
    assert (c.rewrite(UOp(Ops.NOOP, dtypes.int, (x,))) is x) == fires, (lo, hi)
