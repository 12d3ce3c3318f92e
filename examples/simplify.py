"""A first look: build an index expression as UOps, simplify it with the generated symbolic rules, and check the
result against Python's own arithmetic. (The main job becomes the example training once the tensor layer exists.)"""
from runtime import UOp, Ops, dtypes, graph_rewrite
from rules.symbolic import symbolic

a, b = UOp.variable("a", 0, 10), UOp.variable("b", 0, 7)
expr = (a * 4 + 3 + 4) * 1 + b * 0 + (b // 1) % 8
print("input:     ", expr.render())
simple = graph_rewrite(expr, symbolic)
print("simplified:", simple.render())
for av in range(11):
  for bv in range(8):
    assert expr.sym_infer({"a": av, "b": bv}) == simple.sym_infer({"a": av, "b": bv})
print("same value at all", 11 * 8, "points; the constant", UOp(Ops.CONST, dtypes.int, arg=7) in simple.toposort() and "7 was folded" or "")
