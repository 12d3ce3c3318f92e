"""Tensor: the user-facing array. Every op builds a lazy UOp graph (runtime/uop.py); `realize()` schedules it into
kernels (tensor/engine), lowers and runs them. First layer of the pipeline: Tensor -> UOp graph -> schedule -> kernels.
This file is the core (creation, host I/O, movement, elementwise ops, reductions, matmul); topic modules hold the rest as
mixin classes Tensor derives from (autograd.py, functional/, random.py, elementwise.py, creation.py, movement.py, scan.py,
indexing.py), and the live tensors: what the engine's realize returns is applied to them here (rewire).
"""
from __future__ import annotations
import math, sys, weakref
from typing import Any, Iterable, Sequence
import numpy as np
from runtime.device import Buffer, Device
from runtime.dtype import DType, dtypes, int_acc_dtype, least_upper_dtype, least_upper_float
from runtime.ops import GroupOp, Ops, cast_value
from runtime.helpers import LRU
from runtime.uop import UNSET as _UNSET, UOp, uop, arg_str, dim_max, dim_vars, dim_value, is_symbolic, shape_str
from rules.substitute import substitute
from runtime.rewrite import graph_rewrite
from tensor import multi, symbolic_sizes
from tensor.engine.jit import JitError
from tensor.engine.realize import realize_held, run_chain
from tensor.engine.schedule import computed as _gate, is_kernelized, kernelize_map
from tensor.engine.state import ENGINE, Engine
from tensor.engine.storage import device_node as _device, realized_buffer
from tensor.autograd import AutogradMixin, note_folded
from tensor import helpers as _helpers  # noqa: F401  (registers Context(DEFAULT_FLOAT=, DEFAULT_INT=) with Tensor)
from tensor.creation import CreationMixin
from tensor.elementwise import ElementwiseMixin
from tensor.functional import FunctionalMixin
from tensor.functional.matmul import packed_matmul, panel_tile
from tensor.errors import (TensorError, ShapeError, AxisError, DTypeError, ArgumentTypeError, ArgumentValueError, ConstantOverflowError,
                           DeviceMismatchError, flat_args, axis_arg, axes_arg, pads_arg, check_fits, to_dtype, broadcast_shape)
from tensor.indexing import IndexingMixin
from tensor.movement import MovementMixin, broadcast_pair as _broadcast
from tensor.random import RandomMixin
from tensor.scan import ScanMixin

__all__ = ["Tensor", "TensorError", "buffer_uop", "to_dtype", "broadcast_shape", "realize", "kernelize", "rewire", "live_tensors"]

# module names for what each op and each realize reads: `Ops.X` costs about 0.3 us in Python 3.11
_BUFFER, _RESHAPE, _ADD, _SUB, _MUL = Ops.BUFFER, Ops.RESHAPE, Ops.ADD, Ops.SUB, Ops.MUL
# a size: an int, or a bound Variable or an int expression of them (one TinyJit capture for every value): tensor/symbolic_sizes.py
_size_arg = symbolic_sizes.size_arg
# the frontend runs on the process's engine: its storage holds the tensors' buffers, unique ids and the live tensors, its
# chains the op chains of `x * 2 + 1` (tensor/engine/state.py)
_storage = ENGINE.storage
_new_unique, _chains, _chain_step, _buffer_chain = _storage.new_unique, ENGINE.chains, ENGINE.chains.step, ENGINE.chains.of_buffer
_new_tensor = object.__new__

def buffer_uop(buf: Buffer) -> UOp:
  """A BUFFER UOp standing for an existing Buffer."""
  return _storage.buffer_uop(buf)

def _int_dtype_for(lo: int, hi: int, what: str) -> DType:
  """The default int (int32) when [lo, hi] fits it, else int64 (as torch and numpy pick); OverflowError beyond."""
  for d in (dtypes.default_int, dtypes.int64):
    if dtypes.min(d) <= lo and hi <= dtypes.max(d): return d
  raise ConstantOverflowError(f"{what} {hi if hi > dtypes.max(dtypes.int64) else lo} does not fit int64")

def _acc_dtype(d: DType) -> DType:
  """The dtype a sum or product of `d` accumulates in: half and bfloat16 in float32 (then cast back), others in themselves."""
  return dtypes.float32 if d in (dtypes.float16, dtypes.bfloat16) else d

# Two interning tables of pure values (each entry a function of its key alone, the nodes hash-consed), so one for the
# process; the ones used last are kept. A Python number broadcast to a shape, by (its CONST node, the shape): a loop of
# `x * 0.5 + 1` builds these nodes once
_broadcasts: LRU = LRU(256)
# what `x + number` combines x with, by (the number's class, the number, x's dtype, device, shape): (the dtype the op computes
# in, the number's node broadcast to the shape); a loop of `x * 0.5 + 1` looks each number up once per op
_numbers: LRU = LRU(1024)
_refcount = sys.getrefcount
_dict_get = dict.get  # LRU.get's lookup without its Python frame (and without refreshing the entry: helpers.LRU)

# the topic mixins after FunctionalMixin: a name both define is FunctionalMixin's (gelu(approximate=)); none defines a name
# Tensor defines itself, nor one another topic mixin defines (tests/tensor/test_errors.py checks both)
class Tensor(AutogradMixin, FunctionalMixin, RandomMixin, ElementwiseMixin, CreationMixin, MovementMixin, ScanMixin, IndexingMixin):
  """A lazy n-dimensional array on a device: `Tensor([1, 2, 3])`, `Tensor.ones(2, 3)`, `(a @ b).relu().numpy()`."""
  # _trace: (uop, OpChain, leaf) while uop is a chain of ops on the realized buffer `leaf` (tensor/engine/schedule_cache.py),
  # which lets realize look its schedule up without walking the graph; None otherwise (or stale, once uop changed)
  __slots__ = ("uop", "requires_grad", "grad", "_trace", "__weakref__")
  training: bool = False

  def __init__(self, data: Any, device: str | None = None, dtype: DType | None = None, requires_grad: bool | None = None):
    self.requires_grad, self.grad, self._trace = requires_grad, None, None
    if data.__class__ is UOp and device is None and dtype is None:  # an op's result (the common call): nothing to convert
      self.uop = data
      _live_add(_ref(self, _live_remove))
      return
    dev = Device.canonicalize(device) if device.__class__ is not tuple else multi.canonical_devices(device)
    if dtype is not None: dtype = to_dtype(dtype)
    if isinstance(data, UOp):  # a graph node: on `device` and of `dtype` where they are given (a copy, a cast)
      x = Tensor(data)
      self.uop = x.to(dev).cast(dtype or x.dtype).uop if device is not None else x.cast(dtype or x.dtype).uop
    elif isinstance(data, Tensor): self.uop = data.to(dev).cast(dtype or data.dtype).uop
    elif isinstance(data, (bool, int, float)) and not isinstance(data, np.generic):
      if dtype is not None: check_fits(data, dtype, "value")
      dt = dtype or (_int_dtype_for(data, data, "value") if type(data) is int else dtypes.from_py(data))
      # a tensor made from a number is a tensor of its own (UNIQUE): two Tensor.ones(n) are two parameters, realized into two
      # buffers and differentiated apart; a number an op combines with (x * 2.0) stays a plain constant, shared by every use
      self.uop = uop(Ops.CONST, dt, (_device(dev), _new_unique()), cast_value(data, dt))
    else:
      arr = _to_numpy(data, dtype)
      dt = dtype or dtypes.from_numpy(arr.dtype)
      host = Buffer("PYTHON", arr.size, dt, arr.astype(dtypes.to_numpy(dt), copy=False) if dt is not dtypes.bfloat16 else _to_bf16(arr))
      u = _storage.buffer_uop(host)
      if dev != "PYTHON": u = uop(Ops.COPY, dt, (u, _device(dev)))
      if arr.shape != (arr.size,): u = uop(Ops.RESHAPE, dt, (u,), arr.shape)
      self.uop = u
    _live_add(_ref(self, _live_remove))

  # ---- properties ----
  @property
  def shape(self) -> tuple[int, ...]: return self.uop.shape  # type: ignore[return-value]
  @property
  def dtype(self) -> DType: return self.uop.dtype
  @property
  def device(self) -> str: return self.uop.device  # type: ignore[return-value]
  @property
  def ndim(self) -> int: return len(self.shape)
  def numel(self) -> int: return math.prod(dim_value(d) for d in self.shape)  # a symbolic size counts at its bound value
  def element_size(self) -> int: return self.dtype.itemsize
  def size(self, dim: int | None = None):
    if dim is None: return self.shape
    if self.ndim == 0: raise AxisError(f"size({dim}) of a 0-d tensor: it has no dimensions")
    return self.shape[axis_arg(dim, self.shape)]
  def __len__(self) -> int:
    if not self.shape: raise ArgumentTypeError("len() of a 0-d tensor")
    return self.shape[0]
  # by identity (== is elementwise): object's own hash, a C slot, so the live set's weakref of every new tensor calls no Python
  __hash__ = object.__hash__
  # pickled and copied without the op-chain trace: it holds engine state (compiled programs) and is rebuilt by the next op
  def __getstate__(self) -> tuple: return (None, {"uop": self.uop, "requires_grad": self.requires_grad, "grad": self.grad})
  def __setstate__(self, state: tuple) -> None:
    for k, v in state[1].items(): setattr(self, k, v)
    self._trace = None
  def __bool__(self) -> bool:
    if self.numel() != 1: raise ShapeError(f"the truth value of a tensor with {self.numel()} elements is ambiguous: use .any() or .all()")
    return bool(self.item())
  def __repr__(self) -> str:  # as the seeds print it: <Tensor <UOp CPU (4,) int (Ops.COPY, None)> on CPU with grad None>
    u = self.uop
    shape, arg = self.shape, repr(u.arg)
    if any(d.__class__ is UOp for d in shape): shape, arg = shape_str(shape), arg_str(u.arg)  # (n=5, 3): not the Variable's graph
    return f"<Tensor <UOp {self.device} {shape} {self.dtype.name} ({u.op!r}, {arg})> on {self.device} with grad {self.grad!r}>"

  # ---- creation ----
  @staticmethod
  def full(shape: Sequence[int] | int, fill_value: Any, dtype: DType | None = None, device: str | None = None, **kwargs) -> Tensor:
    shape = symbolic_sizes.shape_arg((shape,), "full shape")  # a size may be a bound Variable or an expression of them (2*n)
    if isinstance(fill_value, Tensor): raise ArgumentTypeError("full takes a Python number as fill_value, not a Tensor: use expand")
    return Tensor(Tensor(fill_value, device, dtype).reshape((1,) * len(shape)).expand(shape).uop, **kwargs)
  @staticmethod
  def zeros(*shape, dtype: DType | None = None, device: str | None = None, **kw) -> Tensor:
    return Tensor.full(symbolic_sizes.shape_arg(shape, "zeros shape"), 0, dtype or dtypes.default_float, device, **kw)
  @staticmethod
  def ones(*shape, dtype: DType | None = None, device: str | None = None, **kw) -> Tensor:
    return Tensor.full(symbolic_sizes.shape_arg(shape, "ones shape"), 1, dtype or dtypes.default_float, device, **kw)
  @staticmethod
  def empty(*shape, dtype: DType | None = None, device: str | None = None, **kw) -> Tensor:
    shape = symbolic_sizes.shape_arg(shape, "empty shape")
    dt, dev = to_dtype(dtype or dtypes.default_float), Device.canonicalize(device)
    n = math.prod(dim_max(d) for d in shape)  # a symbolic shape's storage holds its largest size; the first numel() elements are the data
    u = _storage.new_buffer(dt, n, dev)
    return Tensor(uop(Ops.RESHAPE, dt, (u,), shape) if len(shape) != 1 else u, **kw)
  @staticmethod
  def from_blob(ptr: int, shape: tuple[int, ...], dtype: DType | None = None, device: str | None = None, **kw) -> Tensor:
    """A tensor over memory at host address `ptr` that the caller owns and keeps alive as long as the tensor (tinygrad's):
    nothing is copied, kernels read the memory as it is when they run, and it is never freed here. Host devices (CPU)."""
    shape = symbolic_sizes.shape_arg(shape, "from_blob shape")
    if any(d.__class__ is not int for d in shape): raise ArgumentTypeError(f"from_blob shape {shape}: sizes must be ints")
    if not isinstance(ptr, int) or isinstance(ptr, bool): raise ArgumentTypeError(f"from_blob takes an address (int), got {type(ptr).__name__}")
    dt, dev = to_dtype(dtype or dtypes.default_float), Device.canonicalize(device)
    u = buffer_uop(Buffer.borrow(dev, ptr, math.prod(shape), dt))
    return Tensor(uop(Ops.RESHAPE, dt, (u,), shape) if len(shape) != 1 else u, **kw)
  @staticmethod
  def arange(start: int | float, stop: int | float | None = None, step: int | float = 1, dtype: DType | None = None,
             device: str | None = None, **kw) -> Tensor:
    """[start, start + step, ...) below stop (above it for a negative step). Ints give int32, or int64 when the values need it."""
    if stop is None: start, stop = 0, start
    for name, v in (("start", start), ("stop", stop), ("step", step)):
      if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise ArgumentTypeError(f"arange {name} must be a number, got {type(v).__name__} {arg_str(v)}")
      if not math.isfinite(v): raise ArgumentValueError(f"arange {name} must be finite, got {v}")
    if step == 0: raise ArgumentValueError("arange step must not be zero")
    n = max(0, math.ceil((stop - start) / step))
    ints = all(isinstance(v, (int, np.integer)) for v in (start, stop, step))
    last = start + (n - 1) * step if n else start
    if dtype is not None:
      dt = to_dtype(dtype)
      if ints: check_fits(min(start, last), dt, "arange value"); check_fits(max(start, last), dt, "arange value")  # noqa: E702
    else: dt = _int_dtype_for(min(start, last), max(start, last), "arange value") if ints else dtypes.default_float
    # constant data: made on the host, like a list literal (exact: ints in int64, floats in float64, then cast)
    vals = np.arange(n, dtype=np.int64) * int(step) + int(start) if ints else np.arange(start, stop, step, dtype=np.float64)[:n]
    return Tensor(vals, device, dt, **kw)
  def full_like(self, fill_value: Any, dtype: DType | None = None, device: str | None = None, **kw) -> Tensor:
    return self._made_like(device, lambda d: Tensor.full(self.shape, fill_value, dtype or self.dtype, d, **kw))
  def _made_like(self, device, make) -> Tensor:
    """make(device) on `device` (default: self's); like a tensor over several devices, laid out as it: made on the first
    and split on its axis (or whole on each). Other devices than its own are refused: the layout would be a guess."""
    if self.device.__class__ is not tuple: return make(device or self.device)
    if device is not None and not isinstance(device, str) and multi.canonical_devices(device) != self.device:
      raise DeviceMismatchError(f"a tensor like one on {self.device} can't be made on {tuple(device)}: make it on one device and shard it")
    if isinstance(device, str): return make(device)
    return make(self.device[0]).shard(self.device, self.uop.axis)
  def const_like(self, value: Any) -> Tensor:
    """`value` in self's shape, dtype and device(s) (tinygrad's name for full_like of a number)."""
    return self.full_like(value)
  def zeros_like(self, **kw) -> Tensor: return self.full_like(0, **kw)
  def ones_like(self, **kw) -> Tensor: return self.full_like(1, **kw)
  def empty_like(self, **kw) -> Tensor:
    return Tensor.empty(*self.shape, dtype=kw.get("dtype") or self.dtype, device=kw.get("device") or self.device)

  # ---- realizing and host I/O ----
  def kernelize(self, *others: Tensor) -> Tensor:
    """Schedule this tensor (and others) into kernels, leaving KERNEL/ASSIGN nodes in the graph; nothing runs yet."""
    kernelize([self, *others])
    return self
  def realize(self, *others: Tensor) -> Tensor:
    """Compute this tensor (and others): schedule, compile and run the kernels. Returns self."""
    if others:
      realize([self, *others])
      return self
    # realize() as below, for one tensor: the eager path
    u = self.uop
    if (tr := self._trace) is None or tr[0] is not u:
      with ENGINE.lock:
        if (becomes := realize_held([u], ENGINE)): rewire(becomes)
      return self
    with ENGINE.lock:
      if (n := run_chain(tr[1], tr[2], ENGINE)) is None:  # an op chain whose prepared launches don't apply: the full path
        if (becomes := realize_held([u], ENGINE, (tr[1], tr[2]))): rewire(becomes)
        return self
      # u is referenced by this tensor, its trace, `u` and getrefcount's argument alone: no other tensor is u or has a graph
      # that reads u (that would hold it), so rewire would point this tensor at n and nothing else; it need not look at the
      # live tensors (their number, which grows with what the program keeps, would be paid on every eager op)
      if _refcount(u) == 4: self.uop, self._trace = n, None
      else: rewire({u: n})
    return self
  def _buffer(self) -> tuple[Buffer, UOp]:
    # a tensor still computing is read through a contiguous copy: it keeps its graph, so it can be differentiated after
    # its values are read (the seeds print y.item() before loss.gradient(x)), as tinygrad's numpy() leaves it
    buffers = _storage.buffers
    if (base := realized_buffer(self.uop)) is None or base not in buffers: base = realized_buffer(self.contiguous().realize().uop)
    return buffers[base], base  # type: ignore[index]
  def is_realized(self) -> bool:
    """Whether this tensor is a whole realized buffer (what assign and __setitem__ write into)."""
    return realized_buffer(self.uop) is not None
  def numpy(self) -> np.ndarray:
    """The values, as a numpy array of numpy's type for this dtype (bfloat16 as float32)."""
    if ENGINE.capturing:  # a TinyJit capture: the replay would not read them again, so the value read now would be baked in
      raise JitError(f"reading a tensor's values ({shape_str(self.shape)} {self.dtype}: .numpy(), .item(), .tolist()) inside a TinyJit capture: "
                     "a replay would reuse this call's value. Return the tensor from the jitted function and read it outside")
    if self.numel() == 0: return np.zeros(self.shape, dtype=np.float32 if self.dtype is dtypes.bfloat16 else dtypes.to_numpy(self.dtype))
    if self.uop.device.__class__ is tuple: return self.to(self.device[0]).numpy()  # on several devices: gathered on the first
    buf, base = self._buffer()
    arr = buf.numpy()
    # a symbolic shape's storage is sized for the Variables' maxima: the first numel() elements are the data
    if arr.size > (n := self.numel()): arr = arr[:n]
    return arr.reshape(tuple(dim_value(d) for d in self.shape))
  def __array__(self, dtype=None, copy=None) -> np.ndarray:
    a = self.numpy()
    return a if dtype is None else a.astype(dtype)
  def tolist(self) -> Any: return self.numpy().tolist()
  def item(self) -> Any:
    if self.numel() != 1: raise ShapeError(f"item() needs a tensor with one element, this one has shape {self.shape}")
    return self.numpy().reshape(()).item()
  def data(self) -> memoryview:
    """The values as a memoryview of host memory in this dtype's format (tinygrad's; bfloat16 as float32), shaped."""
    return memoryview(np.require(self.numpy(), requirements="C"))  # numpy's buffer: its format ('f', 'e', '?', ...) and shape
  def replace(self, x: Tensor) -> Tensor:
    """This tensor now stands for x (same shape; dtype and device may differ): no data is written, so nothing else that
    reads this tensor's old storage changes (unlike assign)."""
    if not isinstance(x, Tensor): raise ArgumentTypeError(f"replace takes a Tensor, got {type(x).__name__}")
    if x.shape != self.shape: raise ShapeError(f"replace of shape {x.shape} for a tensor of shape {self.shape}")
    self.uop, self._trace = x.uop, None
    return self
  def to(self, device: str | tuple[str, ...] | None) -> Tensor:
    """This tensor on `device` (lazy: a COPY node); a tuple of devices puts the whole of it on each (tensor/multi.py),
    and a tensor on several devices to one device is gathered there."""
    if device.__class__ is tuple: return Tensor(multi.to_devices(self.uop, device))
    dev = Device.canonicalize(device)
    if dev == self.device: return self
    # the scheduler makes the source of a COPY contiguous when it is not a whole buffer already
    return Tensor(uop(Ops.COPY, self.dtype, (self.uop, _device(dev))))
  def to_(self, device: str | tuple[str, ...] | None) -> Tensor:
    """to, in place (tinygrad's): this tensor, and its gradient if it has one, now stand for their copies on `device`."""
    moved = self.to(device)
    if self.grad is not None: self.grad.replace(self.grad.to(device))
    self.uop, self._trace = moved.uop, None
    return self
  def shard(self, devices: tuple[str, ...], axis: int | None = None) -> Tensor:
    """This tensor split on `axis` over devices, an equal piece on each (axis=None: the whole of it on each): tensor/multi.py."""
    return Tensor(multi.shard(self.uop, devices, axis), requires_grad=self.requires_grad)
  def shard_like(self, y: Tensor) -> Tensor:
    """This tensor laid out as y: on y's device, or split over y's devices on y's axis."""
    return Tensor(multi.shard_like(self.uop, y.uop))
  def shard_(self, devices: tuple[str, ...], axis: int | None = None) -> Tensor:
    """shard, in place: this tensor now stands for its shards."""
    self.uop, self._trace = self.shard(devices, axis).uop, None
    return self
  def contiguous(self) -> Tensor: return Tensor(uop(Ops.CONTIGUOUS, self.dtype, (self.uop,)))
  def clone(self) -> Tensor:
    """A copy with its own storage (a kernel copies the values into a new buffer; x * 1 keeps -0.0 and nan), and a copy of
    the gradient when there is one (tinygrad's; torch's clone has none: it is a new node of the graph)."""
    out = (self & True if self.dtype is dtypes.bool else self * 1).contiguous()
    if self.grad is not None: out.grad = self.grad.clone()
    return out
  def detach(self) -> Tensor: return Tensor(uop(Ops.DETACH, self.dtype, (self.uop,)))
  def assign(self, x: Tensor | Any) -> Tensor:
    """Write x into this tensor's storage (its shape and dtype must match); returns self, now holding x's values."""
    if not isinstance(x, Tensor):  # a number fills; an array or a list is a tensor of self's dtype (torch weights: w.assign(t.numpy()))
      x = Tensor(x, self.device, self.dtype) if isinstance(x, (np.ndarray, list, tuple)) else self.full_like(x)
    if x.shape != self.shape: raise ShapeError(f"assign of shape {x.shape} into a tensor of shape {self.shape}")
    if x.dtype is not self.dtype: raise DTypeError(f"assign of dtype {x.dtype} into a tensor of dtype {self.dtype}")
    if x.device != self.device: raise DeviceMismatchError(f"assign from {x.device} into a tensor on {self.device}")
    if realized_buffer(self.uop) is None:  # a view of stored data (t[1:], t.T): the write goes into the stored tensor
      from tensor.indexing import view_chain, write_through
      if (chain := view_chain(self)) is not None:
        write_through(self, chain, x)
        return self
      if self.uop.device.__class__ is tuple and not multi.stored(self.uop): self.realize()  # shards to write into (tensor/multi.py)
      elif self.uop.device.__class__ is not tuple and all(d.__class__ is int for d in self.shape):
        # a lazy tensor (a layer's Tensor.uniform weight) takes the new value whole: storage of its own to write into,
        # as load_state_dict gives it (tensors that read its old graph keep reading that)
        self.uop = Tensor.empty(*self.shape, dtype=self.dtype, device=self.device).uop
    self.uop, self._trace = uop(Ops.ASSIGN, self.dtype, (self.uop, x.uop)), None
    return self

  # ---- movement (the six movement ops; the rest build on them in movement.py) ----
  def _mv(self, op: Ops, arg: Any) -> Tensor: return Tensor(uop(op, self.dtype, (self.uop,), arg))
  def reshape(self, *shape) -> Tensor:
    """A new shape with the same elements; one size may be -1 (inferred), None keeps that dimension."""
    given = flat_args(shape)
    shape = tuple(self.shape[i] if s is None and i < self.ndim else _size_arg(s, "reshape", given) for i, s in enumerate(given))
    if any(is_symbolic(s) for s in shape + self.shape): return self._symbolic_reshape(shape, given)
    if any(s < -1 for s in shape): raise ArgumentValueError(f"reshape {given!r}: sizes must be >= 0, or -1 for one inferred size")
    if shape.count(-1) > 1: raise ArgumentValueError(f"reshape to {shape}: only one dimension can be -1")
    if -1 in shape:
      rest = math.prod(s for s in shape if s != -1)
      if rest == 0 or self.numel() % rest: raise ShapeError(f"can't reshape {self.shape} to {shape}")
      shape = tuple(self.numel() // rest if s == -1 else s for s in shape)
    if math.prod(shape) != self.numel(): raise ShapeError(f"can't reshape a tensor of shape {self.shape} ({self.numel()} elements) to {shape}")
    return self if shape == self.shape else self._mv(Ops.RESHAPE, shape)
  def _symbolic_reshape(self, shape: tuple, given) -> Tensor:
    # a bound Variable among the sizes (one TinyJit capture for every value): the sizes are checked at the bound values
    if sum(1 for s in shape if s.__class__ is int and s == -1) > 1:
      raise ArgumentValueError(f"reshape to {shape_str(shape)}: only one dimension can be -1")
    if -1 in shape:  # inferred: the element count (an expression) divided by the other sizes
      rest = symbolic_sizes.numel([s for s in shape if not (s.__class__ is int and s == -1)])
      total = symbolic_sizes.numel(self.shape)
      if rest.__class__ is int and rest == 0: raise ShapeError(f"can't reshape {shape_str(self.shape)} to {shape_str(shape)}")
      inferred = total // rest if total.__class__ is int and rest.__class__ is int else (total // rest).simplify()
      shape = tuple(inferred if s.__class__ is int and s == -1 else s for s in shape)
    if any(dim_value(s) < 0 or (is_symbolic(s) and s.vmin < 0) for s in shape):
      raise ArgumentValueError(f"reshape {symbolic_sizes.arg_str(given)}: sizes must be >= 0 (for every value of their Variables)")
    if math.prod(dim_value(s) for s in shape) != self.numel():
      raise ShapeError(f"can't reshape a tensor of shape {shape_str(self.shape)} ({self.numel()} elements) to {shape_str(shape)} "
                       f"({math.prod(dim_value(s) for s in shape)} elements at the bound values)")
    return self if shape == self.shape else self._mv(Ops.RESHAPE, shape)
  def view(self, *shape) -> Tensor: return self.reshape(*shape)
  def permute(self, *order) -> Tensor:
    order = tuple(axis_arg(o, self.shape, "permute axis") for o in flat_args(order))
    if sorted(order) != list(range(self.ndim)):
      raise ShapeError(f"permute order {order} is not a permutation of the {self.ndim} axes of {self.shape}")
    return self if order == tuple(range(self.ndim)) else self._mv(Ops.PERMUTE, order)
  def transpose(self, dim0: int = 1, dim1: int = 0) -> Tensor:
    order = list(range(self.ndim))
    a, b = axis_arg(dim0, self.shape), axis_arg(dim1, self.shape)
    order[a], order[b] = order[b], order[a]
    return self.permute(order)
  @property
  def T(self) -> Tensor: return self.transpose() if self.ndim >= 2 else self
  def expand(self, *shape) -> Tensor:
    """Broadcast size-1 dimensions (and new leading ones) to `shape`; -1 keeps a dimension."""
    given = flat_args(shape)
    sizes = tuple(_size_arg(s, "expand", given) for s in given)
    if any(not is_symbolic(s) and s < -1 for s in sizes): raise ArgumentValueError(f"expand {given!r}: sizes must be >= 0, or -1 to keep one")
    if len(sizes) < self.ndim: raise ShapeError(f"can't expand shape {self.shape} to fewer dimensions {sizes}")
    lead = len(sizes) - self.ndim
    if any(s == -1 for s in sizes[:lead]): raise ArgumentValueError(f"expand {given!r}: a new leading dimension can't be -1")
    shape = tuple(self.shape[i - lead] if not is_symbolic(s) and s == -1 else s for i, s in enumerate(sizes))
    x = self.reshape((1,) * lead + self.shape) if lead else self
    for d, s in zip(x.shape, shape):
      if d != s and d != 1: raise ShapeError(f"can't expand shape {self.shape} to {shape}: only size-1 dimensions expand")
    return x if shape == x.shape else x._mv(Ops.EXPAND, shape)
  def pad(self, padding: Sequence, mode: str = "constant", value: float | None = None) -> Tensor:
    """padding: ((before, after), ...) per axis (None for an axis or a width is 0), or a flat torch-style tuple (last axis
    first). Negative widths crop. mode: "constant" (fill with value, default 0), "reflect", "replicate" or "circular"."""
    from tensor.movement import pad_mode
    if not isinstance(mode, str): raise ArgumentTypeError(f"pad mode must be a string, got {mode!r}: the fill is the keyword value=")
    pairs = pads_arg(padding, self.shape, symbolic=mode == "constant")
    if any(is_symbolic(w) for p in pairs for w in p): return self._symbolic_pad(pairs, padding, value)
    if mode != "constant":
      if value not in (None, 0): raise ArgumentValueError(f"pad value={value!r} is only for mode 'constant', not {mode!r}")
      return pad_mode(self, pairs, mode)
    value = 0 if value is None else value
    if not isinstance(value, (bool, int, float, np.integer, np.floating)):
      raise ArgumentTypeError(f"pad value must be a number, got {type(value).__name__} {value!r}")
    check_fits(value, self.dtype, "pad value")
    if any(b < 0 or a < 0 for b, a in pairs):  # negative padding crops
      x = self.shrink(tuple((-min(b, 0), d + min(a, 0)) for (b, a), d in zip(pairs, self.shape)))
      return x.pad([(max(b, 0), max(a, 0)) for b, a in pairs], value=value)
    if all(p == (0, 0) for p in pairs): return self
    if self.numel() == 0:  # nothing to move: the result is all padding
      out = Tensor.full(tuple(d + b + a for d, (b, a) in zip(self.shape, pairs)), value, self.dtype, self.device)
      note_folded(out.uop, self.uop)
      return out
    out = self._mv(Ops.PAD, tuple(pairs))
    if value == 0 and not (isinstance(value, float) and math.copysign(1, value) < 0): return out
    mask = Tensor.ones(*self.shape, dtype=dtypes.bool, device=self.device)._mv(Ops.PAD, tuple(pairs))
    return mask.where(out, self._const_like(value))  # the fill takes the tensor's dtype, as numpy's constant_values
  def _symbolic_pad(self, pairs: list, given: Any, value: Any) -> Tensor:
    """A constant pad whose widths are bound Variables or expressions of them (the inverse of a shrink by a Variable: a
    KV cache's t[:, :, sp:sp+1] = v): each width must be >= 0 at the bound values (a symbolic crop is a shrink)."""
    pairs = [tuple(symbolic_sizes.size_arg(w, "pad width", given) for w in p) for p in pairs]
    for axis, p in enumerate(pairs):
      for w in p:
        if dim_value(w) < 0:
          raise ArgumentValueError(f"padding {arg_str(tuple(given))}: the width {arg_str(w)} on axis {axis} is negative; a pad by a "
                                   "Variable takes widths >= 0 (shrink to crop)")
        # negative for another value (the write t[:, sp:sp+6] = v past the end): checked at each TinyJit replay, as the shrink
        if w.__class__ is not int and w.vmin < 0: symbolic_sizes.guard(w, f"padding {arg_str(tuple(given))}: a width on axis {axis} is negative")
    if any(dim_value(d) == 0 for d in self.shape):
      raise ArgumentValueError(f"padding {arg_str(tuple(given))} of an empty tensor of shape {shape_str(self.shape)} by a Variable")
    out = self._mv(Ops.PAD, tuple(pairs))
    if value is None or (value == 0 and not (isinstance(value, float) and math.copysign(1, value) < 0)): return out
    check_fits(value, self.dtype, "pad value")
    mask = Tensor.ones(*self.shape, dtype=dtypes.bool, device=self.device)._mv(Ops.PAD, tuple(pairs))
    return mask.where(out, self._const_like(value))
  def shrink(self, arg: Sequence) -> Tensor:
    """Keep [begin, end) of each axis: ((begin, end) or None, ...), one entry per axis."""
    if not isinstance(arg, (tuple, list)): raise ArgumentTypeError(f"shrink takes a tuple of (begin, end) pairs, got {type(arg).__name__}")
    if len(arg) != self.ndim: raise ShapeError(f"shrink {tuple(arg)} has {len(arg)} entries for a tensor of shape {self.shape}")
    pairs = tuple((0, d) if p is None else (_size_arg(p[0], "shrink begin"), _size_arg(p[1], "shrink end")) for p, d in zip(arg, self.shape))
    if any(is_symbolic(x) for p in pairs for x in p) or any(is_symbolic(d) for d in self.shape):
      symbolic_sizes.check_shrink(pairs, self.shape, arg)  # x.shrink(((0, n), None)) with n a bound Variable: x[:n]
    elif any(not 0 <= b <= e <= d for (b, e), d in zip(pairs, self.shape)): raise ShapeError(f"shrink {tuple(arg)} does not fit shape {self.shape}")
    return self if all(p == (0, d) for p, d in zip(pairs, self.shape)) else self._mv(Ops.SHRINK, pairs)
  def flip(self, *axis) -> Tensor:
    given = [axis_arg(a, self.shape) for a in flat_args(axis)]
    if len(set(given)) != len(given): raise ArgumentValueError(f"flip axes {flat_args(axis)} name an axis twice (shape {self.shape})")
    axes = set(given)
    return self._mv(Ops.FLIP, tuple(i in axes for i in range(self.ndim))) if axes and self.ndim else self
  def squeeze(self, dim: int | Sequence[int] | None = None) -> Tensor:
    if dim is None: return self.reshape(tuple(d for d in self.shape if d != 1))
    axes = {axis_arg(a, self.shape) for a in (dim if isinstance(dim, (tuple, list)) else (dim,))}
    if self.ndim == 0: return self
    return self.reshape(tuple(d for i, d in enumerate(self.shape) if not (i in axes and d == 1)))
  def unsqueeze(self, dim: int) -> Tensor:
    a = axis_arg(dim, self.shape, extra=1)
    return self.reshape(self.shape[:a] + (1,) + self.shape[a:])
  def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    if self.ndim == 0: return self.reshape(1)
    s, e = axis_arg(start_dim, self.shape), axis_arg(end_dim, self.shape)
    if s > e: raise ArgumentValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim} (shape {self.shape})")
    return self.reshape(self.shape[:s] + (math.prod(self.shape[s:e + 1]),) + self.shape[e + 1:])
  def __getitem__(self, idx) -> Tensor:
    from tensor.indexing import getitem
    return getitem(self, idx)
  def __setitem__(self, idx, value) -> None:
    from tensor.indexing import setitem
    setitem(self, idx, value)

  # ---- elementwise ----
  def _const_like(self, v: Any, dtype: DType | None = None) -> Tensor:
    dt = dtype or self.dtype
    return Tensor(uop(Ops.CONST, dt, (_device(self.device),), cast_value(v, dt)))
  def _operands(self, other: Any, reverse: bool = False) -> tuple[Tensor, Tensor]:
    if isinstance(other, Tensor):
      if other.device != self.device:
        raise DeviceMismatchError(f"operands on different devices: {self.device} and {other.device} (shapes {self.shape} and {other.shape})")
      dt = least_upper_dtype(self.dtype, other.dtype)
      a, b = self.cast(dt), other.cast(dt)
    else:
      if isinstance(other, UOp): return self._bound_variable_operands(other, reverse)
      if not isinstance(other, (bool, int, float, np.generic)): raise ArgumentTypeError(f"can't combine a Tensor with {type(other).__name__}")
      a, c = self._number_operand(other.item() if isinstance(other, np.generic) else other)
      return (Tensor(c), a) if reverse else (a, Tensor(c))
    a, b = _broadcast(a, b)
    return (b, a) if reverse else (a, b)
  def _number_operand(self, other: bool | int | float) -> tuple[Tensor, UOp]:
    """(this tensor in the dtype an op with a Python number computes in, the number's node broadcast to its shape)."""
    # a Python number adapts to the tensor, except that a float meeting an int tensor makes it float (as in torch);
    # an int that does not fit the tensor's int type is an OverflowError, as in numpy 2
    dt = self.dtype
    if isinstance(other, float):
      if not dtypes.is_float(dt): dt = dtypes.default_float
    elif type(other) is int and dt is dtypes.bool: dt = _int_dtype_for(other, other, "constant")  # type: ignore[arg-type]
    check_fits(other, dt)
    u = self.uop
    c = uop(Ops.CONST, dt, (_device(u.device),), cast_value(other, dt))  # type: ignore[arg-type]
    shape = u.shape
    if not shape: return (self if dt is u.dtype else self.cast(dt)), c
    if (b := _dict_get(_broadcasts, (c, shape))) is None:
      # the number broadcast to the tensor's shape, built as the nodes reshape and expand would build; kept for the next
      # `x + 1` of this shape, which then makes no new nodes
      b = uop(Ops.RESHAPE, dt, (c,), (1,) * len(shape))
      if any(d != 1 for d in shape): b = uop(Ops.EXPAND, dt, (b,), shape)
      _broadcasts[(c, shape)] = b
    return (self if dt is u.dtype else self.cast(dt)), b
  def _bound_variable_operands(self, v: UOp, reverse: bool) -> tuple[Tensor, Tensor]:
    """`x * Variable("n", 1, 64).bind(8)`: the variable's value, broadcast; kernels read it as an argument (TinyJit replays
    them with each call's value)."""
    if not dtypes.is_int(v.dtype) or any(x.op is not Ops.BIND for x in dim_vars(v)) or v.op not in GroupOp.ALU | {Ops.BIND}:
      raise ArgumentTypeError(f"a Tensor op takes Tensors, Python numbers, bound Variables or int expressions of them, not a UOp {v.op}")
    dt = self.dtype if self.dtype is not dtypes.bool else v.dtype
    a, shape = self, self.shape
    c = v if dt is v.dtype else uop(Ops.CAST, dt, (v,))
    if shape:
      c = uop(Ops.RESHAPE, dt, (c,), (1,) * len(shape))
      if any(d != 1 for d in shape): c = uop(Ops.EXPAND, dt, (c,), shape)
    return (Tensor(c), a) if reverse else (a, Tensor(c))
  def _alu(self, op: Ops, *srcs: Tensor, dtype: DType | None = None) -> Tensor:
    return _tensor(uop(op, dtype or self.dtype, (self.uop, *(s.uop for s in srcs))))
  def _binop(self, op: Ops, other: Any, reverse: bool = False, out: DType | None = None) -> Tensor:
    if other.__class__ is float or other.__class__ is int:  # `x + 1`, the common case: no Tensor for the number
      u = self.uop
      # a number met before with a tensor of this dtype, device and shape: its broadcast node (a zero float is not looked up:
      # 0.0 == -0.0 as keys, and they are two constants). The node's device and shape read from its slots when known (the
      # properties' Python frames cost ~0.1 us each, on every op)
      if (device := u._device) is _UNSET: device = u.device
      if (shape := u._shape) is _UNSET: shape = u.shape
      key = (other.__class__, other, u.dtype, device, shape)
      if (known := _dict_get(_numbers, key)) is None:
        a, c = self._number_operand(other)
        if other or other.__class__ is int: _numbers[key] = (a.uop.dtype, c)
      else: a, c = self if known[0] is u.dtype else self.cast(known[0]), known[1]
      r = uop(op, out or a.uop.dtype, (c, a.uop) if reverse else (a.uop, c))
      # the result has the tensor's shape and device: known, so the next op's lookup needs no walk to find them (with_facts)
      if r._shape is _UNSET: r._shape = shape
      if r._device is _UNSET: r._device = device
      t = _new_tensor(Tensor)  # _tensor(r), inline: this runs on every eager op
      t.uop, t.requires_grad, t.grad, t._trace = r, None, None, None
      _live_add(_ref(t, _live_remove))
      # a chain of such ops on a realized buffer: the result's chain is the operand's and this op (its realize needs no walk);
      # the chains' table read with dict.get (Chains.step, Chains.of_buffer on a miss)
      if (tr := self._trace) is not None and tr[0] is u: parent, leaf = tr[1], tr[2]
      elif u.op is _BUFFER:
        if (parent := _dict_get(_chains, (u.dtype, u.arg, u.src[1].arg))) is None: parent = _buffer_chain(u)
        leaf = u
      else: return t
      if (ch := _dict_get(_chains, (parent, op, reverse, out, c))) is None: ch = _chain_step(parent, op, reverse, out, c)
      t._trace = (r, ch, leaf)
      return t
    a, b = self._operands(other, reverse)
    return a._alu(op, b, dtype=out)

  def add(self, x, reverse=False) -> Tensor: return self._binop(_ADD, x, reverse)
  def sub(self, x, reverse=False) -> Tensor:
    if self.dtype is dtypes.bool and (x.__class__ is bool or isinstance(x, Tensor) and x.dtype is dtypes.bool):
      raise DTypeError("subtracting bools is not defined (torch and numpy refuse it too): use ^ or logical_xor for a difference of masks, "
                       "~ or logical_not to invert one, or cast to an int first")
    return self._binop(_SUB, x, reverse)
  def mul(self, x, reverse=False) -> Tensor: return self._binop(_MUL, x, reverse)
  def div(self, x, reverse=False, rounding_mode: str | None = None) -> Tensor:
    """True division (ints compute in float32); rounding_mode "trunc" rounds toward zero, "floor" down (as //), and
    both keep an int dtype, as torch."""
    a, b = self._operands(x, reverse)
    if rounding_mode == "floor": return a.floordiv(b)
    if rounding_mode == "trunc":
      return a.div(b).trunc() if dtypes.is_float(a.dtype) else a._alu(Ops.IDIV, b) if a.dtype is not dtypes.bool else a.floordiv(b)
    if rounding_mode is not None: raise ArgumentValueError(f"div rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
    dt = least_upper_float(a.dtype)
    return a.cast(dt)._alu(Ops.FDIV, b.cast(dt))
  def floordiv(self, x, reverse=False) -> Tensor:
    a, b = self._operands(x, reverse)
    if dtypes.is_float(a.dtype): return _float_divmod(a, b)[0]
    # C truncates toward zero; Python and numpy floor: step down when the signs differ and it did not divide exactly
    q, r = a._alu(Ops.IDIV, b), a._alu(Ops.MOD, b)
    if dtypes.is_unsigned(a.dtype) or a.dtype is dtypes.bool: return q
    fix = r.ne(0) & b.ne(0) & ((r < 0) ^ (b < 0))  # x // 0 == 0, and x % 0 == x must not shift it
    return fix.where(q - 1, q)
  def mod(self, x, reverse=False) -> Tensor:
    a, b = self._operands(x, reverse)
    if dtypes.is_float(a.dtype): return _float_divmod(a, b)[1]
    r = a._alu(Ops.MOD, b)
    if dtypes.is_unsigned(a.dtype) or a.dtype is dtypes.bool: return b.eq(0).where(False if a.dtype is dtypes.bool else 0, r)
    # Python's sign (the divisor's), and x % 0 == 0 as numpy gives
    fixed = (r.ne(0) & ((r < 0) ^ (b < 0))).where(r + b, r)
    return b.eq(0).where(0, fixed)
  def pow(self, x, reverse=False) -> Tensor:
    if not reverse and not isinstance(x, Tensor) and type(x) is int and x >= 0 and (x <= 4 or not dtypes.is_float(self.dtype)):
      # a small or integer power is square-and-multiply: exact, and an int tensor stays int (wrapping, as numpy's)
      out: Tensor | None = None
      base = self if self.dtype is not dtypes.bool else self.cast(dtypes.default_int)
      while x:
        if x & 1: out = base if out is None else out * base
        x >>= 1
        if x: base = base * base
      if out is not None: return out
      note_folded((ones := base.ones_like()).uop, self.uop)  # x ** 0: its gradient is zero, not "not in the graph"
      return ones
    if not reverse and type(x) is int and x < 0 and dtypes.is_int(self.dtype):
      raise ArgumentValueError(f"an integer tensor to the negative integer power {x}: cast it to a float first (numpy and torch refuse it too)")
    a, b = self._operands(x, reverse)
    if not dtypes.is_float(a.dtype): a, b = a.cast(dtypes.default_float), b.cast(dtypes.default_float)
    return a._alu(Ops.POW, b)
  def maximum(self, x) -> Tensor: return self._binop(Ops.MAX, x)
  def minimum(self, x) -> Tensor:
    a, b = self._operands(x)
    if dtypes.is_float(a.dtype): return -((-a).maximum(-b))
    return (a < b).where(a, b)
  def where(self, x, y) -> Tensor:
    """self ? x : y, elementwise; self is the condition (cast to bool)."""
    cond = self.cast(dtypes.bool)
    if isinstance(x, Tensor): xt = x
    elif isinstance(y, Tensor):
      dt = y.dtype if not (isinstance(x, float) and not dtypes.is_float(y.dtype)) else dtypes.default_float
      if type(x) is int and dt is dtypes.bool: dt = _int_dtype_for(x, x, "constant")
      if not isinstance(x, (bool, int, float, np.generic)): raise ArgumentTypeError(f"where takes Tensors or numbers, not {type(x).__name__}")
      check_fits(x, dt)
      xt = y._const_like(x, dt)
    else:
      if not isinstance(x, (bool, int, float)): raise ArgumentTypeError(f"where takes Tensors or numbers, not {type(x).__name__}")
      xt = cond._const_like(x, dtypes.from_py(x) if type(x) is not int else _int_dtype_for(x, x, "constant"))
    xt, yt = xt._operands(y)
    c, xt = _broadcast(cond, xt)
    c, yt = _broadcast(c, yt)
    xt, yt = _broadcast(xt, yt)
    c, xt = _broadcast(c, xt)
    return c._alu(Ops.WHERE, xt, yt, dtype=xt.dtype)

  def _cmp(self, op: Ops, x, reverse: bool = False) -> Tensor:
    if type(x) is int and dtypes.is_int(self.dtype) and not dtypes.min(self.dtype) <= x <= dtypes.max(self.dtype):
      # an int beyond the tensor's range decides every comparison (numpy 2 compares by value too)
      above = x > dtypes.max(self.dtype)
      decided = {Ops.CMPEQ: False, Ops.CMPNE: True, Ops.CMPLT: above != reverse}[op]
      return Tensor.full(self.shape, decided, dtypes.bool, self.device)
    return self._binop(op, x, reverse, out=dtypes.bool)
  def __lt__(self, x): return self._cmp(Ops.CMPLT, x)
  def __gt__(self, x): return self._cmp(Ops.CMPLT, x, reverse=True)
  # a <= b is not (b < a) except for nan, which compares false with everything
  def __le__(self, x): return self._cmp(Ops.CMPLT, x) | self.eq(x) if _floaty(self, x) else self._cmp(Ops.CMPLT, x, reverse=True).logical_not()
  def __ge__(self, x): return self._cmp(Ops.CMPLT, x, reverse=True) | self.eq(x) if _floaty(self, x) else self._cmp(Ops.CMPLT, x).logical_not()
  def eq(self, x) -> Tensor: return self._cmp(Ops.CMPEQ, x)
  def ne(self, x) -> Tensor: return self._cmp(Ops.CMPNE, x)
  def __eq__(self, x): return self.eq(x)  # type: ignore[override]
  def __ne__(self, x): return self.ne(x)  # type: ignore[override]
  def logical_not(self) -> Tensor: return self.cast(dtypes.bool)._cmp(Ops.CMPNE, True)
  def logical_and(self, x) -> Tensor: return self.cast(dtypes.bool) & (x.cast(dtypes.bool) if isinstance(x, Tensor) else bool(x))
  def logical_or(self, x) -> Tensor: return self.cast(dtypes.bool) | (x.cast(dtypes.bool) if isinstance(x, Tensor) else bool(x))
  def logical_xor(self, x) -> Tensor: return self.cast(dtypes.bool) ^ (x.cast(dtypes.bool) if isinstance(x, Tensor) else bool(x))
  def _bitop(self, op: Ops, x, reverse=False) -> Tensor:
    if type(x) is int and op in _BITOPS and dtypes.is_int(self.dtype) and not dtypes.is_unsigned(self.dtype):
      # a bit mask written unsigned (x | 0xFFFFFFFF on int32) is its two's complement, as C and tinygrad read it
      bits = 8 * self.dtype.itemsize
      if dtypes.max(self.dtype) < x < 2 ** bits: x -= 2 ** bits
    a, b = self._operands(x, reverse)
    if dtypes.is_float(a.dtype):
      other = f"{x.dtype} {x.shape}" if isinstance(x, Tensor) else f"{type(x).__name__} {x!r}"
      operands = (other, f"{self.dtype} {self.shape}") if reverse else (f"{self.dtype} {self.shape}", other)
      raise DTypeError(f"{_BITOPS[op]} needs bool or int operands, got {operands[0]} and {operands[1]}")
    return a._alu(op, b)
  def bitwise_and(self, x) -> Tensor: return self._bitop(Ops.AND, x)
  def bitwise_or(self, x) -> Tensor: return self._bitop(Ops.OR, x)
  def bitwise_xor(self, x) -> Tensor: return self._bitop(Ops.XOR, x)
  def bitwise_not(self) -> Tensor:
    if self.dtype is dtypes.bool: return self.logical_not()
    if dtypes.is_float(self.dtype): raise DTypeError(f"bitwise_not (~) needs a bool or int tensor, got {self.dtype} {self.shape}")
    return self._bitop(Ops.XOR, -1 if not dtypes.is_unsigned(self.dtype) else dtypes.max(self.dtype))
  def lshift(self, x) -> Tensor: return self._bitop(Ops.SHL, x)
  def rshift(self, x) -> Tensor: return self._bitop(Ops.SHR, x)

  __add__, __sub__, __mul__, __truediv__, __floordiv__, __mod__, __pow__ = add, sub, mul, div, floordiv, mod, pow
  def __radd__(self, x): return self.add(x, True)
  def __rsub__(self, x): return self.sub(x, True)
  def __rmul__(self, x): return self.mul(x, True)
  def __rtruediv__(self, x): return self.div(x, True)
  def __rfloordiv__(self, x): return self.floordiv(x, True)
  def __rmod__(self, x): return self.mod(x, True)
  def __rpow__(self, x): return self.pow(x, True)
  def __and__(self, x): return self.bitwise_and(x)
  def __or__(self, x): return self.bitwise_or(x)
  def __xor__(self, x): return self.bitwise_xor(x)
  def __rand__(self, x): return self._bitop(Ops.AND, x, True)
  def __ror__(self, x): return self._bitop(Ops.OR, x, True)
  def __rxor__(self, x): return self._bitop(Ops.XOR, x, True)
  def __invert__(self): return self.bitwise_not()
  def __lshift__(self, x): return self.lshift(x)
  def __rshift__(self, x): return self.rshift(x)
  def __neg__(self): return self.logical_not() if self.dtype is dtypes.bool else self._alu(Ops.NEG)
  def __pos__(self): return self
  def __abs__(self): return self.abs()
  def __matmul__(self, x): return self.matmul(x)
  def __rmatmul__(self, x):
    if not isinstance(x, Tensor): raise ArgumentTypeError(f"matmul takes Tensors, not {type(x).__name__}: wrap it in Tensor(...)")
    return x.matmul(self)
  def __iadd__(self, x): return self.assign(self + x)
  def __isub__(self, x): return self.assign(self - x)
  def __imul__(self, x): return self.assign(self * x)
  def __itruediv__(self, x): return self.assign(self / x)

  def cast(self, dtype: DType) -> Tensor:
    dtype = to_dtype(dtype)
    return self if dtype is self.dtype else Tensor(uop(Ops.CAST, dtype, (self.uop,)))
  def bitcast(self, dtype: DType) -> Tensor:
    dtype = to_dtype(dtype)
    if dtype.itemsize != self.dtype.itemsize: raise DTypeError(f"bitcast from {self.dtype} to {dtype} changes the item size")
    return self if dtype is self.dtype else Tensor(uop(Ops.BITCAST, dtype, (self.uop,)))
  def float(self) -> Tensor: return self.cast(dtypes.float32)
  def half(self) -> Tensor: return self.cast(dtypes.float16)
  def double(self) -> Tensor: return self.cast(dtypes.float64)
  def int(self) -> Tensor: return self.cast(dtypes.int32)
  def long(self) -> Tensor: return self.cast(dtypes.int64)
  def bool(self) -> Tensor: return self.cast(dtypes.bool)
  def _float(self) -> Tensor: return self.cast(least_upper_float(self.dtype))

  # ---- reductions (half and bfloat16 accumulate in float32 and give their own type back) ----
  def _reduce(self, op: Ops, axis, keepdim: bool) -> Tensor:
    axes = axes_arg(axis, self.shape)
    out_shape = tuple(1 if i in axes else d for i, d in enumerate(self.shape))
    if any(self.shape[a] == 0 for a in axes):  # a reduction over nothing: the op's identity
      ident = {Ops.ADD: 0, Ops.MUL: 1, Ops.MAX: dtypes.min(self.dtype)}[op]
      ret = Tensor.full(out_shape, ident, self.dtype, self.device)
      note_folded(ret.uop, self.uop)
    else:
      acc = _acc_dtype(self.dtype) if op is not Ops.MAX else self.dtype
      ret = Tensor(uop(Ops.REDUCE_AXIS, acc, (self.cast(acc).uop,), (op, axes))).cast(self.dtype) if axes else self
    return ret if keepdim else ret.reshape(tuple(d for i, d in enumerate(self.shape) if i not in axes))
  def sum(self, axis=None, keepdim: bool = False, dtype: DType | None = None) -> Tensor:
    """Ints and bools add up in int64, as torch (and numpy) do: sum([2**30] * 4) of int32 is 2**32, not 0 (docs/tensor.md)."""
    return self.cast(to_dtype(dtype) if dtype is not None else int_acc_dtype(self.dtype))._reduce(Ops.ADD, axis, keepdim)
  def prod(self, axis=None, keepdim: bool = False, dtype: DType | None = None) -> Tensor:
    return self.cast(to_dtype(dtype) if dtype is not None else int_acc_dtype(self.dtype))._reduce(Ops.MUL, axis, keepdim)
  def max(self, axis=None, keepdim: bool = False) -> Tensor:
    """The largest value over axis; over an axis of size 0 an ArgumentValueError, as torch and numpy (no value to give)."""
    self._some_values("max", axis)
    return self._reduce(Ops.MAX, axis, keepdim)
  def min(self, axis=None, keepdim: bool = False) -> Tensor:
    self._some_values("min", axis)
    if dtypes.is_float(self.dtype): return -((-self)._reduce(Ops.MAX, axis, keepdim))
    return ~((~self)._reduce(Ops.MAX, axis, keepdim))  # ~ reverses the order of ints (signed and unsigned) and bools
  def _some_values(self, name: str, axis) -> None:
    # internal reductions that want max's identity over nothing (any, softmax, logsumexp) call _reduce directly
    if any(self.shape[a] == 0 for a in axes_arg(axis, self.shape)):
      raise ArgumentValueError(f"{name} over axis {axis} of shape {self.shape}: an axis of size 0 has no "
                               f"{'largest' if name == 'max' else 'smallest'} value (as torch and numpy, this is an error)")
  def mean(self, axis=None, keepdim: bool = False, dtype: DType | None = None) -> Tensor:
    out_dt = to_dtype(dtype) if dtype is not None else least_upper_float(self.dtype)
    if not dtypes.is_float(out_dt): raise DTypeError(f"mean gives a float: dtype {out_dt!r} is not a float type")
    n = symbolic_sizes.numel([self.shape[a] for a in axes_arg(axis, self.shape)])  # over a symbolic axis: its bound value
    out = self.cast(_acc_dtype(out_dt)).sum(axis, keepdim)
    return (out / n if is_symbolic(n) or n else out * math.nan).cast(out_dt)
  def var(self, axis=None, keepdim: bool = False, correction: int = 1) -> Tensor:
    n = symbolic_sizes.numel([self.shape[a] for a in axes_arg(axis, self.shape)])
    x = self.cast(_acc_dtype(least_upper_float(self.dtype)))
    sq = (x - x.mean(axis, keepdim=True)).square().sum(axis, keepdim)
    return (sq / (max(n - correction, 0) if n.__class__ is int else (n - correction).maximum(0).simplify())).cast(least_upper_float(self.dtype))
  def std(self, axis=None, keepdim: bool = False, correction: int = 1) -> Tensor: return self.var(axis, keepdim, correction).sqrt()
  def var_mean(self, axis=None, keepdim: bool = False, correction: int = 1) -> tuple[Tensor, Tensor]:
    return self.var(axis, keepdim, correction), self.mean(axis, keepdim)
  def std_mean(self, axis=None, keepdim: bool = False, correction: int = 1) -> tuple[Tensor, Tensor]:
    return self.std(axis, keepdim, correction), self.mean(axis, keepdim)
  def any(self, axis=None, keepdim: bool = False) -> Tensor: return self.cast(dtypes.bool)._reduce(Ops.MAX, axis, keepdim)
  def all(self, axis=None, keepdim: bool = False) -> Tensor: return self.logical_not().any(axis, keepdim).logical_not()
  def argmax(self, axis=None, keepdim: bool = False) -> Tensor:
    if axis is None:
      out = self.flatten().argmax(0)
      return out.reshape((1,) * self.ndim) if keepdim else out
    a = axis_arg(axis, self.shape)
    if self.ndim == 0: return Tensor.zeros((), dtype=dtypes.int32, device=self.device)
    n = self.shape[a]
    if n == 0: raise ArgumentValueError(f"argmax over axis {axis} of size 0 (shape {self.shape}): an empty axis has no maximum")
    # the first index of the maximum (of the first nan, as numpy, since max propagates nan): mark maxima with
    # (n - index) and take the largest mark
    m = self.max(a, keepdim=True)
    is_max = (self == m) | self.isnan() if dtypes.is_float(self.dtype) else self == m
    marks = Tensor.arange(n, 0, -1, dtype=dtypes.int32, device=self.device).reshape((n,) + (1,) * (self.ndim - a - 1))
    return (n - (is_max.cast(dtypes.int32) * marks).max(a, keepdim)).cast(dtypes.int32)
  def argmin(self, axis=None, keepdim: bool = False) -> Tensor: return (-self if dtypes.is_float(self.dtype) else ~self).argmax(axis, keepdim)
  def softmax(self, axis: int = -1, dtype: DType | None = None) -> Tensor:
    out_dt = to_dtype(dtype) if dtype is not None else least_upper_float(self.dtype)
    x = self.cast(_acc_dtype(out_dt))
    e = (x - x._reduce(Ops.MAX, axis, keepdim=True)).exp()
    # times the sum's reciprocal, as torch: one division per row instead of one per element (14% of softmax (4096, 1024)
    # on one core, where a vector division takes 10 cycles); within an ulp of e / sum
    return (e * (1 / e.sum(axis, keepdim=True))).cast(out_dt)
  def log_softmax(self, axis: int = -1, dtype: DType | None = None) -> Tensor:
    out_dt = to_dtype(dtype) if dtype is not None else least_upper_float(self.dtype)
    x = self.cast(_acc_dtype(out_dt))
    m = x - x._reduce(Ops.MAX, axis, keepdim=True)
    return (m - m.exp().sum(axis, keepdim=True).log()).cast(out_dt)
  def logsumexp(self, axis=None, keepdim: bool = False) -> Tensor:
    x = self.cast(_acc_dtype(least_upper_float(self.dtype)))
    m = x._reduce(Ops.MAX, axis, keepdim=True)
    m = m.isinf().where(0, m)  # all -inf (or an inf): shift by 0, so the result is the plain log-sum-exp
    out = ((x - m).exp().sum(axis, keepdim=True).log() + m).cast(least_upper_float(self.dtype))
    return out if keepdim else out.squeeze(axes_arg(axis, self.shape)) if self.ndim else out

  # ---- matmul ----
  def dot(self, w: Tensor) -> Tensor: return self.matmul(w)
  def matmul(self, w: Tensor, dtype: DType | None = None) -> Tensor:
    """numpy's matmul: 1-D operands get a dimension added (and removed from the result), batch dims broadcast.
    Half and bfloat16 multiply and accumulate in float32; dtype= sets the result's type."""
    if not isinstance(w, Tensor): raise ArgumentTypeError(f"matmul takes a Tensor, not {type(w).__name__}: wrap it in Tensor(...)")
    x = self
    if x.ndim == 0 or w.ndim == 0: raise ShapeError(f"matmul needs at least 1-D operands, got shapes {x.shape} and {w.shape}")
    k_w = w.shape[-2] if w.ndim >= 2 else w.shape[0]
    if x.shape[-1] != k_w: raise ShapeError(f"matmul shapes {x.shape} and {w.shape} don't fit: {x.shape[-1]} != {k_w}")
    out_dt = to_dtype(dtype) if dtype is not None else least_upper_dtype(x.dtype, w.dtype)
    acc = _acc_dtype(least_upper_dtype(x.dtype, w.dtype))
    # a large float32 matmul on the CPU reads w from column panels (tensor/functional/matmul.py)
    if (tile := panel_tile(x, w)) is not None: return packed_matmul(x, w, tile).cast(out_dt)
    xs = x.cast(acc).reshape(*x.shape[:-1], 1, x.shape[-1])                     # (..., n, 1, k)
    ws = w.cast(acc).reshape(*w.shape[:-2], 1, w.shape[-2], w.shape[-1]).transpose(-1, -2) if w.ndim >= 2 else \
      w.cast(acc).reshape(1, w.shape[0])                                          # (..., 1, m, k)
    try: a, b = _broadcast(xs, ws)
    except ShapeError: raise ShapeError(f"matmul batch dimensions of {x.shape} and {w.shape} don't broadcast") from None
    out = (a * b).sum(-1)                                                          # (..., n, m)
    if w.ndim == 1: out = out.squeeze(-1)
    if x.ndim == 1: out = out.squeeze(-2 if w.ndim > 1 else -1)
    return out.cast(out_dt)
  def linear(self, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    out = self.matmul(weight.T) if weight.ndim > 1 else self * weight
    return out + bias if bias is not None else out
  def sequential(self, layers: Iterable) -> Tensor:
    out = self
    for f in layers: out = f(out)
    return out

def _to_numpy(data: Any, dtype: DType | None) -> np.ndarray:
  if isinstance(data, np.ndarray): return data  # an array converts as numpy's astype does
  if isinstance(data, (bytes, bytearray, memoryview)): return np.frombuffer(bytes(data), dtype=np.uint8)
  if isinstance(data, np.generic): return _to_numpy(np.array(data), dtype)
  if data is None: data = []  # Tensor(None) is an empty tensor, as tinygrad
  if not isinstance(data, (list, tuple)): raise ArgumentTypeError(f"can't make a Tensor from {type(data).__name__}")
  try:
    with np.errstate(all="ignore"): arr = np.array(data)
  except ValueError as e: raise ArgumentValueError(f"can't make a tensor from {type(data).__name__}: {e}") from None
  except OverflowError: raise ConstantOverflowError(f"an integer in the {type(data).__name__} does not fit int64") from None
  if arr.dtype.kind not in "biuf" and arr.size:
    if arr.dtype.kind == "O" and all(type(v) is int for v in arr.reshape(-1)):
      raise ConstantOverflowError(f"an integer in the {type(data).__name__} does not fit int64 or uint64")
    raise ArgumentTypeError(f"can't make a tensor from a {type(data).__name__} of {arr.dtype}")
  if dtype is None:
    if arr.dtype.kind == "f" or arr.size == 0:  # Python floats take the default float (Context(DEFAULT_FLOAT=) sets it)
      return arr.astype(np.float32 if dtypes.default_float is dtypes.bfloat16 else dtypes.to_numpy(dtypes.default_float))
    if arr.dtype.kind in "iu":
      return arr.astype(dtypes.to_numpy(_int_dtype_for(int(arr.min()), int(arr.max()), f"an integer in the {type(data).__name__}")))
    return arr
  if dtypes.is_int(dtype) and arr.size: _check_array_fits(arr, dtype)
  return arr.astype(np.float32 if dtype is dtypes.bfloat16 else dtypes.to_numpy(dtype))

def _check_array_fits(arr: np.ndarray, dtype: DType) -> None:
  """Values given for an int dtype must be integers in its range (as numpy 2 checks Python ints): else OverflowError."""
  if arr.dtype.kind == "f":
    if not np.isfinite(arr).all(): raise ArgumentValueError(f"nan or inf can't be {dtype!r}: they have no integer value")
    lo, hi = math.trunc(float(arr.min())), math.trunc(float(arr.max()))
  else: lo, hi = int(arr.min()), int(arr.max())
  check_fits(lo, dtype, "value")
  check_fits(hi, dtype, "value")

def _to_bf16(arr: np.ndarray) -> np.ndarray:
  f = arr.astype(np.float32).reshape(-1).view(np.uint32)
  return ((f + 0x7FFF + ((f >> 16) & 1)) >> 16).astype(np.uint16)

_BITOPS = {Ops.AND: "bitwise_and (&)", Ops.OR: "bitwise_or (|)", Ops.XOR: "bitwise_xor (^)", Ops.SHL: "lshift (<<)", Ops.SHR: "rshift (>>)"}

def _floaty(a: Tensor, b: Any) -> bool:
  """Whether a comparison of a with b happens in a float type (where nan makes `not (b < a)` differ from `a <= b`)."""
  return dtypes.is_float(a.dtype) or isinstance(b, (float, np.floating)) or (isinstance(b, Tensor) and dtypes.is_float(b.dtype))

def _float_divmod(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
  """numpy's floor division and remainder of floats (npy_divmod): from C's fmod, so x % inf is x (or inf for negative x,
  the divisor's sign), the remainder of an exact division is a zero with the divisor's sign, x // 0 is x / 0."""
  fm = a._alu(Ops.MOD, b)                                     # C's fmod: the dividend's sign
  step = fm.ne(0) & ((b < 0) ^ (fm < 0))                      # nan != 0: a nan remainder steps too, and stays nan
  mod = step.where(fm + b, fm.eq(0).where(b.signbit().where(-0.0, 0.0).cast(a.dtype), fm))
  div = (a - fm) / b
  div = step.where(div - 1, div)
  fl = div.floor()
  fl = (div - fl > 0.5).where(fl + 1, fl)                     # snap a quotient that rounded just below an integer
  zero_sign = (a / b).signbit().where(-0.0, 0.0)
  floordiv = div.ne(0).where(fl, zero_sign.cast(a.dtype))
  return b.eq(0).where(a / b, floordiv), mod

# ---- the live tensors, and what realizing does to them ----

# the live set's add and the callback that takes a dead tensor's reference out (the engine's storage holds it: scheduling and
# memory planning read the graphs live tensors hold): both C methods of the set, so making and freeing a tensor, once per op,
# runs no Python frame for it
_live_add, _live_remove, _ref = _storage.live.add, _storage.live.discard, weakref.ref

def live_tensors() -> list[Tensor]:
  """The live tensors, as a snapshot (other threads keep making tensors meanwhile: see Storage.live_roots)."""
  return _storage.live_holders()

def realize(tensors: list[Tensor], engine: Engine = ENGINE) -> None:
  """Compute these tensors: the engine schedules, compiles and runs what their graphs need, then every live tensor whose
  graph shared the work is pointed at the results, all under the engine's lock. `engine`: one on this frontend's storage
  (ENGINE, or an Engine(storage=ENGINE.storage) with caches of its own)."""
  _check_storage(engine, "realize")
  chain = chain_of(tensors[0]) if len(tensors) == 1 else None
  with engine.lock:
    if (becomes := realize_held([t.uop for t in tensors], engine, chain)): rewire(becomes)

def chain_of(t: Tensor) -> tuple | None:
  """(OpChain, its leaf BUFFER) when t was made by a chain of number ops on one realized buffer and its graph is still that
  chain's (schedule_cache.OpChain: its schedule is found without a walk), else None."""
  return (tr[1], tr[2]) if (tr := t._trace) is not None and tr[0] is t.uop else None

def kernelize(tensors: list[Tensor], engine: Engine = ENGINE) -> None:
  """Replace the computations behind these tensors (and the pending tensors reading the old value of what they assign) with
  KERNEL nodes, leaving ASSIGN(BUFFER, KERNEL) in their graphs; nothing runs."""
  _check_storage(engine, "kernelize")
  with engine.lock: rewire(kernelize_map([t.uop for t in tensors], engine)[1])

def _check_storage(engine: Engine, what: str) -> None:
  if engine.storage is not _storage:
    raise ArgumentValueError(f"{what} with an engine on another storage: the tensors' buffers are ENGINE's (tensor/engine/state.py); "
                             "an engine of its own for them is Engine(storage=ENGINE.storage)")

def rewire(becomes: dict[UOp, UOp]) -> None:
  """Point every live tensor that uses a replaced node at its replacement (what the engine returns as what became what).
  One look at each live tensor: realized ones (a BUFFER, or a reshape of one) are passed over at once, so the cost is small
  per tensor, though it grows with their number."""
  BUFFER, RESHAPE, get = _BUFFER, _RESHAPE, becomes.get
  hit: dict[UOp, UOp] = {}  # the replaced nodes some live tensor is
  pending: list[Tensor] = []  # the other live tensors not realized
  for r in _storage.live.copy():  # a snapshot, as live_tensors() takes
    if (t := r()) is None: continue
    u = t.uop
    if (n := get(u)) is not None:
      t.uop = hit[u] = n
      t._trace = None  # it named the graph replaced (and kept it alive)
    elif u.op is BUFFER or (u.op is RESHAPE and u.src[0].op is BUFFER): continue
    else: pending.append(t)
  if not pending: return
  # inside other graphs, replace only what some live tensor is (and kernels by their buffers): an intermediate no tensor
  # holds keeps its computation there, so a gradient taken later still sees it (it is recomputed if realized again)
  inner = {**hit, **{k: v for k, v in becomes.items() if is_kernelized(k)}}
  # tensors whose graphs use a replaced node: rewritten together, sharing the work
  stale = [t for t in pending if any(x in inner for x in t.uop.toposort(gate=_gate))] if inner else []
  if stale:
    graphs = uop(Ops.SINK, dtypes.void, tuple(t.uop for t in stale))
    for t, n in zip(stale, graph_rewrite(graphs, substitute, inner, bottom_up=True, name="substitute").src): t.uop, t._trace = n, None

def _tensor(u: UOp) -> Tensor:
  """A Tensor of a node, without __init__'s look at its argument (an op's result: one per op)."""
  t = object.__new__(Tensor)
  t.uop, t.requires_grad, t.grad, t._trace = u, None, None, None
  _live_add(_ref(t, _live_remove))
  return t
