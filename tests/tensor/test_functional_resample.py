"""interpolate against the numpy reference (torch's source-index formulas, gathered with numpy indexing) and torch when
installed, on CPU and PYTHON: hypothesis over 1-3 resized axes, sizes up and down, every mode, align_corners and
scale_factor; the movement-op path (periodic indices: 2x, 3/2, 1/2) and the one-hot path (7 -> 10) both checked.
"""
import numpy as np
import pytest
from hypothesis import strategies as st
from tensor import Tensor, dtypes, GlobalCounters
from tensor.tensor import TensorError
import functional_refs as R

MODES = {1: "linear", 2: "bilinear", 3: "trilinear"}

def _check(device, data):
  rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
  nd = data.draw(st.sampled_from([1, 2, 2, 3] if device == "CPU" else [1, 2]))
  top = 12 if device == "CPU" and nd < 3 else 5
  spatial = tuple(data.draw(st.integers(1, top)) for _ in range(nd))
  size = tuple(data.draw(st.one_of(st.integers(1, 2 * top), st.sampled_from([2 * i, max(1, i // 2)]))) for i in spatial)
  mode = data.draw(st.sampled_from(["nearest", "nearest-exact", "linear"]))
  align = data.draw(st.booleans()) if mode == "linear" else None
  torch_mode = MODES[nd] if mode == "linear" else mode
  x = R.rand(rng, 2, 2, *spatial)
  out = Tensor(x, device=device).interpolate(size, mode=torch_mode if data.draw(st.booleans()) else mode, align_corners=align)
  R.close(out, R.interpolate(x, size, mode, bool(align)), what=f"{mode} {spatial}->{size} {align=}")
  if R.torch is not None:
    R.close(out, R.torch.nn.functional.interpolate(R.T(x), size=size, mode=torch_mode, align_corners=align), what="torch")

@pytest.mark.parametrize("device", R.DEVICES)
def test_interpolate(device): R.run(device, lambda data: _check(device, data), st.data(), examples=2 * R.EXAMPLES[device])

@pytest.mark.parametrize("device", R.DEVICES)
def test_scale_factor(device):
  rng = np.random.default_rng(6)
  x = R.rand(rng, 1, 2, 5, 6)
  for mode, sf in [("nearest", 2.0), ("nearest", 1.5), ("bilinear", 2.0), ("bilinear", 0.5), ("nearest-exact", 2.5), ("bilinear", 1.7)]:
    out = Tensor(x, device=device).interpolate(scale_factor=sf, mode=mode)
    size = tuple(int(np.floor(i * sf)) for i in x.shape[2:])
    R.close(out, R.interpolate(x, size, mode.replace("bilinear", "linear"), scale_factor=sf), what=f"{mode} x{sf}")
    if R.torch is not None: R.close(out, R.torch.nn.functional.interpolate(R.T(x), scale_factor=sf, mode=mode), what=f"torch {mode} x{sf}")

def _kernels(t: Tensor) -> int:
  GlobalCounters.reset()
  t.realize()
  return GlobalCounters.kernel_count

def test_paths_at_user_size():
  """2x bilinear (a feature-pyramid upsample) is movement ops and scalar weights: one kernel per axis, no weight
  tables copied in; 32 -> 50 has no short period and takes the one-hot path (its weight tables are copies)."""
  rng = np.random.default_rng(7)
  x = Tensor(R.rand(rng, 4, 8, 32, 32)).realize()
  for size, kernels in [((64, 64), 2), ((16, 16), 2), ((48, 48), 2)]:
    out = x.interpolate(size, mode="bilinear")
    assert _kernels(out) == kernels, size
    R.close(out, R.interpolate(x.numpy(), size, "linear"), what=str(size))
  out = x.interpolate((64, 64), mode="nearest")
  assert _kernels(out) == 1
  R.close(out, R.interpolate(x.numpy(), (64, 64), "nearest"))
  out = x.interpolate((50, 50), mode="bilinear", align_corners=True)
  R.close(out, R.interpolate(x.numpy(), (50, 50), "linear", True))

@pytest.mark.parametrize("device", R.DEVICES)
def test_dtypes_and_values(device):
  xi = np.arange(12, dtype=np.int32).reshape(1, 1, 3, 4)
  out = Tensor(xi, device=device).interpolate((5, 7), mode="nearest")
  assert out.dtype is dtypes.int32
  np.testing.assert_array_equal(out.numpy(), R.interpolate(xi, (5, 7), "nearest").astype(np.int32))
  lin = Tensor(xi, device=device).interpolate((5, 7), mode="bilinear")
  assert lin.dtype is dtypes.int32  # ints come back in their dtype, rounded after each axis (tinygrad's, torch's uint8)
  assert np.abs(lin.numpy() - R.interpolate(xi, (5, 7), "linear")).max() <= 1
  # an inf stays where its weight reaches: its neighbours two positions away are untouched
  xf = np.array([[[0.0, 1.0, np.inf, 3.0, 4.0, 5.0]]], np.float32)
  got = Tensor(xf, device=device).interpolate((12,), mode="linear").numpy()
  assert np.isinf(got[0, 0, 4:6]).all() and np.isfinite(got[0, 0, :3]).all() and np.isfinite(got[0, 0, 8:]).all()
  # leading axes are batch: a 2-d tensor resized on its last axis only
  x2 = np.arange(8, dtype=np.float32).reshape(2, 4)
  R.close(Tensor(x2, device=device).interpolate((7,)), R.interpolate(x2, (7,), "linear"))

@pytest.mark.parametrize("bad, exc, message", [
  (lambda x: x.interpolate((4, 4), mode="cubic"), ValueError, r"mode='cubic' must be one of"),
  (lambda x: x.interpolate((4, 4), mode="nearest", align_corners=True), ValueError, r"align_corners only goes with the linear modes"),
  (lambda x: x.interpolate(), ValueError, r"give exactly one of size and scale_factor"),
  (lambda x: x.interpolate((4, 4), scale_factor=2), ValueError, r"give exactly one of size and scale_factor"),
  (lambda x: x.interpolate((4, 4, 4), mode="bilinear"), RuntimeError, r"mode 'bilinear' resizes 2 axes, got 3"),
  (lambda x: x.interpolate((2, 2, 2, 2, 2)), RuntimeError, r"can't resize 5 axes of a tensor of shape \(1, 2, 3, 3\)"),
  (lambda x: x.interpolate((0, 4)), ValueError, r"output size \(0, 4\) must be positive"),
  (lambda x: x.interpolate(scale_factor=-1.0, mode="nearest"), ValueError, r"scale_factor -1.0 must be 2 positive numbers"),
  (lambda x: x.interpolate((2.5, 3)), TypeError, r"size must be an integer"),
])
def test_errors(bad, exc, message):
  with pytest.raises(exc, match=message) as e: bad(Tensor.ones(1, 2, 3, 3))
  assert isinstance(e.value, TensorError)
