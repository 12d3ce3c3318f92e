"""Indexing with numpy's rules: t[...] and t[...] = v, plus gather, scatter, scatter_reduce (torch's), masked_fill,
masked_select and nonzero. Part of the Tensor frontend: IndexingMixin is a base class of Tensor (tensor/tensor.py), and
this module needs nothing of tensor.py to load (a tensor's class is type(x); every Tensor is an IndexingMixin).

Basic indices (ints, slices with any step, None, ...) are views made of movement ops, so they fuse into their readers.
Advanced indices (lists, numpy arrays and integer tensors on any axes, broadcast together; boolean masks) move their
axes to the front, flatten them into one linear index and `take` rows by it (a GATHER node, which rangeify turns into a
load at the index's value). The result's advanced dims go in place of the indexed axes when those are adjacent, else
first; an int is a select even beside advanced indices (torch's rule, which tinygrad follows; numpy differs there).
torch's gather and scatter compare their index with each position of the axis (work proportional to the axis size
times the index's size), as the writes of t[...] = v do.

Out-of-range indices: one known on the host (a Python int, list or numpy array) raises IndexError naming it; an integer
tensor's entries are device data, so one outside its axis (after adding the axis size to a negative one) reads 0
(False) and writes nothing. A boolean mask, masked_select and nonzero read their mask on the host: their result's size
depends on it (with `size=`, they don't: computed on the device). t[...] = v writes into t's buffer (an assign) when t
is realized; into the realized tensor under it when t is a view of one (t[::-1][0] = 5 writes into t); else t takes the
new value. Of several writes to one element by an advanced index, the last one wins (as numpy).
"""
from __future__ import annotations
import math, operator
from typing import TYPE_CHECKING, Any
import numpy as np
from runtime.dtype import dtypes
from runtime.ops import Ops
from runtime.uop import arg_str, dim_str, is_symbolic, shape_str, uop
from tensor.engine.state import ENGINE
from tensor.engine.storage import realized_buffer
from tensor.errors import ArgumentTypeError, ArgumentValueError, DTypeError, ShapeError, TensorIndexError, axis_arg, broadcast_shape
from tensor.movement import broadcast_pair
from tensor.multi import stored as stored_multi
from tensor.random import iota
from tensor.symbolic_sizes import always_le, size_arg, var_names

if TYPE_CHECKING: from tensor.tensor import Tensor

# ---- take: the one gather everything here is built on ----

def take(x: Tensor, idx: Tensor) -> Tensor:
  """x[idx] along axis 0 for an integer tensor idx of any shape S: shape S + x.shape[1:]. An entry outside [0, n) reads 0.
  A GATHER node: rangeify turns it into a load at the index's value (rules/rangeify.rules), so the cost is the output's."""
  if x.shape[0] == 0 or idx.numel() == 0 or x.numel() == 0: return type(x).zeros(*idx.shape, *x.shape[1:], dtype=x.dtype, device=x.device)
  return type(x)(uop(Ops.GATHER, x.dtype, (x.uop, idx.uop)))

# ---- parsing an index ----

class IndexTypeError(TensorIndexError, TypeError):
  """An index array or tensor of floats: IndexError as numpy raises (and tinygrad's tests expect), TypeError as torch."""

def _host_index(it: Any) -> np.ndarray:
  arr = np.asarray(it)
  if arr.dtype.kind == "b": return arr
  if arr.size == 0: return arr.astype(np.int64)
  if arr.dtype.kind not in "iu": raise IndexTypeError(f"index arrays must hold integers or bools, got {arr.dtype} in {it!r}")
  return arr

def _is_mask(i: Any) -> bool:
  return (isinstance(i, np.ndarray) and i.dtype == np.bool_) or (isinstance(i, IndexingMixin) and i.dtype is dtypes.bool)

class _Parsed:
  """An index split into its basic part (per axis of t: (start, step, count), or an int) and its advanced part
  (axes of the basic view with their integer index tensors)."""
  def __init__(self, t: Tensor, idx: Any):
    items = list(idx) if isinstance(idx, tuple) else [idx]
    conv: list[Any] = []
    for it in items:
      if it is None or it is Ellipsis or isinstance(it, slice) or isinstance(it, IndexingMixin): conv.append(it)
      elif isinstance(it, (bool, np.bool_)): raise ArgumentTypeError(f"a bool index ({it!r}) is not supported: use a boolean tensor mask")
      elif isinstance(it, (list, tuple, np.ndarray)): conv.append(_host_index(it))
      elif hasattr(it, "__index__"): conv.append(operator.index(it))
      else: raise ArgumentTypeError(f"unsupported index {it!r} ({type(it).__name__}): use ints, slices, None, ..., lists, arrays or Tensors")
    if sum(1 for i in conv if i is Ellipsis) > 1: raise TensorIndexError("an index can have only a single ellipsis ('...')")
    for i in conv:
      if _is_mask(i) and i.ndim == 0: raise ArgumentTypeError("a 0-d boolean index is not supported: use a mask with the indexed dims")
    n_used = sum(0 if i is None or i is Ellipsis else i.ndim if _is_mask(i) else 1 for i in conv)
    if n_used > t.ndim: raise TensorIndexError(f"too many indices ({n_used}) for a tensor of {t.ndim} dimensions (shape {t.shape})")
    fill = [slice(None)] * (t.ndim - n_used)
    ell = [j for j, i in enumerate(conv) if i is Ellipsis]
    if ell: conv[ell[0]:ell[0] + 1] = fill
    else: conv += fill
    # boolean masks become the integer arrays of their True positions (read on the host): one per mask dim
    expanded: list[Any] = []
    axis = 0
    for it in conv:
      if _is_mask(it):
        mask = it.numpy() if isinstance(it, IndexingMixin) else it
        want = t.shape[axis:axis + mask.ndim]
        if mask.shape != want:
          raise TensorIndexError(f"boolean index of shape {mask.shape} does not match the indexed dims {want} of shape {t.shape}")
        expanded.extend(np.nonzero(mask))
        axis += mask.ndim
      else:
        expanded.append(it)
        if it is not None: axis += 1
    self.t, self.items = t, expanded
    self.has_adv = any(isinstance(i, (np.ndarray, IndexingMixin)) for i in expanded)

  def basic_view(self) -> tuple[Tensor, list[tuple[int, int, Tensor]], list]:
    """The view of t made by the basic items (advanced axes kept whole), the advanced items as (position in the index,
    axis of the view, index tensor wrapped into range), and per axis of t its (start, step, count) or an int."""
    t = self.t
    out, axis, squeeze = t, 0, []
    adv: list[tuple[int, int, Tensor]] = []
    placement: list = []
    for pos, it in enumerate(self.items):
      if it is None:
        out = out.unsqueeze(axis)
        axis += 1
        continue
      n = out.shape[axis]
      taxis = len(placement)
      if isinstance(it, slice) and (is_symbolic(n) or any(is_symbolic(v) for v in (it.start, it.stop, it.step))):
        out, where = _symbolic_slice(out, axis, it, taxis)  # x[:n] with n a bound Variable
        placement.append(where)
      elif isinstance(it, slice):
        start, stop, step = _slice_args(it, n, t.shape, taxis)
        count = max(0, math.ceil((stop - start) / step))
        out = _apply_slice(out, axis, start, step, count)
        placement.append((start, step, count))
      elif isinstance(it, int):  # a select, also beside advanced indices (torch's rule; numpy counts it as an advanced index)
        if is_symbolic(n):
          if not (0 <= it and always_le(it + 1, n)):
            raise TensorIndexError(f"index {it} on axis {taxis} of symbolic size {dim_str(n)} (shape {shape_str(t.shape)}): it must be >= 0 "
                                   f"and inside the axis for every value of the Variable {var_names(n)}")
        elif not -n <= it < n: raise TensorIndexError(f"index {it} is out of bounds for axis {taxis} of size {n} (shape {t.shape})")
        i = it if is_symbolic(n) else it % n
        out = out.shrink(tuple((i, i + 1) if k == axis else (0, d) for k, d in enumerate(out.shape)))
        squeeze.append(axis)
        placement.append(i)
      else:
        adv.append((pos, axis, _index_tensor(it, n, taxis, t)))
        placement.append((0, 1, n))
      axis += 1
    if squeeze:
      out = out.reshape(tuple(d for k, d in enumerate(out.shape) if k not in squeeze))
      adv = [(pos, a - sum(1 for s in squeeze if s < a), ix) for pos, a, ix in adv]
    return out, adv, placement

def _symbolic_slice(x: Tensor, axis: int, it: slice, taxis: int) -> tuple[Tensor, tuple]:
  """A slice with a bound Variable (or an expression of them) as start or stop, or of an axis of symbolic size: a shrink
  (step 1; start and stop count from the axis start)."""
  if is_symbolic(it.step):
    raise ArgumentTypeError(f"slice step must be an integer, got the Variable {arg_str(it.step)}: a slice takes no symbolic step")
  if it.step is not None and not (it.step.__class__ is int and it.step == 1):
    raise ArgumentValueError(f"a slice with a symbolic bound or of a symbolic axis takes step 1, got {it.step!r} (axis {taxis} of shape "
                             f"{shape_str(x.shape)})")
  n = x.shape[axis]
  start = 0 if it.start is None else size_arg(it.start, "slice start")
  stop = n if it.stop is None else size_arg(it.stop, "slice stop")
  for v, name in ((start, "start"), (stop, "stop")):
    if v.__class__ is int and v < 0:
      raise ArgumentValueError(f"slice {name} {v} with a symbolic size (axis {taxis} of shape {shape_str(x.shape)}): negative bounds "
                               "count from a symbolic end; give the bound as an expression instead (n - 1)")
  out = x.shrink(tuple((start, stop) if k == axis else None for k in range(x.ndim)))
  return out, (start, 1, out.shape[axis])

def _slice_args(it: slice, n: int, shape, taxis: int) -> tuple[int, int, int]:
  for name, v in (("start", it.start), ("stop", it.stop), ("step", it.step)):
    if v is not None and (isinstance(v, bool) or not hasattr(v, "__index__")):
      raise ArgumentTypeError(f"slice {name} must be an integer or None, got {v!r}")
  if it.step is not None and operator.index(it.step) == 0: raise ArgumentValueError(f"slice step cannot be zero (axis {taxis} of shape {shape})")
  return slice(*(None if v is None else operator.index(v) for v in (it.start, it.stop, it.step))).indices(n)

def _apply_slice(x: Tensor, axis: int, start: int, step: int, count: int) -> Tensor:
  """Elements start, start + step, ... (count of them) along axis: a shrink, a flip for a negative step, and for |step| > 1
  a pad to a multiple of the step, a split of the axis and a shrink to the first of each group."""
  def along(pair): return tuple(pair if k == axis else (0, d) for k, d in enumerate(x.shape))
  if count == 0: return x.shrink(along((0, 0)))
  lo, hi = (start, start + (count - 1) * step + 1) if step > 0 else (start + (count - 1) * step, start + 1)
  x = x.shrink(along((lo, hi)))
  if step < 0: x = x.flip(axis)
  s = abs(step)
  if s == 1: return x
  x = x.pad(tuple((0, count * s - x.shape[axis]) if k == axis else (0, 0) for k in range(x.ndim)))
  x = x.reshape(*x.shape[:axis], count, s, *x.shape[axis + 1:])
  x = x.shrink(tuple((0, 1) if k == axis + 1 else (0, d) for k, d in enumerate(x.shape)))
  return x.reshape(*x.shape[:axis + 1], *x.shape[axis + 2:])

def _index_tensor(it: Any, n: int, taxis: int, t: Tensor) -> Tensor:
  """An advanced index as an integer tensor on t's device, negative entries wrapped. A host index is checked here."""
  if isinstance(it, IndexingMixin):
    if not dtypes.is_int(it.dtype): raise IndexTypeError(f"index tensors must be integer or bool, got {it.dtype!r}")
    if it.device != t.device: it = it.to(t.device)
    return it if dtypes.is_unsigned(it.dtype) else (it < 0).where(it + n, it)
  arr = np.asarray(it)
  if arr.size:
    bad = arr[(arr < -n) | (arr >= n)]
    if bad.size: raise TensorIndexError(f"index {int(bad.reshape(-1)[0])} is out of bounds for axis {taxis} of size {n} (shape {t.shape})")
  arr = np.where(arr < 0, arr + n, arr)
  return type(t)(arr.astype(np.int32 if n <= 2**31 else np.int64), t.device)

def _linear(adv: list[tuple[int, int, Tensor]], sizes: list[int]) -> Tensor:
  """The advanced indices (broadcast together) as one index into their axes flattened: -1 where any is out of range."""
  shape = broadcast_shape(*(i.shape for _, _, i in adv))
  wide = dtypes.int64 if math.prod(sizes) > 2**31 - 1 or any(i.dtype in (dtypes.int64, dtypes.uint64, dtypes.uint32) for _, _, i in adv) \
    else dtypes.int32
  lin: Tensor | None = None
  valid: Tensor | None = None
  stride = 1
  for (_, _, i), n in reversed(list(zip(adv, sizes))):
    i = i.cast(wide).reshape((1,) * (len(shape) - i.ndim) + i.shape).expand(shape)
    ok = (i >= 0) & (i < n)
    valid = ok if valid is None else valid & ok
    lin = i * stride if lin is None else lin + i * stride
    stride *= n
  assert lin is not None and valid is not None
  return valid.where(lin, -1)

def _adjacent(adv) -> bool:
  """Whether the advanced indices sit on consecutive axes of the basic view (ints selected away, as torch): then the
  result's advanced dims go in their place, else first."""
  return [a for _, a, _ in adv] == list(range(adv[0][1], adv[0][1] + len(adv)))

def _gather_advanced(view: Tensor, adv) -> Tensor:
  axes = [a for _, a, _ in adv]
  rest = [a for a in range(view.ndim) if a not in axes]
  sizes = [view.shape[a] for a in axes]
  x = view.permute(*axes, *rest).reshape(math.prod(sizes), *(view.shape[a] for a in rest))
  lin = _linear(adv, sizes)
  out = take(x, lin)                                                           # B + rest
  if _adjacent(adv):
    k = sum(1 for a in rest if a < axes[0])                                     # view dims before the indexed ones
    b = lin.ndim
    order = list(range(b, b + k)) + list(range(b)) + list(range(b + k, out.ndim))
    out = out.permute(order)
  return out

def getitem(t: Tensor, idx: Any) -> Tensor:
  p = _Parsed(t, idx)
  view, adv, _ = p.basic_view()
  return _gather_advanced(view, adv) if adv else view

# ---- t[...] = v ----

def _spread(x: Tensor, axis: int, start: int, step: int, n: int) -> Tensor:
  """The inverse of _apply_slice: x's elements along axis placed at start, start + step, ... of an axis of size n
  (the other places padded: zeros, or False for a mask)."""
  count = x.shape[axis]
  if step < 0: x, start, step = x.flip(axis), start + (count - 1) * step, -step
  if step > 1:
    x = x.unsqueeze(axis + 1).pad(tuple((0, step - 1) if k == axis + 1 else (0, 0) for k in range(x.ndim + 1)))
    x = x.reshape(*x.shape[:axis], count * step, *x.shape[axis + 2:])
    x = x.shrink(tuple((0, (count - 1) * step + 1) if k == axis else (0, d) for k, d in enumerate(x.shape)))
  span = x.shape[axis]
  return x.pad(tuple((start, n - start - span) if k == axis else (0, 0) for k in range(x.ndim)))

def _place(t: Tensor, placement: list, x: Tensor) -> tuple[Tensor, Tensor]:
  """x (shaped like the basic view without its None dims, int axes removed) placed into t's shape: (values, mask)."""
  mask = type(t).ones(*x.shape, dtype=dtypes.bool, device=t.device)
  keep = tuple(1 if isinstance(p, int) else p[2] for p in placement)
  x, mask = x.reshape(keep), mask.reshape(keep)
  for axis, p in enumerate(placement):
    start, step = (p, 1) if isinstance(p, int) else p[:2]
    x, mask = _spread(x, axis, start, step, t.shape[axis]), _spread(mask, axis, start, step, t.shape[axis])
  return x, mask

def setitem(t: Tensor, idx: Any, value: Any) -> None:
  if isinstance(value, IndexingMixin): v = value.cast(t.dtype).to(t.device)
  elif isinstance(value, (bool, int, float, np.generic)): v = type(t)(value, t.device, t.dtype)
  else: v = type(t)(np.asarray(value), t.device).cast(t.dtype)
  mask_only = isinstance(idx, IndexingMixin) and idx.dtype is dtypes.bool and idx.shape == t.shape[:idx.ndim] and v.numel() == 1
  if mask_only:  # t[mask] = scalar: a select, no host read of the mask
    new = idx.reshape(*idx.shape, *(1,) * (t.ndim - idx.ndim)).where(v.reshape(()), t)
  else: new = _set(t, idx, v)
  if new is None: return
  if t.is_realized() or stored_multi(t.uop): t.assign(new)
  elif (chain := view_chain(t)) is not None: write_through(t, chain, new)
  else: t.uop = new.uop

# ---- writes through a view: t[::-1][0] = 5, t.T[1, 0] = 5, t.detach()[1] = 5, t[1][2] = 5 write into t ----

_VIEW_OPS = (Ops.RESHAPE, Ops.PERMUTE, Ops.FLIP, Ops.SHRINK, Ops.PAD, Ops.EXPAND, Ops.DETACH)

def _in_memory(u) -> bool:  # a realized buffer, or a tensor over several devices whose shards are (tensor/multi.py)
  return realized_buffer(u) is not None or stored_multi(u)

def _chain(u) -> tuple[list, Any]:
  chain = []
  while u.op in _VIEW_OPS and realized_buffer(u) is None:
    chain.append(u)
    u = u.src[0]
  return chain, u

def view_chain(t: Tensor) -> list | None:
  """The movement ops (top first) from t's node down to a realized buffer, or None when t is not a view of another tensor
  (then t takes the new value itself). A view of a live tensor that is still unrealized realizes that tensor first (the
  deepest one under the view: the others are views of it), so the write has storage to go into and is not lost."""
  chain, bottom = _chain(t.uop)
  if not chain: return None
  if _in_memory(bottom): return chain
  if bottom.op is Ops.ASSIGN and _in_memory(bottom.src[0]):  # a view of a pending in-place write (t[1] += 2; t[1] -= 1)
    for h in [h for h in ENGINE.storage.live_holders() if h.uop is bottom] or [type(t)(bottom)]: h.realize()
    u = bottom.src[0]  # the write's own storage, which holds the new values once realized: the view reads it
    for c in reversed(chain): u = c.replace(src=(u,))
    t.uop = u
    return _chain(u)[0]
  live = [h for h in ENGINE.storage.live_holders() if h is not t]
  for u in [bottom, *(c.src[0] for c in reversed(chain))]:  # deepest first
    if (holders := [h for h in live if h.uop is u]):
      for h in holders: h.realize()  # the engine rewires t's graph onto the new buffer
      chain, bottom = _chain(t.uop)
      if chain and _in_memory(bottom): return chain
      raise ShapeError(f"t[...] = v into a view of a tensor that could not be stored ({bottom.op.name}): realize that tensor first")
  return None

def write_through(t: Tensor, chain: list, new: Tensor) -> None:
  """Writes `new` (the view's whole new value) into the stored tensor under the view: each movement op inverted (a shrink
  becomes a pad with a mask of where the view lies, a flip a flip, ...), then one assign into that buffer, realized now so
  every tensor of that storage (the base itself, its other views) reads the new values."""
  T = type(t)
  x, mask = new, T.ones(*new.shape, dtype=dtypes.bool, device=t.device)
  for u in chain:
    src_shape = u.src[0].shape
    if u.op is Ops.RESHAPE: x, mask = x.reshape(src_shape), mask.reshape(src_shape)
    elif u.op is Ops.PERMUTE:
      inv = [0] * len(u.arg)
      for k, a in enumerate(u.arg): inv[a] = k
      x, mask = x.permute(inv), mask.permute(inv)
    elif u.op is Ops.FLIP:
      axes = [k for k, f in enumerate(u.arg) if f]
      x, mask = x.flip(axes), mask.flip(axes)
    elif u.op is Ops.SHRINK:
      pads = tuple((b, s - e) for (b, e), s in zip(u.arg, src_shape))
      x, mask = x.pad(pads), mask.pad(pads, value=False)
    elif u.op is Ops.PAD:
      box = tuple((b, b + s) for (b, _), s in zip(u.arg, src_shape))
      x, mask = x.shrink(box), mask.shrink(box)
    elif u.op is Ops.EXPAND:
      raise ShapeError(f"t[...] = v into an expanded view ({shape_str(src_shape)} -> {shape_str(u.shape)}): several of its elements "
                       "are one stored element; write into the tensor before expanding it")
  base = T(chain[-1].src[0])
  base.assign(mask.where(x, base)).realize()
  # the realize computed t first as a reader of the old values (the engine's rule for pending readers): t stays the view
  t.uop = chain[0]

def _set(t: Tensor, idx: Any, v: Tensor) -> Tensor | None:
  p = _Parsed(t, idx)
  view, adv, placement = p.basic_view()
  target = _gather_advanced(view, adv) if adv else view
  try: v = broadcast_pair(v, target)[0] if v.shape != target.shape else v
  except ShapeError: raise ShapeError(f"can't set a value of shape {v.shape} into t[...] of shape {target.shape}") from None
  if v.shape != target.shape: raise ShapeError(f"can't set a value of shape {v.shape} into t[...] of shape {target.shape}")
  if v.numel() == 0: return None
  new_view = _scatter_advanced(view, adv, v) if adv else v                       # view.shape
  nones = [k for k, it in enumerate(_view_items(p)) if it is None]
  vals, mask = _place(t, placement, new_view.reshape(tuple(d for k, d in enumerate(view.shape) if k not in nones)))
  return mask.where(vals, t)

def _view_items(p: _Parsed) -> list:
  """The items that made each dim of the basic view (ints that were squeezed away are skipped)."""
  return [it for it in p.items if not isinstance(it, int)]

def _scatter_advanced(view: Tensor, adv, v: Tensor) -> Tensor:
  """The basic view with v written at the advanced indices (last write wins)."""
  axes = [a for _, a, _ in adv]
  rest = [a for a in range(view.ndim) if a not in axes]
  sizes = [view.shape[a] for a in axes]
  n = math.prod(sizes)
  x = view.permute(*axes, *rest).reshape(n, *(view.shape[a] for a in rest))
  lin = _linear(adv, sizes)
  b = lin.ndim
  if _adjacent(adv):  # v has the advanced dims where getitem put them: move them to the front
    k = sum(1 for a in rest if a < axes[0])
    v = v.permute(list(range(k, k + b)) + list(range(k)) + list(range(k + b, v.ndim)))
  m = lin.numel()
  lin, v = lin.reshape(m), v.reshape(m, *x.shape[1:])
  pos = iota(type(view), m, dtypes.int32, view.device)
  hit = lin.reshape(1, m) == iota(type(view), n, dtypes.int32, view.device).reshape(n, 1)      # (n, m)
  last = hit.where(pos.reshape(1, m), -1)._reduce(Ops.MAX, -1, False)              # (n,): the last write to each row (-1: none)
  new = take(v, last)
  written = (last >= 0).reshape(n, *(1,) * (x.ndim - 1))
  out = written.where(new, x)
  inv = [0] * view.ndim
  for k, a in enumerate(axes + rest): inv[a] = k
  return out.reshape(*sizes, *(view.shape[a] for a in rest)).permute(inv)

# ---- torch's gather / scatter family ----

def _coord(T: type[Tensor], shape: tuple[int, ...], k: int, dtype, device: str) -> Tensor:
  """The coordinate along dim k of a tensor of `shape`, broadcastable to it (computed in the kernel that reads it)."""
  return iota(T, shape[k], dtype, device).reshape(*(d if j == k else 1 for j, d in enumerate(shape)))

def _check_gather_shapes(x: Tensor, dim: int, index: Tensor, op: str, src: Tensor | None = None) -> None:
  if not isinstance(index, IndexingMixin): raise ArgumentTypeError(f"{op} index must be a Tensor, got {type(index).__name__}")
  if not dtypes.is_int(index.dtype): raise DTypeError(f"{op} index must be an integer tensor, got {index.dtype!r}")
  if index.ndim != x.ndim: raise ShapeError(f"{op} index of shape {index.shape} must have the {x.ndim} dims of {x.shape}")
  if any(i > s for k, (i, s) in enumerate(zip(index.shape, x.shape)) if k != dim):
    raise ShapeError(f"{op} index of shape {index.shape} is larger than {x.shape} outside dim {dim}")
  if src is not None and (src.ndim != index.ndim or any(i > s for i, s in zip(index.shape, src.shape))):
    raise ShapeError(f"{op} index of shape {index.shape} is larger than src of shape {src.shape}")

_REDUCE = {"sum": "sum", "add": "sum", "prod": "prod", "multiply": "prod", "mean": "mean", "amax": "amax", "amin": "amin"}

class IndexingMixin:
  """Tensor's gather/scatter methods and masks (torch's names and semantics)."""
  __slots__ = ()

  def gather(self: Tensor, dim: int, index: Tensor) -> Tensor:
    """out[i][j][k] = self[i][index[i][j][k]][k] for dim 1 (torch's gather); index may be smaller than self outside dim.
    One take from the flattened tensor at each element's linear position (the other coordinates counted in-kernel)."""
    axis = axis_arg(dim, self.shape, "gather dim")
    _check_gather_shapes(self, axis, index, "gather")
    if self.ndim == 0: return self
    n = self.shape[axis]
    idx = (index < 0).where(index + n, index) if not dtypes.is_unsigned(index.dtype) else index
    wide = dtypes.int64 if self.numel() > 2**31 - 1 or idx.dtype.itemsize == 8 else dtypes.int32
    lin, stride = None, 1
    for k in reversed(range(self.ndim)):
      c = idx.cast(wide) if k == axis else _coord(type(self), index.shape, k, wide, self.device)
      lin = c * stride if lin is None else lin + c * stride
      stride *= self.shape[k]
    assert lin is not None
    return take(self.reshape(-1), ((idx >= 0) & (idx < n)).where(lin, -1))

  def scatter(self: Tensor, dim: int, index: Tensor, src: Tensor | float, reduce: str | None = None) -> Tensor:
    """A copy of self with src written at index along dim (torch's scatter; reduce "add" or "multiply" combines with
    the old value instead; only with a number as src, as tinygrad: for a Tensor src it is scatter_reduce, where torch
    deprecates it). Of several writes to one place without reduce, the last one wins."""
    if reduce is not None:
      if reduce not in ("add", "multiply"): raise ArgumentValueError(f"scatter reduce must be None, 'add' or 'multiply', got {reduce!r}")
      if isinstance(src, IndexingMixin):
        raise ArgumentTypeError(f"scatter(reduce={reduce!r}) takes a number as src, got a Tensor of shape {src.shape}: "
                                f"use scatter_reduce(dim, index, src, {_REDUCE[reduce]!r})")
      return self.scatter_reduce(dim, index, src, _REDUCE[reduce], include_self=True)
    return _scatter(self, dim, index, src, None, True)

  def scatter_reduce(self: Tensor, dim: int, index: Tensor, src: Tensor | float, reduce: str, include_self: bool = True) -> Tensor:
    """self with the src values at each index combined by reduce: "sum", "prod", "mean", "amax" or "amin" (torch's),
    with self's own value included or not."""
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
      raise ArgumentValueError(f"scatter_reduce reduce must be 'sum', 'prod', 'mean', 'amax' or 'amin', got {reduce!r}")
    return _scatter(self, dim, index, src, reduce, include_self)

  def masked_fill(self: Tensor, mask: Tensor, value: Any) -> Tensor:
    """value where mask is True (mask broadcasts to self); value takes self's dtype."""
    if not isinstance(mask, IndexingMixin) or mask.dtype is not dtypes.bool: raise DTypeError("masked_fill mask must be a bool Tensor")
    v = value.cast(self.dtype) if isinstance(value, IndexingMixin) else type(self)(value, self.device, self.dtype)
    if v.numel() != 1: raise ShapeError(f"masked_fill value must have one element, got shape {v.shape}")
    out = mask.where(v.reshape(()), self)
    if out.shape != self.shape: raise ShapeError(f"masked_fill mask of shape {mask.shape} does not broadcast to {self.shape}")
    return out

  def masked_select(self: Tensor, mask: Tensor, size: int | None = None, fill_value: Any = 0) -> Tensor:
    """The elements where mask (broadcast with self) is True, as a 1-D tensor. Reads both on the host; with `size`, the
    first `size` of them (then fill_value) computed on the device: a static shape, so it works inside TinyJit."""
    if not isinstance(mask, IndexingMixin) or mask.dtype is not dtypes.bool: raise DTypeError("masked_select mask must be a bool Tensor")
    x, m = broadcast_pair(self, mask)
    if size is not None:
      hit = _kth_true(m.reshape(-1), size_arg(size, "masked_select size"))                  # (size, n)
      vals = hit.where(x.reshape(1, -1), x._const_like(0)).sum(1, dtype=x.dtype) if x.numel() else x.zeros(size, dtype=x.dtype)
      return (hit.any(1) if x.numel() else x.zeros(size, dtype=dtypes.bool)).where(vals, x._const_like(fill_value))
    return type(self)(x.numpy()[m.numpy()], self.device, self.dtype)

  def nonzero(self: Tensor, as_tuple: bool = False, size: int | None = None, fill_value: Any = 0) -> Tensor | tuple[Tensor, ...]:
    """The indices of the nonzero elements, (count, ndim) (or a tuple of ndim 1-D tensors). Reads self on the host; with
    `size`, the first `size` rows (then fill_value) computed on the device (default int), as masked_select."""
    if size is not None and not as_tuple:
      n, k = self.numel(), size_arg(size, "nonzero size")
      if self.ndim == 0: return self.zeros(k, 0, dtype=dtypes.default_int)
      if n == 0: return self.full((k, self.ndim), int(fill_value), dtype=dtypes.default_int)
      hit = _kth_true(self.reshape(-1).cast(dtypes.bool), k)                                   # (k, n)
      flat = iota(type(self), n, dtypes.default_int, self.device)
      cols = []
      for d in range(self.ndim):
        coord = (flat // math.prod(self.shape[d + 1:])) % self.shape[d]
        cols.append(hit.where(coord.reshape(1, n), 0).sum(1, dtype=dtypes.default_int))
      rows = type(self).stack(*cols, dim=1)
      return hit.any(1).reshape(k, 1).where(rows, int(fill_value))
    if self.ndim == 0:  # torch's: one row of no coordinates if the value is nonzero
      return self.zeros(int(bool(self.item())), 0, dtype=dtypes.int32)
    where = np.nonzero(self.numpy().astype(bool))
    dt = dtypes.int32 if max(self.shape) <= 2**31 else dtypes.int64
    if as_tuple: return tuple(type(self)(w.astype(np.int64), self.device, dt) for w in where)
    return type(self)(np.stack(where, axis=1).astype(np.int64).reshape(-1, self.ndim), self.device, dt)

def _kth_true(m: Tensor, k: int) -> Tensor:
  """(k, n) bool: row r is True at the position of the (r+1)-th True of the flat mask m (n * k work, no host read)."""
  n = m.shape[0]
  pos = m.cast(dtypes.int32).cumsum(0) - 1                                                   # the rank of each True
  return m.reshape(1, n) & (pos.reshape(1, n) == iota(type(m), k, dtypes.int32, m.device).reshape(k, 1))

def _scatter(x: Tensor, dim: int, index: Tensor, src: Any, reduce: str | None, include_self: bool) -> Tensor:
  axis = axis_arg(dim, x.shape, "scatter dim")
  if isinstance(src, IndexingMixin) and src.dtype is not x.dtype:  # torch and tinygrad refuse it too: say which to cast
    raise DTypeError(f"scatter src of dtype {src.dtype} into a tensor of dtype {x.dtype}: cast src first (src.cast({x.dtype}))")
  s = src if isinstance(src, IndexingMixin) else type(x)(src, x.device, x.dtype).reshape((1,) * index.ndim).expand(index.shape)
  _check_gather_shapes(x, axis, index, "scatter", s)
  if x.ndim == 0 or index.numel() == 0: return x
  n = x.shape[axis]
  s = s.shrink(tuple((0, i) for i in index.shape))
  # move dim last: contributions land on x's (..., n) from index's (..., k)
  xm, im, sm = (a.transpose(axis, -1) for a in (x, index, s))
  im = (im < 0).where(im + n, im) if not dtypes.is_unsigned(im.dtype) else im
  hit = im.unsqueeze(-1) == iota(type(x), n, dtypes.int32, x.device)                       # (..., k, n)
  lead = im.shape[:-1]
  k = im.shape[-1]
  if reduce is None:
    pos = iota(type(x), k, dtypes.int32, x.device).reshape(k, 1)
    last = hit.where(pos, -1)._reduce(Ops.MAX, -2, False)                         # (..., n): the last write, or -1
    val = (last.unsqueeze(-2) == pos).where(sm.unsqueeze(-1), sm._const_like(dtypes.min(sm.dtype)))._reduce(Ops.MAX, -2, False)
    got = last >= 0
  else:
    ident = {"sum": 0, "mean": 0, "prod": 1, "amax": dtypes.min(x.dtype), "amin": dtypes.max(x.dtype)}[reduce]
    spread = hit.where(sm.unsqueeze(-1), sm._const_like(ident))                    # (..., k, n)
    # amax and amin of no writes (k = 0) are the identity, which `got` then discards: min/max would refuse an empty axis
    neg = (lambda t: -t) if dtypes.is_float(spread.dtype) else (lambda t: ~t)  # noqa: E731 - reverses the order, as min does
    val = {"sum": lambda: spread.sum(-2, dtype=x.dtype), "mean": lambda: spread.sum(-2, dtype=x.dtype),
           "prod": lambda: spread.prod(-2, dtype=x.dtype), "amax": lambda: spread._reduce(Ops.MAX, -2, False),
           "amin": lambda: neg(neg(spread)._reduce(Ops.MAX, -2, False))}[reduce]()
    got = hit.any(-2)
  # x's extent beyond index's in the other dims gets nothing
  grow = tuple((0, d - i) for d, i in zip(xm.shape[:-1], lead)) + ((0, 0),)
  val, got = val.pad(grow), got.pad(grow)
  if reduce is None: out = got.where(val, xm)
  elif reduce == "mean":
    count = hit.sum(-2).pad(grow) + (1 if include_self else 0)
    total = val + xm if include_self else val
    mean = total / count if dtypes.is_float(x.dtype) else total.floordiv(count.cast(x.dtype))
    out = got.where(mean.cast(x.dtype), xm)
  else:
    combined = val if not include_self else {"sum": lambda: val + xm, "prod": lambda: val * xm, "amax": lambda: val.maximum(xm),
                                             "amin": lambda: val.minimum(xm)}[reduce]()
    out = got.where(combined.cast(x.dtype), xm)
  return out.transpose(axis, -1)
