"""Helpers of rules/multi.rules: the per-device pieces of a MULTI node (a tensor over several devices, one shard on each),
the moves between layouts (whole on every device, or split on an axis) and the all-reduce, built from COPY nodes and ALU
ops. They build tensor-graph nodes only; nothing runs here.
"""
from __future__ import annotations
import math
from runtime.dtype import dtypes
from runtime.helpers import ContextVar, getenv
from runtime.ops import Ops
from runtime.uop import UOp, uop

class MultiDeviceError(RuntimeError):
  """An op on a multi-device tensor that has no per-device form (it names the op, the shapes and the sharded axis)."""

# an all-reduce of at least this many elements is a reduce-scatter then an all-gather (each device reduces one chunk and
# sends it to the others: every device sends and receives 2*(n-1)/n of the tensor, as a ring all-reduce); a smaller one
# copies every device's part to every device (one kernel and n-1 copies per device: fewer launches)
RING_THRESHOLD = getenv("RING_ALLREDUCE_THRESHOLD", 256_000)
# RING=0 never takes the reduce-scatter form, RING=2 always does (when each device gets at least one element), as tinygrad's
RING = ContextVar("RING", 1)

_VOID = dtypes.void

def device_tuple(d: UOp) -> bool: return d.arg.__class__ is tuple
def multi(srcs: list[UOp], axis: int | None) -> UOp: return uop(Ops.MULTI, srcs[0].dtype, tuple(srcs), axis)
def has_multi(srcs: tuple) -> bool: return any(s.op is Ops.MULTI for s in srcs)

def on(x: UOp, device: str) -> UOp:
  """x on `device`: x itself when it is there, else a COPY."""
  return x if x.device == device else uop(Ops.COPY, x.dtype, (x, uop(Ops.DEVICE, _VOID, (), device)))

def on_device(c: UOp, device: str) -> UOp:
  """A node whose first source is its DEVICE (a constant), on `device` instead."""
  return c.replace(src=(uop(Ops.DEVICE, _VOID, (), device),) + c.src[1:])

def piece(x: UOp, axis: int, i: int, n: int) -> UOp:
  """The i-th of n equal pieces of x along axis."""
  size = x.shape[axis] // n
  return uop(Ops.SHRINK, x.dtype, (x,), tuple((i * size, (i + 1) * size) if a == axis else (0, d) for a, d in enumerate(x.shape)))

def concat(parts: list[UOp], axis: int) -> UOp:
  """parts (on one device) side by side along axis: each padded to the whole, then added (or-ed, for bools)."""
  total, off, out = sum(p.shape[axis] for p in parts), 0, None
  for p in parts:
    arg = tuple((off, total - off - p.shape[axis]) if a == axis else (0, 0) for a in range(len(p.shape)))
    padded = uop(Ops.PAD, p.dtype, (p,), arg)
    off += p.shape[axis]
    out = padded if out is None else uop(Ops.OR if p.dtype.name == "bool" else Ops.ADD, p.dtype, (out, padded))
  return out  # type: ignore[return-value]

def gather(m: UOp, device: str) -> UOp:
  """The whole value of MULTI m on one device: the shard already there (whole on every device), or every shard copied
  there and put side by side."""
  if m.arg is None: return on(next((s for s in m.src if s.device == device), m.src[0]), device)
  return concat([on(s, device) for s in m.src], m.arg)

def local(m: UOp, axis: int | None, i: int) -> UOp:
  """What device i of m holds when m is laid out on `axis` (None: whole): its own shard, a piece of it, or a gather."""
  if m.arg == axis: return m.src[i]
  whole = m.src[i] if m.arg is None else gather(m, m.src[i].device)
  return whole if axis is None else piece(whole, axis, i, len(m.src))

def _devices(u: UOp, ms: list[UOp]) -> tuple:
  devs = tuple(s.device for s in ms[0].src)
  for m in ms[1:]:
    if tuple(s.device for s in m.src) != devs:
      raise MultiDeviceError(f"{u.op.name} of tensors on different devices: {devs} and {tuple(s.device for s in m.src)}")
  return devs

def same_devices(m: UOp, other) -> bool:
  """Whether MULTI m's shards are on the devices of `other` (a MULTI, or a tuple of names), in order."""
  return tuple(s.device for s in m.src) == (other if other.__class__ is tuple else tuple(s.device for s in other.src))

# ---- the rules' results ----

def elementwise(u: UOp) -> UOp:
  """An elementwise op of multi-device tensors: per device, every source brought to the first split source's layout."""
  ms = [s for s in u.src if s.op is Ops.MULTI]
  _devices(u, ms)
  axis = next((m.arg for m in ms if m.arg is not None), None)
  return multi([u.replace(src=tuple(local(s, axis, i) if s.op is Ops.MULTI else s for s in u.src))
                for i in range(len(ms[0].src))], axis)

def reduce_split(u: UOp, m: UOp) -> UOp:
  """A reduction over the split axis: per shard, the partial results then all-reduced."""
  return all_reduce([uop(Ops.REDUCE_AXIS, u.dtype, (s,), u.arg) for s in m.src], u.arg[0])

def _fold(op: Ops, xs: list[UOp]) -> UOp:
  out = xs[0]
  for x in xs[1:]: out = uop(op, out.dtype, (out, x))
  return out

def all_reduce(parts: list[UOp], op: Ops) -> UOp:
  """parts[i] on device i, combined by op, whole on every device. Every device combines in the same order (device 0's
  part first), so the copies are bit-identical."""
  devs, shape = [p.device for p in parts], parts[0].shape
  n, numel = len(parts), math.prod(shape)
  if numel < n or RING.value <= 0 or (RING.value == 1 and numel < RING_THRESHOLD):
    return multi([_fold(op, [on(p, d) for p in parts]) for d in devs], None)
  # reduce-scatter: chunk c of every part is combined on device c; all-gather: every device gets every reduced chunk
  flat = [uop(Ops.RESHAPE, p.dtype, (p,), (numel,)) for p in parts]
  bounds = [(c * numel // n, (c + 1) * numel // n) for c in range(n)]
  chunks = [_fold(op, [on(uop(Ops.SHRINK, f.dtype, (f,), (b,)), devs[c]) for f in flat]) for c, b in enumerate(bounds)]
  return multi([uop(Ops.RESHAPE, parts[0].dtype, (concat([on(ch, d) for ch in chunks], 0),), shape) for d in devs], None)

def split_reshape(u: UOp, m: UOp) -> UOp:
  """A reshape of a split tensor keeps the split when the split axis's outer elements stay outer and the new axis at that
  place divides evenly: then each shard is the same block of the flat data."""
  new_shape, n = u.arg, len(m.src)
  outer, acc = math.prod(m.shape[:m.arg]), [1]
  for d in new_shape: acc.append(acc[-1] * d)
  if outer not in acc[:-1] or new_shape[ax := len(acc) - 2 - acc[-2::-1].index(outer)] % n:
    raise MultiDeviceError(f"reshape {m.shape} -> {tuple(new_shape)} of a tensor split on axis {m.arg} over {n} devices moves "
                           "elements between devices: reshape it before sharding, or shard it on another axis")
  local_shape = tuple(d // n if i == ax else d for i, d in enumerate(new_shape))
  return multi([uop(Ops.RESHAPE, s.dtype, (s,), local_shape) for s in m.src], ax)

def one_shard(u: UOp, m: UOp) -> int | None:
  """The shard a SHRINK of split tensor m takes exactly (its slice of the split axis is that shard's), or None."""
  size, (b, e) = m.src[0].shape[m.arg], u.arg[m.arg]
  return b // size if b % size == 0 and e - b == size else None

def gather_rows(u: UOp, x: UOp, idx: UOp) -> UOp:
  """GATHER (x's rows at idx, shape idx.shape + x.shape[1:]) per device: at split indices, each device's rows from the
  whole table; else a table split off its rows (an embedding split on its features) gives the output split on that
  feature axis; a table split on its rows is gathered whole on each device first."""
  if idx.arg is None and x.arg is not None and x.arg >= 1: axis, xa, ia = len(idx.shape) + x.arg - 1, x.arg, None
  else: axis, xa, ia = idx.arg, None, idx.arg
  return multi([uop(Ops.GATHER, u.dtype, (local(x, xa, i), local(idx, ia, i)), u.arg) for i in range(len(x.src))], axis)

def unsupported(u: UOp) -> UOp:
  ms = [s for s in u.src if s.op is Ops.MULTI]
  raise MultiDeviceError(f"{u.op.name} has no multi-device form yet (sources of shapes {[s.shape for s in u.src]}, split on "
                         f"{[m.arg for m in ms]}): gather the tensor to one device first with .to(device)")

def multi_gradient(ctx: UOp, m: UOp) -> tuple:
  """The gradient of MULTI m's shards given ctx, m's gradient (over m's devices): each split shard gets its piece of ctx on
  its device; a tensor whole on each device is its first shard (the others are copies of it), which gets all of ctx."""
  def to(x: UOp, d: str) -> UOp: return uop(Ops.COPY, x.dtype, (x, uop(Ops.DEVICE, _VOID, (), d)))
  if m.arg is None: return (to(ctx, m.src[0].device),) + (None,) * (len(m.src) - 1)
  return tuple(to(piece(ctx, m.arg, i, len(m.src)), s.device) for i, s in enumerate(m.src))
