"""Kernel fusion: how many kernels the scheduler makes of a tensor expression (inputs realized first, so only the
expression's own kernels count). Counted two ways: KERNEL nodes left by `kernelize()` and GlobalCounters.kernel_count
around `realize()`; values are checked against numpy too.

Counts at the time of writing: (a*b+c).sum() 1; x.sum(1) + x.max(1) 1; elementwise chains 1; movement ops into an
elementwise op 1; x - x.max(1, keepdim=True) 1; softmax 1; log_softmax 1; matmul 1; a contiguous() read by two
reductions 3 (it runs once); two outputs realized together 2. The tests assert the issue's bounds, not these numbers.
"""
import numpy as np
import pytest
from tensor import Tensor, GlobalCounters
from runtime import Ops

DEVICES = ["CPU", "PYTHON"]

def kernels_in(t: Tensor) -> int:
  """The number of KERNEL nodes scheduling t makes (nothing runs)."""
  t.kernelize()
  return sum(1 for u in t.uop.toposort() if u.op is Ops.KERNEL)

def run_count(*ts: Tensor) -> int:
  """The number of kernels realizing ts runs."""
  GlobalCounters.reset()
  Tensor.realize(*ts) if len(ts) > 1 else ts[0].realize()
  return GlobalCounters.kernel_count

def inputs(device: str, *shapes, seed: int = 0) -> list[tuple[Tensor, np.ndarray]]:
  """Realized tensors with random values, and their numpy arrays."""
  rng = np.random.default_rng(seed)
  out = []
  for s in shapes:
    a = rng.uniform(-2, 2, s).astype(np.float32)
    out.append((Tensor(a, device=device).realize(), a))
  return out

@pytest.mark.parametrize("device", DEVICES)
def test_multiply_add_sum_is_one_kernel(device):
  (a, na), (b, nb), (c, nc) = inputs(device, (4, 5), (4, 5), (4, 5))
  assert kernels_in((a * b + c).sum()) == 1
  out = (a * b + c).sum()
  assert run_count(out) == 1
  np.testing.assert_allclose(out.item(), (na * nb + nc).sum(), rtol=1e-5)

@pytest.mark.parametrize("device", DEVICES)
def test_two_reductions_of_one_input(device):
  (x, nx), = inputs(device, (4, 5))
  assert kernels_in(x.sum(1) + x.max(1)) <= 2
  out = x.sum(1) + x.max(1)
  assert run_count(out) <= 2
  np.testing.assert_allclose(out.numpy(), nx.sum(1) + nx.max(1), rtol=1e-5)

@pytest.mark.parametrize("device", DEVICES)
def test_elementwise_chain_is_one_kernel(device):
  (a, na), (b, nb), (c, nc) = inputs(device, (3, 4), (3, 4), (4,))
  chains = [(((a + 1) * b - c).exp().sqrt().relu() * 2, np.sqrt(np.exp((na + 1) * nb - nc)) * 2),
            ((a > b).where(a, c).maximum(0.5), np.maximum(np.where(na > nb, na, nc), 0.5)),
            (a.int().float() / 3 + b.sigmoid(), na.astype(np.int32).astype(np.float32) / 3 + 1 / (1 + np.exp(-nb))),
            (a.T.flip(0).reshape(2, 6) + b.reshape(2, 6)[:, ::-1], na.T[::-1].reshape(2, 6) + nb.reshape(2, 6)[:, ::-1]),
            (a.pad(((1, 0), (0, 2))).shrink(((0, 3), (1, 5))) * c, np.pad(na, ((1, 0), (0, 2)))[0:3, 1:5] * nc)]
  for t, ref in chains:
    assert kernels_in(t) == 1
    np.testing.assert_allclose(t.numpy(), ref, rtol=1e-5, atol=1e-6)
  for t, ref in [(a * 2 - 1 + b, na * 2 - 1 + nb), (((a + 1) * b - c).abs().log2(), np.log2(np.abs((na + 1) * nb - nc)))]:
    assert run_count(t) == 1
    np.testing.assert_allclose(t.numpy(), ref, rtol=1e-5, atol=1e-6)

@pytest.mark.parametrize("device", DEVICES)
def test_reduce_then_expand(device):
  """A reduction broadcast back over its input: at most two kernels (the reduction may be fused, recomputed per row)."""
  (x, nx), = inputs(device, (4, 5))
  out = x - x.max(1, keepdim=True)
  assert run_count(out) <= 2
  np.testing.assert_allclose(out.numpy(), nx - nx.max(1, keepdims=True), rtol=1e-6)

@pytest.mark.parametrize("device", DEVICES)
def test_softmax(device):
  """softmax: 1 kernel when this was written (max, sum of exp and the division in one); at most 3, as tinygrad's."""
  (x, nx), = inputs(device, (4, 5))
  out = x.softmax(-1)
  n = run_count(out)
  assert 1 <= n <= 3
  e = np.exp(nx - nx.max(-1, keepdims=True))
  np.testing.assert_allclose(out.numpy(), e / e.sum(-1, keepdims=True), rtol=1e-5)
  assert run_count(x.log_softmax(-1)) <= 3

@pytest.mark.parametrize("device", DEVICES)
def test_matmul_is_one_kernel(device):
  (a, na), (b, nb) = inputs(device, (3, 4), (4, 5))
  out = a @ b
  assert run_count(out) == 1
  np.testing.assert_allclose(out.numpy(), na @ nb, rtol=1e-5, atol=1e-6)

@pytest.mark.parametrize("device", DEVICES)
def test_a_buffer_read_by_several_kernels_is_realized_once(device):
  (x, nx), = inputs(device, (4, 5))
  y = (x * 2).contiguous()
  s, m = y.sum(), y.max()
  assert run_count(s, m) == 3                          # y, then the two reductions reading it
  assert y.uop.op in (Ops.BUFFER, Ops.RESHAPE)         # realizing its readers realized y: it is a buffer now
  assert run_count(y + 1) == 1                         # and it is not computed again
  np.testing.assert_allclose([s.item(), m.item()], [(nx * 2).sum(), (nx * 2).max()], rtol=1e-5)
  # data from a list is copied to the device once, whoever reads it
  t = Tensor([1, 2, 3], device=device)
  first = run_count(t + 1)
  assert first == (2 if device != "PYTHON" else 1)     # the copy from the host (PYTHON) and the kernel
  assert run_count(t * 2) == 1

@pytest.mark.parametrize("device", DEVICES)
def test_identical_expressions_share_kernels(device):
  """The seeds' dedup: A = t*4 and B = t*4 are one UOp, so realizing A realizes B (no kernel left to run)."""
  (t, nt), = inputs(device, (4,))
  A, B = t * 4, t * 4
  assert A.uop is B.uop
  assert run_count(A) == 1 and run_count(B) == 0
  assert A.uop is B.uop and B.tolist() == (nt * 4).tolist()

@pytest.mark.parametrize("device", DEVICES)
def test_outputs_realized_together(device):
  (a, na), (b, nb) = inputs(device, (3, 3), (3, 3))
  assert run_count(a + b, a * b) <= 2
  z = a + 1
  assert run_count(z.sum(), z.max()) <= 3               # z may be fused into both reductions (2) or realized once (3)
