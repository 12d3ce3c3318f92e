"""dslc/smt.py against its definitions: every ALU op on every dtype against exec_alu, casts and bitcasts against cast_value and
the PYTHON device, range analysis against runtime/uop.py, on corner values (0, -1, the extremes, nan, -0.0, inf, subnormals)
and random ones. A proof by `dslc verify` is only as good as these meanings."""
import math, random, struct
import pytest
z3 = pytest.importorskip("z3", reason="dslc verify needs z3: pip install -e '.[verify]'")
from runtime.dtype import dtypes, truncate  # noqa: E402
from runtime.ops import ARITY, GroupOp, Ops, cast_value, exec_alu  # noqa: E402
from runtime.ops_python import _bitcast  # noqa: E402
from runtime.uop import UOp, uop  # noqa: E402
from dslc import smt  # noqa: E402

INTS = [d for d in dtypes.all() if dtypes.is_int(d)]
FLOATS = [dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64]

def corner_values(d, rng: random.Random, n: int) -> list:
  if d is dtypes.bool: return [False, True]
  if dtypes.is_int(d):
    lo, hi = dtypes.min(d), dtypes.max(d)
    vals = [0, 1, 2, -1, -2, lo, lo + 1, hi, hi - 1, 7, -7, 8 * d.itemsize, 8 * d.itemsize - 1, 3]
    vals += [rng.randint(lo, hi) for _ in range(n)] + [rng.randint(-20, 20) for _ in range(n)]
    return sorted({truncate(d, v) for v in vals})
  vals = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 7.0, math.inf, -math.inf, math.nan, 1e-40, -3e-39, 65504.0, 1e30, 2.0 ** -20]
  vals += [rng.uniform(-100, 100) for _ in range(n)] + [rng.choice([-1, 1]) * 2.0 ** rng.uniform(-140, 120) for _ in range(n)]
  return [truncate(d, v) for v in vals]

MODES = ["bv", "int", "intq"]

def z3_const(v, d):
  if d is dtypes.bool: return z3.BoolVal(v)
  if dtypes.is_int(d): return z3.IntVal(v) if smt.int_mode() else z3.BitVecVal(v, smt.bits(d))
  return z3.FPVal(v, smt.FLOAT_SORTS[d])

def value(e, d=None):
  """A term's value: the int encoding's quotients and remainders are fresh integers, fixed by the facts smt.take_defs gives."""
  defs = smt.take_defs()
  if not defs: return smt.concrete(e, d)
  s = z3.Solver()
  s.add(*defs)
  assert s.check() == z3.sat
  return smt.concrete(s.model().eval(e, model_completion=True), d)

def same_value(a, b) -> bool:
  if isinstance(a, float) or isinstance(b, float):
    if math.isnan(a) and math.isnan(b): return True
    return struct.pack("<d", a) == struct.pack("<d", b)
  return a == b and type(a) is type(b) or (a == b and not isinstance(a, bool) and not isinstance(b, bool))

def check_op(op, d, operands) -> None:
  operand = d if op not in GroupOp.Comparison else operands[0][1]
  out_dt = dtypes.bool if op in GroupOp.Comparison else d
  try: want = exec_alu(op, out_dt, [v for v, _ in operands])
  except (ValueError, OverflowError): return
  smt.forget_raw()
  got = value(smt.alu(op, out_dt, [z3_const(v, t) for v, t in operands], operand), out_dt)
  assert same_value(want, got), f"{op.name} {d} {[v for v, _ in operands]}: exec_alu {want!r}, smt {got!r}"

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("d", [dtypes.bool, *INTS, *FLOATS], ids=lambda d: d.name)
def test_alu_matches_exec_alu(d, mode):
  with smt.encoding(mode): _alu_matches(d)

def _alu_matches(d):
  rng = random.Random(1234 + d.priority)
  vals = corner_values(d, rng, 6)
  for op in sorted(GroupOp.ALU - {Ops.WHERE}, key=lambda o: o.value):
    if not smt.has_meaning(op, d) or op in smt.OPAQUE_ALU: continue
    n = ARITY[op]
    combos = [[rng.choice(vals) for _ in range(n)] for _ in range(60)]
    if n == 2: combos += [[a, b] for a in vals[:12] for b in vals[:12]]
    for c in combos: check_op(op, d, [(v, d) for v in c])
  for c in [[rng.choice([True, False]), rng.choice(vals), rng.choice(vals)] for _ in range(20)]:
    check_op(Ops.WHERE, d, [(c[0], dtypes.bool), (c[1], d), (c[2], d)])

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("src", [dtypes.bool, *INTS, *FLOATS], ids=lambda d: d.name)
def test_cast_matches_cast_value(src, mode):
  with smt.encoding(mode): _cast_matches(src)

def _cast_matches(src):
  rng = random.Random(99 + src.priority)
  # a double just above a bfloat16 tie that float32 rounds onto it, an int64 that a double rounds onto a float32 tie: both round twice
  vals = corner_values(src, rng, 10) + ([2.0 ** 40 + 3, -1e19, 4e9, 3e38, 1.5e300, 1 + 2 ** -8 + 2 ** -30] if src is dtypes.float64 else [])
  if src in (dtypes.int64, dtypes.uint64): vals += [2 ** 53 + 1, 2 ** 63 - 1, 2 ** 62 + 2 ** 38 + 1, -(2 ** 60) - 1]
  for dst in [dtypes.bool, *INTS, *FLOATS]:
    for v in vals:
      v = truncate(src, v)
      want = cast_value(v, dst)
      got = value(smt.cast(z3_const(v, src), src, dst), dst)
      assert same_value(want, got), f"cast {src} {v!r} -> {dst}: cast_value {want!r}, smt {got!r}"
      if dst.itemsize == src.itemsize and dtypes.bool not in (src, dst) and not (dtypes.is_float(src) and math.isnan(v)):
        want = _bitcast(v, src, dst)
        got = value(smt.bitcast(z3_const(v, src), src, dst), dst)
        assert same_value(want, got), f"bitcast {src} {v!r} -> {dst}: {want!r}, smt {got!r}"

@pytest.mark.parametrize("mode", MODES)
def test_python_ints_never_wrap(mode):
  with smt.encoding(mode): _python_ints()

def _python_ints():
  rng = random.Random(5)
  for _ in range(300):
    a, b = rng.randint(-2 ** 70, 2 ** 70), rng.choice([rng.randint(-2 ** 40, 2 ** 40), rng.randint(-9, 9) or 1])
    pa, pb = smt.PInt.of(a), smt.PInt.of(b)
    for f, want in [(smt.p_add, a + b), (smt.p_sub, a - b), (smt.p_mul, a * b), (smt.p_floordiv, a // b), (smt.p_mod, a % b),
                    (smt.p_min, min(a, b)), (smt.p_max, max(a, b))]:
      smt.forget_raw()
      assert value(f(pa, pb).e) == want, (f.__name__, a, b)
    assert value(smt.p_abs(pa).e) == abs(a) and value(smt.p_neg(pa).e) == -a
    k = rng.randint(0, 60)
    assert value(smt.p_shl(pa, k).e) == a << k and value(smt.p_shr(pa, k).e) == a >> k
    if a >= 0: assert value(smt.p_smear(pa).e) == (1 << a.bit_length()) - 1
    for name, want in [("&", a & b), ("|", a | b), ("^", a ^ b)]: assert value(smt.p_bit(name, pa, pb).e) == want

def _bounds_pair(lo, hi):
  return smt.PInt.of(int(lo)), smt.PInt.of(int(hi))

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("d", [dtypes.bool, dtypes.int8, dtypes.uint8, dtypes.int32, dtypes.uint64], ids=lambda d: d.name)
def test_range_analysis_matches_uop(d, mode):
  """smt.int_bounds on concrete bounds gives what _bounds_of gives on variables with those bounds."""
  with smt.encoding(mode): _bounds_match(d)

def _bounds_match(d):
  rng = random.Random(7 + d.priority)
  def var_bounds():
    if d is dtypes.bool: return sorted([rng.choice([False, True]), rng.choice([False, True])])
    lo, hi = dtypes.min(d), dtypes.max(d)
    pts = [lo, hi, 0, 1, -1, 2, -3, 5, rng.randint(lo, hi), rng.randint(-9, 9)]
    return sorted(truncate(d, rng.choice(pts)) for _ in range(2))
  ops = [o for o in GroupOp.ALU if smt.has_meaning(o, d) and o not in (Ops.THREEFRY, Ops.POW, Ops.TRUNC)]
  for _ in range(600):
    op = rng.choice(ops)
    n = ARITY[op]
    bs = [var_bounds() for _ in range(n)]
    if op is Ops.WHERE: bs[0] = sorted([rng.choice([False, True]), rng.choice([False, True])])
    srcs = [UOp.variable(f"v{i}", b[0], b[1], dtypes.bool if op is Ops.WHERE and i == 0 else d) for i, b in enumerate(bs)]
    out_dt = dtypes.bool if op in GroupOp.Comparison else d
    want = uop(op, out_dt, tuple(srcs)).bounds
    smt.forget_raw()
    lo, hi = smt.int_bounds(op, out_dt, [_bounds_pair(*b) for b in bs])
    defs = smt.take_defs()
    s = z3.Solver()
    s.add(*defs)
    assert s.check() == z3.sat
    got = (smt.concrete(s.model().eval(lo.e, model_completion=True)), smt.concrete(s.model().eval(hi.e, model_completion=True)))
    assert tuple(int(x) for x in want) == got, f"{op.name} {d} on {bs}: _bounds_of {want}, smt {got}"
  for _ in range(200):
    b = var_bounds()
    dst = rng.choice([dtypes.bool, dtypes.int8, dtypes.uint16, dtypes.int32, dtypes.uint64])
    want = uop(Ops.CAST, dst, (UOp.variable("v", b[0], b[1], d),)).bounds
    lo, hi = smt.cast_bounds(dst, *_bounds_pair(*b))
    assert tuple(int(x) for x in want) == (value(lo.e), value(hi.e)), (d, dst, b)
