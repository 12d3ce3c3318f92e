"""interpolate: nearest / nearest-exact / (bi,tri)linear resizing of the last axes, one axis at a time. The source
index and weight of every output position are computed on the host with torch's float formulas, then read with
`take`: movement ops when the indices repeat with a short period (2x up or down, integer factors), a one-hot
select otherwise.
"""
from __future__ import annotations
import math
from typing import TYPE_CHECKING, Any
import numpy as np
from runtime.dtype import dtypes, least_upper_float
from tensor.functional.args import as_int, shape_error, value_error

if TYPE_CHECKING: from tensor.tensor import Tensor

MAX_PERIOD = 16  # index patterns repeating within this many outputs are read with movement ops

def _arith(idx: np.ndarray) -> tuple[int, int] | None:
  """(start, step) when idx is start, start+step, ... with step >= 0."""
  if len(idx) < 2: return int(idx[0]), 0
  step = int(idx[1] - idx[0])
  return (int(idx[0]), step) if step >= 0 and np.array_equal(np.diff(idx), np.full(len(idx) - 1, step)) else None

def _take_arith(x: Tensor, start: int, step: int, count: int) -> Tensor:
  """x[..., start + step*j for j < count] along the last axis, with movement ops."""
  lead = x.shape[:-1]
  keep = [(0, d) for d in lead]
  if step == 0: return x.shrink(keep + [(start, start + 1)]).expand(*lead, count)
  # take count*step elements from start (padding past the end), read in rows of step, keep column 0
  x = x.pad([(0, 0)] * len(lead) + [(-start, start + count * step - x.shape[-1])])
  return x.reshape(*lead, count, step).shrink(keep + [(0, count), (0, 1)]).reshape(*lead, count)

def take(x: Tensor, idx: np.ndarray) -> Tensor:
  """x[..., idx] along the last axis for host-known indices (each in range)."""
  n = len(idx)
  for period in range(1, min(MAX_PERIOD, n) + 1):
    pieces = [_arith(idx[r::period]) for r in range(period)]
    if any(p is None for p in pieces): continue
    # out[q*period + r] = piece r at q: each piece padded into its slot of a (count, period) grid, then summed
    count = -(-n // period)
    lead = x.shape[:-1]
    out = None
    for r, (start, step) in enumerate(pieces):  # type: ignore[misc]
      m = len(idx[r::period])
      piece = _take_arith(x, start, step, m).pad([(0, 0)] * len(lead) + [(0, count - m)]).reshape(*lead, count, 1)
      piece = piece.pad([(0, 0)] * (len(lead) + 1) + [(r, period - r - 1)])
      out = piece if out is None else out + piece
    return out.reshape(*lead, count * period).shrink([(0, d) for d in lead] + [(0, n)])  # type: ignore[union-attr]
  onehot = type(x)(idx.reshape(-1, 1) == np.arange(x.shape[-1]), device=x.device)          # (n, in)
  return onehot.where(x.unsqueeze(-2), 0).sum(-1, dtype=x.dtype)

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
    Linear modes give floats; nearest keeps the dtype."""
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
    for j in range(n):  # the last axis first, as torch's kernels sum
      axis = x.ndim - 1 - j
      n_in, n_out, scale = spatial[-1 - j], sizes[-1 - j], scales[-1 - j]
      last = x if axis == x.ndim - 1 else x.transpose(axis, -1)
      src = _source(mode, n_in, n_out, bool(align_corners), scale, ftype)
      if len(src) == 1: y = take(last, src[0])
      else:
        i0, i1, w0, w1 = src
        y = take(last, i0) * type(self)(w0, device=self.device, dtype=x.dtype) + take(last, i1) * type(self)(w1, device=self.device, dtype=x.dtype)
      x = y if axis == x.ndim - 1 else y.transpose(axis, -1)
    return x
