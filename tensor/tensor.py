"""Tensor: the user-facing array. Every op builds a lazy UOp graph (runtime/uop.py); `realize()` schedules it into
kernels (tensor/engine), lowers and runs them. First layer of the pipeline: Tensor -> UOp graph -> schedule -> kernels.
"""
from __future__ import annotations
import math, weakref
from typing import Any, Iterable, Sequence
import numpy as np
from runtime.device import Buffer, Device
from runtime.dtype import DTYPE_NAMES, DType, PtrDType, dtypes, least_upper_dtype, least_upper_float
from runtime.ops import Ops
from runtime.uop import UOp, uop

class TensorError(Exception):
  """A tensor op got operands it can't take: shapes, dtypes or axes that don't fit."""

_unique = [0]
def _new_unique() -> UOp:
  _unique[0] += 1
  return uop(Ops.UNIQUE, dtypes.void, (), _unique[0])

def _device(name: str) -> UOp: return uop(Ops.DEVICE, dtypes.void, (), name)

# the host-side memory behind BUFFER UOps: the engine reads it when it runs kernels
buffers: weakref.WeakKeyDictionary[UOp, Buffer] = weakref.WeakKeyDictionary()

def buffer_uop(buf: Buffer) -> UOp:
  """A BUFFER UOp standing for an existing Buffer."""
  u = uop(Ops.BUFFER, buf.dtype, (_new_unique(), _device(buf.device)), buf.size)
  buffers[u] = buf
  return u

def to_dtype(x: Any) -> DType:
  """A tensor dtype from a DType, its name ("float32", "int") or a numpy type; TypeError for anything else."""
  if isinstance(x, DType) and not isinstance(x, PtrDType) and x.count == 1 and x is not dtypes.void: return x
  if isinstance(x, str) and isinstance(DTYPE_NAMES.get(x), DType) and DTYPE_NAMES[x] is not dtypes.void: return DTYPE_NAMES[x]
  if isinstance(x, (np.dtype, type)) and x not in (int, float, bool):
    try: return dtypes.from_numpy(x)
    except TypeError: pass
  raise TypeError(f"{x!r} is not a tensor dtype: use one of dtypes (dtypes.float32, dtypes.int32, ...), its name, or a numpy type")

def _shape_arg(shape: Sequence) -> tuple[int, ...]:
  if len(shape) == 1 and isinstance(shape[0], (tuple, list)): shape = shape[0]
  out = tuple(int(s) for s in shape)
  if any(s < 0 for s in out): raise TensorError(f"negative dimension in shape {out}")
  return out

class Tensor:
  """A lazy n-dimensional array on a device: `Tensor([1, 2, 3])`, `Tensor.ones(2, 3)`, `(a @ b).relu().numpy()`."""
  __slots__ = ("uop", "requires_grad", "grad", "__weakref__")
  training: bool = False
  _live: weakref.WeakSet[Tensor] = weakref.WeakSet()

  def __init__(self, data: Any, device: str | None = None, dtype: DType | None = None, requires_grad: bool | None = None):
    self.requires_grad, self.grad = requires_grad, None
    dev = Device.canonicalize(device)
    if dtype is not None: dtype = to_dtype(dtype)
    if isinstance(data, UOp): self.uop = data
    elif isinstance(data, Tensor): self.uop = data.to(dev).cast(dtype or data.dtype).uop
    elif isinstance(data, (bool, int, float)) and not isinstance(data, np.generic):
      dt = dtype or dtypes.from_py(data)
      self.uop = uop(Ops.CONST, dt, (_device(dev),), _const_value(dt, data))
    else:
      arr = _to_numpy(data, dtype)
      dt = dtype or dtypes.from_numpy(arr.dtype)
      host = Buffer("PYTHON", arr.size, dt, arr.astype(dtypes.to_numpy(dt), copy=False) if dt is not dtypes.bfloat16 else _to_bf16(arr))
      u = buffer_uop(host)
      if dev != "PYTHON": u = uop(Ops.COPY, dt, (u, _device(dev)))
      if arr.shape != (arr.size,): u = uop(Ops.RESHAPE, dt, (u,), arr.shape)
      self.uop = u
    Tensor._live.add(self)

  # ---- properties ----
  @property
  def shape(self) -> tuple[int, ...]: return self.uop.shape  # type: ignore[return-value]
  @property
  def dtype(self) -> DType: return self.uop.dtype
  @property
  def device(self) -> str: return self.uop.device  # type: ignore[return-value]
  @property
  def ndim(self) -> int: return len(self.shape)
  def numel(self) -> int: return math.prod(self.shape)
  def size(self, dim: int | None = None): return self.shape if dim is None else self.shape[self._axis(dim)]
  def __len__(self) -> int:
    if not self.shape: raise TypeError("len() of a 0-d tensor")
    return self.shape[0]
  def __hash__(self) -> int: return id(self)
  def __bool__(self) -> bool:
    if self.numel() != 1: raise TensorError(f"the truth value of a tensor with {self.numel()} elements is ambiguous: use .any() or .all()")
    return bool(self.item())
  def __repr__(self) -> str:  # as the seeds print it: <Tensor <UOp CPU (4,) int (Ops.COPY, None)> on CPU with grad None>
    u = self.uop
    return f"<Tensor <UOp {self.device} {self.shape} {self.dtype.name} ({u.op!r}, {u.arg!r})> on {self.device} with grad {self.grad!r}>"

  # ---- creation ----
  @staticmethod
  def full(shape: Sequence[int] | int, fill_value: Any, dtype: DType | None = None, device: str | None = None, **kwargs) -> Tensor:
    shape = (shape,) if isinstance(shape, int) else _shape_arg(shape)
    if shape and min(shape) < 0: raise TensorError(f"negative dimension in shape {shape}")
    return Tensor(fill_value, device, dtype, **kwargs).reshape((1,) * len(shape)).expand(shape)
  @staticmethod
  def zeros(*shape, dtype: DType | None = None, device: str | None = None, **kw) -> Tensor:
    return Tensor.full(_shape_arg(shape), 0, dtype or dtypes.default_float, device, **kw)
  @staticmethod
  def ones(*shape, dtype: DType | None = None, device: str | None = None, **kw) -> Tensor:
    return Tensor.full(_shape_arg(shape), 1, dtype or dtypes.default_float, device, **kw)
  @staticmethod
  def empty(*shape, dtype: DType | None = None, device: str | None = None, **kw) -> Tensor:
    shape = _shape_arg(shape)
    dt, dev = to_dtype(dtype or dtypes.default_float), Device.canonicalize(device)
    u = uop(Ops.BUFFER, dt, (_new_unique(), _device(dev)), math.prod(shape))
    buffers[u] = Buffer(dev, math.prod(shape), dt)
    return Tensor(uop(Ops.RESHAPE, dt, (u,), shape) if len(shape) != 1 else u, **kw)
  @staticmethod
  def arange(start: int | float, stop: int | float | None = None, step: int | float = 1, dtype: DType | None = None,
             device: str | None = None) -> Tensor:
    if stop is None: start, stop = 0, start
    if step == 0: raise TensorError("arange step must not be zero")
    dt = to_dtype(dtype) if dtype is not None else \
      dtypes.default_float if any(isinstance(v, float) for v in (start, stop, step)) else dtypes.default_int
    # constant data: made on the host, like a list literal
    return Tensor(np.arange(start, stop, step).astype(np.float64 if dtypes.is_float(dt) else np.int64), device, dt)
  def full_like(self, fill_value: Any, dtype: DType | None = None, device: str | None = None) -> Tensor:
    return Tensor.full(self.shape, fill_value, dtype or self.dtype, device or self.device)
  def zeros_like(self, **kw) -> Tensor: return self.full_like(0, **kw)
  def ones_like(self, **kw) -> Tensor: return self.full_like(1, **kw)
  def empty_like(self, **kw) -> Tensor:
    return Tensor.empty(*self.shape, dtype=kw.get("dtype") or self.dtype, device=kw.get("device") or self.device)

  # ---- realizing and host I/O ----
  def kernelize(self, *others: Tensor) -> Tensor:
    """Schedule this tensor (and others) into kernels, leaving KERNEL/ASSIGN nodes in the graph; nothing runs yet."""
    from tensor.engine.schedule import kernelize
    kernelize([self, *others])
    return self
  def realize(self, *others: Tensor) -> Tensor:
    """Compute this tensor (and others): schedule, compile and run the kernels. Returns self."""
    from tensor.engine.realize import realize
    realize([self, *others])
    return self
  def _buffer(self) -> tuple[Buffer, UOp]:
    self.realize()
    u = self.uop
    base = u.src[0] if u.op is Ops.RESHAPE else u
    if base.op is not Ops.BUFFER or base not in buffers:
      self.uop = u = self.contiguous().realize().uop
      base = u.src[0] if u.op is Ops.RESHAPE else u
    return buffers[base], base
  def numpy(self) -> np.ndarray:
    """The values, as a numpy array of numpy's type for this dtype (bfloat16 as float32)."""
    if self.numel() == 0: return np.zeros(self.shape, dtype=np.float32 if self.dtype is dtypes.bfloat16 else dtypes.to_numpy(self.dtype))
    buf, base = self._buffer()
    return buf.numpy().reshape(self.shape)
  def __array__(self, dtype=None, copy=None) -> np.ndarray:
    a = self.numpy()
    return a if dtype is None else a.astype(dtype)
  def tolist(self) -> Any: return self.numpy().tolist()
  def item(self) -> Any:
    if self.numel() != 1: raise TensorError(f"item() needs a tensor with one element, this one has shape {self.shape}")
    return self.numpy().reshape(()).item()
  def to(self, device: str | None) -> Tensor:
    dev = Device.canonicalize(device)
    if dev == self.device: return self
    # the scheduler makes the source of a COPY contiguous when it is not a whole buffer already
    return Tensor(uop(Ops.COPY, self.dtype, (self.uop, _device(dev))))
  def contiguous(self) -> Tensor: return Tensor(uop(Ops.CONTIGUOUS, self.dtype, (self.uop,)))
  def detach(self) -> Tensor: return Tensor(uop(Ops.DETACH, self.dtype, (self.uop,)))
  def assign(self, x: Tensor | Any) -> Tensor:
    """Write x into this tensor's storage (its shape and dtype must match); returns self, now holding x's values."""
    x = x if isinstance(x, Tensor) else self.full_like(x)
    if x.shape != self.shape: raise TensorError(f"assign of shape {x.shape} into a tensor of shape {self.shape}")
    if x.dtype is not self.dtype: raise TensorError(f"assign of dtype {x.dtype} into a tensor of dtype {self.dtype}")
    self.uop = uop(Ops.ASSIGN, self.dtype, (self.uop, x.uop))
    return self

  # ---- movement ----
  def _axis(self, a: int, ndim: int | None = None) -> int:
    n = self.ndim if ndim is None else ndim
    if not -max(n, 1) <= a < max(n, 1): raise TensorError(f"axis {a} is out of range for a tensor of shape {self.shape}")
    return a + n if a < 0 else a
  def _mv(self, op: Ops, arg: Any) -> Tensor: return Tensor(uop(op, self.dtype, (self.uop,), arg))
  def reshape(self, *shape) -> Tensor:
    shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
    shape = tuple(s if s is not None else self.shape[i] for i, s in enumerate(shape))
    if shape.count(-1) > 1: raise TensorError(f"reshape to {shape}: only one dimension can be -1")
    if -1 in shape:
      rest = math.prod(s for s in shape if s != -1)
      if rest == 0 or self.numel() % rest: raise TensorError(f"can't reshape {self.shape} to {shape}")
      shape = tuple(self.numel() // rest if s == -1 else s for s in shape)
    if math.prod(shape) != self.numel(): raise TensorError(f"can't reshape a tensor of shape {self.shape} ({self.numel()} elements) to {shape}")
    return self if shape == self.shape else self._mv(Ops.RESHAPE, tuple(int(s) for s in shape))
  def view(self, *shape) -> Tensor: return self.reshape(*shape)
  def permute(self, *order) -> Tensor:
    order = tuple(self._axis(o) for o in (order[0] if len(order) == 1 and isinstance(order[0], (tuple, list)) else order))
    if sorted(order) != list(range(self.ndim)):
      raise TensorError(f"permute order {order} is not a permutation of the {self.ndim} axes of {self.shape}")
    return self if order == tuple(range(self.ndim)) else self._mv(Ops.PERMUTE, order)
  def transpose(self, dim0: int = 1, dim1: int = 0) -> Tensor:
    order = list(range(self.ndim))
    a, b = self._axis(dim0), self._axis(dim1)
    order[a], order[b] = order[b], order[a]
    return self.permute(order)
  @property
  def T(self) -> Tensor: return self.transpose() if self.ndim >= 2 else self
  def expand(self, *shape) -> Tensor:
    shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
    shape = tuple(self.shape[i - (len(shape) - self.ndim)] if s == -1 else s for i, s in enumerate(shape))
    if len(shape) < self.ndim: raise TensorError(f"can't expand shape {self.shape} to fewer dimensions {shape}")
    x = self.reshape((1,) * (len(shape) - self.ndim) + self.shape) if len(shape) != self.ndim else self
    for d, s in zip(x.shape, shape):
      if d != s and d != 1: raise TensorError(f"can't expand shape {self.shape} to {shape}: only size-1 dimensions expand")
    return x if tuple(shape) == x.shape else x._mv(Ops.EXPAND, tuple(shape))
  def pad(self, padding: Sequence, value: float = 0.0) -> Tensor:
    """padding: ((before, after), ...) per axis, or a flat torch-style tuple (last axis first)."""
    if padding and not isinstance(padding[0], (tuple, list)):
      flat = list(padding)
      pairs = [(0, 0)] * (self.ndim - len(flat) // 2) + [(flat[i], flat[i + 1]) for i in range(len(flat) - 2, -1, -2)]
    else: pairs = [tuple(p) if p is not None else (0, 0) for p in padding]
    if len(pairs) != self.ndim: raise TensorError(f"padding {padding} has {len(pairs)} pairs for a tensor of shape {self.shape}")
    pairs = [(int(b), int(a)) for b, a in pairs]
    if any(b < 0 or a < 0 for b, a in pairs):  # negative padding crops
      x = self.shrink(tuple((-min(b, 0), d + min(a, 0)) for (b, a), d in zip(pairs, self.shape)))
      return x.pad([(max(b, 0), max(a, 0)) for b, a in pairs], value)
    if all(p == (0, 0) for p in pairs): return self
    if self.numel() == 0:  # nothing to move: the result is all padding
      return Tensor.full(tuple(d + b + a for d, (b, a) in zip(self.shape, pairs)), value, self.dtype, self.device)
    out = self._mv(Ops.PAD, tuple(pairs))
    if value == 0: return out
    mask = Tensor.ones(*self.shape, dtype=dtypes.bool, device=self.device)._mv(Ops.PAD, tuple(pairs))
    return mask.where(out, self._const_like(value))  # the fill takes the tensor's dtype, as numpy's constant_values
  def shrink(self, arg: Sequence) -> Tensor:
    pairs = tuple((0, d) if p is None else (int(p[0]), int(p[1])) for p, d in zip(arg, self.shape))
    if len(pairs) != self.ndim or any(not 0 <= b <= e <= d for (b, e), d in zip(pairs, self.shape)):
      raise TensorError(f"shrink {tuple(arg)} does not fit shape {self.shape}")
    return self if all(p == (0, d) for p, d in zip(pairs, self.shape)) else self._mv(Ops.SHRINK, pairs)
  def flip(self, *axis) -> Tensor:
    axes = {self._axis(a) for a in (axis[0] if len(axis) == 1 and isinstance(axis[0], (tuple, list)) else axis)}
    return self._mv(Ops.FLIP, tuple(i in axes for i in range(self.ndim))) if axes else self
  def squeeze(self, dim: int | None = None) -> Tensor:
    if dim is None: return self.reshape(tuple(d for d in self.shape if d != 1))
    a = self._axis(dim)
    return self if self.ndim == 0 or self.shape[a] != 1 else self.reshape(self.shape[:a] + self.shape[a + 1:])
  def unsqueeze(self, dim: int) -> Tensor:
    a = self._axis(dim, self.ndim + 1)
    return self.reshape(self.shape[:a] + (1,) + self.shape[a:])
  def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    if self.ndim == 0: return self.reshape(1)
    s, e = self._axis(start_dim), self._axis(end_dim)
    return self.reshape(self.shape[:s] + (math.prod(self.shape[s:e + 1]),) + self.shape[e + 1:])
  def __getitem__(self, idx) -> Tensor:
    from tensor.indexing import getitem
    return getitem(self, idx)

  # ---- elementwise ----
  def _const_like(self, v: Any, dtype: DType | None = None) -> Tensor:
    dt = dtype or self.dtype
    return Tensor(uop(Ops.CONST, dt, (_device(self.device),), _const_value(dt, v)))
  def _operands(self, other: Any, reverse: bool = False) -> tuple[Tensor, Tensor]:
    if isinstance(other, Tensor):
      if other.device != self.device:
        raise TensorError(f"operands on different devices: {self.device} and {other.device} (shapes {self.shape} and {other.shape})")
      dt = least_upper_dtype(self.dtype, other.dtype)
      a, b = self.cast(dt), other.cast(dt)
    else:
      if isinstance(other, UOp): raise TypeError("a Tensor op takes Tensors or Python numbers, not UOps")
      if not isinstance(other, (bool, int, float, np.generic)): raise TypeError(f"can't combine a Tensor with {type(other).__name__}")
      other = other.item() if isinstance(other, np.generic) else other
      # a Python number adapts to the tensor, except that a float meeting an int tensor makes it float (as in torch)
      dt = self.dtype
      if isinstance(other, float) and not dtypes.is_float(dt): dt = dtypes.default_float
      elif isinstance(other, int) and not isinstance(other, bool) and dt is dtypes.bool: dt = dtypes.default_int
      a, b = self.cast(dt), self._const_like(other, dt)
    a, b = _broadcast(a, b)
    return (b, a) if reverse else (a, b)
  def _alu(self, op: Ops, *srcs: Tensor, dtype: DType | None = None) -> Tensor:
    return Tensor(uop(op, dtype or self.dtype, (self.uop, *(s.uop for s in srcs))))
  def _binop(self, op: Ops, other: Any, reverse: bool = False, out: DType | None = None) -> Tensor:
    a, b = self._operands(other, reverse)
    return a._alu(op, b, dtype=out)

  def add(self, x, reverse=False) -> Tensor: return self._binop(Ops.ADD, x, reverse)
  def sub(self, x, reverse=False) -> Tensor: return self._binop(Ops.SUB, x, reverse)
  def mul(self, x, reverse=False) -> Tensor: return self._binop(Ops.MUL, x, reverse)
  def div(self, x, reverse=False) -> Tensor:
    a, b = self._operands(x, reverse)
    dt = least_upper_float(a.dtype)
    return a.cast(dt)._alu(Ops.FDIV, b.cast(dt))
  def floordiv(self, x, reverse=False) -> Tensor:
    a, b = self._operands(x, reverse)
    if dtypes.is_float(a.dtype): return a.div(b).floor()
    # C truncates toward zero; Python and numpy floor: step down when the signs differ and it did not divide exactly
    q, r = a._alu(Ops.IDIV, b), a._alu(Ops.MOD, b)
    if dtypes.is_unsigned(a.dtype) or a.dtype is dtypes.bool: return q
    fix = r.ne(0) & b.ne(0) & ((r < 0) ^ (b < 0))  # x // 0 == 0, and x % 0 == x must not shift it
    return fix.where(q - 1, q)
  def mod(self, x, reverse=False) -> Tensor:
    a, b = self._operands(x, reverse)
    if dtypes.is_float(a.dtype): return a - b * a.div(b).floor()
    r = a._alu(Ops.MOD, b)
    if dtypes.is_unsigned(a.dtype) or a.dtype is dtypes.bool: return b.eq(0).where(0, r)
    # Python's sign (the divisor's), and x % 0 == 0 as numpy gives
    fixed = (r.ne(0) & ((r < 0) ^ (b < 0))).where(r + b, r)
    return b.eq(0).where(0, fixed)
  def pow(self, x, reverse=False) -> Tensor:
    if not reverse and not isinstance(x, Tensor) and isinstance(x, int) and not isinstance(x, bool) and x >= 0 and \
       (x <= 4 or not dtypes.is_float(self.dtype)):
      # a small or integer power is square-and-multiply: exact, and an int tensor stays int (wrapping, as numpy's)
      out: Tensor | None = None
      base = self
      while x:
        if x & 1: out = base if out is None else out * base
        x >>= 1
        if x: base = base * base
      return out if out is not None else self.ones_like()
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
      xt = y._const_like(x, y.dtype if not (isinstance(x, float) and not dtypes.is_float(y.dtype)) else dtypes.default_float)
    else: xt = cond._const_like(x, dtypes.from_py(x))
    xt, yt = xt._operands(y)
    c, xt = _broadcast(cond, xt)
    c, yt = _broadcast(c, yt)
    xt, yt = _broadcast(xt, yt)
    c, xt = _broadcast(c, xt)
    return c._alu(Ops.WHERE, xt, yt, dtype=xt.dtype)

  def _cmp(self, op: Ops, x, reverse: bool = False) -> Tensor: return self._binop(op, x, reverse, out=dtypes.bool)
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
  def _bitop(self, op: Ops, x, reverse=False) -> Tensor:
    a, b = self._operands(x, reverse)
    if dtypes.is_float(a.dtype):
      other = f"{x.dtype} {x.shape}" if isinstance(x, Tensor) else f"{type(x).__name__} {x!r}"
      operands = (other, f"{self.dtype} {self.shape}") if reverse else (f"{self.dtype} {self.shape}", other)
      raise TensorError(f"{_BITOPS[op]} needs bool or int operands, got {operands[0]} and {operands[1]}")
    return a._alu(op, b)
  def bitwise_and(self, x) -> Tensor: return self._bitop(Ops.AND, x)
  def bitwise_or(self, x) -> Tensor: return self._bitop(Ops.OR, x)
  def bitwise_xor(self, x) -> Tensor: return self._bitop(Ops.XOR, x)
  def bitwise_not(self) -> Tensor:
    if self.dtype is dtypes.bool: return self.logical_not()
    if dtypes.is_float(self.dtype): raise TensorError(f"bitwise_not (~) needs a bool or int tensor, got {self.dtype} {self.shape}")
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
  def __rmatmul__(self, x): return x.matmul(self) if isinstance(x, Tensor) else Tensor(x, self.device).matmul(self)
  def __iadd__(self, x): return self.assign(self + x)
  def __isub__(self, x): return self.assign(self - x)
  def __imul__(self, x): return self.assign(self * x)
  def __itruediv__(self, x): return self.assign(self / x)

  # ---- unary math (float ops compute in the least float type that holds the input) ----
  def _float(self) -> Tensor: return self.cast(least_upper_float(self.dtype))
  def neg(self) -> Tensor: return -self
  def abs(self) -> Tensor: return self if dtypes.is_unsigned(self.dtype) or self.dtype is dtypes.bool else (self < 0).where(-self, self)
  def sign(self) -> Tensor: return (self > 0).cast(self.dtype) - (self < 0).cast(self.dtype)
  def exp2(self) -> Tensor: return self._float()._alu(Ops.EXP2)
  def log2(self) -> Tensor: return self._float()._alu(Ops.LOG2)
  def exp(self) -> Tensor: return (self._float() * (1 / math.log(2))).exp2()
  def log(self) -> Tensor: return self.log2() * math.log(2)
  def sqrt(self) -> Tensor: return self._float()._alu(Ops.SQRT)
  def rsqrt(self) -> Tensor: return self.sqrt().reciprocal()
  def reciprocal(self) -> Tensor: return self._float()._alu(Ops.RECIPROCAL)
  def sin(self) -> Tensor: return self._float()._alu(Ops.SIN)
  def cos(self) -> Tensor: return (math.pi / 2 - self._float()).sin()
  def tan(self) -> Tensor: return self.sin() / self.cos()
  def trunc(self) -> Tensor: return self._alu(Ops.TRUNC) if dtypes.is_float(self.dtype) else self
  def floor(self) -> Tensor:
    if not dtypes.is_float(self.dtype): return self
    t = self.trunc()
    return (self < t).where(t - 1, t)
  def ceil(self) -> Tensor:
    if not dtypes.is_float(self.dtype): return self
    t = self.trunc()
    return (self > t).where(t + 1, t)
  def round(self) -> Tensor:
    # half to even, as numpy and torch round
    f = self.floor()
    d = self - f
    even = (f * 0.5).floor() * 2 == f
    return (d > 0.5).where(f + 1, (d < 0.5).where(f, even.where(f, f + 1)))
  def relu(self) -> Tensor: return (self > 0).where(self, 0)
  def sigmoid(self) -> Tensor: return 1 / (1 + (-self._float()).exp())
  def tanh(self) -> Tensor: return 2.0 * (2.0 * self._float()).sigmoid() - 1.0
  def leaky_relu(self, neg_slope: float = 0.01) -> Tensor: return (self > 0).where(self, self * neg_slope)
  def gelu(self) -> Tensor: return 0.5 * self * (1 + (math.sqrt(2 / math.pi) * (self + 0.044715 * self * self * self)).tanh())
  def silu(self) -> Tensor: return self * self.sigmoid()
  def swish(self) -> Tensor: return self.silu()
  def square(self) -> Tensor: return self * self
  def clip(self, min_=None, max_=None) -> Tensor:
    out = self
    if min_ is not None: out = out.maximum(min_)
    if max_ is not None: out = out.minimum(max_)
    return out
  clamp = clip
  def isnan(self) -> Tensor: return self.ne(self)
  def cast(self, dtype: DType) -> Tensor:
    dtype = to_dtype(dtype)
    return self if dtype is self.dtype else Tensor(uop(Ops.CAST, dtype, (self.uop,)))
  def bitcast(self, dtype: DType) -> Tensor:
    dtype = to_dtype(dtype)
    if dtype.itemsize != self.dtype.itemsize: raise TensorError(f"bitcast from {self.dtype} to {dtype} changes the item size")
    return self if dtype is self.dtype else Tensor(uop(Ops.BITCAST, dtype, (self.uop,)))
  def float(self) -> Tensor: return self.cast(dtypes.float32)
  def half(self) -> Tensor: return self.cast(dtypes.float16)
  def int(self) -> Tensor: return self.cast(dtypes.int32)
  def long(self) -> Tensor: return self.cast(dtypes.int64)
  def bool(self) -> Tensor: return self.cast(dtypes.bool)

  # ---- reductions ----
  def _axes(self, axis) -> tuple[int, ...]:
    if axis is None: return tuple(range(self.ndim))
    axes = {self._axis(a) for a in (axis if isinstance(axis, (tuple, list)) else (axis,))}
    return tuple(sorted(axes)) if self.ndim else ()  # a 0-d tensor takes axis 0 or -1, as torch, and has nothing to reduce
  def _reduce(self, op: Ops, axis, keepdim: bool) -> Tensor:
    axes = self._axes(axis)
    out_shape = tuple(1 if i in axes else d for i, d in enumerate(self.shape))
    if any(self.shape[a] == 0 for a in axes):  # a reduction over nothing: the op's identity
      ident = {Ops.ADD: 0, Ops.MUL: 1, Ops.MAX: dtypes.min(self.dtype)}[op]
      ret = Tensor.full(out_shape, ident, self.dtype, self.device)
    else: ret = Tensor(uop(Ops.REDUCE_AXIS, self.dtype, (self.uop,), (op, axes))) if axes else self
    return ret if keepdim else ret.reshape(tuple(d for i, d in enumerate(self.shape) if i not in axes))
  def sum(self, axis=None, keepdim: bool = False, dtype: DType | None = None) -> Tensor:
    # small ints and bools add up in int32 (and unsigned in uint32), so counts don't wrap
    acc = to_dtype(dtype) if dtype is not None else (least_upper_dtype(self.dtype, dtypes.uint32 if dtypes.is_unsigned(self.dtype) else dtypes.int32)
                    if dtypes.is_int(self.dtype) or self.dtype is dtypes.bool else self.dtype)
    return self.cast(acc)._reduce(Ops.ADD, axis, keepdim)
  def prod(self, axis=None, keepdim: bool = False) -> Tensor:
    x = self.cast(dtypes.int32) if self.dtype is dtypes.bool else self
    return x._reduce(Ops.MUL, axis, keepdim)
  def max(self, axis=None, keepdim: bool = False) -> Tensor: return self._reduce(Ops.MAX, axis, keepdim)
  def min(self, axis=None, keepdim: bool = False) -> Tensor:
    if dtypes.is_float(self.dtype): return -((-self).max(axis, keepdim))
    return ~((~self).max(axis, keepdim))  # ~ reverses the order of ints (signed and unsigned) and bools
  def mean(self, axis=None, keepdim: bool = False) -> Tensor:
    n = math.prod(self.shape[a] for a in self._axes(axis))
    out = self._float().sum(axis, keepdim)
    return out / n if n else out * math.nan
  def var(self, axis=None, keepdim: bool = False, correction: int = 1) -> Tensor:
    n = math.prod(self.shape[a] for a in self._axes(axis))
    sq = (self._float() - self._float().mean(axis, keepdim=True)).square().sum(axis, keepdim)
    return sq / max(n - correction, 0)
  def std(self, axis=None, keepdim: bool = False, correction: int = 1) -> Tensor: return self.var(axis, keepdim, correction).sqrt()
  def any(self, axis=None, keepdim: bool = False) -> Tensor: return self.cast(dtypes.bool).max(axis, keepdim)
  def all(self, axis=None, keepdim: bool = False) -> Tensor: return self.logical_not().any(axis, keepdim).logical_not()
  def argmax(self, axis=None, keepdim: bool = False) -> Tensor:
    if axis is None:
      out = self.flatten().argmax(0)
      return out.reshape((1,) * self.ndim) if keepdim else out
    a = self._axis(axis)
    if self.ndim == 0: return Tensor.zeros((), dtype=dtypes.int32, device=self.device)
    n = self.shape[a]
    if n == 0: raise TensorError(f"argmax over axis {axis} of size 0 (shape {self.shape}): an empty axis has no maximum")
    # the first index of the maximum (of the first nan, as numpy, since max propagates nan): mark maxima with
    # (n - index) and take the largest mark
    m = self.max(a, keepdim=True)
    is_max = (self == m) | self.isnan() if dtypes.is_float(self.dtype) else self == m
    marks = Tensor.arange(n, 0, -1, dtype=dtypes.int32, device=self.device).reshape((n,) + (1,) * (self.ndim - a - 1))
    return (n - (is_max.cast(dtypes.int32) * marks).max(a, keepdim)).cast(dtypes.int32)
  def argmin(self, axis=None, keepdim: bool = False) -> Tensor: return (-self if dtypes.is_float(self.dtype) else ~self).argmax(axis, keepdim)
  def softmax(self, axis: int = -1) -> Tensor:
    e = (self._float() - self._float().max(axis, keepdim=True)).exp()
    return e / e.sum(axis, keepdim=True)
  def log_softmax(self, axis: int = -1) -> Tensor:
    m = self._float() - self._float().max(axis, keepdim=True)
    return m - m.exp().sum(axis, keepdim=True).log()
  def logsumexp(self, axis: int = -1, keepdim: bool = False) -> Tensor:
    m = self._float().max(axis, keepdim=True)
    out = (self._float() - m).exp().sum(axis, keepdim=True).log() + m
    return out if keepdim else out.squeeze(axis)

  # ---- matmul ----
  def dot(self, w: Tensor) -> Tensor: return self.matmul(w)
  def matmul(self, w: Tensor) -> Tensor:
    x = self
    if x.ndim == 0 or w.ndim == 0: raise TensorError(f"matmul needs at least 1-D operands, got shapes {x.shape} and {w.shape}")
    if x.shape[-1] != w.shape[-2 if w.ndim >= 2 else -1]:
      raise TensorError(f"matmul shapes {x.shape} and {w.shape} don't fit: {x.shape[-1]} != {w.shape[-2 if w.ndim >= 2 else -1]}")
    # (..., n, k) x (..., k, m): broadcast multiply over (..., n, k, m) and sum over k
    xs = x.reshape(*x.shape[:-1], 1, x.shape[-1]) if x.ndim >= 1 else x
    ws = w.reshape(*w.shape[:-2], 1, w.shape[-2], w.shape[-1]).transpose(-1, -2) if w.ndim >= 2 else w.reshape(1, w.shape[0])
    a, b = _broadcast(*xs._operands(ws))
    out = (a * b).sum(-1)
    if w.ndim == 1: out = out.squeeze(-1)
    return out
  def linear(self, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    out = self.matmul(weight.T) if weight.ndim > 1 else self * weight
    return out + bias if bias is not None else out
  def sequential(self, layers: Iterable) -> Tensor:
    out = self
    for f in layers: out = f(out)
    return out

def _const_value(dt: DType, v: Any) -> Any:
  from runtime.ops import cast_value
  return cast_value(v, dt)

def _to_numpy(data: Any, dtype: DType | None) -> np.ndarray:
  if isinstance(data, np.ndarray): return data
  if isinstance(data, (bytes, bytearray, memoryview)): return np.frombuffer(bytes(data), dtype=np.uint8)
  if isinstance(data, (list, tuple)):
    dt = dtype or dtypes.from_py(data)
    try: return np.array(data, dtype=np.float32 if dt is dtypes.bfloat16 else dtypes.to_numpy(dt))
    except ValueError as e: raise TensorError(f"can't make a tensor from {type(data).__name__}: {e}") from None
  if isinstance(data, np.generic): return np.array(data)
  raise TypeError(f"can't make a Tensor from {type(data).__name__}")

def _to_bf16(arr: np.ndarray) -> np.ndarray:
  f = arr.astype(np.float32).reshape(-1).view(np.uint32)
  return ((f + 0x7FFF + ((f >> 16) & 1)) >> 16).astype(np.uint16)

_BITOPS = {Ops.AND: "bitwise_and (&)", Ops.OR: "bitwise_or (|)", Ops.XOR: "bitwise_xor (^)", Ops.SHL: "lshift (<<)", Ops.SHR: "rshift (>>)"}

def _floaty(a: Tensor, b: Any) -> bool:
  """Whether a comparison of a with b happens in a float type (where nan makes `not (b < a)` differ from `a <= b`)."""
  return dtypes.is_float(a.dtype) or isinstance(b, (float, np.floating)) or (isinstance(b, Tensor) and dtypes.is_float(b.dtype))

def _broadcast(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
  if a.shape == b.shape: return a, b
  n = max(a.ndim, b.ndim)
  sa, sb = (1,) * (n - a.ndim) + a.shape, (1,) * (n - b.ndim) + b.shape
  out = []
  for x, y in zip(sa, sb):
    if x != y and x != 1 and y != 1: raise TensorError(f"shapes {a.shape} and {b.shape} can't broadcast together")
    out.append(y if x == 1 else x)
  return a.reshape(sa).expand(tuple(out)), b.reshape(sb).expand(tuple(out))

# ---- Tensor's methods by topic: each topic module holds a mixin class whose methods are copied onto Tensor here ----
def _mix_in(mixin: type) -> None:
  for name, value in vars(mixin).items():
    if name.startswith("__") and name.endswith("__"): continue
    if any(name in vars(c) for c in Tensor.__mro__ if c is not object):
      raise TypeError(f"{mixin.__name__}.{name} would replace Tensor's own {name}")  # two modules defining one method
    setattr(Tensor, name, value)

from tensor.random import RandomMixin  # noqa: E402  (the topic modules import Tensor from here)
for _m in (RandomMixin,): _mix_in(_m)
