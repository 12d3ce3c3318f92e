"""Structured tensors: eye, linspace, meshgrid, triangles (tril, triu) and diagonals (diag, diagonal). Part of the
Tensor frontend: CreationMixin is a base class of Tensor (tensor/tensor.py), and this module needs nothing of tensor.py to
load (a tensor's class is type(x), or cls; every Tensor is a CreationMixin). Built from movement ops on constants, so most
need no host data and fuse into whatever reads them.
"""
from __future__ import annotations
from typing import TYPE_CHECKING, Any
import numpy as np
from runtime.dtype import DType, dtypes
from runtime.uop import UOp
from tensor.errors import ArgumentTypeError, ArgumentValueError, DTypeError, ShapeError, as_int, axis_arg, to_dtype
from tensor.random import iota
from tensor.symbolic_sizes import size_arg

if TYPE_CHECKING: from tensor.tensor import Tensor

def _on_diagonal(x: Tensor) -> Tensor:
  """(..., n) -> (..., n, n) with x on the diagonal and zeros elsewhere, by movement only: each row padded with n zeros
  and the rows laid out n + 1 apart land on the diagonal of an n x n grid."""
  n = x.shape[-1]
  lead = x.shape[:-1]
  rows = x.reshape(*lead, n, 1).pad(((0, 0),) * len(lead) + ((0, 0), (0, n)))       # (..., n, n + 1)
  flat = rows.reshape(*lead, n * (n + 1)).shrink(tuple((0, d) for d in lead) + ((0, n * n),))
  return flat.reshape(*lead, n, n)

class CreationMixin:
  """Tensor's structured creation methods (torch's and tinygrad's names)."""
  __slots__ = ()

  @classmethod
  def eye(cls, n: int, m: int | None = None, dtype: DType | None = None, device: str | None = None, **kwargs) -> Tensor:
    """The n x m identity (ones on the main diagonal)."""
    n = as_int(n, "eye n")
    m = n if m is None else as_int(m, "eye m")
    if n < 0 or m < 0: raise ArgumentValueError(f"eye sizes must be >= 0, got n={n} m={m}")
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    k = max(n, m)
    if k == 0: return cls.zeros(n, m, dtype=dt, device=device, **kwargs)
    square = _on_diagonal(cls.ones(k, dtype=dt, device=device))
    return cls(square.shrink(((0, n), (0, m))).uop, **kwargs)

  @classmethod
  def linspace(cls, start: float, stop: float, steps: int, dtype: DType | None = None, device: str | None = None, **kwargs) -> Tensor:
    """`steps` evenly spaced values from start to stop, both included (numpy's linspace: computed in float64, then cast)."""
    steps = as_int(steps, "linspace steps")
    if steps < 0: raise ArgumentValueError(f"linspace steps must be >= 0, got {steps}")
    for name, v in (("start", start), ("stop", stop)):
      if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise ArgumentTypeError(f"linspace {name} must be a number, got {type(v).__name__} {v!r}")
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    if dt is dtypes.bool: raise DTypeError("linspace of bools: torch refuses it too; give a number dtype")
    vals = np.linspace(float(start), float(stop), steps, dtype=np.float64)
    if dtypes.is_int(dt): vals = np.trunc(vals)
    return cls(vals, device, dt, **kwargs)

  def meshgrid(self: Tensor, *args: Tensor, indexing: str = "ij") -> tuple[Tensor, ...]:
    """Coordinate grids of 1-D tensors: "ij" (matrix, torch's default) or "xy" (Cartesian, numpy's default: the first two
    grid dims swapped)."""
    if indexing not in ("ij", "xy"): raise ArgumentValueError(f"meshgrid indexing must be 'ij' or 'xy', got {indexing!r}")
    ts = (self, *args)
    for t in ts:
      if not isinstance(t, CreationMixin): raise ArgumentTypeError(f"meshgrid takes Tensors, got {type(t).__name__}")
      if t.ndim > 1: raise ShapeError(f"meshgrid takes 0-d or 1-D tensors, got shape {t.shape}")
    ts = tuple(t.reshape(-1) for t in ts)
    shape = [t.shape[0] for t in ts]
    if indexing == "xy" and len(ts) >= 2: shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, t in enumerate(ts):
      pos = (1, 0)[i] if indexing == "xy" and len(ts) >= 2 and i < 2 else i
      out.append(t.reshape(*(1 if k != pos else -1 for k in range(len(ts)))).expand(*shape))
    return tuple(out)

  def tril(self: Tensor, diagonal: int = 0) -> Tensor:
    """The lower triangle of the last two dims (element (i, j) kept when j - i <= diagonal), zeros above."""
    return _triangle(self, _diagonal_arg(diagonal, "tril diagonal"), lower=True)

  def triu(self: Tensor, diagonal: int = 0) -> Tensor:
    """The upper triangle of the last two dims (element (i, j) kept when j - i >= diagonal), zeros below."""
    return _triangle(self, _diagonal_arg(diagonal, "triu diagonal"), lower=False)

  def diag(self: Tensor, diagonal: int = 0) -> Tensor:
    """torch's diag: a 1-D tensor becomes a square matrix with it on diagonal `diagonal`; a 2-D tensor gives that
    diagonal as a 1-D tensor."""
    k = as_int(diagonal, "diag diagonal")
    if self.ndim == 2: return self.diagonal(k)
    if self.ndim != 1: raise ShapeError(f"diag takes a 1-D or 2-D tensor, got shape {self.shape}")
    d = _on_diagonal(self) if self.shape[0] else self.zeros(0, 0, dtype=self.dtype, device=self.device)
    return d.pad(((0, k), (k, 0))) if k >= 0 else d.pad(((-k, 0), (0, -k)))

  def diagonal(self: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The diagonal of dims dim1 and dim2 (offset > 0 above the main one), as a new last dim: torch's diagonal."""
    if self.ndim < 2: raise ShapeError(f"diagonal needs at least 2 dimensions, got shape {self.shape}")
    offset = as_int(offset, "diagonal offset")
    a, b = axis_arg(dim1, self.shape, "diagonal dim1"), axis_arg(dim2, self.shape, "diagonal dim2")
    if a == b: raise ArgumentValueError(f"diagonal dims must differ, got {dim1} and {dim2} (shape {self.shape})")
    rest = [i for i in range(self.ndim) if i not in (a, b)]
    x = self.permute(*rest, a, b)                                    # (..., rows, cols)
    rows, cols = x.shape[-2:]
    r0, c0 = (0, offset) if offset >= 0 else (-offset, 0)
    n = max(0, min(rows - r0, cols - c0))
    lead = tuple((0, d) for d in x.shape[:-2])
    x = x.shrink(lead + ((min(r0, rows), min(r0, rows) + n), (min(c0, cols), min(c0, cols) + n)))
    if n == 0: return x.reshape(*x.shape[:-2], 0)
    flat = x.reshape(*x.shape[:-2], n * n).pad(((0, 0),) * len(lead) + ((0, n),))   # n rows of n + 1: the diagonal is column 0
    return flat.reshape(*x.shape[:-2], n, n + 1).shrink(lead + ((0, n), (0, 1))).reshape(*x.shape[:-2], n)

def _diagonal_arg(k: Any, what: str) -> Any:
  """An int, or a bound Variable's int expression (a causal mask's triu(start_pos + 1): one kernel for every position)."""
  return size_arg(k, what) if isinstance(k, UOp) else as_int(k, what)

def _triangle(x: Tensor, k: Any, lower: bool) -> Tensor:
  if x.ndim < 2: raise ShapeError(f"{'tril' if lower else 'triu'} needs at least 2 dimensions, got shape {x.shape}")
  n, m = x.shape[-2:]
  if n == 0 or m == 0: return x
  rows = iota(type(x), n, dtypes.int32, x.device).reshape(n, 1)
  cols = iota(type(x), m, dtypes.int32, x.device).reshape(1, m)
  d = cols - rows if k.__class__ is int else cols - rows - k  # a Variable k: the tensor stays the first operand (it holds the device)
  if k.__class__ is not int: k = 0
  keep = (d <= k) if lower else (d >= k)       # (n, m)
  return keep.where(x, x._const_like(False if x.dtype is dtypes.bool else 0))
