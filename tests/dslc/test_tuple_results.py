"""Tuple results: a rule set declared `returns per-source` gives, per rule, a tuple with one entry (a node or None) per source.

The oracle is reverse-mode differentiation: a gradient rule set written this way, driven by a ten-line accumulation loop,
must agree with dual numbers evaluated in Python integers (wrapped to int32, as the UOps compute) on random expressions.
"""
import pytest
from hypothesis import given, settings, strategies as st
from dslc.compile import compile_rules, exec_module
from runtime import UOp, Ops, dtypes
from runtime.rewrite import RewriteError

GRAD = """
from rules.symbolic_helpers import fold_alu
ruleset grad(ctx: UOp) returns per-source "d(node)/d(source) times ctx, for each source"
# a constant factor on either side: the tuple follows the node's sources, whichever order matched
(MUL x c@(CONST)) -> ((MUL ctx c) _)
(ADD x y) -> (ctx ctx)
(SUB x y) -> (ctx (NEG ctx))
(MUL x y) -> ((MUL ctx y) (MUL ctx x))
(NEG x) -> ((NEG ctx))
# ties go to the second source
(MAX x y) -> ((WHERE (CMPLT y x) ctx 0) (WHERE (CMPLT y x) 0 ctx))
(WHERE c _ _) -> (_ (WHERE c ctx 0) (WHERE c 0 ctx))
(CMPLT _ _) -> (_ None)
"""

def load(text: str, name: str = "t.rules") -> dict:
  ns: dict = {}
  exec_module(compile_rules(name, name, source=text), name, ns)
  return ns

@pytest.fixture(scope="module")
def grad():
  return load(GRAD)["grad"]

def gradients(root: UOp, wrt: list[UOp], matcher) -> list[UOp | None]:
  """Reverse mode: each node's gradient, users before sources, summed over its users."""
  g: dict[UOp, UOp] = {root: UOp.const(root.dtype, 1)}
  for u in reversed(list(root.toposort())):
    if u not in g: continue
    per_src = matcher.rewrite(u, g[u])
    if per_src is None: continue
    assert isinstance(per_src, tuple) and len(per_src) == len(u.src)
    for s, d in zip(u.src, per_src):
      if d is not None: g[s] = g[s] + d if s in g else d
  return [g.get(w) for w in wrt]

# ---- the oracle: dual numbers in int32 ----

def wrap(v: int) -> int: return (v + 2**31) % 2**32 - 2**31

def dual(t, env: dict, var: str) -> tuple[int, int]:
  """(value, d value / d var) of an expression tree, every step wrapped to int32 as the UOps compute."""
  k = t[0]
  if k == "var": return env[t[1]], int(t[1] == var)
  if k == "const": return t[1], 0
  if k == "neg":
    v, d = dual(t[1], env, var)
    return wrap(-v), wrap(-d)
  if k == "where":
    (a, _), (b, _) = dual(t[1], env, var), dual(t[2], env, var)
    return dual(t[3] if a < b else t[4], env, var)
  (x, dx), (y, dy) = dual(t[1], env, var), dual(t[2], env, var)
  if k == "add": return wrap(x + y), wrap(dx + dy)
  if k == "sub": return wrap(x - y), wrap(dx - dy)
  if k == "mul": return wrap(x * y), wrap(dx * y + x * dy)
  if k == "max": return (x, dx) if y < x else (y, dy)
  raise ValueError(k)

VARS = {name: UOp.variable(name, -20, 20, dtypes.int32) for name in "abc"}

def build(t) -> UOp:
  k = t[0]
  if k == "var": return VARS[t[1]]
  if k == "const": return UOp.const(dtypes.int32, t[1])
  if k == "neg": return -build(t[1])
  if k == "where": return (build(t[1]) < build(t[2])).where(build(t[3]), build(t[4]))
  x, y = build(t[1]), build(t[2])
  return {"add": x + y, "sub": x - y, "mul": x * y, "max": x.maximum(y)}[k]

leaves = st.one_of(st.tuples(st.just("var"), st.sampled_from("abc")), st.tuples(st.just("const"), st.integers(-9, 9)))
trees = st.recursive(leaves, lambda t: st.one_of(
  st.tuples(st.sampled_from(["add", "sub", "mul", "max"]), t, t), st.tuples(st.just("neg"), t), st.tuples(st.just("where"), t, t, t, t)),
  max_leaves=14)

@settings(max_examples=150, deadline=None)
@given(trees, st.dictionaries(st.sampled_from("abc"), st.integers(-20, 20), min_size=3, max_size=3))
def test_gradients_agree_with_dual_numbers(grad, tree, env):
  root = build(tree)
  got = gradients(root, list(VARS.values()), grad)
  for name, g in zip(VARS, got):
    want = dual(tree, env, name)[1]
    assert (0 if g is None else g.sym_infer(env)) == want, f"d/d{name} of {root.render()}"

# ---- the tuple's shape ----

def test_entries_follow_the_nodes_sources_in_either_order(grad):
  a, g = VARS["a"], UOp.variable("g", 0, 9, dtypes.int32)
  three = UOp.const(dtypes.int32, 3)
  assert grad.rewrite(a * 3, g) == (g * three, None)
  assert grad.rewrite(3 * a, g) == (None, g * three)
  assert grad.rewrite(a + 3, g) == (g, g)
  assert grad.rewrite(a < 3, g) == (None, None)

def test_dispatch_and_each_rule_alone_agree(grad):
  a, b, g = VARS["a"], VARS["b"], UOp.variable("g", 0, 9, dtypes.int32)
  for u in [a * 3, 3 * a, a * b, a + b, a - b, -a, a.maximum(b), (a < b).where(a, b), a < b]:
    # a rule alone does not test its root op (the dispatch did): try the rules of u's op
    first = next(r for r in (rule.fn(u, g) for rule in grad.rules if u.op in rule.ops) if r is not None)
    assert grad.rewrite(u, g) == first
  assert grad.rewrite(a // b, g) is None  # no rule for IDIV: nothing, not an empty tuple

def test_literal_and_python_entries_take_their_sources_dtype():
  ns = load("""
ruleset t(ctx: UOp) returns per-source
(CAST x) -> (0)
(WHERE c x y) -> ({False} {ctx} 2)
(ADD x y) -> ((CAST:x.dtype ctx) {None})
""")
  a, f = VARS["a"], UOp.variable("f", 0, 1, dtypes.float32)
  assert ns["t"].rewrite(a.cast(dtypes.float32), f) == (UOp.const(dtypes.int32, 0),)
  p = UOp.variable("p", 0, 1, dtypes.bool)
  got = ns["t"].rewrite(p.where(f, f), f)
  assert got == (UOp.const(dtypes.bool, False), f, UOp.const(dtypes.float32, 2.0))
  assert ns["t"].rewrite(a + a, f) == (f.cast(dtypes.int32), None)

# a {python} result stands for a helper's: its value is known only when the rule fires
HELPER = """
ruleset t(ctx: UOp) returns per-source
(ADD x y) -> {(y, x)}
(MUL x y) -> {None if x is y else [x, y]}
(SUB x y) -> {(x,)}
(MAX x y) -> {(x, "not a node")}
(CMPLT x y) -> {(1, 0)}
"""

def test_a_helpers_tuple_is_checked_when_the_rule_fires():
  ns = load(HELPER, "helper.rules")
  a, b = VARS["a"], VARS["b"]
  assert ns["t"].rewrite(a + b) == (b, a)
  assert ns["t"].rewrite(a * b) == (a, b)                 # a list is made a tuple
  assert ns["t"].rewrite(a * a) is None                   # the helper returned None: the rule declines
  assert ns["t"].rewrite(a < b) == (UOp.const(dtypes.int32, 1), UOp.const(dtypes.int32, 0))  # numbers: constants of each source
  with pytest.raises(RewriteError, match=r"helper.rules:5: \(SUB x y\) -> \{\(x,\)\}: the result must be a tuple of 2 entries"):
    ns["t"].rewrite(a - b)
  with pytest.raises(RewriteError, match=r"helper.rules:6: .* each entry must be a node, a number or None"):
    ns["t"].rewrite(a.maximum(b))

def test_statistics_run_the_tuple_rules_too(grad):
  from runtime.helpers import Context
  from runtime.rewrite import rule_stats
  a, g = VARS["a"], UOp.variable("g", 0, 9, dtypes.int32)
  fn = grad.stats_table()[Ops.MUL]
  with Context(RULESTATS=1): rule, got = fn(a * 3, g)
  assert got == (g * 3, None) and rule.hits >= 1 and rule in rule_stats()
