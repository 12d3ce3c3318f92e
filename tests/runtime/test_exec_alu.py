"""exec_alu (runtime/ops.py) against numpy for every ALU op on every dtype it applies to, with C semantics.

Oracle: numpy with the dtype's numpy type (integer arrays wrap like C; float16/float32 round like C); bfloat16, which
numpy lacks, is computed in float64 and rounded by an independent reference here. What C leaves undefined is checked
against the definitions documented in runtime/ops.py. Transcendentals (SIN, EXP2, LOG2, POW) may differ from numpy by
a few ulps; everything else must agree bit for bit (including the sign of zero).

Example counts: every (op, dtype) pair gets an exhaustive run over a table of special values (nan, +-inf, +-0,
extremes, subnormals, ...) plus a hypothesis test of EXAMPLES = 40 random operand tuples: 20 ops x 4 float dtypes,
19 ops x 8 int dtypes and 17 ops on bool, i.e. 249 pairs and ~10,000 hypothesis examples in all.
"""
import itertools, math
from fractions import Fraction
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from runtime import Ops, GroupOp, dtypes, exec_alu
from runtime.ops import threefry2x32

EXAMPLES = 40
FLOATS = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)
INTS = (dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64)
INT_ONLY = frozenset({Ops.XOR, Ops.OR, Ops.AND, Ops.SHL, Ops.SHR, Ops.THREEFRY})
FLOAT_ONLY = frozenset({Ops.FDIV, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIPROCAL})
TRANSCENDENTAL = frozenset({Ops.SIN, Ops.EXP2, Ops.LOG2, Ops.POW})
FLOAT_OPS = sorted(GroupOp.ALU - INT_ONLY)
INT_OPS = sorted(GroupOp.ALU - FLOAT_ONLY - {Ops.THREEFRY})  # THREEFRY: known-answer tests below
# bool shifts: C promotes bool to int before shifting, ops.py shifts within a 1-bit width; only shifts by 0 agree (see the report)
BOOL_OPS = [op for op in INT_OPS if op not in (Ops.SHL, Ops.SHR)]
ARITY = {**{o: 1 for o in GroupOp.Unary}, **{o: 2 for o in GroupOp.Binary}, **{o: 3 for o in GroupOp.Ternary}}

# ---- bfloat16: an independent round-to-nearest-even of a float32 value to 8 significant bits ----

def bf16_round(x: float) -> float:
  if math.isnan(x) or math.isinf(x) or x == 0: return x
  with np.errstate(over="ignore"): x = float(np.float32(x))  # C computes bfloat16 arithmetic in float, then rounds the float to bfloat16
  if math.isinf(x): return x
  exp = math.frexp(x)[1]
  quantum = max(exp - 8, -133)  # 8 significant bits; subnormals share float32's smallest exponent
  r = math.copysign(round(x / 2.0**quantum) * 2.0**quantum, x)  # round() on a float rounds half to even
  return math.copysign(math.inf, x) if abs(r) >= 2.0**128 else r

def round_to(dt, x: float) -> float:
  if dt is dtypes.bfloat16: return bf16_round(x)
  with np.errstate(over="ignore"): return float(dtypes.to_numpy(dt).type(x))

# ---- comparing floats: bit-exact, or within a few ulps ----

def ordered_bits(dt, x: float) -> int:
  # float bits mapped to integers in value order (-0.0 and 0.0 both map to 0), so a difference counts ulps
  if dt is dtypes.bfloat16: return ordered_bits(dtypes.float32, x) // 65536
  np_t, int_t, bits = {dtypes.float16: (np.float16, np.int16, 16), dtypes.float32: (np.float32, np.int32, 32),
                       dtypes.float64: (np.float64, np.int64, 64)}[dt]
  i = int(np.array([x], dtype=np_t).view(int_t)[0])
  return i if i >= 0 else -(i & ((1 << (bits - 1)) - 1))

def assert_float_equal(dt, got, want, ulps: int = 0, what: str = "", zero_sign: bool = True):
  assert isinstance(got, float), f"{what}: {got!r} is not a float"
  if math.isnan(want) or math.isnan(got):
    assert math.isnan(want) and math.isnan(got), f"{what}: got {got!r}, numpy gives {want!r}"
    return
  if ulps == 0:
    same_sign = not zero_sign or math.copysign(1.0, got) == math.copysign(1.0, want)
    assert got == want and same_sign, f"{what}: got {got!r}, numpy gives {want!r}"
  else:
    assert abs(ordered_bits(dt, got) - ordered_bits(dt, want)) <= ulps, f"{what}: got {got!r}, numpy gives {want!r} (> {ulps} ulps)"

# ---- the numpy oracle ----

_np_float = {Ops.ADD: np.add, Ops.SUB: np.subtract, Ops.MUL: np.multiply, Ops.FDIV: np.divide, Ops.MOD: np.fmod, Ops.MAX: np.maximum,
             Ops.POW: np.power, Ops.NEG: np.negative, Ops.EXP2: np.exp2, Ops.LOG2: np.log2, Ops.SIN: np.sin, Ops.SQRT: np.sqrt,
             Ops.RECIPROCAL: lambda x: x.dtype.type(1) / x, Ops.TRUNC: np.trunc, Ops.IDIV: lambda x, y: np.trunc(np.divide(x, y)),
             Ops.CMPLT: np.less, Ops.CMPNE: np.not_equal, Ops.CMPEQ: np.equal, Ops.WHERE: np.where}

def fused(dt, x: float, y: float, z: float) -> float:
  """x*y + z of finite operands rounded once to dt (C's fma): the exact value, then the nearer of the two floats of dt
  around it (ties: the even one)."""
  r = Fraction(x) * Fraction(y) + Fraction(z)
  if r == 0: return x * y + z  # IEEE's sign of an exact zero (x*y == -z exactly)
  t, u = {dtypes.float32: (np.float32, np.uint32), dtypes.float64: (np.float64, np.uint64)}[dt]
  try: d = float(r)
  except OverflowError: return math.inf if r > 0 else -math.inf
  with np.errstate(all="ignore"):
    f = t(d)
    if not np.isfinite(f): return float(f)  # past the largest finite value
    lo, hi = (f, np.nextafter(f, t(np.inf))) if Fraction(float(f)) <= r else (np.nextafter(f, t(-np.inf)), f)
  if not np.isfinite(lo) or not np.isfinite(hi): return float(f)
  dl, dh = r - Fraction(float(lo)), Fraction(float(hi)) - r
  return float(lo if dl < dh or dl == dh and not int(np.array([lo]).view(u)[0]) & 1 else hi)

def ref_float(op: Ops, dt, args: list):
  """The numpy value of op on float operands of dt (bfloat16: float64, then rounded)."""
  if op is Ops.MULACC and dt in (dtypes.float32, dtypes.float64) and all(math.isfinite(a) for a in args):
    return fused(dt, *args)
  if op is Ops.MULACC:  # documented: float16 and bfloat16 compute in double, then round to the dtype (and specials)
    x, y, z = (np.float64(a) for a in args)
    with np.errstate(all="ignore"): return round_to(dt, float(x * y + z))
  if op is Ops.IDIV and dt is dtypes.bfloat16:  # TRUNC(FDIV): the quotient is a bfloat16 before it is truncated
    return float(np.trunc(ref_float(Ops.FDIV, dt, args)))
  np_t = np.float64 if dt is dtypes.bfloat16 else dtypes.to_numpy(dt).type
  xs = [a if op is Ops.WHERE and i == 0 else np.array([a], dtype=np_t) for i, a in enumerate(args)]
  with np.errstate(all="ignore"): r = _np_float[op](*xs)[0]
  if op in GroupOp.Comparison: return bool(r)
  return round_to(dt, float(r))

_np_int = {Ops.ADD: np.add, Ops.SUB: np.subtract, Ops.MUL: np.multiply, Ops.NEG: np.negative, Ops.MAX: np.maximum, Ops.XOR: np.bitwise_xor,
           Ops.OR: np.bitwise_or, Ops.AND: np.bitwise_and, Ops.SHL: np.left_shift, Ops.SHR: np.right_shift, Ops.TRUNC: lambda x: x,
           Ops.CMPLT: np.less, Ops.CMPNE: np.not_equal, Ops.CMPEQ: np.equal, Ops.WHERE: np.where, Ops.MULACC: lambda x, y, z: x * y + z}

def ref_int(op: Ops, dt, args: list):
  """The numpy value of op on integer operands of dt, wrapping, with ops.py's definitions where C has none."""
  if dt is dtypes.bool:
    # C promotes bools to int, computes, and converts back: nonzero is true
    r = ref_int(op, dtypes.int32, [a if op is Ops.WHERE and i == 0 else int(a) for i, a in enumerate(args)])
    return bool(r)
  np_t, signed = dtypes.to_numpy(dt).type, not dtypes.is_unsigned(dt)
  bits, lo = 8 * dt.itemsize, dtypes.min(dt)
  xs = [a if op is Ops.WHERE and i == 0 else np.array([a], dtype=np_t) for i, a in enumerate(args)]
  with np.errstate(all="ignore"):
    if op is Ops.IDIV:
      a, b = args
      if b == 0: return 0  # defined: x // 0 == 0
      if signed and a == lo and b == -1: return lo  # defined: INT_MIN // -1 wraps
      if bits <= 32: return int(np.trunc(np.float64(a) / np.float64(b)))  # exact below 2**53
      return int(((xs[0] - np.fmod(xs[0], xs[1])) // xs[1])[0])  # exact: x - x%y is a multiple of y
    if op is Ops.MOD:
      a, b = args
      if b == 0: return a  # defined: x % 0 == x
      return int(np.fmod(xs[0], xs[1])[0])
    if op is Ops.POW and args[1] < 0:  # C has no integer pow: the truncated real power, with 0**-n == 0
      a, b = args
      return 1 if a == 1 else (-1 if b % 2 else 1) if a == -1 else 0
    if op is Ops.POW: return int(np.power(xs[0], xs[1])[0])
    # numpy's shifts use the same definitions as ops.py outside [0, bits): 0, or -1 for SHR of a negative value
    r = _np_int[op](*xs)[0]
  return bool(r) if op in GroupOp.Comparison else int(r)

def ref(op: Ops, dt, args: list):
  return ref_float(op, dt, args) if dtypes.is_float(dt) else ref_int(op, dt, args)

def result_dtype(op: Ops, dt): return dtypes.bool if op in GroupOp.Comparison else dt

def check(op: Ops, dt, args: list):
  got = exec_alu(op, result_dtype(op, dt), list(args))
  want = ref(op, dt, args)
  what = f"{op}({', '.join(map(repr, args))}) on {dt}"
  if isinstance(want, bool):
    assert got is want, f"{what}: got {got!r}, numpy gives {want!r}"
  elif isinstance(want, float):
    # max(0.0, -0.0): C's fmax may return either zero, and numpy's answer differs between float16 and float64
    assert_float_equal(dt, got, want, ulps=4 if op in TRANSCENDENTAL else 0, what=what, zero_sign=op is not Ops.MAX)
  else:
    assert type(got) is int and got == want, f"{what}: got {got!r}, numpy gives {want!r}"

# ---- operand values ----

def float_specials(dt) -> list[float]:
  big = dtypes.to_numpy(dt if dt is not dtypes.bfloat16 else dtypes.float32)
  fmax, tiny = float(np.finfo(big).max), float(np.finfo(big).smallest_subnormal)
  vals = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 7.0, -8.0, 100.0, 1e-3, fmax, -fmax, tiny, -tiny, math.pi]
  return [round_to(dt, v) for v in vals]

def int_specials(dt) -> list[int]:
  lo, hi, bits = dtypes.min(dt), dtypes.max(dt), 8 * dt.itemsize
  return sorted({v for v in (0, 1, -1, 2, -2, 3, -3, 7, -8, bits - 1, bits, bits + 1, lo, lo + 1, hi, hi - 1) if lo <= v <= hi})

def values(dt) -> st.SearchStrategy:
  if dt is dtypes.bool: return st.booleans()
  if dtypes.is_int(dt):
    lo, hi = dtypes.min(dt), dtypes.max(dt)
    return st.one_of(st.integers(lo, hi), st.sampled_from(int_specials(dt)), st.integers(max(lo, -2), min(hi, 8 * dt.itemsize + 2)))
  if dt is dtypes.bfloat16: return st.floats(width=32).map(bf16_round)
  return st.floats(width={dtypes.float16: 16, dtypes.float32: 32, dtypes.float64: 64}[dt])

def operands(op: Ops, dt) -> st.SearchStrategy:
  n = ARITY[op]
  if op is Ops.WHERE: return st.tuples(st.booleans(), values(dt), values(dt))
  return st.tuples(*[values(dt)] * n)

def special_operands(op: Ops, dt):
  vals = [False, True] if dt is dtypes.bool else float_specials(dt) if dtypes.is_float(dt) else int_specials(dt)
  if op is Ops.WHERE: return [(c, a, b) for c in (False, True) for a in vals for b in vals]
  if op is Ops.MULACC: vals = vals[:10]
  return list(itertools.product(vals, repeat=ARITY[op]))

CASES = [(op, dt) for dt in FLOATS for op in FLOAT_OPS] + [(op, dt) for dt in INTS for op in INT_OPS] + [(op, dtypes.bool) for op in BOOL_OPS]
IDS = [f"{op.name}-{dt.name.replace(' ', '_')}" for op, dt in CASES]

@pytest.mark.parametrize("op,dt", CASES, ids=IDS)
def test_special_values(op, dt):
  for args in special_operands(op, dt): check(op, dt, list(args))

@pytest.mark.parametrize("op,dt", CASES, ids=IDS)
def test_random_values(op, dt):
  @settings(max_examples=EXAMPLES, deadline=None, database=None)
  @given(operands(op, dt))
  def run(args): check(op, dt, list(args))
  run()

@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.float64], ids=str)
def test_mulacc_rounds_once(dt):
  """MULACC is C's fma: where c cancels most of a*b, or is tiny beside it, rounding the product first would differ."""
  rng = np.random.default_rng(7)
  t = dtypes.to_numpy(dt).type
  a, b = (rng.standard_normal(300) * 2.0 ** rng.integers(-30, 30, 300)).astype(t), rng.standard_normal(300).astype(t)
  c = (-(a.astype(np.float64) * b) * (1 + rng.standard_normal(300) * 1e-4)).astype(t)
  c[::3] = (rng.standard_normal(100) * 1e-7).astype(t)
  unfused = 0
  for x, y, z in zip(a.tolist(), b.tolist(), c.tolist()):
    want = fused(dt, x, y, z)
    assert_float_equal(dt, exec_alu(Ops.MULACC, dt, [x, y, z]), want, what=f"MULACC({x!r}, {y!r}, {z!r}) on {dt}")
    unfused += float(t(t(x) * t(y)) + t(z)) != want
  assert unfused > 50  # the cases tell a fused from an unfused multiply-add

# ---- what C leaves undefined, as ops.py defines it ----

@pytest.mark.parametrize("dt", INTS, ids=lambda d: d.name)
def test_division_by_zero(dt):
  for x in int_specials(dt):
    assert exec_alu(Ops.IDIV, dt, [x, 0]) == 0
    assert exec_alu(Ops.MOD, dt, [x, 0]) == x
    # so x == (x//y)*y + x%y holds for y == 0 too
    assert exec_alu(Ops.IDIV, dt, [x, 0]) * 0 + exec_alu(Ops.MOD, dt, [x, 0]) == x

@pytest.mark.parametrize("dt", [d for d in INTS if not dtypes.is_unsigned(d)], ids=lambda d: d.name)
def test_int_min_divided_by_minus_one(dt):
  lo = dtypes.min(dt)
  assert exec_alu(Ops.IDIV, dt, [lo, -1]) == lo
  assert exec_alu(Ops.MOD, dt, [lo, -1]) == 0
  assert exec_alu(Ops.NEG, dt, [lo]) == lo
  assert exec_alu(Ops.MUL, dt, [lo, -1]) == lo

@pytest.mark.parametrize("dt", INTS, ids=lambda d: d.name)
def test_truncating_division_and_remainder(dt):
  signed = not dtypes.is_unsigned(dt)
  cases = [(7, 2, 3, 1), (7, 3, 2, 1)] + ([(-7, 2, -3, -1), (7, -2, -3, 1), (-7, -2, 3, -1), (-1, 2, 0, -1)] if signed else [])
  for x, y, q, r in cases:
    assert exec_alu(Ops.IDIV, dt, [x, y]) == q and exec_alu(Ops.MOD, dt, [x, y]) == r, (x, y)

@pytest.mark.parametrize("dt", INTS, ids=lambda d: d.name)
def test_shifts_out_of_range(dt):
  bits, signed = 8 * dt.itemsize, not dtypes.is_unsigned(dt)
  amounts = [bits, bits + 1, dtypes.max(dt)] + ([-1, -bits, dtypes.min(dt)] if signed else [])
  for y in amounts:
    assert exec_alu(Ops.SHL, dt, [1, y]) == 0 and exec_alu(Ops.SHR, dt, [5, y]) == 0, y
    if signed: assert exec_alu(Ops.SHR, dt, [-5, y]) == -1, y
  assert exec_alu(Ops.SHL, dt, [1, bits - 1]) == dtypes.min(dt) if signed else 2**(bits - 1)
  if signed: assert exec_alu(Ops.SHR, dt, [dtypes.min(dt), bits - 1]) == -1  # arithmetic shift

def test_bool_shift_by_zero():
  for x in (False, True):
    assert exec_alu(Ops.SHL, dtypes.bool, [x, False]) is x and exec_alu(Ops.SHR, dtypes.bool, [x, False]) is x
    assert exec_alu(Ops.SHR, dtypes.bool, [x, True]) is False

@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: d.name)
def test_float_division_by_zero(dt):
  inf, nan = math.inf, math.nan
  for x, y, want in [(1.0, 0.0, inf), (-1.0, 0.0, -inf), (1.0, -0.0, -inf), (-1.0, -0.0, inf), (0.0, 0.0, nan), (nan, 0.0, nan),
                     (inf, 0.0, inf), (0.0, inf, 0.0), (-0.0, 1.0, -0.0)]:
    assert_float_equal(dt, exec_alu(Ops.FDIV, dt, [x, y]), want, what=f"{x}/{y}")
    assert_float_equal(dt, exec_alu(Ops.IDIV, dt, [x, y]), want, what=f"{x}//{y}")
  assert_float_equal(dt, exec_alu(Ops.RECIPROCAL, dt, [0.0]), inf)
  assert_float_equal(dt, exec_alu(Ops.RECIPROCAL, dt, [-0.0]), -inf)
  assert math.isnan(exec_alu(Ops.MOD, dt, [1.0, 0.0])) and math.isnan(exec_alu(Ops.MOD, dt, [inf, 2.0]))
  assert_float_equal(dt, exec_alu(Ops.MOD, dt, [-3.0, inf]), -3.0)

@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: d.name)
def test_float_nan_and_inf(dt):
  nan, inf = math.nan, math.inf
  for a, b in [(nan, 1.0), (1.0, nan), (nan, nan), (nan, -inf), (inf, nan)]:
    assert math.isnan(exec_alu(Ops.MAX, dt, [a, b])), (a, b)  # nan propagates, as np.maximum
  assert exec_alu(Ops.MAX, dt, [-inf, 1.0]) == 1.0 and exec_alu(Ops.MAX, dt, [inf, 1.0]) == inf
  assert math.isnan(exec_alu(Ops.LOG2, dt, [-1.0])) and exec_alu(Ops.LOG2, dt, [0.0]) == -inf and exec_alu(Ops.LOG2, dt, [-0.0]) == -inf
  assert exec_alu(Ops.LOG2, dt, [inf]) == inf and math.isnan(exec_alu(Ops.LOG2, dt, [nan]))
  assert math.isnan(exec_alu(Ops.SQRT, dt, [-1.0])) and math.isnan(exec_alu(Ops.SQRT, dt, [-inf])) and exec_alu(Ops.SQRT, dt, [inf]) == inf
  assert_float_equal(dt, exec_alu(Ops.SQRT, dt, [-0.0]), -0.0)
  assert exec_alu(Ops.EXP2, dt, [inf]) == inf and exec_alu(Ops.EXP2, dt, [-inf]) == 0.0 and exec_alu(Ops.EXP2, dt, [1e6]) == inf
  assert math.isnan(exec_alu(Ops.SIN, dt, [inf])) and math.isnan(exec_alu(Ops.SIN, dt, [-inf])) and math.isnan(exec_alu(Ops.SIN, dt, [nan]))
  assert math.isnan(exec_alu(Ops.POW, dt, [-8.0, 0.5])) and exec_alu(Ops.POW, dt, [nan, 0.0]) == 1.0 and exec_alu(Ops.POW, dt, [1.0, nan]) == 1.0
  assert exec_alu(Ops.POW, dt, [0.0, -1.0]) == inf and exec_alu(Ops.POW, dt, [-0.0, -1.0]) == -inf and exec_alu(Ops.POW, dt, [10.0, 1e6]) == inf
  assert exec_alu(Ops.POW, dt, [-10.0, 1e6 + 1]) == -inf and exec_alu(Ops.POW, dt, [-10.0, 1e6]) == inf
  assert math.isnan(exec_alu(Ops.TRUNC, dt, [nan])) and exec_alu(Ops.TRUNC, dt, [-inf]) == -inf
  assert_float_equal(dt, exec_alu(Ops.TRUNC, dt, [-0.5]), -0.0)
  assert exec_alu(Ops.CMPNE, dtypes.bool, [nan, nan]) is True and exec_alu(Ops.CMPEQ, dtypes.bool, [nan, nan]) is False
  assert exec_alu(Ops.CMPLT, dtypes.bool, [nan, 1.0]) is False and exec_alu(Ops.CMPLT, dtypes.bool, [1.0, nan]) is False

@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16, dtypes.float32], ids=lambda d: d.name)
def test_float_rounding(dt):
  # results round to the dtype: 1 + 2**-30 is 1 below float64, and a too-large finite sum overflows to inf
  assert exec_alu(Ops.ADD, dt, [1.0, 2.0**-30]) == 1.0
  big = float_specials(dt)[14]
  assert exec_alu(Ops.ADD, dt, [big, big]) == math.inf and exec_alu(Ops.MUL, dt, [big, -2.0]) == -math.inf
  assert exec_alu(Ops.FDIV, dt, [1.0, 3.0]) == round_to(dt, 1 / 3) != 1 / 3

def test_pow_with_huge_integer_exponent():
  # the result wraps to the dtype, without computing a huge Python integer first
  assert exec_alu(Ops.POW, dtypes.int64, [3, 2**62]) == 1  # 3 has order 2**62 modulo 2**64
  assert exec_alu(Ops.POW, dtypes.uint64, [3, 2**64 - 1]) == pow(3, 2**64 - 1, 2**64)
  assert exec_alu(Ops.POW, dtypes.int8, [2, 127]) == 0 and exec_alu(Ops.POW, dtypes.int8, [-1, 127]) == -1

@pytest.mark.parametrize("dt", INTS + (dtypes.bool,), ids=lambda d: d.name)
def test_float_only_ops_raise_on_ints(dt):
  for op in FLOAT_ONLY:
    with pytest.raises(ValueError, match=op.name): exec_alu(op, dt, [1] * ARITY[op])

@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: d.name)
def test_int_only_ops_raise_on_floats(dt):
  for op in INT_ONLY:
    with pytest.raises(ValueError, match=op.name): exec_alu(op, dt, [1.0] * ARITY[op])

def test_vectors_apply_lane_by_lane():
  assert exec_alu(Ops.ADD, dtypes.int.vec(3), [(1, 2, 1), (10, 20, 2**31 - 1)]) == (11, 22, -2**31)
  assert exec_alu(Ops.MUL, dtypes.float.vec(2), [(1.5, 2.0), 2.0]) == (3.0, 4.0)  # a scalar broadcasts
  assert exec_alu(Ops.CMPLT, dtypes.bool.vec(2), [(1, 5), (2, 2)]) == (True, False)
  assert exec_alu(Ops.WHERE, dtypes.int.vec(2), [(True, False), (1, 2), (3, 4)]) == (1, 4)

def test_comparisons_take_the_operand_type_from_the_operands():
  assert exec_alu(Ops.CMPLT, dtypes.bool, [0.5, 0.75]) is True  # not truncated to ints
  assert exec_alu(Ops.CMPLT, dtypes.bool, [2**40, 2**41]) is True  # nor to 32 bits
  assert exec_alu(Ops.CMPEQ, dtypes.bool, [True, True]) is True

# Threefry-2x32, 20 rounds: the known-answer vectors of Random123 (counter, key -> result), as 64-bit words (high word first there)
THREEFRY_KAT = [((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6b200159, 0x99ba4efe)),
                ((0xffffffff, 0xffffffff), (0xffffffff, 0xffffffff), (0x1cb996fc, 0xbb002be7)),
                ((0x243f6a88, 0x85a308d3), (0x13198a2e, 0x03707344), (0xc4923a9c, 0x483df7a0))]

@pytest.mark.parametrize("ctr,key,want", THREEFRY_KAT)
def test_threefry_known_answers(ctr, key, want):
  # word 0 is the low half of the 64-bit value
  pack = lambda w: w[1] << 32 | w[0]
  assert threefry2x32(pack(ctr), pack(key)) == pack(want)
  assert exec_alu(Ops.THREEFRY, dtypes.uint64, [pack(ctr), pack(key)]) == pack(want)
