"""Gradients of conv1d/2d/3d (the CONV node's rule in rules/gradient.rules: a transposed conv for the input, a conv of the
input by the gradient for the weight) against torch: strides, paddings (uneven ones too), dilations, groups and odd sizes
on both of the value's forms (the fused window kernel and the implicit GEMM, forced at small sizes), and at sizes either
side of the GEMM's threshold and of the blocked sum of a long weight-gradient reduction. Second derivatives go through the
same rule (a gradient's convs are CONVs again)."""
import numpy as np
import pytest
from tensor import Tensor

torch = pytest.importorskip("torch", reason="needs torch (pip install torch) for the reference gradients")

class R:
  """The few helpers of tests/tensor/functional_refs.py these tests use."""
  torch = torch
  @staticmethod
  def rand(rng, *shape, lo=-2.0, hi=2.0): return rng.uniform(lo, hi, shape).astype(np.float32)
  @staticmethod
  def T(a): return torch.tensor(np.asarray(a))
  @staticmethod
  def close(out, ref, rtol=1e-4, atol=1e-5, what=""):
    got = out.numpy() if isinstance(out, Tensor) else np.asarray(out)
    ref = ref.detach().numpy()
    assert got.shape == ref.shape, f"{what}: shape {got.shape}, expected {ref.shape}"
    np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=rtol, atol=atol, err_msg=what)

# (batch, cin, cout, spatial, kernel, stride, padding, dilation, groups); padding a list of (before, after) per dim
CASES = [
  (2, 3, 4, (9,), (3,), (1,), [(0, 0)], (1,), 1),
  (1, 4, 6, (11,), (4,), (3,), [(2, 1)], (2,), 2),
  (2, 2, 3, (7, 8), (3, 2), (1, 1), [(1, 1), (0, 0)], (1, 1), 1),
  (2, 6, 4, (9, 7), (3, 3), (2, 1), [(1, 0), (2, 2)], (1, 2), 2),
  (1, 3, 3, (10, 10), (5, 5), (3, 3), [(0, 0), (0, 0)], (1, 1), 3),       # depthwise, windows skipping pixels
  (3, 4, 2, (5, 6), (1, 1), (2, 2), [(0, 0), (0, 0)], (1, 1), 1),         # 1x1, strided: the last row and column unused
  (1, 2, 4, (5, 6, 7), (2, 3, 2), (1, 2, 1), [(1, 1), (0, 1), (1, 0)], (2, 1, 1), 2),
  # strided and undilated: the input gradient runs per phase (a phase whose pixels see no tap is zeros)
  (2, 4, 6, (9, 8), (3, 3), (2, 2), [(1, 1), (1, 0)], (1, 1), 1),         # ResNet's 3x3/2, uneven padding
  (1, 2, 3, (13,), (2,), (3,), [(2, 0)], (1,), 1),                         # kernel shorter than the stride, padded
  (2, 3, 2, (7, 9, 6), (3, 2, 3), (2, 3, 1), [(1, 1), (0, 2), (1, 1)], (1, 1, 1), 1),
  (1, 4, 4, (8, 9), (7, 7), (2, 2), [(3, 3), (3, 2)], (1, 1), 2),         # ResNet's first 7x7/2, grouped
]

def _check(x, w, b, stride, pads, dilation, groups, rtol=1e-4, atol=1e-4):
  nd = w.ndim - 2
  fn = {1: "conv1d", 2: "conv2d", 3: "conv3d"}[nd]
  xt, wt, bt = (Tensor(a, requires_grad=True) for a in (x, w, b))
  out = getattr(xt, fn)(wt, bt, stride=stride, padding=[p for pair in reversed(pads) for p in pair] if nd > 0 else 0,
                        dilation=dilation, groups=groups)
  g = np.random.default_rng(1).uniform(-1, 1, out.shape).astype(np.float32)
  (out * Tensor(g)).sum().backward()
  tx, tw, tb = (R.T(a).requires_grad_() for a in (x, w, b))
  F = R.torch.nn.functional
  padded = F.pad(tx, [p for pair in reversed(pads) for p in pair])
  ref = getattr(F, fn)(padded, tw, tb, stride, 0, dilation, groups)
  (ref * R.T(g)).sum().backward()
  R.close(out, ref, rtol=rtol, atol=atol, what="forward")
  for name, ours, theirs in (("x", xt, tx), ("w", wt, tw), ("b", bt, tb)): R.close(ours.grad, theirs.grad, rtol=rtol, atol=atol, what=f"d{name}")

def _case(case, seed=0):
  bs, cin, cout, spatial, kernel, stride, pads, dilation, groups = case
  rng = np.random.default_rng(seed)
  return R.rand(rng, bs, cin, *spatial), R.rand(rng, cout, cin // groups, *kernel), R.rand(rng, cout), stride, pads, dilation, groups

@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{len(c[3])}d-k{c[4]}-s{c[5]}-d{c[7]}-g{c[8]}")
def test_fused_form(case):
  _check(*_case(case))

@pytest.fixture
def gemm_always(monkeypatch):
  import tensor.functional.conv_graph as cv
  monkeypatch.setattr(cv, "IMPLICIT_GEMM_MIN_MACS", 0)
  monkeypatch.setattr(cv, "IMPLICIT_GEMM_MIN_COUT", 1)
  monkeypatch.setattr(cv, "IMPLICIT_GEMM_MIN_REDUCE", 1)
  monkeypatch.setattr(cv, "GEMM_BLOCK", 8)  # blocked sums at these sizes too
  import tensor.functional.conv as conv
  monkeypatch.setattr(conv, "tile_columns", lambda device: 2)  # the weight packed in panels of 2 columns (4 output channels: 2 panels)

@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{len(c[3])}d-k{c[4]}-s{c[5]}-d{c[7]}-g{c[8]}")
def test_gemm_form(case, gemm_always):
  _check(*_case(case))

@pytest.mark.parametrize("bs", [2, 4])
def test_real_sizes_either_side_of_the_gemm_threshold(bs):
  """(bs, 32, 32, 32) x (64, 32, 3, 3) padded by 1: 38M multiply-adds at bs 2 (the fused form), 75M at bs 4 (the GEMM,
  whose weight gradient sums 4,096 steps: one block); the seeds' second conv (batch 8 here), whose weight gradient sums
  8 x 20 x 20 = 3,200 steps per tap, and its input gradient is a 5x5 transposed conv."""
  import tensor.functional.conv_graph as cv
  rng = np.random.default_rng(bs)
  x, w, b = R.rand(rng, bs, 32, 32, 32), R.rand(rng, 64, 32, 3, 3, lo=-0.2, hi=0.2), R.rand(rng, 64)
  assert (bs * 64 * 32 * 32 * 32 * 9 >= cv.IMPLICIT_GEMM_MIN_MACS) == (bs == 4)
  _check(x, w, b, (1, 1), [(1, 1), (1, 1)], (1, 1), 1, rtol=1e-3, atol=1e-3)

@pytest.mark.parametrize("seed", range(12))
def test_strided_gradients_random(seed):
  """Random strided, undilated convs (both gradients run per phase) on both of the value's forms: strides 2-4,
  kernels shorter and longer than the stride, uneven and large paddings, groups, 1-d to 3-d; against torch."""
  import tensor.functional.conv_graph as cv
  rng = np.random.default_rng(100 + seed)
  nd, groups = int(rng.integers(1, 4)), int(rng.choice([1, 2]))
  kernel = tuple(int(k) for k in rng.integers(1, 6, nd))
  stride = tuple(int(s) for s in rng.integers(2, 5, nd))
  pads = [(int(rng.integers(0, k)), int(rng.integers(0, k))) for k in kernel]
  spatial = tuple(int(k + rng.integers(0, 9 if nd < 3 else 5)) for k in kernel)
  cin, cout = 2 * groups, 3 * groups
  x, w, b = R.rand(rng, 2, cin, *spatial), R.rand(rng, cout, cin // groups, *kernel), R.rand(rng, cout)
  with pytest.MonkeyPatch.context() as mp:
    if seed % 2:  # the implicit GEMM form
      for name in ("IMPLICIT_GEMM_MIN_MACS", "IMPLICIT_GEMM_MIN_COUT", "IMPLICIT_GEMM_MIN_REDUCE"): mp.setattr(cv, name, 0)
    _check(x, w, b, stride, pads, (1,) * nd, groups)

def test_strided_input_gradient_at_resnet_size():
  """ResNet's layer3 downsampling conv (128 -> 256, 3x3/2, padded 1) at batch 2: each phase of its input gradient is an
  implicit GEMM over 256 channels; against torch."""
  rng = np.random.default_rng(7)
  x, w, b = R.rand(rng, 2, 128, 28, 28), R.rand(rng, 256, 128, 3, 3, lo=-0.1, hi=0.1), R.rand(rng, 256)
  _check(x, w, b, (2, 2), [(1, 1), (1, 1)], (1, 1), 1, rtol=1e-3, atol=1e-3)

def test_long_weight_gradient_reduction_is_blocked():
  """A weight gradient whose reduction (batch x output pixels: 16 x 20 x 20 = 6,400) passes GEMM_BLOCK is summed in
  blocks: a kernel of partial sums, then their sum; against torch."""
  from tensor.functional import conv_graph as cv
  rng = np.random.default_rng(3)
  x, w, b = R.rand(rng, 16, 32, 24, 24), R.rand(rng, 32, 32, 5, 5, lo=-0.1, hi=0.1), R.rand(rng, 32)
  assert 16 * 20 * 20 > cv.GEMM_BLOCK
  _check(x, w, b, (1, 1), [(0, 0), (0, 0)], (1, 1), 1, rtol=1e-3, atol=1e-3)

def test_block_split_prefers_an_even_number_of_blocks():
  """A long reduction is cut into blocks the threads share out evenly: ResNet's layer4 3x3 (3 taps, 3 taps, 512 channels)
  in 2 blocks of its channels rather than 3 of its rows; a weight gradient's (batch 128 x 24 x 24) along the batch."""
  from tensor.functional import conv_graph as cv
  assert cv.block_split((3, 3, 512)) == (2, 2)
  assert cv.block_split((128, 24, 24)) == (0, 32)
  assert cv.block_split((3, 3, 64)) == (0, 1)
  assert cv.block_split((3, 3, 3, 331)) == (0, 3)  # no even cut: the fewest blocks

def test_weight_gradient_reads_the_channels_last_gradient_in_place(monkeypatch):
  """The weight gradient's GEMM takes the output gradient as its weight, packed as (batch, *pixels, channels): the
  channels-last copy of the gradient both gradient convs read already is that layout, so it is read in place, not copied
  again (one kernel fewer than with the packing copy; the same values)."""
  from tensor import GlobalCounters
  from tensor.functional import conv_graph as cv
  rng = np.random.default_rng(5)
  x, w, g = R.rand(rng, 4, 16, 12, 12), R.rand(rng, 32, 16, 3, 3), R.rand(rng, 4, 32, 10, 10)
  def weight_grad():
    wt = Tensor(w)
    out = Tensor(x).conv2d(wt)
    dw, = out.gradient(wt, gradient=Tensor(g))
    GlobalCounters.reset()
    return dw.numpy(), GlobalCounters.kernel_count
  monkeypatch.setattr(cv, "IMPLICIT_GEMM_MIN_MACS", 0)
  ours, n = weight_grad()
  monkeypatch.setattr(cv, "in_order", lambda view: False)
  copied, n_copied = weight_grad()
  assert n == n_copied - 1, (n, n_copied)
  np.testing.assert_array_equal(ours, copied)
  ref = torch.nn.grad.conv2d_weight(R.T(x), w.shape, R.T(g))
  R.close(Tensor(ours), ref, rtol=1e-4, atol=1e-3)

def test_in_order_views():
  """in_order: reshapes and permutes of a CONTIGUOUS node that read its memory in order, and ones that don't."""
  from tensor.functional import conv_graph as cv
  c = cv.contiguous(Tensor.empty(4, 6, 5).uop)
  assert cv.in_order(cv.reshape(c, (24, 5)))
  assert cv.in_order(cv.permute(cv.permute(c, (1, 0, 2)), (1, 0, 2)))
  assert cv.in_order(cv.reshape(cv.permute(cv.reshape(c, (4, 6, 1, 5)), (0, 2, 1, 3)), (4, 30)))  # a size-1 axis moved
  assert not cv.in_order(cv.permute(c, (1, 0, 2)))
  assert not cv.in_order(cv.reshape(cv.permute(c, (0, 2, 1)), (4, 30)))
  assert not cv.in_order(Tensor.empty(4, 6).uop)  # not a CONTIGUOUS node

def test_second_derivative():
  """d/dx of (d loss/dw) goes through the CONV rule twice (the weight gradient is a CONV of x)."""
  rng = np.random.default_rng(4)
  x, w = R.rand(rng, 2, 3, 6, 6), R.rand(rng, 4, 3, 3, 3)
  xt, wt = Tensor(x, requires_grad=True), Tensor(w, requires_grad=True)
  gw, = xt.conv2d(wt, stride=2, padding=1).square().sum().gradient(wt)
  gx, = (gw * gw).sum().gradient(xt)
  tx, tw = R.T(x).requires_grad_(), R.T(w).requires_grad_()
  tgw, = R.torch.autograd.grad(R.torch.nn.functional.conv2d(tx, tw, stride=2, padding=1).square().sum(), tw, create_graph=True)
  tgx, = R.torch.autograd.grad((tgw * tgw).sum(), tx)
  R.close(gw, tgw, rtol=1e-4, atol=1e-3)
  R.close(gx, tgx, rtol=1e-3, atol=1e-2)

def test_one_conv_node_per_conv_and_its_gradients():
  """A conv is one CONV node; its input and weight gradients are CONV nodes too (not window sums of the gradient)."""
  from runtime.ops import Ops
  x, w = Tensor.rand(2, 3, 8, 8, requires_grad=True), Tensor.rand(4, 3, 3, 3, requires_grad=True)
  out = x.conv2d(w, padding=1)
  assert out.uop.op is Ops.CONV
  gx, gw = out.sum().gradient(x, w)
  for g in (gx, gw):
    assert any(u.op is Ops.CONV for u in g.uop.toposort())
