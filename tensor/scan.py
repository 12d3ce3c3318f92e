"""Scans and sorting: cumsum, cumprod, cummax, cummin, logcumsumexp, sort, argsort, topk. Part of the Tensor frontend:
ScanMixin is a base class of Tensor (tensor/tensor.py); this module needs nothing of tensor.py to load.

A scan of n elements reduces, for each output, the window of the elements up to it (sliding windows of the input padded
with the op's identity, tensor/movement.windows): n * n work for n up to BLOCK, then blockwise (scans inside blocks of
BLOCK, a scan of the block totals, and the two combined), so a long scan costs about n * BLOCK. Sorting ranks each
element by counting the elements ordered before it (stable: ties keep their order; nan sorts last, as numpy), then
places each at its rank: n * n work per row.
"""
from __future__ import annotations
import math
from typing import TYPE_CHECKING, Callable
from runtime.dtype import dtypes, int_acc_dtype, least_upper_float
from runtime.ops import Ops
from tensor.errors import ShapeError, as_int, axis_arg
from tensor.movement import windows
from tensor.random import iota

if TYPE_CHECKING: from tensor.tensor import Tensor

BLOCK = 256

def _scan(x: Tensor, axis: int, reduce: Callable[[Tensor], Tensor], combine: Callable[[Tensor, Tensor], Tensor], identity) -> Tensor:
  """Inclusive scan of x along axis with an associative op given as `reduce` (over the last axis) and `combine`."""
  if x.ndim == 0: return x
  x = x.transpose(axis, -1) if axis != x.ndim - 1 else x
  n, lead = x.shape[-1], x.shape[:-1]
  if n <= BLOCK:
    out = reduce(windows(x.pad(((0, 0),) * len(lead) + ((n - 1, 0),), value=identity), x.ndim - 1, n, 1)) if n else x
  else:
    nb = math.ceil(n / BLOCK)
    blocks = x.pad(((0, 0),) * len(lead) + ((0, nb * BLOCK - n),), value=identity).reshape(*lead, nb, BLOCK)
    inner = _scan(blocks, blocks.ndim - 1, reduce, combine, identity)                    # (..., nb, BLOCK)
    totals = inner.shrink(tuple((0, d) for d in inner.shape[:-1]) + ((BLOCK - 1, BLOCK),)).reshape(*lead, nb)
    before = _scan(totals, totals.ndim - 1, reduce, combine, identity)                   # inclusive over blocks
    before = before.pad(((0, 0),) * len(lead) + ((1, -1),), value=identity)             # exclusive: shifted by one block
    out = combine(inner, before.unsqueeze(-1)).reshape(*lead, nb * BLOCK).shrink(tuple((0, d) for d in lead) + ((0, n),))
  return out.transpose(axis, -1) if axis != out.ndim - 1 else out


def _before(xi: Tensor, xj: Tensor, descending: bool) -> Tensor:
  """Whether xj sorts strictly before xi (nan is the largest value, as numpy and torch order it)."""
  if not dtypes.is_float(xi.dtype): return xj > xi if descending else xj < xi
  ni, nj = xi.isnan(), xj.isnan()
  return ((xj > xi) | (nj & ~ni)) if descending else ((xj < xi) | (ni & ~nj))

def _same(xi: Tensor, xj: Tensor) -> Tensor:
  return (xi == xj) | (xi.isnan() & xj.isnan()) if dtypes.is_float(xi.dtype) else xi == xj

def _scan_indices(x: Tensor, values: Tensor, axis: int) -> Tensor:
  """For a running max or min: at each position i, the last j <= i where x[j] is the running value (n * n work per row)."""
  if x.ndim == 0: return x.zeros((), dtype=dtypes.int32, device=x.device)
  xt, vt = x.transpose(axis, -1), values.transpose(axis, -1)
  n = xt.shape[-1]
  if n == 0: return xt.cast(dtypes.int32).transpose(axis, -1)
  xj, vi = xt.unsqueeze(-1), vt.unsqueeze(-2)                                            # (..., j, 1), (..., 1, i)
  j = iota(type(x), n, dtypes.int32, x.device).reshape(n, 1)
  hit = _same(xj, vi) & (j <= iota(type(x), n, dtypes.int32, x.device).reshape(1, n))    # (..., j, i)
  return hit.where(j, -1).max(-2).transpose(axis, -1)

class ScanMixin:
  """Tensor's scans and sorts (torch's and tinygrad's names; cummax/cummin give (values, indices) as both)."""
  __slots__ = ()

  def cumsum(self: Tensor, axis: int = 0, dtype=None) -> Tensor:
    """Running sums along axis; ints and bools add up as sum does (in int64, as torch)."""
    x = self.cast(dtype if dtype is not None else int_acc_dtype(self.dtype))
    return _scan(x, axis_arg(axis, self.shape), lambda w: w.sum(-1, dtype=w.dtype), lambda a, b: a + b, 0)

  def cumprod(self: Tensor, axis: int = 0, dtype=None) -> Tensor:
    x = self.cast(dtype if dtype is not None else int_acc_dtype(self.dtype))
    return _scan(x, axis_arg(axis, self.shape), lambda w: w.prod(-1, dtype=w.dtype), lambda a, b: a * b, 1)

  def cummax(self: Tensor, axis: int = 0) -> tuple[Tensor, Tensor]:
    """(running maxima, the index where each was reached) along axis, as torch and tinygrad: nan propagates, and of equal
    values the index is the last one's (torch's). The indices are int32 (tinygrad's; torch's are int64)."""
    ax = axis_arg(axis, self.shape)
    values = _scan(self, ax, lambda w: w.max(-1), lambda a, b: a.maximum(b), dtypes.min(self.dtype))
    return values, _scan_indices(self, values, ax)

  def cummin(self: Tensor, axis: int = 0) -> tuple[Tensor, Tensor]:
    """(running minima, the index where each was reached) along axis: as cummax."""
    ax = axis_arg(axis, self.shape)
    values = _scan(self, ax, lambda w: w.min(-1), lambda a, b: a.minimum(b), dtypes.max(self.dtype))
    return values, _scan_indices(self, values, ax)

  def logcumsumexp(self: Tensor, axis: int = 0) -> Tensor:
    """log(cumsum(exp(x))) without overflow or underflow: a log-sum-exp over each window."""
    x = self.cast(least_upper_float(self.dtype))
    return _scan(x, axis_arg(axis, self.shape), lambda w: w.logsumexp(-1), lambda a, b: a.logaddexp(b), -math.inf)

  def sort(self: Tensor, dim: int = -1, descending: bool = False) -> tuple[Tensor, Tensor]:
    """(values, indices) sorted along dim, stably: equal values keep their order; nan last (first when descending)."""
    axis = axis_arg(dim, self.shape, "sort dim")
    if self.ndim == 0: return self, self.zeros((), dtype=dtypes.int32, device=self.device)
    x = self.transpose(axis, -1) if axis != self.ndim - 1 else self                     # (..., n)
    n = x.shape[-1]
    if n == 0: idx = self.zeros(*x.shape, dtype=dtypes.int32, device=self.device)
    else:
      pos = iota(type(self), n, dtypes.int32, self.device)
      xi, xj = x.unsqueeze(-1), x.unsqueeze(-2)                                           # (..., n, 1), (..., 1, n)
      earlier = pos.reshape(1, n) < pos.reshape(n, 1)                                     # j < i
      rank = (_before(xi, xj, descending) | (_same(xi, xj) & earlier)).sum(-1).contiguous()  # (..., n): where x[i] goes
      # element i goes to place rank[i]: for each place r, the i with rank[i] == r
      at = rank.unsqueeze(-2) == pos.reshape(n, 1)                                        # (..., r, i)
      idx = at.where(pos.reshape(1, n), -1)._reduce(Ops.MAX, -1, False)
      x = at.where(x.unsqueeze(-2), x._const_like(dtypes.min(x.dtype)))._reduce(Ops.MAX, -1, False)
    if axis != self.ndim - 1: x, idx = x.transpose(axis, -1), idx.transpose(axis, -1)
    return x, idx.cast(dtypes.int32)

  def argsort(self: Tensor, dim: int = -1, descending: bool = False) -> Tensor:
    return self.sort(dim, descending)[1]

  def topk(self: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> tuple[Tensor, Tensor]:
    """(values, indices) of the k largest (or smallest) along dim, always in sorted order (sorted=False is accepted)."""
    k = as_int(k, "topk k")
    axis = axis_arg(dim, self.shape, "topk dim")
    n = self.shape[axis] if self.ndim else 1
    if not 0 <= k <= n: raise ShapeError(f"topk k={k} must be in [0, {n}] (dim {dim} of shape {self.shape})")
    vals, idx = self.sort(axis, descending=largest)
    if self.ndim == 0: return vals, idx
    keep = tuple((0, k) if i == axis else (0, d) for i, d in enumerate(self.shape))
    return vals.shrink(keep), idx.shrink(keep)
