"""interpolate: nearest / nearest-exact / (bi,tri)linear resizing of the last axes, one axis at a time. Torch's float
formulas give, on the host, each output position's source indices and weights; `resample` reads them with movement
ops when they repeat with a short period (integer and small rational factors: 2x up or down, 3/2, ...; a few edge
positions apart; the first weight of a period stands for the rest, which differ from it by float rounding of the
source positions only), or with a one-hot select otherwise.
"""
from __future__ import annotations
import math
from typing import TYPE_CHECKING, Any, Optional
import numpy as np
from runtime.dtype import dtypes, least_upper_float
from tensor.functional.args import as_int, shape_error, value_error

if TYPE_CHECKING: from tensor.tensor import Tensor

MAX_PERIOD = 8  # index patterns repeating within this many outputs are read with movement ops (2 terms per tap and period)
Taps = list[tuple[np.ndarray, Optional[np.ndarray]]]  # out[o] = sum of weight[o] * x[idx[o]] over the taps (no weight: 1)

def _take_arith(x: Tensor, start: int, step: int, count: int) -> Tensor:
  """x[..., start + step*j for j < count] along the last axis, with movement ops."""
  lead = x.shape[:-1]
  keep = [(0, d) for d in lead]
  if step == 0 or count == 1: return x.shrink(keep + [(start, start + 1)]).expand(*lead, count)
  # take count*step elements from start (padding past the end), read in rows of step, keep column 0
  x = x.pad([(0, 0)] * len(lead) + [(-start, start + count * step - x.shape[-1])])
  return x.reshape(*lead, count, step).shrink(keep + [(0, count), (0, 1)]).reshape(*lead, count)

def _regular_end(taps: Taps, period: int, lo: int, n: int, tol: float) -> int:
  """The largest hi such that on [lo, hi), in each residue class of period, every tap's index steps by a constant
  (>= 0) and its weight stays constant (to within tol: the float rounding of the source positions)."""
  hi = n
  for r in range(period):
    start = lo + r
    if start >= n: break
    for idx, w in taps:
      seq = idx[start::period]
      ok = len(seq)
      if ok >= 2:
        d = np.diff(seq)
        bad = np.nonzero(d != d[0])[0]
        ok = 1 if d[0] < 0 else int(bad[0]) + 1 if bad.size else ok
      if w is not None:
        changed = np.nonzero(np.abs(w[start::period] - w[start]) > tol)[0]
        if changed.size: ok = min(ok, int(changed[0]))
      hi = min(hi, start + period * ok)
  return hi

def _tap_sum(x: Tensor, taps: Taps, o: int, count: int, period: int) -> Tensor:
  """Sum over taps of weight * x[idx] for positions o, o+period, ... (count of them), their steps constant."""
  out = None
  for idx, w in [(idx, w) for idx, w in taps if w is None or w[o] != 0] or taps[:1]:  # a weight-0 tap adds nothing
    step = int(idx[o + period] - idx[o]) if count > 1 else 0
    term = _take_arith(x, int(idx[o]), step, count)
    if w is not None: term = term * float(w[o])
    out = term if out is None else out + term
  return out  # type: ignore[return-value]

def resample(x: Tensor, taps: Taps) -> Tensor:
  """(..., n_in) -> (..., n): out[o] = sum over taps of weight[o] * x[..., idx[o]] (indices in range)."""
  n = len(taps[0][0])
  lead = x.shape[:-1]
  def place(t: Tensor, at: int) -> Tensor: return t.pad([(0, 0)] * len(lead) + [(at, n - at - t.shape[-1])])
  # torch's float source positions wobble the weights along a period by a few ulps of the largest position
  tol = max((8 * float(np.finfo(w.dtype).eps) * x.shape[-1] for _, w in taps if w is not None), default=0.0)
  for period in range(1, min(MAX_PERIOD, n) + 1):
    for lo in range(min(period, n)):
      hi = _regular_end(taps, period, lo, n, tol)
      if hi <= lo or lo + n - hi > 2 * period: continue
      # the regular part: each residue class is a strided read, padded into its slot of a (count, period) grid
      m = hi - lo
      count = -(-m // period)
      grid = None
      for r in range(min(period, m)):
        k = len(range(lo + r, hi, period))
        piece = _tap_sum(x, taps, lo + r, k, period).pad([(0, 0)] * len(lead) + [(0, count - k)]).reshape(*lead, count, 1)
        piece = piece.pad([(0, 0)] * (len(lead) + 1) + [(r, period - r - 1)])
        grid = piece if grid is None else grid + piece
      out = place(grid.reshape(*lead, count * period).shrink([(0, d) for d in lead] + [(0, m)]), lo)  # type: ignore[union-attr]
      for o in [*range(lo), *range(hi, n)]:  # the few irregular positions at the ends, one by one
        out = out + place(_tap_sum(x, taps, o, 1, 1), o)
      return out
  out = None
  for idx, w in taps:
    onehot = type(x)(idx.reshape(-1, 1) == np.arange(x.shape[-1]), device=x.device)        # (n, n_in)
    term = onehot.where(x.unsqueeze(-2), 0).sum(-1, dtype=x.dtype)
    if w is not None: term = term * type(x)(w, device=x.device, dtype=x.dtype)
    out = term if out is None else out + term
  return out  # type: ignore[return-value]

def _source(mode: str, n_in: int, n_out: int, align_corners: bool, scale: float | None, ftype) -> tuple[np.ndarray, ...]:
  """Source indices (and for linear the two weights) of each output position, as torch's upsample kernels compute them."""
  o = np.arange(n_out, dtype=ftype)
  if mode in ("nearest", "nearest-exact"):
    if mode == "nearest" and n_out in (n_in, 2 * n_in): return (np.arange(n_out) // (n_out // n_in),)  # torch's shortcuts
    s = ftype(1.0 / scale) if scale else ftype(n_in) / ftype(n_out)
    src = np.floor((o + ftype(0.5)) * s if mode == "nearest-exact" else o * s)
    return (np.minimum(src.astype(np.int64), n_in - 1),)
  if align_corners: s = ftype(n_in - 1) / ftype(n_out - 1) if n_out > 1 else ftype(0)
  else: s = ftype(1.0 / scale) if scale else ftype(n_in) / ftype(n_out)
  src = o * s if align_corners else np.maximum(s * (o + ftype(0.5)) - ftype(0.5), ftype(0))
  i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
  lam = np.clip(src - i0.astype(ftype), 0, 1).astype(ftype)
  return i0, np.minimum(i0 + 1, n_in - 1), (ftype(1) - lam).astype(ftype), lam

LINEAR = {"linear": None, "bilinear": 2, "trilinear": 3}

class ResampleMixin:
  __slots__ = ()
  def interpolate(self: Tensor, size: Any = None, mode: str = "linear", align_corners: bool | None = None, scale_factor: Any = None) -> Tensor:
    """Resize the last len(size) axes (any leading axes are batch) to `size`, or by `scale_factor` (the new size is
    floor(size * factor), and the factor itself maps positions, as torch). Modes: "nearest", "nearest-exact",
    "linear" (any number of axes), "bilinear" (2), "trilinear" (3); align_corners for the linear ones.
    Float inputs keep their float type, ints (uint8 images) come back rounded in their dtype, as tinygrad's."""
    if mode not in ("nearest", "nearest-exact", *LINEAR): raise value_error(f"interpolate: mode={mode!r} must be one of nearest, "
                                                                             "nearest-exact, linear, bilinear, trilinear")
    if align_corners and mode not in LINEAR: raise value_error(f"interpolate: align_corners only goes with the linear modes, not {mode!r}")
    if (size is None) == (scale_factor is None): raise value_error("interpolate: give exactly one of size and scale_factor")
    n = len(size) if isinstance(size, (tuple, list)) else len(scale_factor) if isinstance(scale_factor, (tuple, list)) else \
      LINEAR.get(mode) or max(self.ndim - 2, 1)
    if not 0 < n <= self.ndim: raise shape_error(f"interpolate: can't resize {n} axes of a tensor of shape {self.shape}")
    if LINEAR.get(mode) not in (None, n): raise shape_error(f"interpolate: mode {mode!r} resizes {LINEAR[mode]} axes, got {n} (shape {self.shape})")
    spatial = self.shape[-n:]
    if size is not None:
      sizes = tuple(as_int(s, "interpolate: size") for s in (size if isinstance(size, (tuple, list)) else (size,) * n))
      if len(sizes) != n: raise value_error(f"interpolate: size {size!r} must have {n} entries")
      scales: tuple = (None,) * n
    else:
      scales = tuple(float(s) for s in (scale_factor if isinstance(scale_factor, (tuple, list)) else (scale_factor,) * n))
      if len(scales) != n or any(not s > 0 for s in scales):
        raise value_error(f"interpolate: scale_factor {scale_factor!r} must be {n} positive numbers")
      sizes = tuple(math.floor(i * s) for i, s in zip(spatial, scales))
    if any(s <= 0 for s in sizes): raise value_error(f"interpolate: output size {sizes} must be positive (input shape {self.shape})")
    if any(i == 0 for i in spatial): raise shape_error(f"interpolate: can't resize empty axes of shape {self.shape}")
    x = self if mode not in LINEAR else self.cast(least_upper_float(self.dtype))
    ftype = np.float64 if x.dtype is dtypes.float64 else np.float32
    done = False
    for j in range(n):  # the last axis first, as torch's kernels sum
      axis = x.ndim - 1 - j
      n_in, n_out, scale = spatial[-1 - j], sizes[-1 - j], scales[-1 - j]
      src = _source(mode, n_in, n_out, bool(align_corners), scale, ftype)
      if len(src) == 4 and dtypes.is_int(self.dtype):  # integer images: 7-bit fixed-point weights, as tinygrad's uint8 lerp
        lam = np.floor(src[3] * 128 + 0.5) / 128
        src = (src[0], src[1], (1 - lam).astype(ftype), lam.astype(ftype))
      if np.array_equal(src[0], np.arange(n_in)) and (len(src) == 1 or not src[3].any()): continue  # this axis keeps its values
      # a linear axis read by the next one at two shifted places: computing it once beats fusing it (4x faster at 2x up)
      if done and mode in LINEAR: x = x.contiguous()
      last = x if axis == x.ndim - 1 else x.transpose(axis, -1)
      y = resample(last, [(src[0], None)] if len(src) == 1 else [(src[0], src[2]), (src[1], src[3])])
      # an integer image is rounded half up after each axis's pass and comes back in its dtype (torch's and tinygrad's
      # uint8 kernels round per pass too; torch's weights have more bits, so a few values differ from its by 1)
      if x.dtype is not self.dtype and dtypes.is_int(self.dtype): y = (y + 0.5).floor()
      x, done = (y if axis == x.ndim - 1 else y.transpose(axis, -1)), True
    return x.cast(self.dtype) if dtypes.is_int(self.dtype) else x
