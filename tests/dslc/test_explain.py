"""`python -m dslc explain FILE --on EXPR`: the pattern IR interpreted against a node must agree with the generated matcher
(the same rule fires, with the same result) on random expressions, and say which test failed for the rules that did not."""
import random
import pytest
from runtime.dtype import dtypes
from runtime.ops import Ops
from runtime.uop import UOp, uop
from dslc.compile import load_rules
from dslc.explain import ExprError, explain_on, fired_rule, module_namespace, parse_on, show
from tests.dslc.test_cli import dslc

BINARY = [Ops.ADD, Ops.SUB, Ops.MUL, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ, Ops.AND, Ops.OR, Ops.XOR]

def random_expr(rng: random.Random, depth: int, xs: list[UOp]) -> UOp:
  if depth == 0 or rng.random() < 0.25:
    return rng.choice(xs) if rng.random() < 0.6 else UOp.const(dtypes.int32, rng.choice([-3, -1, 0, 1, 2, 3, 4, 8]))
  r = rng.random()
  if r < 0.08: return uop(Ops.NEG, dtypes.int32, (random_expr(rng, depth - 1, xs),))
  if r < 0.14:
    c = uop(Ops.CMPLT, dtypes.bool, (random_expr(rng, depth - 1, xs), random_expr(rng, depth - 1, xs)))
    return uop(Ops.WHERE, dtypes.int32, (c, random_expr(rng, depth - 1, xs), random_expr(rng, depth - 1, xs)))
  op = rng.choice(BINARY)
  a, b = random_expr(rng, depth - 1, xs), random_expr(rng, depth - 1, xs)
  if op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ):
    return uop(op, dtypes.bool, (a, b))
  return uop(op, dtypes.int32, (a, b))

@pytest.fixture(scope="module")
def symbolic():
  import rules.symbolic as mod
  return load_rules("rules/symbolic.rules"), vars(mod), mod.symbolic

def test_explain_agrees_with_the_generated_matcher(symbolic):
  rf, ns, matcher = symbolic
  rng = random.Random(8)
  xs = [UOp.variable("x", -4, 9, dtypes.int32), UOp.variable("y", 0, 7, dtypes.int32), UOp.variable("z", 1, 30, dtypes.int32)]
  nodes: dict[UOp, None] = {}
  for _ in range(200):
    e = random_expr(rng, 3, xs)
    for n in e.toposort(): nodes[n] = None
    # as graph_rewrite meets it: the sources simplified first, the node itself not yet
    nodes[e.replace(src=tuple(s.simplify() for s in e.src))] = None
  fired = set()
  for u in nodes:
    fn = matcher.table[u.op]
    want = fn(u, None) if fn is not None else None
    got = fired_rule(rf, ns, "symbolic", u)
    if want is None:
      assert got is None, f"{show(u)}: explain says {got.rule.text} fires, the matcher fires nothing"
      continue
    assert got is not None, f"{show(u)}: the matcher fires {want[0]}, explain says nothing fires"
    assert (got.rule.id, got.result) == (want[0].id, want[1]), f"{show(u)}: explain {got.rule.text} -> {got.result}, matcher {want[0]} -> {want[1]}"
    fired.add(got.rule.id)
  assert len(nodes) > 500 and len(fired) > 30, (len(nodes), len(fired))  # the sample exercises many rules

def test_explain_agrees_on_a_fresh_compile_of_decompositions():
  # a float rule set with `where` bindings, from a namespace compiled now rather than the built module
  from dslc.compile import compile_rules
  rf = load_rules("rules/decompositions.rules")
  ns = module_namespace(rf, compile_rules("rules/decompositions.rules"))
  x = UOp.variable("x", 0, 9, dtypes.int32)
  for dt in (dtypes.float32, dtypes.float16, dtypes.float64):
    for op in (Ops.EXP2, Ops.LOG2):
      u = uop(op, dt, (uop(Ops.CAST, dt, (x,)),))
      want = ns["decompositions"].table[op](u, None)
      got = fired_rule(rf, ns, "decompositions", u)
      assert (got is None) == (want is None) and (got is None or (got.rule.id, got.result) == (want[0].id, want[1]))

def test_explain_agrees_on_gradient_tuples_with_a_ctx():
  # a rule set that returns per-source tuples and reads ctx (a node): the same rule, the same tuple
  import rules.gradient as mod
  rf = load_rules("rules/gradient.rules")
  a, b = UOp.variable("a", 0, 9, dtypes.int32).cast(dtypes.float32), UOp.variable("b", 1, 9, dtypes.int32).cast(dtypes.float32)
  ctx = UOp.variable("g", 0, 3, dtypes.int32).cast(dtypes.float32)
  unary = [uop(op, dtypes.float32, (a,)) for op in (Ops.EXP2, Ops.LOG2, Ops.SQRT, Ops.RECIPROCAL, Ops.SIN, Ops.NEG)]
  binary = [uop(op, dtypes.float32, (a, b)) for op in (Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.MAX)]
  fired = 0
  for u in unary + binary + [(a < b).where(a, b), a.cast(dtypes.float16), a < b]:
    want = mod.gradient.table[u.op](u, ctx) if mod.gradient.table[u.op] is not None else None
    got = fired_rule(rf, vars(mod), "gradient", u, ctx)
    assert (got is None) == (want is None), show(u)
    if got is not None:
      assert (got.rule.id, got.result) == (want[0].id, want[1]), show(u)
      fired += 1
  assert fired >= 12

def test_explain_says_which_test_failed(symbolic):
  rf, ns, _ = symbolic
  out = "\n".join(explain_on(rf, ns, parse_on("(ADD (MUL x 2) 0)")))
  assert "node: (ADD (MUL x 2) 0)  dtype int32" in out
  assert "(op! c@(CONST) x) if x.op is not Ops.CONST -> (op x c)\n      source 0 is MUL, not CONST" in out
  assert "(ADD! x:bool y) -> (OR x y)\n      source 0 has dtype int32, not bool" in out
  assert "(ADD! x:ints 0) -> x\n      FIRES -> (MUL x 2)" in out
  out = "\n".join(explain_on(rf, ns, parse_on("(MOD x[0:20] 8)")))
  assert "(MOD x:ints c@(CONST)) if c.arg > 0 and x.vmax < c.arg and x.vmin > -c.arg -> x\n      guard `c.arg > 0 and x.vmax < c.arg` is false" in out
  assert "(MOD x:ints c@(CONST)) if c.arg < 0 and c.arg != int_min[c.dtype] -> (MOD x (CONST [-c.arg]))\n      guard `c.arg < 0` is false" in out
  out = "\n".join(explain_on(rf, ns, parse_on("(IDIV x 3)")))
  assert "(IDIV x:ints 1) -> x\n      source 1 is 3, not 1" in out

def test_parse_on():
  x = UOp.variable("x", 0, 16, dtypes.int32)
  assert parse_on("(ADD (MUL x 2) 0)") is (x * 2) + 0
  y = UOp.variable("y", -4, 8, dtypes.int64)
  assert parse_on("(CMPLT y:int64[-4:8] 3)") is uop(Ops.CMPLT, dtypes.bool, (y, UOp.const(dtypes.int64, 3)))
  assert parse_on("(CAST:float32 x)").dtype is dtypes.float32
  v = UOp.variable("x", -4, 8, dtypes.int32)
  assert parse_on("(ADD x[-4:8] x)") is uop(Ops.ADD, dtypes.int32, (v, v))
  w = parse_on("(WHERE (CMPLT x 3) 1.5 f:float32)")
  assert w.dtype is dtypes.float32 and w.src[1].arg == 1.5 and w.src[1].dtype is dtypes.float32
  for bad, msg in [("(ADDD x 1)", "'ADDD' at column 2 is not an op (did you mean 'ADD'?)"), ("(ADD x 1", "ends early"),
                   ("(ADD x 1))", "unexpected ')' at column 10"), ("(CAST:flaot32 x)", "unknown dtype 'flaot32'"),
                   ("(ADD x$ 1)", "unexpected '$ 1)'"), ("(ADD x[0:4] x[0:5])", "variable x is written twice")]:
    with pytest.raises(ExprError) as e: parse_on(bad)
    assert msg in str(e.value), (bad, str(e.value))

def test_explain_on_command_line():
  r = dslc("explain", "rules/symbolic.rules", "--on", "(ADD (MUL x 2) 0)")
  assert r.returncode == 0, r.stderr
  assert "ruleset symbolic: 4 rules for ADD, rule" in r.stdout and "FIRES -> (MUL x 2)" in r.stdout
  r = dslc("explain", "rules/gradient.rules", "--on", "(MUL a:float32 b:float32)", "--ctx", "g:float32")
  assert r.returncode == 0 and "FIRES -> ((MUL g b) (MUL g a))" in r.stdout, r.stderr
  r = dslc("explain", "rules/symbolic.rules", "--on", "(ADD x")
  assert r.returncode == 1 and "ends early" in r.stderr and r.stdout == ""
