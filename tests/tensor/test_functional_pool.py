"""max_pool (values and indices), avg_pool (ceil_mode, count_include_pad, divisor_override) and max_unpool in 1, 2 and 3
dims against the numpy references (torch's window and divisor rules, written as loops) and torch when installed, on CPU
and PYTHON; hypothesis over sizes, kernels, strides, paddings and dilations; windows of 64+ taps (the optimizer's split).
"""
import math
import numpy as np
import pytest
from hypothesis import strategies as st
from tensor import Tensor, dtypes
from tensor.tensor import TensorError
import functional_refs as R

def _params(data, nd, device, dilate=True):
  kernel = tuple(data.draw(st.integers(1, 3)) for _ in range(nd))
  stride = tuple(data.draw(st.integers(1, 3)) for _ in range(nd))
  padding = tuple(data.draw(st.integers(0, k // 2)) for k in kernel)
  dilation = tuple(data.draw(st.integers(1, 2)) if dilate else 1 for _ in range(nd))
  extra = 6 if device == "CPU" and nd < 3 else 3
  # torch's 3-d pools refuse inputs smaller than the kernel before padding (ours pool them, as the 1-d and 2-d ones do)
  lows = [d * (k - 1) + 1 - (2 * p if nd < 3 else 0) for k, d, p in zip(kernel, dilation, padding)]
  spatial = tuple(data.draw(st.integers(max(1, lo), d * (k - 1) + extra)) for lo, k, d in zip(lows, kernel, dilation))
  return kernel, stride, padding, dilation, spatial, data.draw(st.booleans())

def _check_max(device, data, nd):
  rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
  kernel, stride, padding, dilation, spatial, ceil_mode = _params(data, nd, device)
  # distinct values, so the first maximum is the only one (torch and we agree on ties too, but not by contract)
  x = rng.permutation(2 * math.prod(spatial) * 3).astype(np.float32)[:2 * 3 * math.prod(spatial)].reshape(2, 3, *spatial)
  fn = getattr(Tensor(x, device=device), f"max_pool{nd}d")
  vals, idx = fn(kernel, stride=stride, padding=padding, dilation=dilation, ceil_mode=ceil_mode, return_indices=True)
  rv, ri = R.max_pool(x, kernel, stride, padding, dilation, ceil_mode)
  assert idx.dtype is dtypes.int32  # tinygrad's (torch's are int64)
  R.close(vals, rv, what="max_pool values")
  np.testing.assert_array_equal(idx.numpy(), ri)
  if R.torch is not None:
    tv, ti = getattr(R.torch.nn.functional, f"max_pool{nd}d")(R.T(x), kernel, stride, padding, dilation, ceil_mode, return_indices=True)
    R.close(vals, tv)
    real = np.isfinite(rv)  # windows dilation leaves on padding only: torch's index there is another one past the input
    np.testing.assert_array_equal(idx.numpy()[real], ti.numpy()[real])
  # max_unpool with the same windows puts each maximum back at its index (dilation 1: torch's unpool has none)
  if all(d == 1 for d in dilation) and nd <= 3:
    out = getattr(vals, f"max_unpool{nd}d")(idx, kernel, stride=stride, padding=padding, output_size=spatial)
    R.close(out, R.max_unpool(rv, ri, spatial), what="max_unpool")
    if R.torch is not None:
      R.close(out, getattr(R.torch.nn.functional, f"max_unpool{nd}d")(R.T(rv), R.T(ri), kernel, stride, padding, output_size=spatial))

def _check_avg(device, data, nd):
  rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
  kernel, stride, padding, _, spatial, ceil_mode = _params(data, nd, device, dilate=False)
  include = data.draw(st.booleans())
  divisor = data.draw(st.sampled_from([None, None, None, 3])) if nd != 1 else None
  x = R.rand(rng, 2, 3, *spatial)
  kw = {"divisor_override": divisor} if nd != 1 else {}
  out = getattr(Tensor(x, device=device), f"avg_pool{nd}d")(kernel, stride=stride, padding=padding, ceil_mode=ceil_mode,
                                                             count_include_pad=include, **kw)
  R.close(out, R.avg_pool(x, kernel, stride, padding, ceil_mode, include, divisor), what=f"avg_pool{nd}d")
  if R.torch is not None:
    ref = getattr(R.torch.nn.functional, f"avg_pool{nd}d")(R.T(x), kernel, stride, padding, ceil_mode, include, **kw)
    R.close(out, ref, what=f"torch avg_pool{nd}d")

@pytest.mark.parametrize("device", R.DEVICES)
def test_max_pool2d_and_unpool(device): R.run(device, lambda data: _check_max(device, data, 2), st.data())

@pytest.mark.parametrize("device", R.DEVICES)
def test_max_pool1d_3d_and_unpool(device):
  R.run(device, lambda data: _check_max(device, data, 1), st.data(), examples=R.EXAMPLES[device] // 2)
  R.run(device, lambda data: _check_max(device, data, 3), st.data(), examples=R.EXAMPLES[device] // 2)

@pytest.mark.parametrize("device", R.DEVICES)
def test_avg_pool2d(device): R.run(device, lambda data: _check_avg(device, data, 2), st.data())

@pytest.mark.parametrize("device", R.DEVICES)
def test_avg_pool1d_3d(device):
  R.run(device, lambda data: _check_avg(device, data, 1), st.data(), examples=R.EXAMPLES[device] // 2)
  R.run(device, lambda data: _check_avg(device, data, 3), st.data(), examples=R.EXAMPLES[device] // 2)

def test_large_windows_and_defaults():
  """8x8 windows (64 taps: the optimizer splits the reduction), tinygrad's default 2x2 kernel, global pooling."""
  rng = np.random.default_rng(5)
  x = R.rand(rng, 2, 4, 16, 16)
  R.close(Tensor(x).avg_pool2d(8), R.avg_pool(x, (8, 8), (8, 8), (0, 0), False, True))
  R.close(Tensor(x).max_pool2d(8, stride=4), R.max_pool(x, (8, 8), (4, 4), (0, 0), (1, 1), False)[0])
  R.close(Tensor(x).max_pool2d(), R.max_pool(x, (2, 2), (2, 2), (0, 0), (1, 1), False)[0])
  R.close(Tensor(x).avg_pool2d((16, 16)), x.mean((2, 3), keepdims=True), atol=1e-6)

@pytest.mark.parametrize("device", R.DEVICES)
def test_int_and_special_values(device):
  xi = np.array([[[[-5, -7, 3], [2, -9, 1], [0, 4, -2]]]], np.int32)
  out = Tensor(xi, device=device).max_pool2d(2, stride=1, padding=1)
  assert out.dtype is dtypes.int32
  np.testing.assert_array_equal(out.numpy(), R.max_pool(xi.astype(np.float64), (2, 2), (1, 1), (1, 1), (1, 1), False)[0])
  avg = Tensor(xi, device=device).avg_pool2d(2, stride=1)  # int input averages in float
  assert avg.dtype is dtypes.float32
  R.close(avg, R.avg_pool(xi, (2, 2), (1, 1), (0, 0), False, True))
  xf = np.array([[[[1.0, -np.inf, 2.0, np.inf]]]], np.float32)
  vals, idx = Tensor(xf, device=device).max_pool2d((1, 2), return_indices=True)
  np.testing.assert_array_equal(vals.numpy(), [[[[1.0, np.inf]]]])
  np.testing.assert_array_equal(idx.numpy(), [[[[0, 3]]]])
  vals, idx = Tensor(np.full((1, 1, 1, 4), -np.inf, np.float32), device=device).max_pool2d((1, 2), padding=(0, 1), return_indices=True)
  np.testing.assert_array_equal(idx.numpy(), [[[[0, 1, 3]]]])  # an all -inf window picks its first input, never the padding

@pytest.mark.parametrize("bad, exc, message", [
  (lambda x: x.max_pool2d(3, padding=2), ValueError, r"padding 2 must be between 0 and half the kernel size \(3, 3\)"),
  (lambda x: x.avg_pool2d(0), ValueError, r"kernel_size 0 must be at least 1"),
  (lambda x: x.max_pool2d((2, 2, 2, 2, 2)), RuntimeError, r"input of shape \(1, 2, 5, 5\) has fewer dims than the kernel"),
  (lambda x: x.max_pool2d(7), RuntimeError, r"input of shape \(1, 2, 5, 5\) padded by .* is smaller than the kernel \(7, 7\)"),
  (lambda x: x.avg_pool2d(2, divisor_override=0), ValueError, r"divisor_override must not be zero"),
  (lambda x: x.max_unpool2d(Tensor.zeros(1, 2, 5, 4, dtype=dtypes.int64)), RuntimeError,
   r"indices of shape \(1, 2, 5, 4\) don't fit input of shape \(1, 2, 5, 5\)"),
  (lambda x: x.max_unpool2d(x), TypeError, r"indices must be an integer tensor"),
  (lambda x: x.max_unpool2d(x.int(), output_size=(3, 3)), ValueError, r"output_size \(3, 3\) must be within a stride"),
])
def test_errors(bad, exc, message):
  with pytest.raises(exc, match=message) as e: bad(Tensor.ones(1, 2, 5, 5))
  assert isinstance(e.value, TensorError)
