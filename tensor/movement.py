"""Movement built from the six movement ops: cat, stack, split, chunk, repeat, tile, repeat_interleave, roll, unflatten,
unfold (sliding windows) and the pad modes (reflect, replicate, circular). Part of the Tensor frontend: MovementMixin is a
base class of Tensor (tensor/tensor.py), and this module needs nothing of tensor.py to load (a tensor's class is
type(x); every Tensor is a MovementMixin). Nothing here moves data by itself: every result is a view that fuses into the
kernel reading it.
"""
from __future__ import annotations
import math
from typing import TYPE_CHECKING, Sequence
from runtime.dtype import dtypes, least_upper_dtype
from tensor.autograd import note_folded
from tensor.errors import AxisError, ArgumentTypeError, ArgumentValueError, DeviceMismatchError, ShapeError, as_int, axis_arg, flat_args

if TYPE_CHECKING: from tensor.tensor import Tensor

def broadcast_pair(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
  """a and b broadcast to one shape (numpy's rules): reshaped and expanded views; ShapeError when they don't broadcast."""
  if a.shape == b.shape: return a, b
  n = max(a.ndim, b.ndim)
  sa, sb = (1,) * (n - a.ndim) + a.shape, (1,) * (n - b.ndim) + b.shape
  out = []
  for x, y in zip(sa, sb):
    if x != y and x != 1 and y != 1: raise ShapeError(f"shapes {a.shape} and {b.shape} can't broadcast together")
    out.append(y if x == 1 else x)
  return a.reshape(sa).expand(tuple(out)), b.reshape(sb).expand(tuple(out))

def _along(x: Tensor, axis: int, pair: tuple[int, int]) -> list:
  """A pads/shrink argument touching only `axis`."""
  return [(0, 0) if i != axis else pair for i in range(x.ndim)]

def _slice(x: Tensor, axis: int, begin: int, end: int) -> Tensor:
  return x.shrink(tuple((begin, end) if i == axis else (0, d) for i, d in enumerate(x.shape)))

# the most pieces one select chain joins: each output element reads (guarded) every piece of its chain, so stack of 400
# realized tensors in one kernel did 400 loads per element, in a 400-deep select no compiler finished in 300 s
CAT_FANIN = 16

def _cat(pieces: list[Tensor], axis: int) -> Tensor:
  """Pieces of equal shapes but for `axis`, joined along it: each padded to the full length and selected where it lies
  (a select, not a sum of padded pieces: adding zeros would turn -0.0 into 0.0). More than CAT_FANIN pieces are joined as
  a tree: groups of CAT_FANIN made contiguous, then the groups joined, so the work per element grows with log(pieces)."""
  pieces = [p for p in pieces if not (p.shape[axis].__class__ is int and p.shape[axis] == 0)] or pieces[:1]  # a Variable's size stays
  if len(pieces) == 1: return pieces[0]
  if len(pieces) > CAT_FANIN:
    groups = [_cat(pieces[i:i + CAT_FANIN], axis).contiguous() for i in range(0, len(pieces), CAT_FANIN)]
    return _cat(groups, axis)
  total = sum(p.shape[axis] for p in pieces)
  out: Tensor | None = None
  offset = 0
  for p in pieces:
    pads = _along(p, axis, (offset, total - offset - p.shape[axis]))
    placed = p.pad(pads)
    if out is None: out = placed
    else: out = type(p).ones(*p.shape, dtype=dtypes.bool, device=p.device).pad(pads).where(placed, out)
    offset += p.shape[axis]
  assert out is not None
  return out

def windows(x: Tensor, axis: int, size: int, step: int) -> Tensor:
  """Sliding windows along `axis`: the axis becomes (n - size) // step + 1 windows and a new last axis of `size` holds
  each window. By movement only: the axis repeated R times and read in rows of n + step, so row w starts at w * step."""
  n = x.shape[axis]
  count = (n - size) // step + 1
  if size == 0 or n == 0:  # nothing to read: an empty result of the right shape
    return type(x).zeros(*(count if i == axis else d for i, d in enumerate(x.shape)), size, dtype=x.dtype, device=x.device)
  last = axis == x.ndim - 1
  x = x if last else x.transpose(axis, -1)                                     # (..., n)
  lead, keep = x.shape[:-1], tuple((0, d) for d in x.shape[:-1])
  reps = math.ceil(count * (n + step) / n)
  tiled = x.reshape(*lead, 1, n).expand(*lead, reps, n).reshape(*lead, reps * n)
  rows = tiled.shrink(keep + ((0, count * (n + step)),)).reshape(*lead, count, n + step)
  out = rows.shrink(keep + ((0, count), (0, size)))                           # (..., count, size)
  return out if last else out.transpose(axis, -2)                             # the window count back in the axis's place

class PadModeError(ArgumentValueError, NotImplementedError):
  """A pad mode that does not exist: also NotImplementedError, as torch raises."""

def pad_mode(x: Tensor, pairs: list[tuple[int, int]], mode: str) -> Tensor:
  """Pad with mode "reflect" (mirror, not repeating the edge), "replicate" (repeat the edge) or "circular" (wrap)."""
  if mode not in ("reflect", "replicate", "circular"):
    raise PadModeError(f"pad mode must be 'constant', 'reflect', 'replicate' or 'circular', got {mode!r}")
  crop = None
  if any(b < 0 or a < 0 for b, a in pairs):
    # negative widths crop: circular crops first, reflect and replicate pad the whole axis first and crop after (torch's
    # index rule for them: a reflect of width 2 is allowed on an axis of 3 even when a crop leaves 2)
    crop = tuple((-min(b, 0), min(a, 0)) for b, a in pairs)
    if mode == "circular":
      x, crop = x.shrink(tuple((cb, d + ca) for (cb, ca), d in zip(crop, x.shape))), None
    pairs = [(max(b, 0), max(a, 0)) for b, a in pairs]
  for axis, (b, a) in enumerate(pairs):
    if b == 0 and a == 0: continue
    n = x.shape[axis]
    if mode == "reflect" and (b >= n or a >= n):
      raise ShapeError(f"reflect padding ({b}, {a}) of axis {axis} must be less than its size {n} (shape {x.shape})")
    if mode == "circular" and (b > n or a > n):
      raise ShapeError(f"circular padding ({b}, {a}) of axis {axis} can't exceed its size {n} (shape {x.shape})")
    if mode == "replicate" and n == 0: raise ShapeError(f"replicate padding of axis {axis} of size 0 (shape {x.shape}): no edge to repeat")
    if mode == "reflect": before, after = _slice(x, axis, 1, b + 1).flip(axis), _slice(x, axis, n - 1 - a, n - 1).flip(axis)
    elif mode == "replicate":
      def edge(i: int, k: int) -> Tensor: return _slice(x, axis, i, i + 1).expand(*(k if j == axis else d for j, d in enumerate(x.shape)))
      before, after = edge(0, b), edge(n - 1, a)
    else: before, after = _slice(x, axis, n - b, n), _slice(x, axis, 0, a)
    x = _cat([before, x, after], axis)
  if crop is not None:
    if any(cb - ca > d for (cb, ca), d in zip(crop, x.shape)): raise ShapeError(f"pad {pairs} crops more than the shape {x.shape} holds")
    x = x.shrink(tuple((cb, d + ca) for (cb, ca), d in zip(crop, x.shape)))
  return x

def _tensors(first, rest: tuple, op: str) -> list[Tensor]:
  if isinstance(first, (list, tuple)) and rest:
    raise ArgumentValueError(f"{op} takes tensors, or one list of them, not a list and then more tensors")
  ts = list(first) if isinstance(first, (list, tuple)) else [first, *rest]
  if not ts: raise ArgumentValueError(f"{op} needs at least one tensor")
  for t in ts:
    if not isinstance(t, MovementMixin): raise ArgumentTypeError(f"{op} takes Tensors, got {type(t).__name__}")
  if len({t.device for t in ts}) > 1: raise DeviceMismatchError(f"{op} of tensors on different devices: {[t.device for t in ts]}")
  dt = least_upper_dtype(*(t.dtype for t in ts))
  return [t.cast(dt) for t in ts]

class MovementMixin:
  """Tensor's joining, splitting, repeating and windowing methods (torch's and tinygrad's names)."""
  __slots__ = ()

  def cat(self, *args: Tensor, dim: int = 0) -> Tensor:
    """Join tensors along an existing dim; their other dims must match (dtypes promote). `Tensor.cat(a, b, dim=1)` or
    `Tensor.cat([a, b], dim=1)`."""
    ts = _tensors(self, args, "cat")
    ref = ts[0]
    axis = axis_arg(dim, ref.shape, "cat dim")
    if ref.ndim == 0: raise AxisError("cat of 0-d tensors (no dim to join along): use stack")
    for t in ts[1:]:
      if t.ndim != ref.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, ref.shape)) if i != axis):
        raise ShapeError(f"cat along dim {dim}: shapes {ref.shape} and {t.shape} differ in another dim")
    return _cat(ts, axis)

  def stack(self, *args: Tensor, dim: int = 0) -> Tensor:
    """Join tensors of one shape along a new dim."""
    ts = _tensors(self, args, "stack")
    for t in ts[1:]:
      if t.shape != ts[0].shape: raise ShapeError(f"stack needs tensors of one shape, got {ts[0].shape} and {t.shape}")
    axis = axis_arg(dim, ts[0].shape, "stack dim", extra=1)
    return _cat([t.unsqueeze(axis) for t in ts], axis)

  def split(self: Tensor, sizes: int | Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
    """Pieces along dim: of `sizes` elements each (the last may be smaller), or of the listed sizes (summing to the dim)."""
    axis = axis_arg(dim, self.shape, "split dim")
    n = self.shape[axis] if self.ndim else 1
    if isinstance(sizes, (list, tuple)):
      parts = [as_int(s, "split size") for s in sizes]
      if any(s < 0 for s in parts) or sum(parts) != n:
        raise ShapeError(f"split sizes {list(sizes)} must be >= 0 and add up to {n} (dim {dim} of shape {self.shape})")
    else:
      size = as_int(sizes, "split size")
      if size <= 0: raise ArgumentValueError(f"split size must be > 0, got {size}")
      parts = [min(size, n - i) for i in range(0, n, size)] or [0]
    out, start = [], 0
    for s in parts:
      out.append(_slice(self, axis, start, start + s))
      start += s
    return tuple(out)

  def chunk(self: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """At most `chunks` pieces along dim, each of ceil(n / chunks) elements but the last (torch's chunk)."""
    chunks = as_int(chunks, "chunks")
    if chunks <= 0: raise ArgumentValueError(f"chunk count must be > 0, got {chunks}")
    n = self.shape[axis_arg(dim, self.shape, "chunk dim")]
    return self.split(max(1, math.ceil(n / chunks)), dim)

  def repeat(self: Tensor, *repeats) -> Tensor:
    """torch's repeat: the tensor tiled `repeats[i]` times along dim i (extra leading repeats add dims)."""
    reps = tuple(as_int(r, "repeat count") for r in flat_args(repeats))
    if any(r < 0 for r in reps): raise ArgumentValueError(f"repeat counts must be >= 0, got {reps}")
    if len(reps) < self.ndim: raise ShapeError(f"repeat needs at least {self.ndim} counts for shape {self.shape}, got {reps}")
    shape = (1,) * (len(reps) - self.ndim) + self.shape
    x = self.reshape(shape)
    inter = [v for d in shape for v in (1, d)]                                   # (1, d0, 1, d1, ...)
    big = [v for r, d in zip(reps, shape) for v in (r, d)]                       # (r0, d0, r1, d1, ...)
    return x.reshape(inter).expand(big).reshape(tuple(r * d for r, d in zip(reps, shape)))

  def tile(self: Tensor, *reps) -> Tensor:
    """numpy's tile: like repeat, with fewer counts than dims meaning 1 for the leading dims."""
    r = tuple(flat_args(reps))
    return self.repeat((1,) * (self.ndim - len(r)) + r)

  def repeat_interleave(self: Tensor, repeats: int | Sequence[int], dim: int | None = None) -> Tensor:
    """Each element repeated: `repeats` times, or repeats[i] times for element i along dim (flattened when dim is None)."""
    x = self.flatten() if dim is None else self
    axis = axis_arg(0 if dim is None else dim, x.shape, "repeat_interleave dim")
    n = x.shape[axis] if x.ndim else 1
    if isinstance(repeats, (list, tuple)):
      counts = [as_int(r, "repeat count") for r in repeats]
      if len(counts) != n or any(c < 0 for c in counts):
        raise ShapeError(f"repeat_interleave needs {n} counts >= 0 for dim {axis} of shape {x.shape}, got {len(counts)}")
      idx = [i for i, c in enumerate(counts) for _ in range(c)]
      return x[(slice(None),) * axis + (idx,)] if idx else _slice(x, axis, 0, 0)
    r = as_int(repeats, "repeat count")
    if r < 0: raise ArgumentValueError(f"repeat count must be >= 0, got {r}")
    shape = x.shape
    return x.unsqueeze(axis + 1).expand(*shape[:axis + 1], r, *shape[axis + 1:]).reshape(*shape[:axis], n * r, *shape[axis + 1:])

  def roll(self: Tensor, shifts: int | Sequence[int], dims: int | Sequence[int] | None = None) -> Tensor:
    """Elements shifted along dims, wrapping around (flattened and reshaped back when dims is None)."""
    if dims is None:
      if isinstance(shifts, (list, tuple)):
        if len(shifts) != 1: raise ArgumentValueError(f"roll with several shifts {tuple(shifts)} needs dims")
        shifts = shifts[0]
      return self.flatten().roll(shifts, 0).reshape(self.shape)
    sh = [as_int(s, "roll shift") for s in (shifts if isinstance(shifts, (list, tuple)) else (shifts,))]
    ds = [axis_arg(d, self.shape, "roll dim") for d in (dims if isinstance(dims, (list, tuple)) else (dims,))]
    if len(sh) != len(ds): raise ArgumentValueError(f"roll got {len(sh)} shifts for {len(ds)} dims")
    x = self
    for s, d in zip(sh, ds):
      n = x.shape[d] if x.ndim else 1
      if n == 0 or s % n == 0: continue
      s %= n
      x = _cat([_slice(x, d, n - s, n), _slice(x, d, 0, n - s)], d)
    return x

  def shrink_to(self: Tensor, *shape) -> Tensor:
    """The first shape[i] elements of each dim (None keeps a dim): tinygrad's shorthand for shrink(((0, s), ...))."""
    sizes = flat_args(shape)
    if len(sizes) != self.ndim: raise ShapeError(f"shrink_to {sizes} needs a size for each of the {self.ndim} dims of {self.shape}")
    return self.shrink(tuple(None if s is None else (0, s) for s in sizes))

  def pad_to(self: Tensor, *shape, value: float = 0.0) -> Tensor:
    """Padded at the end of each dim up to shape[i] (None keeps a dim) with `value`."""
    sizes = flat_args(shape)
    if len(sizes) != self.ndim: raise ShapeError(f"pad_to {sizes} needs a size for each of the {self.ndim} dims of {self.shape}")
    if any(s is not None and s < d for s, d in zip(sizes, self.shape)): raise ShapeError(f"pad_to {sizes} is smaller than {self.shape}")
    return self.pad(tuple((0, 0 if s is None else s - d) for s, d in zip(sizes, self.shape)), value=value)

  def unflatten(self: Tensor, dim: int, sizes: Sequence[int]) -> Tensor:
    """Dim split into `sizes` (one of them may be -1)."""
    axis = axis_arg(dim, self.shape, "unflatten dim")
    sizes = tuple(as_int(s, "unflatten size") for s in sizes)
    n, known = self.shape[axis], math.prod(s for s in sizes if s != -1)
    if sizes.count(-1) == 1 and known and n % known == 0: sizes = tuple(n // known if s == -1 else s for s in sizes)  # from the dim alone
    if sizes.count(-1) or math.prod(sizes) != n:
      raise ShapeError(f"unflatten sizes {sizes} don't multiply to {n} (dim {dim} of shape {self.shape})")
    return self.reshape(*self.shape[:axis], *sizes, *self.shape[axis + 1:])

  def unfold(self: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """torch's unfold: windows of `size` along `dimension`, `step` apart; the dimension becomes the window count and a
    new last dimension holds each window."""
    axis = axis_arg(dimension, self.shape, "unfold dimension")
    size, step = as_int(size, "unfold size"), as_int(step, "unfold step")
    if step <= 0 or size < 0: raise ArgumentValueError(f"unfold needs size >= 0 and step > 0, got size={size} step={step}")
    x = self if self.ndim else self.reshape(1)
    if size > x.shape[axis]: raise ShapeError(f"unfold size {size} exceeds dimension {dimension} of size {x.shape[axis]} (shape {self.shape})")
    out = windows(x, axis, size, step)
    if out.numel() == 0: note_folded(out.uop, self.uop)  # windows of nothing: a zero gradient for self, not "not in the graph"
    return out
