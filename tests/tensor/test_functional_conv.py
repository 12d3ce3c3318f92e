"""conv1d/conv2d/conv3d and the transposed convs against the numpy references (loops over kernel taps) and torch when
installed, on CPU and PYTHON: hypothesis over batch, channels, groups, sizes, kernels, strides, dilations and
paddings (int, per-dim, 2-per-dim, 'same', 'valid'), with reductions on both sides of the optimizer's 64 split; bias,
unbatched inputs, the accumulation dtype; errors naming both operands.
"""
import numpy as np
import pytest
from hypothesis import strategies as st
from tensor import Tensor, dtypes
from tensor.tensor import TensorError
import functional_refs as R

def _check_conv(device, data, nd, max_side, transposed=False):
  rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
  groups = data.draw(st.sampled_from([1, 1, 2, 3]))
  cin_g = data.draw(st.integers(1, 8 if device == "CPU" else 2))
  cout_g = data.draw(st.integers(1, 4 if device == "CPU" else 2))
  kernel = tuple(data.draw(st.integers(1, 3)) for _ in range(nd))
  stride = tuple(data.draw(st.integers(1, 3)) for _ in range(nd))
  dilation = tuple(data.draw(st.integers(1, 2)) for _ in range(nd))
  bs = data.draw(st.integers(1, 3 if device == "CPU" else 1))
  spatial = tuple(data.draw(st.integers(d * (k - 1) + 1, d * (k - 1) + max_side)) for k, d in zip(kernel, dilation))
  padding = tuple(data.draw(st.integers(0, 2)) for _ in range(nd))
  bias = rand_or_none(rng, data, groups * cout_g)
  x = R.rand(rng, bs, groups * cin_g, *spatial)
  if not transposed:
    w = R.rand(rng, groups * cout_g, cin_g, *kernel)
    out = getattr(Tensor(x, device=device), f"conv{nd}d")(Tensor(w, device=device), _t(bias, device), stride=stride, dilation=dilation,
                                                          padding=padding, groups=groups)
    R.close(out, R.conv(x, w, bias, stride, dilation, list(zip(padding, padding)), groups), what=f"conv{nd}d")
    if R.torch is not None:
      F = R.torch.nn.functional
      ref = getattr(F, f"conv{nd}d")(R.T(x), R.T(w), None if bias is None else R.T(bias), stride, padding, dilation, groups)
      R.close(out, ref, what=f"torch conv{nd}d")
  else:
    w = R.rand(rng, groups * cin_g, cout_g, *kernel)
    padding = tuple(min(p, d * (k - 1)) for p, d, k in zip(padding, dilation, kernel))
    output_padding = tuple(data.draw(st.integers(0, max(s, d) - 1)) for s, d in zip(stride, dilation))
    fn = "conv_transpose2d" if nd == 2 else f"conv_transpose{nd}d"
    out = getattr(Tensor(x, device=device), fn)(Tensor(w, device=device), _t(bias, device), stride=stride, dilation=dilation,
                                                padding=padding, output_padding=output_padding, groups=groups)
    R.close(out, R.conv_transpose(x, w, bias, stride, dilation, padding, output_padding, groups), what=fn)
    if R.torch is not None:
      ref = getattr(R.torch.nn.functional, fn)(R.T(x), R.T(w), None if bias is None else R.T(bias), stride, padding, output_padding, groups,
                                                 dilation)
      R.close(out, ref, what=f"torch {fn}")

def rand_or_none(rng, data, n):
  return R.rand(rng, n) if data.draw(st.booleans()) else None

def _t(a, device): return None if a is None else Tensor(a, device=device)

@pytest.mark.parametrize("device", R.DEVICES)
def test_conv2d(device):
  R.run(device, lambda data: _check_conv(device, data, 2, 6 if device == "CPU" else 3), st.data())

@pytest.mark.parametrize("device", R.DEVICES)
def test_conv1d_and_conv3d(device):
  R.run(device, lambda data: _check_conv(device, data, 1, 9 if device == "CPU" else 4), st.data())
  R.run(device, lambda data: _check_conv(device, data, 3, 3 if device == "CPU" else 2), st.data(), examples=R.EXAMPLES[device] // 2)

@pytest.mark.parametrize("device", R.DEVICES)
def test_conv_transpose(device):
  R.run(device, lambda data: _check_conv(device, data, 2, 5 if device == "CPU" else 3, transposed=True), st.data())
  R.run(device, lambda data: _check_conv(device, data, 1, 6 if device == "CPU" else 3, transposed=True), st.data(), examples=R.EXAMPLES[device] // 2)

def test_conv2d_at_user_size():
  """A ResNet-style block size: 144-long reductions (split by the optimizer), 32x32 images, stride 2 and padding."""
  rng = np.random.default_rng(1)
  x, w, b = R.rand(rng, 4, 16, 32, 32), R.rand(rng, 32, 16, 3, 3), R.rand(rng, 32)
  for stride, padding in [(1, 1), (2, 1)]:
    out = Tensor(x).conv2d(Tensor(w), Tensor(b), stride=stride, padding=padding)
    R.close(out, R.conv(x, w, b, stride, 1, padding), rtol=1e-4, atol=1e-4)

@pytest.mark.filterwarnings("ignore:Using padding='same'")  # torch's note that it copies for even kernels
@pytest.mark.parametrize("device", R.DEVICES)
def test_padding_forms(device):
  rng = np.random.default_rng(2)
  x, w = R.rand(rng, 1, 2, 6, 7), R.rand(rng, 3, 2, 3, 2)
  xt, wt = Tensor(x, device=device), Tensor(w, device=device)
  # (left, right, top, bottom), last dim first as F.pad
  R.close(xt.conv2d(wt, padding=(1, 0, 2, 1)), R.conv(x, w, pads=[(2, 1), (1, 0)]))
  R.close(xt.conv2d(wt, padding=(2, 1)), R.conv(x, w, pads=[(2, 2), (1, 1)]))
  R.close(xt.conv2d(wt, padding="valid"), R.conv(x, w))
  # 'same': the odd one of an uneven total after (torch); dilation 2 makes the totals (4, 2)
  R.close(xt.conv2d(wt, padding="same", dilation=2), R.conv(x, w, dilation=2, pads=[(2, 2), (1, 1)]))
  R.close(xt.conv2d(wt, padding="same"), R.conv(x, w, pads=[(1, 1), (0, 1)]))
  if R.torch is not None:
    R.close(xt.conv2d(wt, padding="same"), R.torch.nn.functional.conv2d(R.T(x), R.T(w), padding="same"))

@pytest.mark.parametrize("device", R.DEVICES)
def test_unbatched_and_dtype(device):
  rng = np.random.default_rng(3)
  x, w = R.rand(rng, 2, 5, 5), R.rand(rng, 4, 2, 3, 3)
  out = Tensor(x, device=device).conv2d(Tensor(w, device=device), padding=1)
  assert out.shape == (4, 5, 5)
  R.close(out, R.conv(x[None], w, pads=1)[0])
  half = Tensor(x, device=device).half().conv2d(Tensor(w, device=device).half(), dtype=dtypes.float32)
  assert half.dtype is dtypes.float32
  R.close(half, R.conv(x.astype(np.float16)[None], w.astype(np.float16))[0], rtol=1e-2, atol=1e-2)
  xi, wi = rng.integers(-3, 4, (1, 2, 4, 4)).astype(np.int32), rng.integers(-3, 4, (2, 2, 2, 2)).astype(np.int32)
  outi = Tensor(xi, device=device).conv2d(Tensor(wi, device=device))
  assert outi.dtype is dtypes.int32 and (outi.numpy() == R.conv(xi, wi)).all()

@pytest.mark.parametrize("bad, message", [
  (lambda x, w: x.conv2d(w[:, :2]), r"input of shape \(2, 4, 8, 8\) has 4 channels but weight of shape \(6, 2, 3, 3\)"),
  (lambda x, w: x.conv2d(w, groups=3), r"weight of shape \(6, 4, 3, 3\) with groups=3 takes 12"),
  (lambda x, w: x.conv2d(w[:5, :2], groups=2), r"5 output channels, not divisible by groups=2"),
  (lambda x, w: x.conv2d(w, Tensor.ones(5)), r"bias of shape \(5,\) does not fit weight of shape \(6, 4, 3, 3\)"),
  (lambda x, w: x.reshape(2, 256).conv2d(w), r"input of shape \(2, 256\) does not fit weight of shape \(6, 4, 3, 3\)"),
  (lambda x, w: x.conv1d(w), r"weight of shape \(6, 4, 3, 3\) has 2 spatial dims, expected 1"),
  (lambda x, w: x[:, :, :2, :2].conv2d(w), r"input of shape \(2, 4, 2, 2\) padded by .* is smaller than the kernel"),
  (lambda x, w: x.conv_transpose2d(w), r"input of shape \(2, 4, 8, 8\) has 4 channels but weight of shape \(6, 4, 3, 3\) takes 6"),
])
def test_shape_errors(bad, message):
  x, w = Tensor.ones(2, 4, 8, 8), Tensor.ones(6, 4, 3, 3)
  with pytest.raises(TensorError, match=message) as e: bad(x, w)
  assert isinstance(e.value, RuntimeError) and isinstance(e.value, ValueError)

@pytest.mark.parametrize("bad, message", [
  (lambda x, w: x.conv2d(w, padding="full"), r"padding='full' must be 'same', 'valid'"),
  (lambda x, w: x.conv2d(w, padding="same", stride=2), r"padding='same' is not supported for strided convolutions"),
  (lambda x, w: x.conv2d(w, stride=0), r"stride 0 must be at least 1"),
  (lambda x, w: x.conv2d(w, padding=(1, 2, 3)), r"must be an int, 2 ints .* or 4 ints"),
  (lambda x, w: x.conv2d(w, groups=0), r"groups=0 must be at least 1"),
  (lambda x, w: x.conv_transpose2d(w.permute(1, 0, 2, 3), stride=2, output_padding=2), r"output_padding \(2, 2\) must be smaller"),
])
def test_argument_errors(bad, message):
  x, w = Tensor.ones(2, 4, 8, 8), Tensor.ones(6, 4, 3, 3)
  with pytest.raises(ValueError, match=message) as e: bad(x, w)
  assert isinstance(e.value, TensorError)
  with pytest.raises(TypeError, match="stride must be an integer"): x.conv2d(w, stride=1.5)

def test_windows_every_small_case():
  """windows() (the movement ops under every conv and pool) against direct indexing for every kernel, stride and
  dilation up to 3 on sizes around the kernel's span, and for 2-d mixes of overlapping and disjoint windows. PYTHON
  device: no compiles, tiny tensors."""
  from itertools import product
  from tensor.functional.conv import windows
  rng = np.random.default_rng(4)
  def ref(x, k, s, d):  # (..., *spatial) -> (..., *out, *k) by indexing
    n = len(k)
    outs = [(i - dd * (kk - 1) - 1) // ss + 1 for i, kk, ss, dd in zip(x.shape[-n:], k, s, d)]
    res = np.zeros(x.shape[:-n] + tuple(outs) + tuple(k), x.dtype)
    for o in product(*map(range, outs)):
      for t in product(*map(range, k)):
        res[(Ellipsis, *o, *t)] = x[(Ellipsis, *[oo * ss + tt * dd for oo, tt, ss, dd in zip(o, t, s, d)])]
    return res
  for k, s, d in product([1, 2, 3], [1, 2, 3], [1, 2, 3]):
    for i in sorted({d * (k - 1) + 1, d * (k - 1) + 2, 7}):
      x = rng.standard_normal((2, i)).astype(np.float32)
      got = windows(Tensor(x, device="PYTHON"), (k,), (s,), (d,)).numpy()
      np.testing.assert_array_equal(got, ref(x, (k,), (s,), (d,)), err_msg=f"{k=} {s=} {d=} {i=}")
  for k, s, d in [((1, 3), (3, 1), (1, 2)), ((2, 1), (2, 3), (1, 1)), ((3, 2), (1, 2), (2, 1)), ((2, 2), (2, 2), (1, 1))]:
    x = rng.standard_normal((1, 7, 8)).astype(np.float32)
    np.testing.assert_array_equal(windows(Tensor(x, device="PYTHON"), k, s, d).numpy(), ref(x, k, s, d), err_msg=f"{k=} {s=} {d=}")

# ---- the fused kernel's copied input (padding in place, rows widened to whole vectors): forced at small sizes, and at a
# real size ----

@pytest.fixture
def fused_copy_always(monkeypatch):
  import tensor.functional.conv_graph as cv
  import tensor.functional.conv as conv
  monkeypatch.setattr(cv, "FUSED_COPY_MIN_MACS", 0)
  monkeypatch.setattr(cv, "FUSED_WIDEN_MAX_WASTE", 1.0)
  monkeypatch.setattr(conv, "vector_floats", lambda device: 4)  # rows of 4 and more widened to a multiple of 4

@pytest.mark.parametrize("device", R.DEVICES)
def test_fused_copied_input_every_form(device, fused_copy_always):
  """Every fused conv reading a padded copy of its input, output rows widened and cropped: groups, strides, dilations,
  paddings, bias, 1-3 spatial dims and the transposed convs, against numpy and torch."""
  R.run(device, lambda data: _check_conv(device, data, 2, 6 if device == "CPU" else 3), st.data())
  R.run(device, lambda data: _check_conv(device, data, 1, 9 if device == "CPU" else 4), st.data(), examples=R.EXAMPLES[device] // 2)
  R.run(device, lambda data: _check_conv(device, data, 3, 3 if device == "CPU" else 2), st.data(), examples=R.EXAMPLES[device] // 2)
  R.run(device, lambda data: _check_conv(device, data, 2, 5 if device == "CPU" else 3, transposed=True), st.data(),
        examples=R.EXAMPLES[device] // 2)

def test_fused_widened_rows_at_a_real_size():
  """A conv to 3 channels on 56x56 (the fused form: too few output channels for the GEMM) computes rows of 64 on a padded
  copy and keeps 56; values and gradients against torch."""
  import tensor.functional.conv_graph as cv
  if R.torch is None: pytest.skip("torch is not installed")
  rng = np.random.default_rng(9)
  x, w, b = R.rand(rng, 2, 32, 56, 56), R.rand(rng, 3, 32, 3, 3, lo=-0.2, hi=0.2), R.rand(rng, 3)
  xt, wt, bt = (Tensor(a, requires_grad=True) for a in (x, w, b))
  arg = cv.ConvArg((1, 1), (1, 1), 1, ((1, 1), (1, 1)), 16, xt.dtype, cv.conv_value)
  assert not cv.use_implicit_gemm(xt.uop, wt.uop, arg) and cv.fused_input(xt.uop, wt.uop, arg)[1] == 8
  out = xt.conv2d(wt, bt, padding=1)
  g = R.rand(rng, *out.shape)
  (out * Tensor(g)).sum().backward()
  tx, tw, tb = (R.T(a).requires_grad_() for a in (x, w, b))
  ref = R.torch.nn.functional.conv2d(tx, tw, tb, padding=1)
  (ref * R.T(g)).sum().backward()
  R.close(out, ref, rtol=1e-4, atol=1e-4)
  for ours, theirs in ((xt, tx), (wt, tw), (bt, tb)): R.close(ours.grad, theirs.grad, rtol=1e-3, atol=1e-3)

# ---- the implicit GEMM path (large convs): forced at small sizes, and at a real size on both sides of the threshold ----

@pytest.fixture
def gemm_always(monkeypatch):
  import tensor.functional.conv_graph as cv
  monkeypatch.setattr(cv, "IMPLICIT_GEMM_MIN_MACS", 0)
  monkeypatch.setattr(cv, "IMPLICIT_GEMM_MIN_COUT", 1)
  monkeypatch.setattr(cv, "IMPLICIT_GEMM_MIN_REDUCE", 1)

@pytest.mark.parametrize("device", R.DEVICES)
def test_implicit_gemm_every_form(device, gemm_always):
  """Every conv through the implicit GEMM (channels-last input and weight): groups, strides, dilations, paddings, bias,
  1-3 spatial dims and the transposed convs, against numpy and torch as the fused path is."""
  R.run(device, lambda data: _check_conv(device, data, 2, 6 if device == "CPU" else 3), st.data())
  R.run(device, lambda data: _check_conv(device, data, 1, 9 if device == "CPU" else 4), st.data(), examples=R.EXAMPLES[device] // 2)
  R.run(device, lambda data: _check_conv(device, data, 3, 3 if device == "CPU" else 2), st.data(), examples=R.EXAMPLES[device] // 2)
  R.run(device, lambda data: _check_conv(device, data, 2, 5 if device == "CPU" else 3, transposed=True), st.data(),
        examples=R.EXAMPLES[device] // 2)

def test_implicit_gemm_gradients(gemm_always):
  """Gradients through the GEMM path (the layout copies and window movement ops) against torch's."""
  if R.torch is None: pytest.skip("torch is not installed")
  rng = np.random.default_rng(5)
  x, w, b = R.rand(rng, 2, 6, 7, 7), R.rand(rng, 4, 3, 3, 3), R.rand(rng, 4)
  xt, wt, bt = (Tensor(a, requires_grad=True) for a in (x, w, b))
  out = xt.conv2d(wt, bt, groups=2, stride=2, padding=1, dilation=1)
  g = R.rand(rng, *out.shape)
  (out * Tensor(g)).sum().backward()
  tx, tw, tb = (R.T(a).requires_grad_() for a in (x, w, b))
  (R.torch.nn.functional.conv2d(tx, tw, tb, 2, 1, 1, 2) * R.T(g)).sum().backward()
  for ours, theirs in ((xt, tx), (wt, tw), (bt, tb)): R.close(ours.grad, theirs.grad, rtol=1e-4, atol=1e-4)

def test_implicit_gemm_reads_a_realized_input_in_place(gemm_always):
  """A realized unpadded input is read where it is (NCHW, the taps innermost); an input still to compute, or padded, is
  copied channels-last first: one kernel more. Both against numpy, 1 and 2 groups, stride 1 and 2."""
  rng = np.random.default_rng(8)
  for groups, stride in ((1, 1), (2, 2)):
    x, w = R.rand(rng, 2, 6, 9, 9), R.rand(rng, 4, 6 // groups, 3, 3)
    X, W = Tensor(x).realize(), Tensor(w).realize()
    in_place, computed = X.conv2d(W, groups=groups, stride=stride), (X * 2).conv2d(W, groups=groups, stride=stride)
    padded = X.conv2d(W, groups=groups, stride=stride, padding=1)
    assert _kernels(in_place) + 1 == _kernels((X * 2).conv2d(W, groups=groups, stride=stride))
    for t, scale, pads in ((in_place, 1, 0), (computed, 2, 0), (padded, 1, 1)):
      R.close(t, R.conv(scale * x, w, None, stride, 1, pads, groups), rtol=1e-4, atol=1e-4)

def _kernels(t: Tensor) -> int:
  from tensor import GlobalCounters
  GlobalCounters.reset()
  t.realize()
  return GlobalCounters.kernel_count

@pytest.mark.parametrize("bs, stride", [(2, 1), (4, 1), (4, 2)])
def test_threshold_both_sides_at_real_sizes(bs, stride):
  """(bs, 32, 32, 32) x (64, 32, 3, 3) padded by 1: 38M multiply-adds at bs 2 (below the threshold: the fused kernel, after
  its input's padded copy), 75M at bs 4 (above: the GEMM's kernels), 19M at bs 4 with stride 2 (below again: one fused
  kernel, its strided rows read in place). Against numpy (and torch)."""
  import tensor.functional.conv_graph as cv
  rng = np.random.default_rng(6)
  x, w, b = R.rand(rng, bs, 32, 32, 32), R.rand(rng, 64, 32, 3, 3), R.rand(rng, 64)
  out = Tensor(x).realize().conv2d(Tensor(w).realize(), Tensor(b).realize(), stride=stride, padding=1)
  oh = (32 + 2 - 3) // stride + 1
  above = bs * 64 * oh * oh * 32 * 9 >= cv.IMPLICIT_GEMM_MIN_MACS
  assert above == (bs == 4 and stride == 1)
  n = _kernels(out)
  assert (n > 2) if above else (n == (1 if stride == 2 else 2)), n
  R.close(out, R.conv(x, w, b, stride, 1, 1), rtol=1e-4, atol=1e-4)
  if R.torch is not None:
    R.close(out, R.torch.nn.functional.conv2d(R.T(x), R.T(w), R.T(b), stride, 1), rtol=1e-4, atol=1e-4)

@pytest.mark.parametrize("bs, hw", [(1, 6), (1, 14), (3, 16)])
def test_unaligned_rows_threshold_both_sides(bs, hw):
  """Output rows of 4, 12 and 14 columns (no multiple of 8 or 16: the fused kernel can't tile them into vectors) take the
  GEMM from IMPLICIT_GEMM_UNALIGNED_MIN_MACS: (1, 16, 6, 6) x (32, 16, 3, 3) is 74K multiply-adds (one fused kernel),
  (1, 16, 14, 14) 664K and (3, 16, 16, 16) 2.5M (the GEMM's kernels). Against numpy (and torch)."""
  import tensor.functional.conv_graph as cv
  rng = np.random.default_rng(7)
  x, w = R.rand(rng, bs, 16, hw, hw), R.rand(rng, 32, 16, 3, 3)
  out = Tensor(x).realize().conv2d(Tensor(w).realize())
  macs = bs * 32 * (hw - 2) ** 2 * 16 * 9
  assert (hw - 2) % 8 and (macs >= cv.IMPLICIT_GEMM_UNALIGNED_MIN_MACS) == (hw > 6) and macs < cv.IMPLICIT_GEMM_MIN_MACS
  n = _kernels(out)
  assert (n > 1) if hw > 6 else (n == 1), n
  R.close(out, R.conv(x, w, None, 1, 1, 0), rtol=1e-4, atol=1e-4)
  if R.torch is not None: R.close(out, R.torch.nn.functional.conv2d(R.T(x), R.T(w)), rtol=1e-4, atol=1e-4)
