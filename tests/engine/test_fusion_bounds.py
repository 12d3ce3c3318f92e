"""Fusion never makes the work per output element grow with the input (issue 22 item 10): a reduction is not recomputed
per output when a buffer costs less (rules/boundaries.rules), and a cat or stack of many pieces joins them as a tree of
bounded fan-in (tensor/movement.py). Each case from its reproducer, measured by the work the kernels do (GlobalCounters'
ops and bytes) at two sizes: linear work doubles with the size, the quadratic kernels quadrupled. No wall-clock times."""
import numpy as np
import pytest
from runtime.ops import Ops
from tensor import GlobalCounters, Tensor
from tensor.movement import CAT_FANIN

RNG = np.random.default_rng(22)

def work(make, n: int) -> tuple[int, int, int]:
  """(ops, bytes, kernels) of realizing make(n), its inputs realized first; checks the values against numpy on the way."""
  out, want = make(n)
  GlobalCounters.reset()
  got = out.numpy()
  np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
  return GlobalCounters.global_ops, GlobalCounters.global_mem, GlobalCounters.kernel_count

def growth(make, n: int) -> tuple[float, float]:
  (o1, m1, _), (o2, m2, _) = work(make, n), work(make, 2 * n)
  return o2 / o1, m2 / m1

def div_by_sum(n):
  x = RNG.random((n, 16), np.float32)
  return (Tensor(x).realize() / Tensor(x).realize().sum(0)).reshape(-1), (x / x.sum(0)).reshape(-1)

def softmax_reshaped(n):
  x = RNG.random((n, 16), np.float32)
  e = np.exp(x - x.max(0))
  return Tensor(x).realize().softmax(0).reshape(-1), (e / e.sum(0)).reshape(-1)

def log_softmax_gather(n):
  x, idx = RNG.random((n, 16), np.float32), RNG.integers(0, n * 16, n * 16).astype(np.int32)
  m = x - x.max(0)
  want = (m - np.log(np.exp(m).sum(0))).reshape(-1)[idx]
  return Tensor(x).realize().log_softmax(0).reshape(-1).gather(0, Tensor(idx).realize()), want

def stack_realized(n):
  xs = [RNG.random(4, np.float32) for _ in range(n)]
  return Tensor.stack(*[Tensor(x).realize() for x in xs]), np.stack(xs)

def cat_realized(n):
  xs = [RNG.random(4, np.float32) for _ in range(n)]
  return Tensor.cat(*[Tensor(x).realize() for x in xs]), np.concatenate(xs)

@pytest.mark.parametrize("make,n", [(div_by_sum, 1000), (softmax_reshaped, 1000), (log_softmax_gather, 500)],
                         ids=["x / x.sum(0) reshaped", "softmax(0) reshaped", "log_softmax then gather"])
def test_reductions_are_computed_once_per_result(make, n):
  """(x / x.sum(0)).reshape(-1) took 1.66 s at (8000, 16), x.softmax(0).reshape(-1) ran as one kernel r_64000_4000, and
  log_softmax then gather as one kernel r_130305_130305: each output element ran a whole column's reduction."""
  ops, mem = growth(make, n)
  assert ops < 2.5 and mem < 2.5, f"work grew {ops:.2f}x (ops) and {mem:.2f}x (bytes) for twice the size"

@pytest.mark.parametrize("make", [stack_realized, cat_realized], ids=["stack", "cat"])
def test_many_pieces_make_kernels_of_bounded_fanin(make):
  """Tensor.stack of 400 realized (4,) tensors, or cat of 200, made one kernel that the compiler could not finish in 300 s:
  every output element loaded every piece in a 400-deep select."""
  for n in (200, 400):
    out, want = make(n)
    out.kernelize()
    asts = [k.arg.ast for k in out.uop.toposort(gate=lambda u: u.op is not Ops.BUFFER) if k.op is Ops.KERNEL and k.arg.ast.op is Ops.SINK]
    widest = max(sum(1 for u in ast.toposort() if u.op is Ops.DEFINE_GLOBAL) - 1 for ast in asts)
    assert widest <= CAT_FANIN, f"a kernel reads {widest} buffers"
    np.testing.assert_array_equal(out.numpy(), want)
  # 256 -> 512 pieces: the tree gets one more level of 2, so the work per element grows by a sixteenth, not by 2x
  ops, mem = growth(make, 256)
  assert ops < 2.5 and mem < 2.5, f"work grew {ops:.2f}x (ops) and {mem:.2f}x (bytes) for twice the pieces"
