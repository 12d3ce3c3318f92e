"""Data types: scalar, vector and pointer dtypes, their C and numpy names, and type promotion.

DTypes are plain objects interned by their fields, so `is` and identity hashing are exact and cheap
(UOps hash their dtype on every construction). Bottom of the runtime layer: imports only numpy.
"""
from __future__ import annotations
import math, re, struct
import numpy as np

class DType:
  """A scalar type (count == 1) or a vector of `count` scalars. Never construct directly: use `dtypes`."""
  __slots__ = ("priority", "itemsize", "name", "fmt", "count", "scalar", "_vecs", "_ptrs")
  def __init__(self, priority: int, itemsize: int, name: str, fmt: str | None, count: int = 1, scalar: DType | None = None):
    self.priority, self.itemsize, self.name, self.fmt, self.count = priority, itemsize, name, fmt, count
    self.scalar: DType = self if scalar is None else scalar  # a plain attribute: matchers read it on hot paths
    self._vecs: dict[int, DType] = {}
    self._ptrs: dict[tuple, PtrDType] = {}

  @property
  def base(self) -> DType: return self
  # the range of values, as `dtypes.int32.max`: dtypes.min/max of the scalar type (-inf/inf for floats)
  @property
  def min(self): return _limits[self.scalar][0]
  @property
  def max(self): return _limits[self.scalar][1]

  def vec(self, count: int) -> DType:
    """The vector of `count` lanes of this scalar type; vec(1) is the scalar itself."""
    if self.count != 1: raise ValueError(f"can't vectorize {self}: it is already a vector")
    if count == 1 or self is dtypes.void: return self
    if (v := self._vecs.get(count)) is None:
      v = self._vecs[count] = DType(self.priority, self.itemsize * count, f"{self.name}{count}", None, count, self)
    return v

  def ptr(self, size: int = -1, addrspace: str = "global") -> PtrDType:
    """A pointer to a buffer of `size` elements of this type (-1: unknown size)."""
    key = (size, addrspace)
    if (p := self._ptrs.get(key)) is None: p = self._ptrs[key] = PtrDType(self, size, addrspace)
    return p

  def __repr__(self) -> str:
    if self.scalar is not self: return f"{self.scalar!r}.vec({self.count})"
    return f"dtypes.{_canonical_names.get(self, self.name)}"
  def __reduce__(self): return (_dtype_from_repr, (repr(self),))
  def __lt__(self, other: DType) -> bool: return (self.priority, self.itemsize, self.name) < (other.priority, other.itemsize, other.name)

class PtrDType(DType):
  """A pointer into a buffer of `base` elements; `size` is the element count (-1 when unknown)."""
  __slots__ = ("_base", "size", "addrspace")
  def __init__(self, base: DType, size: int, addrspace: str):
    super().__init__(base.priority, 8, base.name, "P", 1, None)
    self._base, self.size, self.addrspace = base, size, addrspace
  @property
  def base(self) -> DType: return self._base
  def vec(self, count: int) -> DType: raise ValueError(f"can't vectorize the pointer type {self}")
  def ptr(self, size: int = -1, addrspace: str = "global") -> PtrDType: raise ValueError(f"no pointers to pointers ({self})")
  def __repr__(self) -> str:
    args = ", ".join(([] if self.size == -1 else [str(self.size)]) + ([] if self.addrspace == "global" else [f"addrspace={self.addrspace!r}"]))
    return f"{self._base!r}.ptr({args})"

# a dtype's repr: dtypes.NAME, then .vec(N), then .ptr(SIZE, addrspace='SPACE') with either argument left out
_REPR = re.compile(r"dtypes\.([a-z][a-z0-9_]*)(?:\.vec\((\d{1,5})\))?(\.ptr\((-1|\d{1,19})?(?:,? ?addrspace='([a-z]{1,16})')?\))?")

def _dtype_from_repr(text: str) -> DType:
  """The dtype whose repr is `text` (pickles and the program cache store dtypes so). Parsed by name, never evaluated: the
  text may come from a file another program wrote. Raises ValueError for anything else."""
  m = _REPR.fullmatch(text) if isinstance(text, str) else None
  d = getattr(dtypes, m.group(1), None) if m is not None else None
  if m is None or not isinstance(d, DType): raise ValueError(f"not a dtype: {text!r:.100}")
  if m.group(2) is not None: d = d.vec(int(m.group(2)))
  if m.group(3) is not None: d = d.ptr(int(m.group(4)) if m.group(4) is not None else -1, m.group(5) or "global")
  return d

class dtypes:
  """The dtype namespace, as in the seeds: `dtypes.int`, `dtypes.float32`, `dtypes.is_int(d)`, ..."""
  void = DType(-1, 0, "void", None)
  bool = DType(0, 1, "bool", "?")
  int8 = DType(1, 1, "signed char", "b")
  uint8 = DType(2, 1, "unsigned char", "B")
  int16 = DType(3, 2, "short", "h")
  uint16 = DType(4, 2, "unsigned short", "H")
  int32 = DType(5, 4, "int", "i")
  uint32 = DType(6, 4, "unsigned int", "I")
  int64 = DType(7, 8, "long long", "q")
  uint64 = DType(8, 8, "unsigned long long", "Q")
  float16 = DType(9, 2, "half", "e")
  bfloat16 = DType(10, 2, "__bf16", None)
  float32 = DType(11, 4, "float", "f")
  float64 = DType(12, 8, "double", "d")
  # the seeds' aliases
  char, uchar, short, ushort, int, uint, long, ulong = int8, uint8, int16, uint16, int32, uint32, int64, uint64
  half, float, double = float16, float32, float64
  default_float = float32
  default_int = int32
  # index arithmetic (RANGE, SPECIAL, INDEX offsets) is done in this type
  index = int32

  @staticmethod
  def is_float(t: DType) -> bool: return t.scalar in _floats
  @staticmethod
  def is_int(t: DType) -> bool: return t.scalar in _ints
  @staticmethod
  def is_unsigned(t: DType) -> bool: return t.scalar in _uints
  @staticmethod
  def is_bool(t: DType) -> bool: return t.scalar is dtypes.bool
  @staticmethod
  def min(t: DType): return _limits[t.scalar][0]
  @staticmethod
  def max(t: DType): return _limits[t.scalar][1]
  @staticmethod
  def from_py(x) -> DType:
    """The dtype a Python value or nested list gets: float beats int beats bool, as in the seeds."""
    if isinstance(x, (list, tuple)):
      return max((dtypes.from_py(e) for e in x), default=dtypes.default_float, key=lambda d: d.priority)
    if isinstance(x, float): return dtypes.default_float
    if isinstance(x, bool): return dtypes.bool  # before int: bool is an int subclass
    if isinstance(x, int): return dtypes.default_int
    raise TypeError(f"no dtype for a Python {type(x).__name__}: {x!r}")
  @staticmethod
  def from_numpy(t) -> DType:
    dt = np.dtype(t)
    if (d := _from_np.get(dt)) is None: raise TypeError(f"numpy dtype {dt} has no counterpart in dtypes")
    return d
  @staticmethod
  def to_numpy(t: DType) -> np.dtype:
    if (n := _to_np.get(t.scalar)) is None: raise TypeError(f"{t} has no numpy counterpart")
    return n
  @staticmethod
  def all() -> tuple[DType, ...]: return _all

_canonical_names = {d: n for n, d in [("void", dtypes.void), ("bool", dtypes.bool), ("int8", dtypes.int8), ("uint8", dtypes.uint8),
                                      ("int16", dtypes.int16), ("uint16", dtypes.uint16), ("int", dtypes.int32), ("uint32", dtypes.uint32),
                                      ("int64", dtypes.int64), ("uint64", dtypes.uint64), ("half", dtypes.float16),
                                      ("bfloat16", dtypes.bfloat16), ("float", dtypes.float32), ("double", dtypes.float64)]}
_all = tuple(d for d in _canonical_names if d is not dtypes.void)
_uints = frozenset({dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64})
_ints = frozenset({dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64}) | _uints
_floats = frozenset({dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64})
_limits = {dtypes.bool: (False, True), dtypes.float16: (-math.inf, math.inf), dtypes.bfloat16: (-math.inf, math.inf),
           dtypes.float32: (-math.inf, math.inf), dtypes.float64: (-math.inf, math.inf),
           **{d: (0, 2**(8 * d.itemsize) - 1) for d in _uints},
           **{d: (-2**(8 * d.itemsize - 1), 2**(8 * d.itemsize - 1) - 1) for d in _ints - _uints}}
# numpy's own types by name (np.dtype("Q") is unsigned long long, which torch.from_numpy refuses: np.uint64 is unsigned long)
_to_np = {d: np.dtype(n) for d, n in [(dtypes.bool, "bool"), (dtypes.int8, "int8"), (dtypes.uint8, "uint8"), (dtypes.int16, "int16"),
                                       (dtypes.uint16, "uint16"), (dtypes.int32, "int32"), (dtypes.uint32, "uint32"), (dtypes.int64, "int64"),
                                       (dtypes.uint64, "uint64"), (dtypes.float16, "float16"), (dtypes.float32, "float32"),
                                       (dtypes.float64, "float64")]}
_from_np = {v: k for k, v in _to_np.items()}

# name -> dtype for every spelling a user or a .rules file may write (dtypes.X attributes)
DTYPE_NAMES: dict[str, DType] = {k: v for k, v in vars(dtypes).items() if isinstance(v, DType)}

# ---- promotion: the least upper bound in this lattice (an edge a -> b means a promotes to b) ----
# Matches numpy and torch where they agree: bool < ints < floats; a signed and an unsigned int meet at the
# next wider signed int; half and bfloat16 meet at float32. Where they differ we follow torch: an int
# meeting a float gives that float (numpy widens int32+float16 to float64). uint64 has no wider signed
# int, so it meets any signed int at float64, as numpy does; then every float above uint64 and int8 is above float64,
# so uint64 meets every float at float64 too (the one exception to "an int meeting a float gives that float").
_promotes_to: dict[DType, tuple[DType, ...]] = {
  dtypes.bool: (dtypes.int8, dtypes.uint8), dtypes.int8: (dtypes.int16,), dtypes.uint8: (dtypes.int16, dtypes.uint16),
  dtypes.int16: (dtypes.int32,), dtypes.uint16: (dtypes.int32, dtypes.uint32), dtypes.int32: (dtypes.int64,),
  dtypes.uint32: (dtypes.int64, dtypes.uint64), dtypes.int64: (dtypes.float16, dtypes.bfloat16), dtypes.uint64: (dtypes.float64,),
  dtypes.float16: (dtypes.float32,), dtypes.bfloat16: (dtypes.float32,), dtypes.float32: (dtypes.float64,), dtypes.float64: ()}

def _upper_set(d: DType) -> frozenset[DType]:
  out, todo = {d}, [d]
  while todo:
    for p in _promotes_to[todo.pop()]:
      if p not in out: out.add(p); todo.append(p)
  return frozenset(out)
_uppers = {d: _upper_set(d) for d in _promotes_to}

def least_upper_dtype(*ds: DType) -> DType:
  """The smallest dtype every one of `ds` promotes to (vectors and pointers promote by their scalar)."""
  if not ds: raise ValueError("least_upper_dtype needs at least one dtype")
  common = frozenset.intersection(*(_uppers[d.scalar] for d in ds))
  return min(common, key=lambda d: d.priority)

def least_upper_float(d: DType) -> DType:
  """The float type an op like exp or division computes `d` in: d itself if it is a float, else the default float."""
  return d if dtypes.is_float(d) else least_upper_dtype(d, dtypes.default_float)

def int_acc_dtype(d: DType) -> DType:
  """The dtype sum, prod, cumsum and cumprod give by default: int64 for bools and ints, as torch; uint64 stays uint64 (as
  numpy: torch's int64 would make sums past 2**63 negative); floats keep their type."""
  return d if dtypes.is_float(d) or d is dtypes.uint64 else dtypes.int64

def truncate(d: DType, x):
  """`x` as a value of scalar dtype `d` with C semantics: ints wrap, float32/16 round, bool is nonzero-ness."""
  return _truncate[d.scalar](x)

def _wrap(bits: int, signed: bool):
  mask, half = (1 << bits) - 1, 1 << (bits - 1)
  if signed: return lambda x: ((int(x) + half) & mask) - half
  return lambda x: int(x) & mask

def _round_to(fmt: str):
  # struct's float packing rounds to nearest even, as numpy and C do (and 20x faster than np.float32(x) in an errstate)
  pack, unpack = struct.Struct(fmt).pack, struct.Struct(fmt).unpack
  def f(x):
    if x.__class__ is not float: x = float(x)  # ints (an int beyond a double's range raises OverflowError, as numpy does), bools
    try: return unpack(pack(x))[0]
    except OverflowError: return math.copysign(math.inf, x)  # rounds past the largest finite value
  return f

def _round_bf16(x) -> float:
  # round float32 to nearest even in the top 16 bits, as the hardware conversion does; nan stays nan
  with np.errstate(over="ignore"): f = np.float32(x)  # beyond float32's range: inf, as for the other float types
  if math.isnan(f): return math.nan
  bits = int(f.view(np.uint32))
  bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
  return float(np.uint32(bits & 0xFFFFFFFF).view(np.float32))

_truncate = {dtypes.bool: bool, dtypes.float64: float, dtypes.float32: _round_to("<f"), dtypes.float16: _round_to("<e"),
             dtypes.bfloat16: _round_bf16, dtypes.void: lambda x: None,
             **{d: _wrap(8 * d.itemsize, d not in _uints) for d in _ints}}
