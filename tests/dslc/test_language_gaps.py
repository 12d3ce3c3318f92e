"""The language gaps the ports hit (issue 23): `rest*` under `CAST?` and alternation."""
from dslc.compile import compile_rules, exec_module
from runtime import Ops, UOp, dtypes, graph_rewrite

def load(text: str, name: str = "gaps.rules") -> dict:
  return exec_module(compile_rules(name, source=text), name)

X = UOp.variable("x", 0, 5, dtypes.int32)
Y = UOp.variable("y", 0, 50, dtypes.int32)
def c(v: int) -> UOp: return UOp.const(dtypes.int32, v)

# ---- rest* under CAST? and alternation ----

def test_rest_under_an_optional_node_and_an_alternation():
  t = load("ruleset t\n(SINK (CAST? x) rest*) if x.op is Ops.CONST -> (SINK rest*)\n"
           "(NOOP (CAST x) rest* | BARRIER (CAST x) rest*) -> (NOOP x rest*)\n")["t"]
  sink = lambda *s: UOp(Ops.SINK, dtypes.void, s)  # noqa: E731
  assert graph_rewrite(sink(c(1), X, Y), t) is sink(X, Y) and graph_rewrite(sink(c(1).cast(dtypes.int64), X), t) is sink(X)
  barrier = UOp(Ops.BARRIER, dtypes.void, (X.cast(dtypes.int64), Y))
  assert t.rewrite(barrier) is UOp(Ops.NOOP, dtypes.void, (X, Y))
