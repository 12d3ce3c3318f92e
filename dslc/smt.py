"""SMT meanings for `python -m dslc verify`: each scalar dtype as a z3 sort and the value of every ALU op, CAST, BITCAST
and constant exactly as runtime/ops.py defines them (exec_alu, cast_value), Python ints (a guard's arithmetic) as
bit-vectors wide enough never to wrap, and range analysis (runtime/uop.py _bounds_of) over symbolic bounds.
Build time only, as the rest of dslc; needs z3 (`pip install -e '.[verify]'`). tests/dslc/test_smt.py checks every
meaning here against exec_alu, cast_value and _bounds_of on corner and random values.
"""
from __future__ import annotations
import math, struct
from contextlib import contextmanager
from typing import Any
import z3
from runtime.dtype import DTYPE_NAMES, DType, dtypes, truncate
from runtime.ops import GroupOp, Ops

class NoMeaning(Exception):
  """An op or a conversion with no value on a dtype (exec_alu raises ValueError for it): such a node can't be evaluated."""

class Unsupported(Exception):
  """Something the SMT meanings don't cover: the rule is reported unsupported with this reason."""

z3.set_param("memory_max_size", 4096)  # MB: a query that needs more ends as unknown (a timeout), not as the machine's memory
RNE: z3.FPRMRef
RTZ: z3.FPRMRef
FLOAT_SORTS: dict[DType, z3.FPSortRef] = {}
F64: z3.FPSortRef

def fresh_context() -> None:
  """A new z3 context for what follows (the driver takes one per rule): z3's answers near a resource limit depend on the
  terms made before (their ids order its search), so each rule's outcome is the same whatever was verified before it."""
  global RNE, RTZ, F64
  z3.z3._main_ctx = None  # z3py makes the next default context on first use
  RNE, RTZ = z3.RNE(), z3.RTZ()
  FLOAT_SORTS.clear()
  FLOAT_SORTS.update({dtypes.float16: z3.FPSort(5, 11), dtypes.bfloat16: z3.FPSort(8, 8), dtypes.float32: z3.Float32(), dtypes.float64: z3.Float64()})
  F64 = FLOAT_SORTS[dtypes.float64]
  _opaque_sorts.clear()
  _unknown.clear()
  forget_raw()
SCALARS: tuple[DType, ...] = dtypes.all()

def dname(d: DType) -> str:
  """A dtype's name as .rules writes it: int32, float16, bool."""
  return next((n for n, v in DTYPE_NAMES.items() if v is d and (any(c.isdigit() for c in n) or n in ("bool", "bfloat16"))), d.name)

def bits(d: DType) -> int: return 1 if d is dtypes.bool else 8 * d.itemsize
def is_int(d: DType) -> bool: return dtypes.is_int(d)
def signed(d: DType) -> bool: return dtypes.is_int(d) and not dtypes.is_unsigned(d)

_opaque_sorts: dict[str, z3.SortRef] = {}
def sort_of(d: DType) -> z3.SortRef:
  """bool: Bool; ints: a bit-vector of their width; floats: IEEE floating point; anything else (void, pointers, vectors)
  a sort of its own with no meaning."""
  if d is dtypes.bool: return z3.BoolSort()
  if dtypes.is_int(d) and d.count == 1: return z3.IntSort() if int_mode() else z3.BitVecSort(bits(d))
  if d in FLOAT_SORTS: return FLOAT_SORTS[d]
  key = repr(d)
  if key not in _opaque_sorts: _opaque_sorts[key] = z3.DeclareSort(f"T<{key}>")
  return _opaque_sorts[key]

def fresh(name: str, d: DType) -> z3.ExprRef: return z3.Const(name, sort_of(d))

def in_range(v: z3.ExprRef, d: DType) -> Any:
  """What a fresh value of dtype d satisfies: in the "int" encoding, the dtype's range (a bit-vector is in it by its width)."""
  if isinstance(v, z3.ArithRef): return z3.And(v >= int(dtypes.min(d)), v <= int(dtypes.max(d)))
  return True

def to_bv(v: z3.ExprRef, d: DType) -> z3.BitVecRef:
  """An int dtype's value as its bits, in either encoding."""
  return z3.Int2BV(v, bits(d)) if isinstance(v, z3.ArithRef) else v

def from_bv(e: z3.BitVecRef, d: DType) -> z3.ExprRef:
  """An int dtype's value from its bits, in the current encoding."""
  if not int_mode(): return e
  return _s2i(e) if signed(d) else _u2i(e)

def same(a: z3.ExprRef, b: z3.ExprRef, d: DType) -> z3.BoolRef:
  """Two values of dtype d are the same: equal bits, or both nan (z3's `=` on floats: nan = nan, +0 != -0); in the "int"
  encoding two ints congruent mod 2^n (either may not be wrapped yet)."""
  if isinstance(a, z3.ArithRef) and (is_raw(a) or is_raw(b)): return (a - b) % (1 << bits(d)) == 0
  return a == b

def ite(c, a: z3.ExprRef, b: z3.ExprRef) -> z3.ExprRef:
  out = z3.If(c, a, b)
  return raw(out) if isinstance(a, z3.ArithRef) and (is_raw(a) or is_raw(b)) else out

# ---- two encodings of ints, one meaning ----
# "bv": a dtype's values are bit-vectors of its width, C's wrapping is the bit-vector's. "int": they are mathematical
# integers kept in the dtype's range, every op wrapped explicitly (mod 2^n); z3 proves // and % identities far faster so
# (x % c + (x // c) * c == x at 64 bits: milliseconds, against no answer in a minute). Both are exact; the driver tries
# "bv" first. Python ints (a guard's arithmetic) follow the mode: wide bit-vectors, or integers. "intq" is "int" with each
# quotient and remainder a fresh integer (see _divmod): better where a guard says a divisor divides, worse elsewhere.
MODE = "bv"

@contextmanager
def encoding(mode: str):
  """Build terms in one encoding ("bv" or "int") inside the block."""
  global MODE
  old, MODE = MODE, mode
  try: yield
  finally: MODE = old

def int_mode() -> bool: return MODE in ("int", "intq")

def _s2i(e: z3.BitVecRef) -> z3.ArithRef:
  """A bit-vector read as a signed integer."""
  n = e.size()
  return z3.If(z3.Extract(n - 1, n - 1, e) == 1, z3.BV2Int(e) - (1 << n), z3.BV2Int(e))

def _u2i(e: z3.BitVecRef) -> z3.ArithRef: return z3.BV2Int(e)

# In the "int" encoding ADD, SUB, MUL and NEG leave their result unwrapped ("raw": congruent mod 2^n to the value), as wrapping
# commutes with them; what reads the value itself (a comparison, //, %, a cast, a guard) wraps it first (norm). So z3 sees
# x%c + (x//c)*c - x cancel as integers, instead of reasoning about a mod inside a product.
_RAW: dict[int, z3.ExprRef] = {}

def raw(e: z3.ExprRef) -> z3.ExprRef:
  _RAW[e.get_id()] = e
  return e

def is_raw(e: z3.ExprRef) -> bool: return isinstance(e, z3.ArithRef) and e.get_id() in _RAW

# Division in the "int" encoding: a quotient and a remainder are fresh integers defined by x == y*q + r and the remainder's
# range (facts the instance collects with take_defs), not z3's div and mod terms: z3 then sees that r == 0 makes x a multiple.
_DEFS: list = []
_DIVS: dict[tuple, tuple] = {}

def _divmod(x: z3.ArithRef, y: z3.ArithRef, trunc: bool) -> tuple[z3.ArithRef, z3.ArithRef]:
  """(q, r) with x == y*q + r where y != 0: C's truncation (r has x's sign) or Python's floor (r has y's sign). In the
  "int" encoding from z3's div on absolute values (|x| div |y| is one term for x // y and x // -y); in "intq", fresh."""
  if MODE != "intq":
    ax, ay = z3.If(x >= 0, x, -x), z3.If(y >= 0, y, -y)
    if trunc: q = z3.If((x >= 0) == (y > 0), ax / ay, -(ax / ay))
    else:
      e = x / y  # Euclidean (a remainder >= 0): one lower when y < 0 and it is not exact
      q = z3.If(z3.And(y < 0, x % y != 0), e - 1, e)
    return q, x - y * q
  key = (x.get_id(), y.get_id(), trunc)
  if key not in _DIVS:
    q, r = z3.FreshInt("q"), z3.FreshInt("r")
    if trunc: rng = z3.And(z3.If(y > 0, r < y, r < -y), z3.If(y > 0, r > -y, r > y), z3.Or(r == 0, (r > 0) == (x > 0)))
    else: rng = z3.If(y > 0, z3.And(0 <= r, r < y), z3.And(y < r, r <= 0))
    _DEFS.append(z3.Implies(y != 0, z3.And(x == y * q + r, rng)))
    _DIVS[key] = (q, r)
  return _DIVS[key]

def take_defs() -> list:
  out = list(_DEFS)
  _DEFS.clear()
  return out

def forget_raw() -> None:
  """Between instances: nothing built before is read again."""
  _RAW.clear()
  _WIDENED.clear()
  _DEFS.clear()
  _DIVS.clear()

def norm(e: z3.ExprRef, d: DType) -> z3.ExprRef:
  """The value itself (in the dtype's range) of a possibly raw int."""
  return wrap_int(e, d) if is_raw(e) else e

def wrap_int(v: z3.ArithRef, d: DType) -> z3.ArithRef:
  """An integer wrapped into int dtype d's range, as C's -fwrapv arithmetic (written as itself when it is in the range: z3
  then reasons without the mod where the guard keeps it there)."""
  n, lo, hi = bits(d), int(dtypes.min(d)), int(dtypes.max(d))
  w = (v + (1 << (n - 1))) % (1 << n) - (1 << (n - 1)) if signed(d) else v % (1 << n)
  return z3.If(z3.And(v >= lo, v <= hi), v, w)

class PInt:
  """A Python int (unbounded): a signed bit-vector of width w that never wraps (every operation widens enough), or in the
  "int" encoding an integer (w still bounds its width)."""
  __slots__ = ("e", "w")
  def __init__(self, e: z3.ExprRef, w: int): self.e, self.w = e, w
  @staticmethod
  def of(v: int) -> PInt:
    w = max(int(v).bit_length() + 1, 2)
    return PInt(z3.IntVal(int(v)) if int_mode() else z3.BitVecVal(v, w), w)
  def at(self, w: int) -> z3.ExprRef:
    if not isinstance(self.e, z3.BitVecRef): return self.e
    return self.e if w == self.w else z3.SignExt(w - self.w, self.e)
  def bv(self, w: int) -> z3.BitVecRef:
    """Its two's complement in w >= self.w bits, in either encoding."""
    return z3.Int2BV(self.e, w) if isinstance(self.e, z3.ArithRef) else self.at(w)
  def __repr__(self) -> str: return f"PInt({self.e}, {self.w})"

def fresh_pint(name: str, w: int) -> PInt: return PInt(z3.Int(name) if int_mode() else z3.BitVec(name, w), w)

def _from_bv(e: z3.BitVecRef, w: int) -> PInt:
  return PInt(_s2i(e), w) if int_mode() else PInt(e, w)

def as_pint(v: Any) -> PInt:
  if isinstance(v, PInt): return v
  if isinstance(v, bool): return PInt.of(int(v))
  if isinstance(v, int): return PInt.of(v)
  if isinstance(v, z3.BoolRef):
    return PInt(z3.If(v, z3.IntVal(1), z3.IntVal(0)), 2) if int_mode() else PInt(z3.If(v, z3.BitVecVal(1, 2), z3.BitVecVal(0, 2)), 2)
  raise Unsupported(f"{v!r} is not an int")

def _ints(a: PInt, b: PInt) -> bool: return isinstance(a.e, z3.ArithRef) or isinstance(b.e, z3.ArithRef)

def _two(a, b) -> tuple[z3.ExprRef, z3.ExprRef, int]:
  a, b = as_pint(a), as_pint(b)
  w = max(a.w, b.w)
  if _ints(a, b): return _as_int(a), _as_int(b), w
  return a.at(w), b.at(w), w

def _as_int(a: PInt) -> z3.ArithRef: return a.e if isinstance(a.e, z3.ArithRef) else _s2i(a.e)

def p_add(a, b) -> PInt:
  x, y, w = _two(a, b)
  if isinstance(x, z3.ArithRef): return PInt(x + y, w + 1)
  return PInt(z3.SignExt(1, x) + z3.SignExt(1, y), w + 1)
def p_sub(a, b) -> PInt:
  x, y, w = _two(a, b)
  if isinstance(x, z3.ArithRef): return PInt(x - y, w + 1)
  return PInt(z3.SignExt(1, x) - z3.SignExt(1, y), w + 1)
def p_neg(a) -> PInt:
  a = as_pint(a)
  if isinstance(a.e, z3.ArithRef): return PInt(-a.e, a.w + 1)
  return PInt(-a.at(a.w + 1), a.w + 1)
def p_mul(a, b) -> PInt:
  a, b = as_pint(a), as_pint(b)
  w = a.w + b.w
  if _ints(a, b): return PInt(_as_int(a) * _as_int(b), w)
  return PInt(a.at(w) * b.at(w), w)
def p_floordiv(a, b) -> PInt:
  """Python's a // b (floor); b != 0 is the caller's obligation."""
  x, y, w = _two(a, b)
  if isinstance(x, z3.ArithRef): return PInt(_divmod(x, y, False)[0], w + 1)
  x, y = z3.SignExt(1, x), z3.SignExt(1, y)  # INT_MIN // -1 needs one more bit
  q, r = x / y, z3.SRem(x, y)
  return PInt(z3.If(z3.And(r != 0, (r < 0) != (y < 0)), q - 1, q), w + 1)
def p_mod(a, b) -> PInt:
  """Python's a % b (the divisor's sign); b != 0 is the caller's obligation."""
  x, y, w = _two(a, b)
  if isinstance(x, z3.ArithRef): return PInt(_divmod(x, y, False)[1], w)
  r = z3.SRem(x, y)
  return PInt(z3.If(z3.And(r != 0, (r < 0) != (y < 0)), r + y, r), w)
def p_cmp(op: str, a, b) -> z3.BoolRef:
  x, y, _ = _two(a, b)
  return {"<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y, "==": x == y, "!=": x != y}[op]
def p_ite(c, a, b) -> PInt:
  if c is True: return as_pint(a)
  if c is False: return as_pint(b)
  x, y, w = _two(a, b)
  return PInt(z3.If(c, x, y), w)
def p_min(a, b) -> PInt: return p_ite(p_cmp("<", b, a), b, a)
def p_max(a, b) -> PInt: return p_ite(p_cmp(">", b, a), b, a)
def p_abs(a) -> PInt:
  a = as_pint(a)
  return p_ite(p_cmp("<", a, 0), p_neg(a), a)
def _via_bv(f, w: int, *xs: PInt) -> PInt:
  """A bitwise op in either encoding: on w-bit two's complements, the result back as a PInt of width w."""
  out = f(*[x.bv(w) for x in xs])
  return _from_bv(out, w) if any(isinstance(x.e, z3.ArithRef) for x in xs) or int_mode() else PInt(out, w)
def p_bit(op: str, a, b) -> PInt:
  a, b = as_pint(a), as_pint(b)
  f = {"&": lambda x, y: x & y, "|": lambda x, y: x | y, "^": lambda x, y: x ^ y}[op]
  return _via_bv(f, max(a.w, b.w), a, b)
def p_shl(a, k) -> PInt:
  """a << k, k >= 0 (the caller checks it) and below 128."""
  a, k = as_pint(a), as_pint(k)
  w = a.w + 128
  return _via_bv(lambda x, y: x << y, w, a, k)
def p_shr(a, k) -> PInt:
  a, k = as_pint(a), as_pint(k)
  return _via_bv(lambda x, y: x >> y, max(a.w, k.w), a, k)
def p_smear(a) -> PInt:
  """(1 << a.bit_length()) - 1 for a >= 0: every bit at or below a's highest set."""
  a = as_pint(a)
  def smear(x):
    s = 1
    while s < a.w: x, s = x | (x >> s), s * 2
    return x
  return _via_bv(smear, a.w, a)

# node values <-> Python values

def to_python(v: z3.ExprRef, d: DType) -> Any:
  """The Python value a node of dtype d holds (its arg, exec_alu's operand): an int as a PInt, a bool a Bool, a float a double."""
  if d is dtypes.bool: return v
  v = norm(v, d)
  if is_int(d):
    if isinstance(v, z3.ArithRef): return PInt(v, bits(d) + (0 if signed(d) else 1))
    return PInt(v, bits(d)) if signed(d) else PInt(z3.ZeroExt(1, v), bits(d) + 1)
  if d in FLOAT_SORTS:
    if d is dtypes.float64: return v
    out = z3.fpToFP(RNE, v, F64)
    _WIDENED[out.get_id()] = (out, d, v)
    return out
  raise Unsupported(f"a value of {d} in Python")

# a double that is a narrower float widened (exactly): rounding it back to that dtype, or a wider one, is exact
_WIDENED: dict[int, tuple] = {}

def round_to(d: DType, x: z3.FPRef) -> z3.FPRef:
  """A double rounded to the float dtype d as runtime/dtype.truncate does (bfloat16 through float32, as numpy does)."""
  if d is dtypes.float64: return x
  if (w := _WIDENED.get(x.get_id())) is not None:
    if w[1] is d: return w[2]
    if w[1].itemsize <= d.itemsize and not (w[1] is dtypes.bfloat16 and d is dtypes.float16): return z3.fpToFP(RNE, w[2], FLOAT_SORTS[d])
  if d is dtypes.bfloat16: return z3.fpToFP(RNE, z3.fpToFP(RNE, x, FLOAT_SORTS[dtypes.float32]), FLOAT_SORTS[d])
  return z3.fpToFP(RNE, x, FLOAT_SORTS[d])

def _wrap(e: z3.BitVecRef, w: int, n: int, sign: bool = True) -> z3.BitVecRef:
  """The low n bits of a w-bit two's complement value (a C cast to an n-bit int)."""
  if w >= n: return z3.Extract(n - 1, 0, e) if w > n else e
  return (z3.SignExt if sign else z3.ZeroExt)(n - w, e)

def _float_to_int(x: z3.FPRef, n: int) -> z3.BitVecRef:
  """cast_value of a double to an n-bit int: truncated toward zero, nan and inf give 0, then wrapped to n bits."""
  t = z3.fpRoundToIntegral(RTZ, x)
  m = z3.fpRem(t, z3.FPVal(float(2 ** n), F64))  # t - 2^n * nearest(t / 2^n): exact, in [-2^(n-1), 2^(n-1)]
  v = z3.Extract(n - 1, 0, z3.fpToSBV(RTZ, m, z3.BitVecSort(n + 1)))
  return z3.If(z3.Or(z3.fpIsNaN(x), z3.fpIsInf(x)), z3.BitVecVal(0, n), v)

def from_python(v: Any, d: DType) -> z3.ExprRef:
  """cast_value(v, d): a Python value (int, bool, float; concrete or symbolic) as a node value of dtype d."""
  if isinstance(v, float): v = z3.FPVal(v, F64)
  elif isinstance(v, (bool, int)) and not isinstance(v, z3.ExprRef): v = PInt.of(int(v)) if not isinstance(v, bool) else z3.BoolVal(v)
  if d is dtypes.bool:
    if isinstance(v, PInt): return v.e != 0
    if isinstance(v, z3.BoolRef): return v
    return z3.Not(z3.fpIsZero(v))  # bool(nan) is True
  if is_int(d):
    if isinstance(v, z3.BoolRef):
      if int_mode(): return z3.If(v, z3.IntVal(1), z3.IntVal(0))
      return z3.If(v, z3.BitVecVal(1, bits(d)), z3.BitVecVal(0, bits(d)))
    if isinstance(v, PInt):
      if isinstance(v.e, z3.ArithRef): return raw(v.e) if int_mode() else z3.Int2BV(v.e, bits(d))
      return _wrap(v.e, v.w, bits(d)) if not int_mode() else wrap_int(_s2i(v.e), d)
    return from_bv(_float_to_int(v, bits(d)), d)
  if d in FLOAT_SORTS:
    if isinstance(v, z3.BoolRef): return z3.If(v, z3.FPVal(1.0, FLOAT_SORTS[d]), z3.FPVal(0.0, FLOAT_SORTS[d]))
    if isinstance(v, PInt): return round_to(d, z3.fpToFP(RNE, v.bv(v.w), F64))  # float(int) rounds to a double first
    return round_to(d, v)
  raise Unsupported(f"a constant of {d}")

def cast(v: z3.ExprRef, src: DType, dst: DType) -> z3.ExprRef:
  """The value of CAST: cast_value of the source's Python value."""
  if src is dst: return v
  return from_python(to_python(v, src), dst)

def bitcast(v: z3.ExprRef, src: DType, dst: DType) -> z3.ExprRef:
  """The value of BITCAST: the same bits read as another dtype of the same size (a nan's bits are any nan's)."""
  if src.itemsize != dst.itemsize or dtypes.bool in (src, dst): raise NoMeaning(f"BITCAST from {src} to {dst}")
  v = norm(v, src)
  raw = z3.fpToIEEEBV(v) if src in FLOAT_SORTS else to_bv(v, src)
  return z3.fpBVToFP(raw, FLOAT_SORTS[dst]) if dst in FLOAT_SORTS else from_bv(raw, dst)

# ---- the ALU ops: exec_alu's meaning on one dtype ----

_unknown: dict[tuple, z3.FuncDeclRef] = {}
def unknown_fn(op: Ops, d: DType, arity: int) -> z3.FuncDeclRef:
  """A function with no SMT meaning (EXP2, SIN, THREEFRY, ...): the same one for the same op and dtype, nothing more known."""
  key = (op, d, arity, MODE)
  if key not in _unknown: _unknown[key] = z3.Function(f"{op.name}<{d.name}>", *[sort_of(d)] * arity, sort_of(d))
  return _unknown[key]

# no SMT meaning: transcendental functions, the hash, and POW (an int POW by a symbolic exponent is 64 chained products:
# gigabytes of circuit for nothing a rule needs)
OPAQUE_ALU = {Ops.THREEFRY, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.POW}

def has_meaning(op: Ops, d: DType) -> bool:
  """exec_alu gives op a value on operands of dtype d (the operand dtype: a comparison's sources')."""
  if d not in SCALARS: return False
  if dtypes.is_float(d): return op not in (Ops.XOR, Ops.OR, Ops.AND, Ops.SHL, Ops.SHR, Ops.THREEFRY)
  return op not in (Ops.FDIV, Ops.SQRT, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.RECIPROCAL)

def alu(op: Ops, d: DType, args: list[z3.ExprRef], operand: DType) -> z3.ExprRef:
  """The value of ALU op with result dtype d on sources of dtype `operand` (a comparison's; WHERE's branches' for WHERE)."""
  if not has_meaning(op, operand): raise NoMeaning(f"{op.name} has no meaning on {operand}")
  if op in OPAQUE_ALU: return unknown_fn(op, operand, len(args))(*args)
  if op is Ops.WHERE: return ite(args[0], args[1], args[2])
  if operand is dtypes.bool: return _bool_alu(op, args)
  if is_int(operand):
    if isinstance(args[0], z3.ArithRef): return _int_alu_int(op, args, operand)
    return _int_alu(op, args, bits(operand), signed(operand))
  return _float_alu(op, operand, args)

def _bool_alu(op: Ops, a: list) -> z3.ExprRef:
  x = a[0]
  if op in (Ops.NEG, Ops.TRUNC): return x
  y = a[1]
  table = {Ops.ADD: z3.Or(x, y), Ops.MAX: z3.Or(x, y), Ops.OR: z3.Or(x, y), Ops.SUB: z3.Xor(x, y), Ops.XOR: z3.Xor(x, y),
           Ops.CMPNE: z3.Xor(x, y), Ops.MUL: z3.And(x, y), Ops.AND: z3.And(x, y), Ops.IDIV: z3.And(x, y), Ops.CMPEQ: x == y,
           Ops.CMPLT: z3.And(z3.Not(x), y), Ops.MOD: z3.And(x, z3.Not(y)), Ops.SHL: z3.And(x, z3.Not(y)),
           Ops.SHR: z3.And(x, z3.Not(y)), Ops.POW: z3.Or(x, z3.Not(y))}
  if op is Ops.MULACC: return z3.Or(z3.And(x, y), a[2])
  return table[op]

def _int_alu(op: Ops, a: list, n: int, sign: bool) -> z3.ExprRef:
  x = a[0]
  zero = z3.BitVecVal(0, n)
  if op is Ops.NEG: return -x
  if op is Ops.TRUNC: return x
  y = a[1]
  if op is Ops.ADD: return x + y
  if op is Ops.SUB: return x - y
  if op is Ops.MUL: return x * y
  if op is Ops.MULACC: return x * y + a[2]
  if op is Ops.CMPLT: return x < y if sign else z3.ULT(x, y)
  if op is Ops.CMPNE: return x != y
  if op is Ops.CMPEQ: return x == y
  if op is Ops.MAX: return z3.If((x < y) if sign else z3.ULT(x, y), y, x)
  if op is Ops.IDIV: return z3.If(y == 0, zero, x / y if sign else z3.UDiv(x, y))   # x // 0 == 0; INT_MIN // -1 wraps
  if op is Ops.MOD: return z3.If(y == 0, x, z3.SRem(x, y) if sign else z3.URem(x, y))  # x % 0 == x; the dividend's sign
  if op is Ops.XOR: return x ^ y
  if op is Ops.OR: return x | y
  if op is Ops.AND: return x & y
  out = z3.Or(y < 0, y >= n) if sign else z3.UGE(y, n)  # a shift out of range
  if op is Ops.SHL: return z3.If(out, zero, x << y)
  if op is Ops.SHR:
    if sign: return z3.If(out, z3.If(x < 0, ~zero, zero), x >> y)
    return z3.If(out, zero, z3.LShR(x, y))
  raise NoMeaning(f"{op.name} on ints")

def _int_alu_int(op: Ops, a: list, d: DType) -> z3.ExprRef:
  # the "int" encoding: exact integers wrapped into the dtype after each op; bit operations go through bit-vectors
  x = a[0]
  if op is Ops.TRUNC: return x
  if op is Ops.NEG: return raw(-x)
  if op is Ops.ADD: return raw(x + a[1])
  if op is Ops.SUB: return raw(x - a[1])
  if op is Ops.MUL: return raw(x * a[1])
  if op is Ops.MULACC: return raw(x * a[1] + a[2])
  a = [norm(v, d) for v in a]
  x, y = a[0], a[1]
  if op is Ops.CMPLT: return x < y
  if op is Ops.CMPNE: return x != y
  if op is Ops.CMPEQ: return x == y
  if op is Ops.MAX: return z3.If(x < y, y, x)
  if op in (Ops.IDIV, Ops.MOD):
    t, r = _divmod(x, y, True)  # C's truncating quotient and remainder (y != 0)
    if op is Ops.MOD: return z3.If(y == 0, x, r)
    if op is Ops.IDIV:  # x // 0 == 0; INT_MIN // -1 wraps to INT_MIN, the one quotient out of range
      return z3.If(y == 0, 0, z3.If(z3.And(x == int(dtypes.min(d)), y == -1), x, t) if signed(d) else t)
  n, sign = bits(d), signed(d)
  return from_bv(_int_alu(op, [to_bv(v, d) for v in a], n, sign), d)

def _float_alu(op: Ops, d: DType, a: list) -> z3.ExprRef:
  # exec_alu computes in double (Python floats) and rounds to the dtype: written so, literally
  up = [z3.fpToFP(RNE, v, F64) if d is not dtypes.float64 else v for v in a]
  x = a[0]
  if op is Ops.NEG: return z3.fpNeg(x)
  if op is Ops.TRUNC: return z3.fpRoundToIntegral(RTZ, x)
  if op is Ops.SQRT: return round_to(d, z3.fpSqrt(RNE, up[0]))
  if op is Ops.RECIPROCAL: return round_to(d, z3.fpDiv(RNE, z3.FPVal(1.0, F64), up[0]))
  y = a[1]
  if op in (Ops.ADD, Ops.MUL) and x.get_id() > y.get_id(): up = [up[1], up[0]]  # IEEE + and * commute: one term for both orders
  if op is Ops.ADD: return round_to(d, z3.fpAdd(RNE, up[0], up[1]))
  if op is Ops.SUB: return round_to(d, z3.fpSub(RNE, up[0], up[1]))
  if op is Ops.MUL: return round_to(d, z3.fpMul(RNE, up[0], up[1]))
  if op is Ops.FDIV: return round_to(d, z3.fpDiv(RNE, up[0], up[1]))
  if op is Ops.IDIV: return z3.fpRoundToIntegral(RTZ, round_to(d, z3.fpDiv(RNE, up[0], up[1])))
  if op is Ops.CMPLT: return z3.fpLT(x, y)
  if op is Ops.CMPNE: return z3.Not(z3.fpEQ(x, y))
  if op is Ops.CMPEQ: return z3.fpEQ(x, y)
  if op is Ops.MAX: return z3.If(z3.fpIsNaN(x), x, z3.If(z3.fpGT(x, y), x, y))
  if op is Ops.MOD:
    # C's fmod (exact): IEEE's remainder moved by |y| toward x's sign when their signs differ
    r = z3.fpRem(x, y)
    ay = z3.fpAbs(y)
    moved = z3.fpAdd(RNE, r, z3.If(z3.fpIsNegative(x), z3.fpNeg(ay), ay))
    return z3.If(z3.And(z3.Not(z3.fpIsZero(r)), z3.fpIsNegative(r) != z3.fpIsNegative(x), z3.Not(z3.fpIsNaN(r))), moved, r)
  if op is Ops.MULACC:
    if d in (dtypes.float32, dtypes.float64): return z3.fpFMA(RNE, x, y, a[2])  # C's fma: rounded once
    return round_to(d, z3.fpAdd(RNE, z3.fpMul(RNE, up[0], up[1]), up[2]))  # the fma in double, then the dtype
  raise NoMeaning(f"{op.name} on {d}")

# ---- range analysis: runtime/uop.py _bounds_of with symbolic bounds (PInt; bools as 0 and 1) ----

def dtype_bounds(d: DType) -> tuple[PInt, PInt]:
  return PInt.of(int(dtypes.min(d))), PInt.of(int(dtypes.max(d)))

def _fits(d: DType, lo: PInt, hi: PInt) -> tuple[PInt, PInt]:
  dlo, dhi = dtype_bounds(d)
  out = z3.Or(p_cmp("<", lo, dlo), p_cmp(">", hi, dhi))
  return p_ite(out, dlo, lo), p_ite(out, dhi, hi)

def _pick(c, a: tuple, b: tuple) -> tuple[PInt, PInt]: return p_ite(c, a[0], b[0]), p_ite(c, a[1], b[1])

def _bool3(c_true, c_false) -> tuple[PInt, PInt]:
  # (True, True) if c_true else (False, False) if c_false else (False, True)
  t, f, tf = (PInt.of(1), PInt.of(1)), (PInt.of(0), PInt.of(0)), (PInt.of(0), PInt.of(1))
  return _pick(c_true, t, _pick(c_false, f, tf))

def _trunc_div(a: PInt, b: PInt) -> PInt:
  x, y, w = _two(a, b)
  if isinstance(x, z3.ArithRef): return PInt(_divmod(x, y, True)[0], w + 1)
  x, y = z3.SignExt(1, x), z3.SignExt(1, y)
  return PInt(x / y, w + 1)  # z3's signed division truncates, as _trunc_div (b never 0 here)

def int_bounds(op: Ops, d: DType, s: list[tuple[PInt, PInt]]) -> tuple[PInt, PInt]:
  """_bounds_of for an ALU node of int or bool dtype d whose sources' bounds are s (all int or bool sources)."""
  if op in GroupOp.Comparison:
    (alo, ahi), (blo, bhi) = s
    if op is Ops.CMPLT: return _bool3(p_cmp("<", ahi, blo), p_cmp(">=", alo, bhi))
    always_eq = z3.And(p_cmp("==", alo, ahi), p_cmp("==", ahi, blo), p_cmp("==", blo, bhi))
    never_eq = z3.Or(p_cmp("<", ahi, blo), p_cmp("<", bhi, alo))
    return _bool3(never_eq, always_eq) if op is Ops.CMPNE else _bool3(always_eq, never_eq)
  if op is Ops.WHERE:
    (clo, chi), a, b = s
    return _pick(clo.e != 0, a, _pick(chi.e == 0, b, (p_min(a[0], b[0]), p_max(a[1], b[1]))))
  if d is dtypes.bool:
    (alo, ahi), (blo, bhi) = s[0], s[1] if len(s) > 1 else s[0]
    if op in (Ops.AND, Ops.MUL): return p_min(alo, blo), p_min(ahi, bhi)  # `and` of 0/1
    if op in (Ops.OR, Ops.ADD, Ops.MAX): return p_max(alo, blo), p_max(ahi, bhi)
    return PInt.of(0), PInt.of(1)
  if op is Ops.ADD: return _fits(d, p_add(s[0][0], s[1][0]), p_add(s[0][1], s[1][1]))
  if op is Ops.SUB: return _fits(d, p_sub(s[0][0], s[1][1]), p_sub(s[0][1], s[1][0]))
  if op is Ops.NEG: return _fits(d, p_neg(s[0][1]), p_neg(s[0][0]))
  if op is Ops.MUL:
    p = [p_mul(a, b) for a in s[0] for b in s[1]]
    return _fits(d, p_min(p_min(p[0], p[1]), p_min(p[2], p[3])), p_max(p_max(p[0], p[1]), p_max(p[2], p[3])))
  if op is Ops.MAX: return p_max(s[0][0], s[1][0]), p_max(s[0][1], s[1][1])
  if op is Ops.IDIV:
    (alo, ahi), (blo, bhi) = s
    one_sign = z3.Or(p_cmp(">", blo, 0), p_cmp("<", bhi, 0))
    # with a divisor of one sign: the extremes of the four quotients (the divisor is never 0 then: guard it anyway)
    safe = [p_ite(one_sign, b, PInt.of(1)) for b in (blo, bhi)]
    q = [_trunc_div(a, b) for a in (alo, ahi) for b in safe]
    mono = _fits(d, p_min(p_min(q[0], q[1]), p_min(q[2], q[3])), p_max(p_max(q[0], q[1]), p_max(q[2], q[3])))
    m = p_max(p_abs(alo), p_abs(ahi))
    return _pick(one_sign, mono, _fits(d, p_neg(m), m))
  if op is Ops.MOD:
    (alo, ahi), (blo, bhi) = s
    one_sign = z3.Or(p_cmp(">", blo, 0), p_cmp("<", bhi, 0))
    m1 = p_min(p_abs(blo), p_abs(bhi))
    m2 = p_sub(p_max(p_abs(blo), p_abs(bhi)), 1)
    below = (p_ite(p_cmp("<", alo, 0), p_max(alo, p_neg(m2)), PInt.of(0)), p_ite(p_cmp(">", ahi, 0), p_min(ahi, m2), PInt.of(0)))
    same_x = z3.And(p_cmp("<=", 0, alo), p_cmp("<", ahi, m1))
    return _pick(one_sign, _pick(same_x, (alo, ahi), below), (p_min(alo, 0), p_max(ahi, 0)))
  if op in (Ops.AND, Ops.OR, Ops.XOR):
    nonneg = z3.And(p_cmp(">=", s[0][0], 0), p_cmp(">=", s[1][0], 0))
    if op is Ops.AND: res = (PInt.of(0), p_min(s[0][1], s[1][1]))
    else:
      top = p_smear(p_max(s[0][1], s[1][1]))
      res = (p_max(s[0][0], s[1][0]) if op is Ops.OR else PInt.of(0), top)
    return _pick(nonneg, res, dtype_bounds(d))
  n = bits(d)
  if op in (Ops.SHL, Ops.SHR):
    (alo, ahi), (klo, khi) = s
    fixed = z3.And(p_cmp("==", klo, khi), p_cmp(">=", klo, 0), p_cmp("<", klo, n))
    k = p_ite(fixed, klo, PInt.of(0))
    res = _fits(d, p_shl(alo, k), p_shl(ahi, k)) if op is Ops.SHL else (p_shr(alo, k), p_shr(ahi, k))
    return _pick(fixed, res, dtype_bounds(d))
  return dtype_bounds(d)

def cast_bounds(d: DType, lo: PInt, hi: PInt) -> tuple[PInt, PInt]:
  """_cast_bounds for an int or bool source's bounds."""
  if d is dtypes.bool:
    crosses = z3.And(p_cmp("<=", lo, 0), p_cmp("<=", 0, hi), p_cmp("!=", lo, hi))
    nz = p_ite(z3.Or(lo.e != 0, hi.e != 0), PInt.of(1), PInt.of(0))
    return _pick(crosses, (PInt.of(0), PInt.of(1)), (nz, nz))
  dlo, dhi = dtype_bounds(d)
  inside = z3.And(p_cmp("<=", dlo, lo), p_cmp("<=", hi, dhi))
  return _pick(inside, (lo, hi), (dlo, dhi))

def concrete(e: z3.ExprRef, d: DType | None = None) -> Any:
  """A z3 value (after model evaluation) as a Python value: a bool, an int (signed per d, or as a PInt's width), a float."""
  e = z3.simplify(e)
  if z3.is_true(e): return True
  if z3.is_false(e): return False
  if z3.is_int_value(e): return e.as_long() if d is None or not is_int(d) else int(truncate(d, e.as_long()))
  if z3.is_bv_value(e):
    v, n = e.as_long(), e.size()
    return v - (1 << n) if (d is None or signed(d)) and v >= 1 << (n - 1) else v
  if isinstance(e, z3.FPNumRef):
    if e.isNaN(): return math.nan
    raw = z3.simplify(z3.fpToIEEEBV(e)).as_long()
    if (e.ebits(), e.sbits()) == (11, 53): return struct.unpack("<d", raw.to_bytes(8, "little"))[0]
    if (e.ebits(), e.sbits()) == (8, 24): return struct.unpack("<f", raw.to_bytes(4, "little"))[0]
    if (e.ebits(), e.sbits()) == (5, 11): return struct.unpack("<e", raw.to_bytes(2, "little"))[0]
    return struct.unpack("<f", (raw << 16).to_bytes(4, "little"))[0]  # bfloat16: the top half of a float32
  raise Unsupported(f"no concrete value for {e}")

fresh_context()
