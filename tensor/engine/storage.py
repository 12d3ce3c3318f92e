"""The memory of the tensors, owned by the engine (tensor/engine/state.py): the Buffer behind each BUFFER node, the ids that
make BUFFER nodes and tensors' own constants distinct (UNIQUE), and the live roots (what the frontend's tensors hold), which
the scheduler and the memory planner must see. Also the few facts every layer asks of a node about the data it stands for.

The frontend makes its tensors' buffers here (`new_buffer`, `buffer_uop`) and registers each tensor in `live`; the engine
reads a live holder only through its `.uop` (the root of the graph it holds), so it never needs the frontend's classes.
"""
from __future__ import annotations
import itertools, weakref
from runtime.device import Buffer
from runtime.dtype import DType, dtypes
from runtime.ops import Ops
from runtime.uop import UOp, uop

# as module names: `Ops.X` costs about 0.3 us in Python 3.11, and these run on every op and realize
_BUFFER, _UNIQUE, _DEVICE, _RESHAPE, _ASSIGN, _VOID = Ops.BUFFER, Ops.UNIQUE, Ops.DEVICE, Ops.RESHAPE, Ops.ASSIGN, dtypes.void

class Storage:
  """`buffers`: BUFFER node -> its Buffer (weak: a node nobody uses frees its memory). `live`: the objects holding a graph
  root in `.uop` (the frontend's tensors), weakly. Unique ids count from 1 in each Storage: the tensors of one storage are
  realized by engines on that storage (an engine of its own caches shares the process's: Engine(storage=ENGINE.storage))."""
  def __init__(self):
    self.buffers: weakref.WeakKeyDictionary[UOp, Buffer] = weakref.WeakKeyDictionary()
    self.live: weakref.WeakSet = weakref.WeakSet()
    self._ids = itertools.count(1)

  def new_unique(self) -> UOp:
    """A UNIQUE node no other node of this storage has: what tells two equal-looking buffers (or constants) apart."""
    return uop(_UNIQUE, _VOID, (), next(self._ids))

  def new_buffer(self, dtype: DType, size: int, device: str) -> UOp:
    """A fresh BUFFER node and its Buffer (allocated on first use)."""
    b = uop(_BUFFER, dtype, (self.new_unique(), device_node(device)), size)
    self.buffers[b] = Buffer(device, size, dtype)
    return b

  def buffer_uop(self, buf: Buffer) -> UOp:
    """A BUFFER node standing for an existing Buffer."""
    u = uop(_BUFFER, buf.dtype, (self.new_unique(), device_node(buf.device)), buf.size)
    self.buffers[u] = buf
    return u

  def live_roots(self) -> list[UOp]:
    """The graphs live holders hold, as a snapshot: other threads keep making tensors while the engine looks (copying the weak
    set's underlying set is one C call, so no other thread adds to it meanwhile; iterating the WeakSet itself is not safe)."""
    return [h.uop for r in self.live.data.copy() if (h := r()) is not None]

  def live_holders(self) -> list:
    """The live holders themselves (the frontend's tensors), as a snapshot as live_roots takes."""
    return [h for r in self.live.data.copy() if (h := r()) is not None]

def device_node(name: str) -> UOp:
  """The DEVICE node of a device name (hash-consed: one node per name)."""
  return uop(_DEVICE, _VOID, (), name)

# ---- what data a node stands for ----

def realized_buffer(u: UOp) -> UOp | None:
  """The BUFFER a realized tensor's node is (a BUFFER, or a RESHAPE of one: a reshape of stored data is the same memory);
  None for anything still to compute."""
  if u.op is _BUFFER: return u
  return u.src[0] if u.op is _RESHAPE and u.src[0].op is _BUFFER else None

def base_buffer(u: UOp) -> UOp | None:
  """The BUFFER behind stored data or an assign chain (below its RESHAPEs and ASSIGNs; None for a computed value)."""
  while u.op is _RESHAPE or u.op is _ASSIGN: u = u.src[0]
  return u if u.op is _BUFFER else None

__all__ = ["Storage", "device_node", "realized_buffer", "base_buffer"]
