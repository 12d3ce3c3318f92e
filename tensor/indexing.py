"""Basic indexing: t[1], t[1:3], t[::2], t[::-1], t[None], t[..., 0], built from movement ops (shrink, flip, pad,
reshape), so an index is a view and fuses into whatever reads it. Tensor (fancy) indexing: t[idx_tensor] along one axis.
"""
from __future__ import annotations
import math
from typing import Any
from tensor.tensor import Tensor, TensorError

def _normalize(idx: Any, ndim: int) -> list:
  items = list(idx) if isinstance(idx, tuple) else [idx]
  n_ell = sum(1 for i in items if i is Ellipsis)
  if n_ell > 1: raise TensorError("an index can have only one '...'")
  used = sum(1 for i in items if i is not None and i is not Ellipsis)
  if used > ndim: raise TensorError(f"too many indices ({used}) for a tensor of {ndim} dimensions")
  if n_ell: k = items.index(Ellipsis); items[k:k + 1] = [slice(None)] * (ndim - used)
  else: items += [slice(None)] * (ndim - used)
  return items

def _step(t: Tensor, axis: int, step: int) -> Tensor:
  """Every step-th element along axis (step > 0): pad to a multiple of step, split the axis, keep the first of each group."""
  n = t.shape[axis]
  if step == 1 or n == 0: return t
  m = math.ceil(n / step)
  t = t.pad([(0, 0)] * axis + [(0, m * step - n)] + [(0, 0)] * (t.ndim - axis - 1))
  t = t.reshape(t.shape[:axis] + (m, step) + t.shape[axis + 1:])
  t = t.shrink([None] * (axis + 1) + [(0, 1)] + [None] * (t.ndim - axis - 2))
  return t.reshape(t.shape[:axis + 1] + t.shape[axis + 2:])

def getitem(t: Tensor, idx: Any) -> Tensor:
  if isinstance(idx, Tensor) or (isinstance(idx, tuple) and any(isinstance(i, Tensor) for i in idx)): return _tensor_index(t, idx)
  items = _normalize(idx, t.ndim)
  out, axis = t, 0
  squeeze: list[int] = []
  new_axes: list[int] = []
  for it in items:
    if it is None:
      new_axes.append(axis)
      out = out.unsqueeze(axis)
      axis += 1
      continue
    n = out.shape[axis]
    if isinstance(it, bool) or not isinstance(it, (int, slice)) and not hasattr(it, "__index__"):
      raise TensorError(f"unsupported index {it!r}: use ints, slices, None, ... or a Tensor")
    if not isinstance(it, slice):
      i = int(it)
      if not -n <= i < n: raise TensorError(f"index {i} is out of range for axis {axis} of size {n} (shape {t.shape})")
      i %= n
      out = out.shrink([None] * axis + [(i, i + 1)] + [None] * (out.ndim - axis - 1))
      squeeze.append(axis)
      axis += 1
      continue
    if it.step == 0: raise TensorError(f"slice step cannot be zero (axis {axis} of shape {t.shape})")
    start, stop, step = it.indices(n)
    if step > 0:
      stop = max(stop, start)
      out = out.shrink([None] * axis + [(start, stop)] + [None] * (out.ndim - axis - 1))
      out = _step(out, axis, step)
    else:
      # a negative step: take [stop+1, start] reversed, then every |step|-th
      lo, hi = stop + 1, start + 1
      hi = max(hi, lo)
      out = out.shrink([None] * axis + [(lo, hi)] + [None] * (out.ndim - axis - 1)).flip(axis)
      out = _step(out, axis, -step)
    axis += 1
  if squeeze: out = out.reshape(tuple(d for i, d in enumerate(out.shape) if i not in squeeze))
  return out

def _tensor_index(t: Tensor, idx: Any) -> Tensor:
  """t[ix] for an integer tensor ix (along axis 0): a one-hot comparison summed over the axis, so it stays a kernel."""
  if isinstance(idx, tuple):
    if len(idx) != 1: raise TensorError("tensor indexing supports one index tensor, on the first axis")
    idx = idx[0]
  n = t.shape[0]
  ix = (idx < 0).where(idx + n, idx)
  onehot = ix.reshape(*ix.shape, 1) == Tensor.arange(n, device=t.device)        # (..., n)
  vals = t.reshape(n, -1)                                                       # (n, m)
  picked = onehot.unsqueeze(-1).where(vals, 0).sum(ix.ndim).cast(t.dtype)       # (..., m)
  return picked.reshape(*ix.shape, *t.shape[1:])
