"""The op set of the UOp IR (`Ops`), its named groups, fixed arities, and `exec_alu`: the exact value of an ALU op
on Python constants with C semantics for a dtype. Everything that folds constants (rules, the PYTHON device) uses it.
"""
from __future__ import annotations
import math, operator, struct
from fractions import Fraction
from enum import IntEnum, auto
from runtime.dtype import DType, dtypes, truncate

class Ops(IntEnum):
  """Every op of the IR, from the tensor graph down to the linear kernel program."""
  # graph structure and storage
  SINK = auto(); NOOP = auto(); UNIQUE = auto(); DEVICE = auto(); BUFFER = auto(); BUFFER_VIEW = auto()  # noqa: E702
  COPY = auto(); KERNEL = auto(); ASSIGN = auto(); CONTIGUOUS = auto(); CONTIGUOUS_BACKWARD = auto(); DETACH = auto()  # noqa: E702
  VIEW = auto(); DEFINE_VAR = auto(); BIND = auto(); AFTER = auto(); GROUP = auto()  # noqa: E702
  # AT(x, valid, i0, i1, ...): the value of tensor-graph node x at one index, during rangeify
  AT = auto()
  # the six movement ops of the tensor graph (arg: the new shape / permutation / padding / ...)
  RESHAPE = auto(); PERMUTE = auto(); EXPAND = auto(); PAD = auto(); SHRINK = auto(); FLIP = auto()  # noqa: E702
  # reductions: REDUCE_AXIS in the tensor graph (arg: (op, axes)), REDUCE over RANGEs in kernels
  REDUCE_AXIS = auto(); REDUCE = auto()  # noqa: E702
  # GATHER(x, idx): x's rows at an integer tensor's values (0 outside x), shape idx.shape + x.shape[1:]; rangeify makes it a load
  GATHER = auto()
  # CONV(value, x, w): a convolution of x by w (arg: tensor/functional/conv_graph.ConvArg) whose value is `value`; autograd
  # differentiates it as one op, scheduling takes its value
  CONV = auto()
  # kernel programs: arguments, loops, memory access, lanes
  DEFINE_GLOBAL = auto(); DEFINE_LOCAL = auto(); DEFINE_REG = auto(); SPECIAL = auto(); RANGE = auto(); END = auto()  # noqa: E702
  IF = auto(); ENDIF = auto(); BARRIER = auto(); INDEX = auto(); LOAD = auto(); STORE = auto()  # noqa: E702
  VECTORIZE = auto(); GEP = auto(); UNROLL = auto(); CONTRACT = auto(); WMMA = auto(); CUSTOM = auto(); CUSTOMI = auto()  # noqa: E702
  # conversions
  CAST = auto(); BITCAST = auto()  # noqa: E702
  # unary ALU
  EXP2 = auto(); LOG2 = auto(); SIN = auto(); SQRT = auto(); RECIPROCAL = auto(); NEG = auto(); TRUNC = auto()  # noqa: E702
  # binary ALU (IDIV and MOD are C's truncating / and %)
  ADD = auto(); SUB = auto(); MUL = auto(); FDIV = auto(); IDIV = auto(); MOD = auto(); MAX = auto(); POW = auto()  # noqa: E702
  CMPLT = auto(); CMPNE = auto(); CMPEQ = auto(); XOR = auto(); OR = auto(); AND = auto(); SHL = auto(); SHR = auto()  # noqa: E702
  THREEFRY = auto()
  # ternary ALU
  WHERE = auto(); MULACC = auto()  # noqa: E702
  # constants (VCONST: a vector constant, arg is a tuple)
  CONST = auto(); VCONST = auto()  # noqa: E702
  # MULTI(shard0, shard1, ...): one tensor over several devices, a shard on each (arg: the axis it is split on, None when
  # every device holds all of it); lowered to per-device graphs by rules/multi.rules before kernelize (last: no op's number moves)
  MULTI = auto()

  def __repr__(self) -> str: return f"Ops.{self.name}"
  __str__ = __repr__

class GroupOp:
  """Named sets of ops; a .rules file refers to them by these names (ALU, Binary, Commutative, ...)."""
  Unary = frozenset({Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIPROCAL, Ops.NEG, Ops.TRUNC})
  Binary = frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.POW, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ,
                      Ops.XOR, Ops.OR, Ops.AND, Ops.SHL, Ops.SHR, Ops.THREEFRY})
  Ternary = frozenset({Ops.WHERE, Ops.MULACC})
  ALU = Unary | Binary | Ternary
  Elementwise = ALU | {Ops.CAST, Ops.BITCAST}
  # source order does not matter: matchers try both orders for these (MULACC only in its first two sources)
  Commutative = frozenset({Ops.ADD, Ops.MUL, Ops.MAX, Ops.CMPNE, Ops.CMPEQ, Ops.XOR, Ops.OR, Ops.AND})
  Associative = frozenset({Ops.ADD, Ops.MUL, Ops.MAX, Ops.XOR, Ops.OR, Ops.AND})
  Comparison = frozenset({Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ})
  Movement = frozenset({Ops.RESHAPE, Ops.PERMUTE, Ops.EXPAND, Ops.PAD, Ops.SHRINK, Ops.FLIP})
  Buffer = frozenset({Ops.LOAD, Ops.STORE, Ops.CONST, Ops.DEFINE_VAR})
  Const = frozenset({Ops.CONST, Ops.VCONST})
  # a op b == op(a, b) with a unit: a op unit == a
  Idempotent = frozenset({Ops.MAX, Ops.OR, Ops.AND})

# the ops whose number of sources is fixed; the rule compiler checks patterns against this
ARITY: dict[Ops, int] = {**{o: 1 for o in GroupOp.Unary}, **{o: 2 for o in GroupOp.Binary}, **{o: 3 for o in GroupOp.Ternary},
                         Ops.CAST: 1, Ops.BITCAST: 1, Ops.VCONST: 0, Ops.UNIQUE: 0, Ops.DEVICE: 0, Ops.DEFINE_VAR: 0,
                         Ops.DEFINE_GLOBAL: 0, Ops.DEFINE_LOCAL: 0, Ops.GEP: 1, Ops.DETACH: 1, Ops.CONTIGUOUS: 1,
                         Ops.CONTIGUOUS_BACKWARD: 1, Ops.REDUCE_AXIS: 1, Ops.GATHER: 2, Ops.CONV: 3, Ops.COPY: 2, Ops.ASSIGN: 2, Ops.BIND: 2,
                         **{o: 1 for o in GroupOp.Movement}}

# ---- exec_alu: C semantics on Python values ----
# Integer results wrap to the dtype's width. IDIV truncates toward zero and MOD takes the dividend's sign, as in C.
# What C leaves undefined is defined here, and renderers must produce the same values:
#   x // 0 == 0 and x % 0 == x (so x == (x//y)*y + x%y still holds); INT_MIN // -1 wraps to INT_MIN, INT_MIN % -1 == 0;
#   a shift by a negative amount or by >= the bit width gives 0 (SHR of a negative signed value gives -1).
# MAX propagates nan as numpy and torch do. Floats compute in double and round to the dtype.
# MULACC on floats is a fused multiply-add, C's fma: x*y + z rounded once to float32 or float64; a float16 or bfloat16
# one is the fma in double, then rounded to the dtype (as C computes those types).

def _idiv(x: int, y: int) -> int:
  if y == 0: return 0
  q = abs(x) // abs(y)
  return q if (x < 0) == (y < 0) else -q

def _imod(x: int, y: int) -> int: return x if y == 0 else x - _idiv(x, y) * y

def _fdiv(x: float, y: float) -> float:
  try: return x / y
  except ZeroDivisionError:
    if x == 0 or math.isnan(x): return math.nan
    return math.copysign(math.inf, x) * math.copysign(1.0, y)

def _fmod(x: float, y: float) -> float:
  try: return math.fmod(x, y)
  except ValueError: return math.nan  # fmod(inf, y) and fmod(x, 0)

def _fpow(x: float, y: float) -> float:
  try: return math.pow(x, y)
  except OverflowError: return math.inf if x > 0 or float(y).is_integer() and y % 2 == 0 else -math.inf
  except ValueError:
    if x == 0: return math.copysign(math.inf, x) if float(y).is_integer() and y % 2 == 1 else math.inf  # pow(+-0, y<0)
    return math.nan  # a negative base with a non-integer exponent

def _ipow(x: int, y: int) -> int:
  if y >= 0: return pow(x, y, 1 << 64)  # the result wraps to <= 64 bits anyway: never build a huge integer
  return 1 if x == 1 else (-1 if y % 2 else 1) if x == -1 else 0

def _ftrunc(x: float) -> float:
  # toward zero, keeping the sign of a zero result (trunc(-0.5) == -0.0); inf and nan are their own truncation
  return math.copysign(float(math.trunc(x)), x) if math.isfinite(x) else x

def _exp2(x: float) -> float:
  try: return math.pow(2.0, x)
  except OverflowError: return math.inf

def _log2(x: float) -> float:
  if math.isnan(x) or x < 0: return math.nan
  return -math.inf if x == 0 else math.log2(x)

def _fma_float(x: float, y: float, z: float) -> float:
  """x*y + z rounded to a double by round-to-odd, for float32 operands: x*y is then exact, and rounding this double once
  more to float32 gives x*y + z correctly rounded, as fmaf (53 bits >= 24 + 2)."""
  p = x * y
  s = p + z
  if not math.isfinite(s): return s
  b = s - p
  e = (p - (s - b)) + (z - b)  # s + e == p + z exactly (TwoSum)
  if e != 0 and not struct.unpack("<q", struct.pack("<d", s))[0] & 1: s = math.nextafter(s, math.inf if e > 0 else -math.inf)
  return s

def _fma_double(x: float, y: float, z: float) -> float:
  """x*y + z rounded once to a double (C's fma), exactly through fractions."""
  if not (math.isfinite(x) and math.isfinite(y) and math.isfinite(z)): return x * y + z
  r = Fraction(x) * Fraction(y) + Fraction(z)
  if r == 0: return x * y + z  # an exact zero takes IEEE's sign (x*y == -z is exact then)
  try: return float(r)  # int / int rounds correctly
  except OverflowError: return math.inf if r > 0 else -math.inf

def _fmax(x, y):
  if x != x: return x  # nan
  return x if x > y else y

def _shl(bits: int):
  def f(x: int, y: int) -> int: return 0 if y < 0 or y >= bits else x << y
  return f

def _shr(bits: int):
  def f(x: int, y: int) -> int: return (-1 if x < 0 else 0) if y < 0 or y >= bits else x >> y
  return f

_M32 = 0xFFFFFFFF
def threefry2x32(x: int, key: int) -> int:
  """Threefry-2x32 with 20 rounds: the 64-bit counter `x` encrypted with the 64-bit `key` (Salmon et al., 2011)."""
  rot = ((13, 15, 26, 6), (17, 29, 16, 24))
  ks = [key & _M32, key >> 32 & _M32, 0]
  ks[2] = ks[0] ^ ks[1] ^ 0x1BD11BDA
  x0, x1 = (x & _M32) + ks[0] & _M32, (x >> 32 & _M32) + ks[1] & _M32
  for i in range(5):
    for r in rot[i % 2]:
      x0 = x0 + x1 & _M32
      x1 = ((x1 << r) | (x1 >> (32 - r))) & _M32
      x1 ^= x0
    x0 = x0 + ks[(i + 1) % 3] & _M32
    x1 = x1 + ks[(i + 2) % 3] + i + 1 & _M32
  return x1 << 32 | x0

_common = {Ops.ADD: operator.add, Ops.SUB: operator.sub, Ops.MUL: operator.mul, Ops.NEG: operator.neg, Ops.CMPLT: operator.lt,
           Ops.CMPNE: operator.ne, Ops.CMPEQ: operator.eq, Ops.WHERE: lambda c, x, y: x if c else y, Ops.MULACC: lambda x, y, z: x * y + z}
_float_alu = {**_common, Ops.MAX: _fmax, Ops.FDIV: _fdiv, Ops.MOD: _fmod, Ops.POW: _fpow, Ops.EXP2: _exp2, Ops.LOG2: _log2,
              Ops.SQRT: lambda x: math.sqrt(x) if x >= 0 else (x if x == 0 else math.nan),
              Ops.SIN: lambda x: math.sin(x) if math.isfinite(x) else math.nan,
              Ops.RECIPROCAL: lambda x: _fdiv(1.0, x), Ops.TRUNC: _ftrunc}
# IDIV on floats is TRUNC(FDIV): the quotient rounds to the dtype before it is truncated, as C code computing it would
# MULACC rounded once (C's fma) in float32 and float64; float16 and bfloat16 products are exact in double, so x*y + z in
# double is the fma in double, which truncate() then rounds to the dtype
_fma_of = {dtypes.float16: _common[Ops.MULACC], dtypes.bfloat16: _common[Ops.MULACC], dtypes.float32: _fma_float, dtypes.float64: _fma_double}
_float_alus = {d: {**_float_alu, Ops.IDIV: lambda x, y, d=d: _ftrunc(truncate(d, _fdiv(x, y))), Ops.MULACC: _fma_of[d]}
               for d in (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)}
_int_alu_base = {**_common, Ops.MAX: max, Ops.IDIV: _idiv, Ops.MOD: _imod, Ops.POW: _ipow, Ops.XOR: operator.xor, Ops.OR: operator.or_,
                 Ops.AND: operator.and_, Ops.TRUNC: lambda x: x, Ops.THREEFRY: threefry2x32}
_int_alu = {bits: {**_int_alu_base, Ops.SHL: _shl(bits), Ops.SHR: _shr(bits)} for bits in (8, 16, 32, 64)}
_bool_alu = {**_int_alu_base, Ops.SHL: _shl(1), Ops.SHR: _shr(1)}

def alu_table(dtype: DType) -> dict:
  """The Python function for each ALU op on operands of `dtype` (the operand type; comparisons still return bool)."""
  s = dtype.scalar
  if dtypes.is_float(s): return _float_alus[s]
  if s is dtypes.bool: return _bool_alu
  return _int_alu[8 * s.itemsize]

_comparisons = GroupOp.Comparison

def exec_alu(op: Ops, dtype: DType, operands):
  """The value of `op` applied to `operands` (Python values of their dtypes), as a value of `dtype`.

  `dtype` is the result type; for comparisons the operands' type is taken from the operands themselves.
  Tuples are vectors and apply lane by lane. Raises ValueError for an op with no meaning on `dtype`.
  """
  if any(type(x) is tuple for x in operands):
    lanes = max(len(x) for x in operands if type(x) is tuple)
    return tuple(exec_alu(op, dtype.scalar, [x[i] if type(x) is tuple else x for x in operands]) for i in range(lanes))
  if op in _comparisons or op is Ops.WHERE:
    a = operands[-1]
    opdt = dtypes.float64 if isinstance(a, float) else dtypes.bool if isinstance(a, bool) else dtypes.int64
    if op is Ops.WHERE: opdt = dtype
  else: opdt = dtype
  table = alu_table(opdt)
  if (fn := table.get(op)) is None: raise ValueError(f"{op} has no meaning on {dtype}")
  return truncate(dtype, fn(*operands))

def cast_value(value, dtype: DType):
  """`value` converted to `dtype` as a C cast does; float to int truncates toward zero (nan and inf give 0)."""
  s = dtype.scalar
  if dtypes.is_int(s) and isinstance(value, float):
    value = math.trunc(value) if math.isfinite(value) else 0
  return truncate(s, value)
