"""The language gaps the ports hit (issue 23): computed bindings in guards, `rest*` under `CAST?` and alternation,
constructors inside expressions and priorities. (The checks of what guards touch, the lint of a bare op before `|` and the
overlap check have files in tests/dslc/fail/; the counts `stats`, `coverage` and the language server agree on are in
test_stats.py.)"""
from dslc.compile import compile_rules, exec_module
from runtime import Ops, UOp, dtypes, graph_rewrite

def load(text: str, name: str = "gaps.rules") -> dict:
  return exec_module(compile_rules(name, source=text), name)

X = UOp.variable("x", 0, 5, dtypes.int32)
Y = UOp.variable("y", 0, 50, dtypes.int32)
def c(v: int) -> UOp: return UOp.const(dtypes.int32, v)

# ---- computed bindings ----

BINDINGS = """
from rules.symbolic_helpers import divmod_linear
ruleset t
(IDIV x:ints c@(CONST)) if c.arg > 0 and x.vmin >= 0 and q := x.vmax // c.arg and q == 0 -> (CONST [q])
u@(MOD x:ints c@(CONST)) if r := divmod_linear(u, x, c.arg) -> r
(MAX x:ints y) if m := (x if x.vmin >= y.vmax else None) -> m
"""

def test_a_binding_is_tested_then_read():
  t = load(BINDINGS)["t"]
  assert t.rewrite(X // c(8)) is c(0) and t.rewrite(Y // c(8)) is None
  # None declines: the helper gives None for a MOD it can't simplify
  assert t.rewrite(Y % c(7)) is None and t.rewrite((Y * 8 + 3) % c(8)) is not None
  z = UOp.variable("z", 10, 20, dtypes.int32)
  assert t.rewrite(z.maximum(X)) is z and t.rewrite(X.maximum(z)) is z and t.rewrite(X.maximum(Y)) is None

def test_a_binding_runs_after_the_structure_and_the_guards_before_it():
  code = compile_rules("b.rules", source=BINDINGS)
  block = code[code.index("def t_IDIV"):code.index("def t_MOD")]
  lines = [x.strip() for x in block.split("\n") if x.strip() and not x.strip().startswith("#")]
  test = next(x for x in lines if ":=" in x)
  # the guards before the binding (a cheap one early, range analysis with it), then the binding, then what reads it
  assert "x.vmin >= 0 and (q := x.vmax // c.arg) is not None and q == 0" in test
  assert lines.index(test) > next(i for i, x in enumerate(lines) if "c.arg > 0" in x)

def test_explain_follows_a_binding(tmp_path):
  from dslc.compile import load_rules
  from dslc.explain import explain_on, module_namespace
  path = tmp_path / "b.rules"
  path.write_text(BINDINGS)
  rf = load_rules(str(path))
  ns = module_namespace(rf, compile_rules(str(path)))
  assert any("FIRES" in x for x in explain_on(rf, ns, X // c(8)))
  assert any("`q := x.vmax // c.arg` is None" in x or "guard `q == 0` is false" in x for x in explain_on(rf, ns, Y // c(8)))

# ---- rest* under CAST? and alternation ----

def test_rest_under_an_optional_node_and_an_alternation():
  t = load("ruleset t\n(SINK (CAST? x) rest*) if x.op is Ops.CONST -> (SINK rest*)\n"
           "(NOOP (CAST x) rest* | BARRIER (CAST x) rest*) -> (NOOP x rest*)\n")["t"]
  sink = lambda *s: UOp(Ops.SINK, dtypes.void, s)  # noqa: E731
  assert graph_rewrite(sink(c(1), X, Y), t) is sink(X, Y) and graph_rewrite(sink(c(1).cast(dtypes.int64), X), t) is sink(X)
  barrier = UOp(Ops.BARRIER, dtypes.void, (X.cast(dtypes.int64), Y))
  assert t.rewrite(barrier) is UOp(Ops.NOOP, dtypes.void, (X, Y))

# ---- constructors inside expressions ----

def test_nodes_inside_expressions_are_built_once_before_the_result():
  text = ("from rules.symbolic_helpers import exact\nruleset t\nu@(STORE a (ADD x 0)) -> u{src: (a, (NEG (NEG x)))}\n"
          "(NOOP x) if x.op is not Ops.NEG -> (NOOP [(NEG x)] x)\n(BARRIER x) -> (NOOP [exact((ADD x x))] x)\n")
  t = load(text)["t"]
  st = UOp(Ops.STORE, dtypes.void, (X, Y + 0))
  assert t.rewrite(st) is UOp(Ops.STORE, dtypes.void, (X, -(-Y)))
  assert t.rewrite(UOp(Ops.NOOP, dtypes.void, (X,))).arg is -X
  assert t.rewrite(UOp(Ops.BARRIER, dtypes.void, (X,))).arg is True
  code = compile_rules("n.rules", source=text)
  assert code.count("_n0 = _uop(ADD, x.dtype, (x, x), None)") == 1

# ---- priorities ----

def test_priorities_order_the_rules():
  text = "ruleset t\n(ADD x y) if x is y -> (MUL x 2)\npriority 1\n(ADD x 0) -> x\npriority -1\n(ADD x y) -> (SUB x y)\n(ADD x 1) -> x\n"
  t = load(text)["t"]
  assert [r.line for r in t.rules] == [4, 2, 7, 6]
  assert graph_rewrite(X + 0, t) is X and graph_rewrite(X + X, t) is X * 2 and t.rewrite(X + 1) is X
  code = compile_rules("p.rules", source=text)
  assert "  # priority: 1\n" in code and "  # priority: -1\n" in code

def test_a_vector_alu_node_lane_by_lane():
  # nested per-source comprehensions (tinygrad's no_vectorized_alu): ops of every arity, the op from a `for` block
  t = load("ruleset t\nfor op in ADD, CMPLT, WHERE {\nu@(op rest*) if u.dtype.count > 1\n"
           "  -> (VECTORIZE:u.dtype (op:u.dtype.scalar (GEP:s.dtype.scalar [(i,)] s) for s in rest) for i in range(u.dtype.count))\n}\n")["t"]
  v, w = (UOp(Ops.VECTORIZE, dtypes.int32.vec(2), s) for s in ((X, Y), (Y, c(3))))
  gep = lambda s, i: UOp(Ops.GEP, s.dtype.scalar, (s,), (i,))  # noqa: E731
  lt = UOp(Ops.CMPLT, dtypes.bool.vec(2), (v, w))
  assert t.rewrite(lt) is UOp(Ops.VECTORIZE, lt.dtype, tuple(UOp(Ops.CMPLT, dtypes.bool, (gep(v, i), gep(w, i))) for i in range(2)))
  where = UOp(Ops.WHERE, v.dtype, (lt, v, w))
  assert t.rewrite(where) is UOp(Ops.VECTORIZE, v.dtype, tuple(UOp(Ops.WHERE, dtypes.int32, (gep(lt, i), gep(v, i), gep(w, i))) for i in range(2)))
  assert t.rewrite(X + Y) is None
