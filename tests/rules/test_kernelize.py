"""rules/kernelize.rules: tensor_cleanup (movement ops that change nothing dropped, chains merged, autograd markers, copies
to the same device and casts to the same dtype gone), to_kernel_ast (a kernel's inputs as parameters, its constants plain)
and parametrize (constants and bound Variables as kernel parameters). The schedules themselves are tested in
tests/engine/test_schedule.py; here each cleanup rule on a graph made for it (the frontend does not build these: autograd
and the graph rewrites do), the values unchanged, and every rule of the file firing."""
from __future__ import annotations
import numpy as np
import pytest
from fires import assert_every_rule_fires, firing, kernel_asts, rules_of
from rules.kernelize import tensor_cleanup
from runtime import Ops, UOp, graph_rewrite
from runtime.dtype import dtypes
from runtime.uop import uop
from tensor import Tensor, Variable

A = np.arange(12, dtype=np.float32).reshape(3, 4)

def cleanup_cases() -> list[tuple[UOp, UOp]]:
  """(a graph, what tensor_cleanup leaves of it) for each rule of the rule set, on a realized buffer x of 12 floats."""
  x = Tensor(A.reshape(-1)).realize().uop
  f = x.dtype
  def mv(op, src, arg): return uop(op, f, (src,), arg)
  grid, row = mv(Ops.RESHAPE, x, (3, 4)), mv(Ops.RESHAPE, x, (1, 1, 12))
  return [(mv(Ops.RESHAPE, x, (12,)), x), (mv(Ops.PERMUTE, x, (0,)), x), (mv(Ops.PAD, x, ((0, 0),)), x), (mv(Ops.SHRINK, x, ((0, 12),)), x),
          (mv(Ops.FLIP, x, (False,)), x), (mv(Ops.RESHAPE, grid, (4, 3)), mv(Ops.RESHAPE, x, (4, 3))),
          (mv(Ops.EXPAND, mv(Ops.EXPAND, row, (1, 2, 12)), (3, 2, 12)), mv(Ops.EXPAND, row, (3, 2, 12))),
          (mv(Ops.PERMUTE, mv(Ops.PERMUTE, grid, (1, 0)), (1, 0)), grid), (uop(Ops.DETACH, f, (x,)), x), (uop(Ops.CONTIGUOUS_BACKWARD, f, (x,)), x),
          (uop(Ops.COPY, f, (x, uop(Ops.DEVICE, dtypes.void, (), x.device))), x), (uop(Ops.CAST, f, (x,)), x)]

@pytest.mark.parametrize("case", range(len(cleanup_cases())))
def test_each_cleanup_rule(case):
  graph, want = cleanup_cases()[case]
  assert graph_rewrite(graph, tensor_cleanup) is want
  np.testing.assert_array_equal(Tensor(graph).numpy(), Tensor(want).numpy())

# every CONTIGUOUS of a pending graph is a realize point (tensor/engine/schedule.realize_points), so a kernel reads it as an
# input and to_kernel_ast never meets one inside a kernel's part: the rule is there should one be left in
UNREACHABLE = {"(CONTIGUOUS x) -> x": "every CONTIGUOUS is a kernel boundary"}

def test_every_rule_fires():
  x = Tensor(A).realize()
  n = Variable("k", 1, 3).bind(2)
  with firing() as counts:
    for graph, _ in cleanup_cases(): graph_rewrite(graph, tensor_cleanup)
    # kernels: inputs as parameters, a contiguous boundary, a tensor's own constant (UNIQUE) plain in the kernel; parametrize:
    # a second AST of a kind with its constants as parameters, a bound Variable as an operand and as a size
    kernel_asts([(x + 1).contiguous() * 2, x * Tensor.ones(3, 4), x * 2.5 + 1, x * n, x.reshape(3, 4)[:n] + 1])
  assert_every_rule_fires(rules_of("rules/kernelize.rules"), counts, UNREACHABLE)
