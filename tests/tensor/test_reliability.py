"""Regression tests of issue 10's engine half, case by case: reductions of reductions past the optimizer's split threshold
(the linearizer ordered loops by RANGE id, and a split reduction's new loop has a larger id than the reductions inside it).
Values against numpy; each case also checks the optimizer really split a reduction, so it can't pass by not optimizing.
"""
import numpy as np
import pytest
from tensor import Tensor, Context
from runtime import Ops
from tensor.codegen import lower_kernel

def opts_of(t: Tensor) -> list[tuple]:
  """The optimizations applied to each kernel computing t (kernelizes t; nothing runs)."""
  t.kernelize()
  return [o for u in t.uop.toposort() if u.op is Ops.KERNEL and u.arg.ast.op is Ops.SINK for o in lower_kernel(u.arg.ast, opt=True)[1]]

def data(*shape, seed=0) -> np.ndarray: return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)
def softmax(a, axis=-1):
  e = np.exp(a - a.max(axis, keepdims=True))
  return e / e.sum(axis, keepdims=True)

a64, w1, w2 = data(64, 64), data(64, 65, seed=1), data(65, 130, seed=2)
CASES = {
  # the first case: a column sum (5 long) inside a max over 64 columns, split into 16 lanes
  "sum0_max0": (lambda x: x.sum(0).max(0), lambda x: x.sum(0).max(0), np.ones((5, 64), np.float32)),
  "sum0_max0_63": (lambda x: x.sum(0).max(0), lambda x: x.sum(0).max(0), np.ones((5, 63), np.float32)),
  "matmul_sum": (lambda x: (x @ x).sum(), lambda x: (x @ x).sum(), a64),
  "matmul_max1": (lambda x: (x @ x).max(1), lambda x: (x @ x).max(1), a64),
  "T_mean1_mean0": (lambda x: x.T.mean(1).mean(0), lambda x: x.T.mean(1).mean(0), data(130, 64)),
  "mean0_sum0": (lambda x: x.mean(0).sum(0), lambda x: x.mean(0).sum(0), data(65, 128)),
  "softmax_matmul_matmul_mean1": (lambda x: (x.softmax(1) @ Tensor(w1) @ Tensor(w2)).mean(1),
                                  lambda x: (softmax(x, 1) @ w1 @ w2).mean(1), a64),
  "max_of_sums_of_max": (lambda x: x.max(1).reshape(8, 16).sum(1).max(0), lambda x: x.max(1).reshape(8, 16).sum(1).max(0), data(128, 64)),
}

@pytest.mark.parametrize("name", list(CASES))
def test_reduction_of_a_reduction(name):
  ours, theirs, x = CASES[name]
  with Context(NOOPT=0):
    out = ours(Tensor(x))
    if name != "sum0_max0_63": assert any(o[0] == "UNROLL" for o in opts_of(out)), "the case no longer crosses the split threshold"
    np.testing.assert_allclose(out.numpy(), theirs(x.astype(np.float64)), rtol=1e-5, atol=1e-4)
