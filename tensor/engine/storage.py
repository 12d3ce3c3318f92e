"""The memory of the tensors, owned by the engine (tensor/engine/state.py): the Buffer behind each BUFFER node, the ids that
make BUFFER nodes and tensors' own constants distinct (UNIQUE), and the live roots (what the frontend's tensors hold), which
the scheduler and the memory planner must see. Also the few facts every layer asks of a node about the data it stands for.

The frontend makes its tensors' buffers here (`new_buffer`, `buffer_uop`) and registers each tensor in `live`; the engine
reads a live holder only through its `.uop` (the root of the graph it holds), so it never needs the frontend's classes.
"""
from __future__ import annotations
import itertools, sys, weakref
from runtime.device import Buffer, unviewed
from runtime.dtype import DType, dtypes
from runtime.ops import Ops
from runtime.uop import UOp, uop

# as module names: `Ops.X` costs about 0.3 us in Python 3.11, and these run on every op and realize
_BUFFER, _UNIQUE, _DEVICE, _RESHAPE, _ASSIGN, _VOID = Ops.BUFFER, Ops.UNIQUE, Ops.DEVICE, Ops.RESHAPE, Ops.ASSIGN, dtypes.void

# the unique ids of every storage (see Storage)
_UNIQUE_IDS = itertools.count(1)
# spare eager outputs a storage keeps (Storage.spares): of each (nbytes, dtype, device), and of all kinds; each of at most
# POOL_BYTES (the host free list's small buffers), so they hold at most SPARES * 64 KB. Memory a spare holds counts in
# GlobalCounters.mem_used until it is used again (a Buffer that was never freed)
SPARES_PER_KIND, SPARES = 4, 64
_refcount, _weakcount, _dict_get = sys.getrefcount, weakref.getweakrefcount, dict.get

class BufferTable(weakref.WeakKeyDictionary):
  """BUFFER node -> its Buffer, weakly keyed: a node nobody uses frees its memory. An entry's weak reference is removed by a
  C-level callback (`forget`, its dict's pop) when the node dies, not by WeakKeyDictionary's Python one: each eager op's
  output dies this way, and the Python frame cost ~0.3 us of it. So the table is never iterated itself (a node dying meanwhile
  would change the dict's size): its iterators walk a snapshot; and an entry is never deleted by hand (the callback would find
  it gone). Every store goes through __setitem__, which gives the C callback (WeakKeyDictionary's setdefault and update
  give the Python one, which does as well)."""
  def __init__(self):
    super().__init__()
    self.forget = self.data.pop
  def __setitem__(self, key: UOp, value: Buffer) -> None: self.data[weakref.ref(key, self.forget)] = value
  def __delitem__(self, key): raise TypeError("a buffer table entry goes with its node: it is never deleted by hand")
  def pop(self, key, *default): raise TypeError("a buffer table entry goes with its node: it is never deleted by hand")
  def popitem(self): raise TypeError("a buffer table entry goes with its node: it is never deleted by hand")
  def clear(self): raise TypeError("a buffer table entry goes with its node: it is never deleted by hand")
  def keys(self): return iter([k for r in list(self.data) if (k := r()) is not None])
  __iter__ = keys
  def items(self): return iter([(k, v) for r, v in list(self.data.items()) if (k := r()) is not None])
  def values(self): return iter([v for r, v in list(self.data.items()) if r() is not None])

class Storage:
  """`buffers`: BUFFER node -> its Buffer (a BufferTable, weak: a node nobody uses frees its memory). `live`: weak references
  to the objects holding a graph root in `.uop` (the frontend's tensors), a plain set each reference leaves by a C-level
  callback (`live.discard`) when its object dies: nothing iterates the set itself (copy it: live_roots). The tensors of one
  storage are realized by engines on that storage (an engine of its own caches shares the process's:
  Engine(storage=ENGINE.storage)). Unique ids come from one count for the process (_UNIQUE_IDS): nodes are hash-consed for
  the process, so two storages counting apart would make one node of two of their buffers; and a new id is on no node yet,
  which lets an eager op make its output's node without a lookup (runtime/uop.py buffer_node)."""
  def __init__(self):
    self.buffers = BufferTable()
    self.live: set[weakref.ref] = set()
    self._ids = _UNIQUE_IDS
    # spare eager outputs: (nbytes, dtype, device) -> [(BUFFER node, its Buffer)], the first SPARES_PER_KIND small outputs of
    # each kind eager ops made (at most SPARES of all kinds), kept so that once nobody uses one, the next eager output of
    # its kind is that node and memory again (spare()): no node, Buffer, table entry or destructor per op
    self.spares: dict[tuple, list[tuple[UOp, Buffer]]] = {}
    self._n_spares = 0

  def keep_spare(self, kind: tuple, u: UOp, b: Buffer) -> None:
    """Keep a new eager output (BUFFER node u, its Buffer b in this storage, small, on a host device) among the spares of its
    kind, if there is room."""
    if self._n_spares < SPARES and len(ring := self.spares.setdefault(kind, [])) < SPARES_PER_KIND:
      ring.append((u, b))
      self._n_spares += 1

  def spare(self, kind: tuple) -> UOp | None:
    """A spare eager output of this kind that nothing uses any more, for the next eager output to be (the kernel writes all
    of it), or None. Unused: no reference to the node or its Buffer but the spare list's and the table's (the reference
    counts show every tensor, graph, caller or view holding either), no weak reference but the hash-consing table's and
    the buffer table's (a weak table elsewhere would see one node stand for two buffers), its UNIQUE under no other node,
    and its memory viewed by no numpy array out there (as Buffer.__del__ checks before it recycles memory)."""
    if (ring := _dict_get(self.spares, kind)) is None: return None
    for entry in ring:
      # the node: entry, `u` and the argument; two weak references. Its Buffer: the table, entry, `b`, the argument
      u, b = entry
      if _refcount(u) != 3 or _weakcount(u) != 2 or _refcount(b) != 4 or _weakcount(b) or _refcount(u.src[0]) != 2 or _weakcount(u.src[0]) != 1:
        continue
      a, raw = b._array, b._buf
      if unviewed(a, raw): return u  # its memory, viewed by no numpy array out there
    return None

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
    """The graphs live holders hold, as a snapshot: other threads keep making tensors while the engine looks (copying the set is
    one C call, so no other thread adds to it meanwhile; iterating the set itself is not safe)."""
    return [h.uop for r in self.live.copy() if (h := r()) is not None]

  def live_holders(self) -> list:
    """The live holders themselves (the frontend's tensors), as a snapshot as live_roots takes."""
    return [h for r in self.live.copy() if (h := r()) is not None]

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

__all__ = ["Storage", "BufferTable", "device_node", "realized_buffer", "base_buffer"]
