"""Every forward op of Tensor against numpy, on both devices: CPU (C compiled by cc) and PYTHON (the scalar interpreter).

Shapes are drawn by hypothesis (broadcasting pairs, 0-size and 1-element dims, 0-d tensors), dtypes from int32, float32
and bool plus int8, uint8, int64, float16 and float64; reductions take negative axes, tuples of axes and keepdim.
Floats compare with tolerances (nan equal to nan), ints and bools exactly. Dtypes follow numpy's promotion where numpy
and torch agree and torch's where they differ: an int meeting a float gives that float, and integer inputs to true
division and transcendental functions compute in float32. A Python number adapts to the tensor's dtype (numpy 2).

Ops tested on each device: 112 (the names in OPS; test_op_count keeps the number true).
"""
from __future__ import annotations
import math, operator, os, warnings
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from hypothesis.extra import numpy as hnp
from tensor import Tensor, dtypes, Device
from runtime import ops_cl
from tensor.errors import ArgumentValueError
from runtime.dtype import DType

# CL where an OpenCL platform is installed (CI: pocl; tests/devices says what to install where it is not)
DEVICES = ["CPU", "PYTHON"] + (["CL"] if ops_cl.available() else [])
# CPU examples each compile a kernel (~0.1 s cold), CL ones too (pocl); the PYTHON device interprets scalar by scalar, so
# tensors stay tiny. EXAMPLES_SCALE=20 runs twenty times as many (a fuzzing session, not CI)
EXAMPLES = {d: n * int(os.environ.get("EXAMPLES_SCALE", "1")) for d, n in {"CPU": 10, "PYTHON": 15, "CL": 3}.items()}
MAX_SIDE = 5
MAIN = [dtypes.int32, dtypes.float32, dtypes.bool]
MORE = [dtypes.int8, dtypes.uint8, dtypes.int64, dtypes.float16, dtypes.float64]
ALL = MAIN + MORE
INTS = [d for d in ALL if dtypes.is_int(d)]
FLOATS = [d for d in ALL if dtypes.is_float(d)]
NUMERIC = INTS + FLOATS

def run(device: str, fn, *strategies, examples: int | None = None) -> None:
  """Run hypothesis test `fn` with the device's example budget (a nested @given, so one test serves both devices)."""
  n = examples if examples is not None else EXAMPLES[device]
  settings(max_examples=n, deadline=None, suppress_health_check=list(HealthCheck), database=None)(given(*strategies)(fn))()

def np_dt(d: DType) -> np.dtype: return dtypes.to_numpy(d)

def dtype_from(choices) -> st.SearchStrategy[DType]:
  """int32/float32/bool twice as often as the others."""
  main = [d for d in choices if d in MAIN]
  return st.sampled_from(main * 2 + [d for d in choices if d not in MAIN])

def elements(d: DType, lo: float | None = None, hi: float | None = None, special: bool = False) -> st.SearchStrategy:
  """Values of dtype d in [lo, hi] (clipped to the dtype), with nan and +-inf when special."""
  if d is dtypes.bool: return st.booleans()
  if dtypes.is_int(d):
    a, b = dtypes.min(d), dtypes.max(d)
    return st.integers(a if lo is None else max(a, int(lo)), b if hi is None else min(b, int(hi)))
  width = 8 * d.itemsize
  if lo is None: return st.floats(width=width, allow_nan=special, allow_infinity=special, allow_subnormal=False)
  finite = st.floats(lo, hi, width=width, allow_subnormal=False)
  return st.one_of(finite, st.sampled_from([math.nan, math.inf, -math.inf])) if special else finite

def arrays(d: DType, shape, lo=None, hi=None, special=False) -> st.SearchStrategy[np.ndarray]:
  return hnp.arrays(np_dt(d), shape, elements=elements(d, lo, hi, special))

def int_values(d: DType, lo: int, hi: int) -> st.SearchStrategy:
  """Integer values in [lo, hi] for any dtype (exact in every float type; clipped to an int dtype's range)."""
  if d is dtypes.bool: return st.booleans()
  return st.integers(max(lo, dtypes.min(d)), min(hi, dtypes.max(d))) if dtypes.is_int(d) else st.integers(lo, hi)

def quarters(d: DType, lo: float, hi: float) -> st.SearchStrategy:
  """Multiples of 1/4 in [lo, hi] for floats (sums of a few of them are exact in float32), integers otherwise."""
  if not dtypes.is_float(d): return int_values(d, int(lo), int(hi))
  return st.integers(int(lo * 4), int(hi * 4)).map(lambda v: v / 4)

shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=MAX_SIDE)
pairs = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, min_side=0, max_side=MAX_SIDE)

TOL = {dtypes.float16: (2e-3, 2e-3), dtypes.float32: (2e-6, 1e-6), dtypes.float64: (1e-12, 1e-12)}

def check(out: Tensor, expected: np.ndarray, dtype: DType, scale: float = 1.0) -> None:
  """out has dtype `dtype` and expected's shape and values: floats within tolerance (times scale), others exactly."""
  assert out.dtype is dtype, f"dtype {out.dtype}, expected {dtype}"
  got = out.numpy()
  assert got.dtype == np_dt(dtype), f"numpy() gave {got.dtype} for {dtype}"
  expected = np.asarray(expected)
  assert got.shape == expected.shape, f"shape {got.shape}, expected {expected.shape}"
  with np.errstate(all="ignore"): want = expected.astype(got.dtype)
  if dtypes.is_float(dtype):
    rtol, atol = TOL[dtype]
    np.testing.assert_allclose(got, want, rtol=rtol * scale, atol=atol * scale, equal_nan=True)
  else: np.testing.assert_array_equal(got, want)

def promoted(a: DType, b: DType) -> DType:
  """The result dtype of a binary op: numpy's promotion, except that an int meeting a float gives that float (torch)."""
  if dtypes.is_float(a) != dtypes.is_float(b): return a if dtypes.is_float(a) else b
  return dtypes.from_numpy(np.result_type(np_dt(a), np_dt(b)))

def float_of(d: DType) -> DType: return d if dtypes.is_float(d) else dtypes.float32

# ---- elementwise binary ops ----
# name: (tensor op, numpy op on operands already in the compute dtype, dtypes allowed, value range, kind of result)
#   kind: "same" (the promoted dtype), "bool" (comparisons), "float" (computed in float32 for ints)
def _np_floordiv(a, b):
  if a.dtype.kind == "f": return np.floor_divide(a, b)
  return np.where(b == 0, 0, np.floor_divide(a, np.where(b == 0, 1, b)))  # numpy gives 0 too, with a warning
def _np_mod(a, b):
  if a.dtype.kind == "f": return np.mod(a, b)
  return np.where(b == 0, 0, np.mod(a, np.where(b == 0, 1, b)))

BINARY = {
  "add": (operator.add, np.add, ALL, None, "same"),
  "sub": (operator.sub, np.subtract, NUMERIC, None, "same"),
  "mul": (operator.mul, np.multiply, ALL, None, "same"),
  "div": (operator.truediv, np.true_divide, ALL, None, "float"),
  "floordiv": (operator.floordiv, _np_floordiv, NUMERIC, (-40, 40), "same"),
  "mod": (operator.mod, _np_mod, NUMERIC, (-40, 40), "same"),
  "pow": (operator.pow, np.power, NUMERIC, (-4, 4), "float"),
  "maximum": (Tensor.maximum, np.maximum, ALL, None, "same"),
  "minimum": (Tensor.minimum, np.minimum, ALL, None, "same"),
  "lt": (operator.lt, np.less, ALL, None, "bool"),
  "gt": (operator.gt, np.greater, ALL, None, "bool"),
  "le": (operator.le, np.less_equal, ALL, None, "bool"),
  "ge": (operator.ge, np.greater_equal, ALL, None, "bool"),
  "eq": (operator.eq, np.equal, ALL, None, "bool"),
  "ne": (operator.ne, np.not_equal, ALL, None, "bool"),
  "bitwise_and": (operator.and_, np.bitwise_and, INTS + [dtypes.bool], None, "same"),
  "bitwise_or": (operator.or_, np.bitwise_or, INTS + [dtypes.bool], None, "same"),
  "bitwise_xor": (operator.xor, np.bitwise_xor, INTS + [dtypes.bool], None, "same"),
  "copysign": (Tensor.copysign, np.copysign, ALL, None, "float"),
  "fmod": (Tensor.fmod, lambda a, b: np.fmod(a, b) if a.dtype.kind == "f" else np.where(b == 0, 0, np.fmod(a, np.where(b == 0, 1, b))),
           NUMERIC, None, "same"),
  "logaddexp": (Tensor.logaddexp, np.logaddexp, ALL, (-100, 100), "float"),
  "lshift": (operator.lshift, np.left_shift, INTS, None, "same"),
  "rshift": (operator.rshift, np.right_shift, INTS, None, "same"),
}

def _binary_inputs(name: str, da: DType, db: DType, sa, sb, data) -> tuple[np.ndarray, np.ndarray]:
  rng = BINARY[name][3]
  if name in ("lshift", "rshift"):
    # shift amounts around the bit width of the promoted type, negative ones included (0 or -1, as numpy gives too)
    bits = 8 * promoted(da, db).itemsize
    return data.draw(arrays(da, sa)), data.draw(hnp.arrays(np_dt(db), sb, elements=int_values(db, -2, bits + 1)))
  if rng is not None and name in ("floordiv", "mod"):
    # integer values: floor(a / b) of floats is then exact, as numpy's floor_divide computes it
    return (data.draw(hnp.arrays(np_dt(da), sa, elements=int_values(da, *rng))), data.draw(hnp.arrays(np_dt(db), sb, elements=int_values(db, *rng))))
  if rng is not None: return data.draw(arrays(da, sa, *rng, special=True)), data.draw(arrays(db, sb, *rng, special=True))
  big = {dtypes.float16: 1e3, dtypes.float32: 1e6, dtypes.float64: 1e6}
  return (data.draw(arrays(da, sa, -big.get(da, 0), big.get(da, 0), special=True) if dtypes.is_float(da) else arrays(da, sa)),
          data.draw(arrays(db, sb, -big.get(db, 0), big.get(db, 0), special=True) if dtypes.is_float(db) else arrays(db, sb)))

def _binary_expected(name: str, a: np.ndarray, b: np.ndarray, da: DType, db: DType) -> tuple[np.ndarray, DType]:
  _, np_fn, _, _, kind = BINARY[name]
  out = promoted(da, db)
  compute = float_of(out) if kind == "float" else out
  with np.errstate(all="ignore"), warnings.catch_warnings():
    warnings.simplefilter("ignore")
    res = np_fn(a.astype(np_dt(compute)), b.astype(np_dt(compute)))
  return res, (dtypes.bool if kind == "bool" else compute)

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(device, name):
  fn, _, allowed, _, _ = BINARY[name]
  def body(data, shp, da, db):
    if name == "sub" and da is dtypes.bool and db is dtypes.bool: db = dtypes.int8  # numpy refuses bool - bool
    a, b = _binary_inputs(name, da, db, shp.input_shapes[0], shp.input_shapes[1], data)
    expected, out_dt = _binary_expected(name, a, b, da, db)
    check(fn(Tensor(a, device=device), Tensor(b, device=device)), expected, out_dt, scale=4 if name == "pow" else 1)
  run(device, body, st.data(), pairs, dtype_from(allowed), dtype_from(allowed))

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(set(BINARY) - {"lshift", "rshift"}))
def test_binary_python_scalar(device, name):
  """t op x and x op t for a Python number x: x takes the tensor's dtype, except that a float makes an int or bool tensor
  float32 and an int makes a bool tensor int32. An int tensor to a non-negative int power stays int."""
  fn, np_fn, allowed, _, kind = BINARY[name]
  def body(data, shape, d, reverse):
    reverse = reverse and name not in ("maximum", "minimum", "copysign", "fmod", "logaddexp")  # methods, not operators: no reflected form
    a = data.draw(hnp.arrays(np_dt(d), shape, elements=quarters(d, -9, 9) if name not in ("floordiv", "mod") else int_values(d, -9, 9)))
    if d is dtypes.bool: py = data.draw(st.booleans())
    # an int inside the tensor's range (numpy 2 refuses others), or a float
    elif name in ("floordiv", "mod") or name.startswith("bitwise"): py = data.draw(int_values(d, -9, 9))
    elif name == "pow" and not reverse: py = data.draw(st.one_of(st.integers(0, 7), st.integers(-8, 8).map(lambda v: v / 4)))
    else: py = data.draw(st.one_of(int_values(d, -9, 9) if dtypes.is_int(d) else st.integers(-9, 9), st.integers(-36, 36).map(lambda v: v / 4)))
    out_dt = dtypes.float32 if isinstance(py, float) and not dtypes.is_float(d) else dtypes.int32 if d is dtypes.bool and type(py) is int else d
    int_pow = name == "pow" and not reverse and isinstance(py, int)
    compute = float_of(out_dt) if kind == "float" and not int_pow else out_dt
    x, y = a.astype(np_dt(compute)), np.array(py).astype(np_dt(compute))
    with np.errstate(all="ignore"), warnings.catch_warnings():
      warnings.simplefilter("ignore")
      expected = np_fn(y, x) if reverse else np_fn(x, y)
    t = Tensor(a, device=device)
    check(fn(py, t) if reverse else fn(t, py), expected, dtypes.bool if kind == "bool" else compute, scale=4 if name == "pow" else 1)
  run(device, body, st.data(), shapes, dtype_from(allowed), st.booleans(), examples=EXAMPLES[device] // 2 + 1)

def test_float_floordiv_and_mod_follow_numpy():
  """Float // and % are numpy's divmod: x % inf is x (inf for negative x), the remainder takes the divisor's sign (a
  zero one too), x // 0 is x / 0, and x == (x // y) * y + x % y wherever that is finite."""
  vals = [5.0, -5.0, 0.0, -0.0, 7.5, -7.5, math.inf, -math.inf, math.nan, 1e30, 3.0]
  a = np.array([x for x in vals for _ in vals], np.float32)
  b = np.array([y for _ in vals for y in vals], np.float32)
  for device in DEVICES:
    with np.errstate(all="ignore"):
      for op, np_op in ((operator.floordiv, np.floor_divide), (operator.mod, np.mod)):
        got, want = op(Tensor(a, device=device), Tensor(b, device=device)).numpy(), np_op(a, b)
        np.testing.assert_array_equal(got, want)
        real = ~np.isnan(want)
        np.testing.assert_array_equal(np.signbit(got[real]), np.signbit(want[real]))  # zeros keep numpy's sign
    assert (Tensor([5.0, -5.0, 5.0, -5.0], device=device) % Tensor([math.inf, math.inf, -math.inf, -math.inf], device=device)).tolist() == \
      [5.0, math.inf, -math.inf, -5.0]

def test_int_division_by_zero_is_defined():
  """// and % by zero follow numpy on ints (x//0 == 0, x%0 == 0) and never kill the process; C's INT_MIN // -1 wraps."""
  for device in DEVICES:
    a = Tensor([7, -7, 0, -2**31, -2**31, 5], dtype=dtypes.int32, device=device)
    b = Tensor([0, 0, 0, -1, 0, -3], dtype=dtypes.int32, device=device)
    assert (a // b).tolist() == [0, 0, 0, -2**31, 0, -2]
    assert (a % b).tolist() == [0, 0, 0, 0, 0, -1]
    u = Tensor([7, 255], dtype=dtypes.uint8, device=device)
    assert (u // 0).tolist() == [0, 0] and (u % 0).tolist() == [0, 0]

def test_where():
  for device in DEVICES:
    def body(data, dims, dc, dx, dy):
      c = data.draw(arrays(dc, dims.input_shapes[0], -2, 2))
      x = data.draw(arrays(dx, dims.input_shapes[1], -100, 100))
      y = data.draw(arrays(dy, dims.input_shapes[2], -100, 100))
      out_dt = promoted(dx, dy)
      expected = np.where(c.astype(bool), x.astype(np_dt(out_dt)), y.astype(np_dt(out_dt)))
      check(Tensor(c, device=device).where(Tensor(x, device=device), Tensor(y, device=device)), expected, out_dt)
      # Python numbers for one or both branches
      dt3 = dtypes.int32 if dx is dtypes.bool else dx  # a Python int meeting bool gives int32
      check(Tensor(c, device=device).where(Tensor(x, device=device), 3), np.where(c.astype(bool), x.astype(np_dt(dt3)), np.array(3, np_dt(dt3))), dt3)
      check(Tensor(c, device=device).where(-1.5, 2.5), np.where(c.astype(bool), np.float32(-1.5), np.float32(2.5)), dtypes.float32)
    triples = hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=3, min_side=0, max_side=MAX_SIDE)
    run(device, body, st.data(), triples, dtype_from(ALL), dtype_from(ALL), dtype_from(ALL))

# ---- elementwise unary ops ----
# name: (tensor op, numpy op, dtypes, value range, result: "same" or "float", tolerance scale)
def _np_sigmoid(x): return 1 / (1 + np.exp(-x))
UNARY = {
  "neg": (operator.neg, np.negative, NUMERIC, None, "same", 1),
  "abs": (Tensor.abs, np.abs, ALL, None, "same", 1),
  "exp": (Tensor.exp, np.exp, ALL, (-20, 20), "float", 4),
  "exp2": (Tensor.exp2, np.exp2, ALL, (-20, 20), "float", 2),
  "log": (Tensor.log, np.log, ALL, (-1, 1e4), "float", 4),
  "log2": (Tensor.log2, np.log2, ALL, (-1, 1e4), "float", 2),
  "sqrt": (Tensor.sqrt, np.sqrt, ALL, (-1, 1e4), "float", 1),
  "sin": (Tensor.sin, np.sin, ALL, (-10, 10), "float", 4),
  "cos": (Tensor.cos, np.cos, ALL, (-10, 10), "float", 8),
  "relu": (Tensor.relu, lambda x: np.where(x < 0, 0, x).astype(x.dtype), NUMERIC, None, "same", 1),
  "sigmoid": (Tensor.sigmoid, _np_sigmoid, ALL, (-20, 20), "float", 4),
  "tanh": (Tensor.tanh, np.tanh, ALL, (-10, 10), "float", 8),
  "bitwise_not": (operator.invert, np.invert, INTS + [dtypes.bool], None, "same", 1),
  "logical_not": (Tensor.logical_not, np.logical_not, ALL, None, "bool", 1),
  "trunc": (Tensor.trunc, np.trunc, NUMERIC, (-1e4, 1e4), "same", 1),
  "floor": (Tensor.floor, np.floor, NUMERIC, (-1e4, 1e4), "same", 1),
  "ceil": (Tensor.ceil, np.ceil, NUMERIC, (-1e4, 1e4), "same", 1),
  "round": (Tensor.round, np.round, NUMERIC, (-1e4, 1e4), "same", 1),
  "sign": (Tensor.sign, np.sign, NUMERIC, None, "same", 1),
  "signbit": (Tensor.signbit, np.signbit, NUMERIC, None, "bool", 1),
  "isnan": (Tensor.isnan, np.isnan, ALL, None, "bool", 1),
  "isinf": (Tensor.isinf, np.isinf, ALL, None, "bool", 1),
  "isfinite": (Tensor.isfinite, np.isfinite, ALL, None, "bool", 1),
  "square": (Tensor.square, np.square, NUMERIC, None, "same", 1),
  "reciprocal": (Tensor.reciprocal, np.reciprocal, ALL, (-1e3, 1e3), "float", 1),
  "rsqrt": (Tensor.rsqrt, lambda x: 1 / np.sqrt(x), ALL, (-1, 1e4), "float", 2),
  "tan": (Tensor.tan, np.tan, ALL, (-1.5, 1.5), "float", 16),
  "log10": (Tensor.log10, np.log10, ALL, (-1, 1e4), "float", 2),
  "log1p": (Tensor.log1p, np.log1p, ALL, (-2, 1e4), "float", 1),
  "expm1": (Tensor.expm1, np.expm1, ALL, (-20, 20), "float", 2),
  "atan": (Tensor.atan, np.arctan, ALL, None, "float", 1),
  "asin": (Tensor.asin, np.arcsin, ALL, (-1.5, 1.5), "float", 1),
  "acos": (Tensor.acos, np.arccos, ALL, (-1.5, 1.5), "float", 1),
  "sinh": (Tensor.sinh, np.sinh, ALL, (-20, 20), "float", 2),
  "cosh": (Tensor.cosh, np.cosh, ALL, (-20, 20), "float", 2),
  "asinh": (Tensor.asinh, np.arcsinh, ALL, None, "float", 1),
  "acosh": (Tensor.acosh, np.arccosh, ALL, (-2, 1e4), "float", 1),
  "atanh": (Tensor.atanh, np.arctanh, ALL, (-1.5, 1.5), "float", 1),
  "erf": (Tensor.erf, np.vectorize(math.erf, otypes=[np.float64]), ALL, None, "float", 1),
}

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(device, name):
  fn, np_fn, allowed, rng, kind, scale = UNARY[name]
  def body(data, shape, d):
    lo, hi = rng if rng is not None else (None, None)
    if d is dtypes.float16 and hi is not None: lo, hi = max(lo, -8), min(hi, 8)  # stay clear of half's overflow edge
    a = data.draw(arrays(d, shape, lo, hi, special=True) if dtypes.is_float(d) else arrays(d, shape, lo, hi))
    out_dt = dtypes.bool if kind == "bool" else float_of(d) if kind == "float" else d
    with np.errstate(all="ignore"): expected = np_fn(a.astype(np_dt(float_of(d))) if kind == "float" else a)
    # cos is sin(pi/2 - x): in half, pi/2 - x itself rounds by up to 4e-3
    check(fn(Tensor(a, device=device)), expected, out_dt, scale=scale * (4 if d is dtypes.float16 and name == "cos" else 1))
  run(device, body, st.data(), shapes, dtype_from(allowed))

def test_neg_of_bool_is_logical_not():
  for device in DEVICES: assert (-Tensor([True, False], device=device)).tolist() == [False, True]

@pytest.mark.parametrize("device", DEVICES)
def test_cast(device):
  """Every pair of dtypes, values inside the target's range (out of range: test_cast_out_of_range)."""
  def body(data, shape, src, dst):
    if dtypes.is_float(src) and dtypes.is_int(dst): a = data.draw(arrays(src, shape, max(dtypes.min(dst), -1e4), min(dtypes.max(dst), 1e4)))
    elif dtypes.is_float(src): a = data.draw(arrays(src, shape, -6e4, 6e4, special=True))
    else: a = data.draw(arrays(src, shape))
    with np.errstate(all="ignore"): expected = a.astype(np_dt(dst))
    check(Tensor(a, device=device).cast(dst), expected, dst)
  run(device, body, st.data(), shapes, st.sampled_from(ALL), st.sampled_from(ALL), examples=2 * EXAMPLES[device])

def test_cast_out_of_range():
  """Float to int outside the int's range: nan and inf give 0, finite values wrap (runtime/ops.py cast_value)."""
  for device in DEVICES:
    t = Tensor([300.5, -1.5, 255.9, math.nan, math.inf, -math.inf, -129.0], device=device)
    assert t.cast(dtypes.int8).tolist() == [44, -1, -1, 0, 0, 0, 127]
    assert t.cast(dtypes.uint8).tolist() == [44, 255, 255, 0, 0, 0, 127]
    assert t.cast(dtypes.bool).tolist() == [True] * 7

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fdt", [dtypes.float32, dtypes.float64, dtypes.float16, dtypes.bfloat16])
def test_cast_to_int_and_back_gives_positive_zero(device, fdt):
  """-0.5 -> int -> float is +0.0, as numpy gives (gcc folds (float)(int)x into truncf(x), which keeps -0.0: the C renderer
  writes these casts so it can't). 64 elements so the CPU kernel's vector loop runs too."""
  a = np.array([-0.5, -0.0, 0.5, -1.5, 2.5, -0.9, 0.0, -3.0] * 8, np.float32)
  for idt in (dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.int32, dtypes.int64):
    got = Tensor(a, device=device).cast(fdt).cast(idt).cast(fdt).float().numpy()
    expected = a.astype(np.int64).astype(np.float32)  # every value here fits each int type but uint8's negatives
    if idt is dtypes.uint8: expected = np.where(a <= -1, np.float32(256) + np.trunc(a), np.trunc(a)) + np.float32(0)
    assert got.tobytes() == expected.tobytes(), (fdt, idt, got, expected)

BITCASTS = [(dtypes.int32, dtypes.float32), (dtypes.float32, dtypes.int32), (dtypes.uint8, dtypes.int8), (dtypes.int8, dtypes.bool),
            (dtypes.int64, dtypes.float64), (dtypes.float64, dtypes.int64), (dtypes.float16, dtypes.int16), (dtypes.uint16, dtypes.float16)]

@pytest.mark.parametrize("device", DEVICES)
def test_bitcast(device):
  def body(data, shape, pair):
    src, dst = pair
    # no signalling nans: converting one to a wider float (the PYTHON device's Python floats) quiets it
    if dtypes.is_float(src): a = data.draw(arrays(src, shape, -1e4, 1e4, special=True))
    elif dst is dtypes.bool: a = data.draw(hnp.arrays(np_dt(src), shape, elements=st.integers(0, 1)))
    elif dtypes.is_float(dst):
      a = data.draw(arrays(src, shape))
      nan_bits = {dtypes.float32: 0x7F800000, dtypes.float64: 0x7FF0000000000000, dtypes.float16: 0x7C00}[dst]
      a = np.where((a & nan_bits) == nan_bits, 0, a).astype(a.dtype)
    else: a = data.draw(arrays(src, shape))
    check(Tensor(a, device=device).bitcast(dst), a.view(np_dt(dst)), dst)
  run(device, body, st.data(), shapes, st.sampled_from(BITCASTS))

# ---- reductions ----
def _acc(d: DType) -> DType:
  """sum's and prod's dtype: bools and ints add up in int64 (as torch), uint64 in itself, floats in their own type."""
  return d if dtypes.is_float(d) or d is dtypes.uint64 else dtypes.int64

REDUCE = {
  "sum": (Tensor.sum, lambda a, ax, kd: np.sum(a.astype(np_dt(_acc(dt_of(a)))), axis=ax, keepdims=kd), _acc),
  "prod": (Tensor.prod, lambda a, ax, kd: np.prod(a, axis=ax, keepdims=kd, dtype=np_dt(_acc(dt_of(a)))), _acc),
  "max": (Tensor.max, lambda a, ax, kd: np.max(a, axis=ax, keepdims=kd), lambda d: d),
  "min": (Tensor.min, lambda a, ax, kd: np.min(a, axis=ax, keepdims=kd), lambda d: d),
  "mean": (Tensor.mean, lambda a, ax, kd: np.mean(a.astype(np.float64), axis=ax, keepdims=kd), float_of),
  "argmax": (Tensor.argmax, lambda a, ax, kd: np.argmax(a, axis=ax, keepdims=kd), lambda d: dtypes.int32),
  "argmin": (Tensor.argmin, lambda a, ax, kd: np.argmin(a, axis=ax, keepdims=kd), lambda d: dtypes.int32),
}
IDENTITY = {"sum": lambda d: 0, "prod": lambda d: 1, "max": dtypes.min, "min": dtypes.max, "mean": lambda d: math.nan}

def dt_of(a: np.ndarray) -> DType: return dtypes.from_numpy(a.dtype)

@st.composite
def axes(draw, ndim: int, single: bool):
  """None, one axis or a tuple of axes, each maybe negative."""
  if ndim == 0: return None
  if single or draw(st.booleans()):
    if draw(st.integers(0, 3)) == 0 and not single: return None
    a = draw(st.integers(0, ndim - 1))
    return a - ndim if draw(st.booleans()) else a
  picked = draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True))
  return tuple(a - ndim if draw(st.booleans()) else a for a in picked)

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(REDUCE))
def test_reduce(device, name):
  fn, np_fn, out_rule = REDUCE[name]
  arg = name.startswith("arg")
  def body(data, shape, d, keepdim):
    axis = data.draw(axes(len(shape), single=arg) if not (arg and data.draw(st.booleans())) else st.none())
    # values whose sums (in float32, for a mean of ints) and products are the same in every order, without overflow;
    # any values for max, min and arg*; ints wrap the same in every order
    if name == "prod" and d is dtypes.float16: values = st.sampled_from([-1.0, -0.5, 0.5, 1.0])
    elif name == "prod": values = quarters(d, -1.5, 1.5) if dtypes.is_float(d) else int_values(d, -3, 3)
    elif name == "sum" and dtypes.is_int(d): values = elements(d)
    elif name in ("sum", "mean"): values = int_values(d, -10, 10) if d is dtypes.float16 else quarters(d, -1000, 1000)
    else: values = elements(d, special=True)
    a = data.draw(hnp.arrays(np_dt(d), shape, elements=values))
    norm = tuple(range(len(shape))) if axis is None else tuple(x % len(shape) for x in (axis if isinstance(axis, tuple) else (axis,)))
    if any(shape[x] == 0 for x in norm):
      if arg: return  # an empty axis has no maximum: test_errors
      if name in ("max", "min"):  # no value to give: an error, as torch and numpy
        with pytest.raises(ArgumentValueError, match=f"{name} over axis .* an axis of size 0 has no"): fn(Tensor(a, device=device), axis, keepdim)
        return
      # a reduction over nothing gives the op's identity
      ref = np.sum(np.zeros(shape), axis=None if axis is None else norm, keepdims=keepdim)
      check(fn(Tensor(a, device=device), axis, keepdim), np.full(ref.shape, IDENTITY[name](d)), out_rule(d))
      return
    t = fn(Tensor(a, device=device), axis, keepdim)
    with np.errstate(all="ignore"): expected = np_fn(a, axis, keepdim)
    check(t, expected, out_rule(d), scale=10)
  run(device, body, st.data(), shapes, dtype_from(ALL), st.booleans())

def test_reduce_nan():
  """max and min propagate nan; argmax and argmin point at the first nan, as numpy's."""
  for device in DEVICES:
    a = np.array([[1.5, math.nan, 3.0, math.nan], [0.0, -1.0, 2.0, 2.0]], np.float32)
    t = Tensor(a, device=device)
    check(t.max(1), np.max(a, 1), dtypes.float32)
    check(t.min(-1), np.min(a, -1), dtypes.float32)
    assert t.argmax(1).tolist() == np.argmax(a, 1).tolist() == [1, 2]
    assert t.argmin(1).tolist() == np.argmin(a, 1).tolist() == [1, 1]

def test_kernel_that_stops_reading_an_input():
  """argmax of one element simplifies to a kernel that no longer reads the input: the other buffers keep their places."""
  for device in DEVICES:
    assert Tensor([5], device=device).argmax().item() == 0
    assert Tensor([[5, 7]], device=device).argmax(0).tolist() == [0, 0]
    assert Tensor(np.array(3.5, np.float32), device=device).argmin().item() == 0

# ---- movement ----
@st.composite
def reshape_targets(draw, shape):
  """A shape with the same number of elements: the dims' prime factors regrouped, maybe with one -1."""
  n = math.prod(shape)
  if n == 0: return draw(st.sampled_from([(0,), (0, 1), tuple(reversed(shape)) or (0,)]))
  factors = [p for d in shape for p in _primes(d)]
  factors = draw(st.permutations(factors))
  out, i = [], 0
  while i < len(factors):
    k = draw(st.integers(1, max(1, len(factors) - i)))
    out.append(math.prod(factors[i:i + k]))
    i += k
  out += [1] * draw(st.integers(0, 1))
  out = draw(st.permutations(out))
  if out and draw(st.booleans()): out[draw(st.integers(0, len(out) - 1))] = -1
  return tuple(out)

def _primes(n: int) -> list[int]:
  out, p = [], 2
  while n > 1:
    while n % p == 0: out.append(p); n //= p  # noqa: E702
    p += 1
  return out

def _sign(draw, a: int, ndim: int) -> int: return a - ndim if draw(st.booleans()) else a

@st.composite
def movements(draw, shape):
  """(name, tensor op, numpy op) for one movement op with drawn arguments fitting `shape`."""
  nd = len(shape)
  name = draw(st.sampled_from(["reshape", "permute", "transpose", "expand", "pad", "shrink", "flip", "squeeze", "unsqueeze", "flatten"]))
  if name == "reshape":
    s = draw(reshape_targets(shape))
    return name, lambda t: t.reshape(s), lambda a: a.reshape(s)
  if name == "permute" or (name == "transpose" and nd < 2):
    order = tuple(_sign(draw, o, nd) for o in draw(st.permutations(range(nd))))
    return "permute", lambda t: t.permute(order), lambda a: np.transpose(a, order)
  if name == "transpose":
    x, y = _sign(draw, draw(st.integers(0, nd - 1)), nd), _sign(draw, draw(st.integers(0, nd - 1)), nd)
    return name, lambda t: t.transpose(x, y), lambda a: np.swapaxes(a, x, y)
  if name == "expand":
    new = tuple(draw(st.integers(0, 3)) if d == 1 else d for d in shape)
    lead = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    arg = lead + tuple(-1 if s == d and draw(st.booleans()) else s for s, d in zip(new, shape))
    return name, lambda t: t.expand(arg), lambda a: np.broadcast_to(a, lead + new)
  if name == "pad":
    pads = [(draw(st.integers(-d, 2)), draw(st.integers(-d, 2))) for d in shape]
    pads = [(b, a) if b + a >= -d else (b, 0) for (b, a), d in zip(pads, shape)]
    value = draw(st.sampled_from([0, 0, 1, 2]))  # fills every dtype takes (one that does not fit is an OverflowError: test_errors)
    def np_pad(a):
      if a.ndim == 0: return a
      sl = tuple(slice(-min(b, 0), d + min(e, 0)) for (b, e), d in zip(pads, shape))
      return np.pad(a[sl], [(max(b, 0), max(e, 0)) for b, e in pads], constant_values=np.array(value).astype(a.dtype))
    if draw(st.booleans()):  # torch style: a flat tuple, last axis first
      flat = tuple(v for b, e in reversed(pads) for v in (b, e))
      return name, lambda t: t.pad(flat, value=value), np_pad
    return name, lambda t: t.pad(tuple(pads), value=value), np_pad
  if name == "shrink":
    arg = []
    for d in shape:
      b = draw(st.integers(0, d))
      arg.append((b, draw(st.integers(b, d))))
    return name, lambda t: t.shrink(tuple(arg)), lambda a: a[tuple(slice(b, e) for b, e in arg)]
  if name == "flip":
    ax = tuple(_sign(draw, x, nd) for x in draw(st.lists(st.integers(0, nd - 1), max_size=nd, unique=True))) if nd else ()
    return name, lambda t: t.flip(ax) if ax else t, lambda a: np.flip(a, ax) if ax else a
  if name == "squeeze":
    if nd == 0 or draw(st.booleans()): return name, lambda t: t.squeeze(), lambda a: np.squeeze(a)
    x = _sign(draw, draw(st.integers(0, nd - 1)), nd)
    # torch's squeeze(dim): a dim that isn't 1 stays (numpy raises)
    return name, lambda t: t.squeeze(x), lambda a: np.squeeze(a, x) if a.shape[x] == 1 else a
  if name == "unsqueeze":
    x = draw(st.integers(-nd - 1, nd))
    return name, lambda t: t.unsqueeze(x), lambda a: np.expand_dims(a, x)
  if nd == 0: return name, lambda t: t.flatten(), lambda a: a.reshape(1)
  s, e = sorted((draw(st.integers(0, nd - 1)), draw(st.integers(0, nd - 1))))
  s2, e2 = _sign(draw, s, nd), _sign(draw, e, nd)
  return name, lambda t: t.flatten(s2, e2), lambda a: a.reshape(a.shape[:s] + (math.prod(a.shape[s:e + 1]),) + a.shape[e + 1:])

MOVEMENT = ["reshape", "permute", "transpose", "expand", "pad", "shrink", "flip", "squeeze", "unsqueeze", "flatten"]

def test_pad_load_stays_guarded():
  """A padded tensor of more than 4 elements (a loop, not upcast) with a nonzero fill: its loads stay guarded (the
  symbolic rules once simplified the guard knowing the WHERE's condition, but the load runs whatever the condition)."""
  for device in DEVICES:
    assert Tensor([1, 2], device=device).pad(((1, 2),), value=9).tolist() == [9, 1, 2, 9, 9]
    assert Tensor([[1, 2, 3]], device=device).pad(((2, 1), (0, 3)), value=-1).sum().item() == 6 - 21
    # gcc 12 -O3 -mavx2 miscompiled this one's guarded loads (runtime/ops_cpu.py WORKAROUND_FLAGS)
    a = np.arange(1, 37, dtype=np.float32).reshape(3, 6, 2)
    check(Tensor(a, device=device).pad(((2, 0), (0, 0), (2, 0))), np.pad(a, ((2, 0), (0, 0), (2, 0))), dtypes.float32)

def test_kernel_padding_an_empty_input():
  from runtime import Ops
  from runtime.uop import uop
  from tensor.codegen import full_rewrite_to_sink
  g0, g1 = uop(Ops.DEFINE_GLOBAL, dtypes.int32.ptr(3), (), 0), uop(Ops.DEFINE_GLOBAL, dtypes.int32.ptr(0), (), 1)
  value = uop(Ops.PAD, dtypes.int32, (uop(Ops.RESHAPE, dtypes.int32, (g1,), (0, 2)),), ((1, 0), (0, 1)))  # (0, 2) -> (1, 3)
  sink = full_rewrite_to_sink(uop(Ops.SINK, dtypes.void, (uop(Ops.STORE, dtypes.void, (g0, value)),)))
  assert sink.op is Ops.SINK

@pytest.mark.parametrize("device", DEVICES)
def test_movement(device):
  """A chain of one to three movement ops, then realized, against numpy's views."""
  def body(data, shape, d):
    a = data.draw(arrays(d, shape, -100, 100) if dtypes.is_float(d) else arrays(d, shape))
    t, ref = Tensor(a, device=device), a
    for _ in range(data.draw(st.integers(1, 3))):
      _, fn, np_fn = data.draw(movements(ref.shape))
      t, ref = fn(t), np_fn(ref)
      assert t.shape == ref.shape
    check(t, ref, d)
    # fused into a consumer
    check(t + 1 if d is not dtypes.bool else t ^ True, ref + 1 if d is not dtypes.bool else ~ref, d)
  run(device, body, st.data(), shapes, dtype_from([dtypes.int32, dtypes.float32, dtypes.bool, dtypes.uint8, dtypes.float16]),
      examples=4 * EXAMPLES[device])

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", MOVEMENT)
def test_movement_op(device, name):
  """Each movement op on its own (test_movement draws them at random; this makes sure every one is hit)."""
  def body(data, shape):
    a = data.draw(arrays(dtypes.int32, shape, -100, 100))
    _, fn, np_fn = data.draw(movements(shape).filter(lambda m: m[0] == name or (name == "transpose" and m[0] == "permute")))
    check(fn(Tensor(a, device=device)), np_fn(a), dtypes.int32)
  run(device, body, st.data(), shapes, examples=3)

@pytest.mark.parametrize("device", DEVICES)
def test_getitem(device):
  """Basic indexing (ints, slices with any step, None, ...) as numpy's."""
  def body(data, shape):
    a = data.draw(arrays(dtypes.int32, shape, -100, 100))
    idx = data.draw(hnp.basic_indices(shape, min_dims=0, allow_newaxis=True, allow_ellipsis=True))
    check(Tensor(a, device=device)[idx], a[idx], dtypes.int32)
  run(device, body, st.data(), shapes, examples=3 * EXAMPLES[device])

# ---- creation ----
@pytest.mark.parametrize("device", DEVICES)
def test_creation(device):
  check(Tensor([[1, 2], [3, 4]], device=device), np.array([[1, 2], [3, 4]], np.int32), dtypes.int32)
  check(Tensor([1, 2.5], device=device), np.array([1, 2.5], np.float32), dtypes.float32)
  check(Tensor([True, False], device=device), np.array([True, False]), dtypes.bool)
  check(Tensor([True, 2], device=device), np.array([1, 2], np.int32), dtypes.int32)
  check(Tensor([[1, 2]], dtype=dtypes.int8, device=device), np.array([[1, 2]], np.int8), dtypes.int8)
  check(Tensor([], device=device), np.zeros((0,), np.float32), dtypes.float32)
  check(Tensor(3, device=device), np.array(3, np.int32), dtypes.int32)
  check(Tensor(2.5, device=device), np.array(2.5, np.float32), dtypes.float32)
  check(Tensor(True, device=device), np.array(True), dtypes.bool)
  check(Tensor(7, dtype=dtypes.float64, device=device), np.array(7.0), dtypes.float64)
  check(Tensor(np.float32(1.5), device=device), np.array(1.5, np.float32), dtypes.float32)
  assert Tensor(3, device=device).device == device and Tensor([1], device=device).device == device
  check(Tensor.zeros(2, 3, device=device), np.zeros((2, 3), np.float32), dtypes.float32)
  check(Tensor.zeros((2, 0), dtype=dtypes.int32, device=device), np.zeros((2, 0), np.int32), dtypes.int32)
  check(Tensor.ones(3, dtype=dtypes.bool, device=device), np.ones(3, bool), dtypes.bool)
  check(Tensor.ones((), device=device), np.ones((), np.float32), dtypes.float32)
  check(Tensor.full((2, 2), 7, device=device), np.full((2, 2), 7, np.int32), dtypes.int32)
  check(Tensor.full(3, 1.5, device=device), np.full(3, 1.5, np.float32), dtypes.float32)
  check(Tensor.full((2,), 300, dtype=dtypes.int64, device=device), np.full(2, 300, np.int64), dtypes.int64)
  e = Tensor.empty(2, 3, dtype=dtypes.int8, device=device)
  assert (e.shape, e.dtype, e.device, e.numpy().shape, e.numpy().dtype) == ((2, 3), dtypes.int8, device, (2, 3), np.int8)
  check(Tensor.arange(5, device=device), np.arange(5, dtype=np.int32), dtypes.int32)
  check(Tensor.arange(2, 11, 3, device=device), np.arange(2, 11, 3, dtype=np.int32), dtypes.int32)
  check(Tensor.arange(5, -3, -2, device=device), np.arange(5, -3, -2, dtype=np.int32), dtypes.int32)
  check(Tensor.arange(5, 3, device=device), np.arange(5, 3, dtype=np.int32), dtypes.int32)
  check(Tensor.arange(0, 1, 0.25, device=device), np.arange(0, 1, 0.25, dtype=np.float32), dtypes.float32)
  check(Tensor.arange(4, dtype=dtypes.float64, device=device), np.arange(4, dtype=np.float64), dtypes.float64)
  base = Tensor([[1, 2, 3]], dtype=dtypes.int8, device=device)
  check(base.zeros_like(), np.zeros((1, 3), np.int8), dtypes.int8)
  check(base.ones_like(), np.ones((1, 3), np.int8), dtypes.int8)
  check(base.ones_like(dtype=dtypes.float32), np.ones((1, 3), np.float32), dtypes.float32)
  check(base.full_like(9), np.full((1, 3), 9, np.int8), dtypes.int8)
  check(base.full_like(2.5, dtype=dtypes.float16), np.full((1, 3), 2.5, np.float16), dtypes.float16)
  el = base.empty_like()
  assert (el.shape, el.dtype, el.device) == ((1, 3), dtypes.int8, device)
  other = "PYTHON" if device == "CPU" else "CPU"
  assert base.zeros_like(device=other).device == other and base.zeros_like(device=other).tolist() == [[0, 0, 0]]

@pytest.mark.parametrize("device", DEVICES)
def test_creation_from_numpy(device):
  """Tensor(ndarray) of any shape (0-d and empty included) and dtype keeps shape, dtype and values."""
  def body(data, shape, d):
    a = data.draw(arrays(d, shape, special=True) if dtypes.is_float(d) else arrays(d, shape))
    t = Tensor(a, device=device)
    assert t.shape == a.shape and t.device == device
    check(t, a, d)
    # a non-contiguous array too
    if a.ndim >= 2: check(Tensor(a.T, device=device), a.T, d)
  run(device, body, st.data(), shapes, st.sampled_from(ALL))

# ---- host I/O and the lazy API ----
@pytest.mark.parametrize("device", DEVICES)
def test_host_io(device):
  t = Tensor([[1, 2, 3], [4, 5, 6]], device=device)
  assert (t.shape, t.dtype, t.device) == ((2, 3), dtypes.int32, device)
  n = t.numpy()
  assert isinstance(n, np.ndarray) and n.dtype == np.int32 and n.tolist() == [[1, 2, 3], [4, 5, 6]]
  n[0, 0] = 100  # numpy() is a copy
  assert t.tolist() == [[1, 2, 3], [4, 5, 6]]
  assert type(t.tolist()[0][0]) is int and type(Tensor([1.5], device=device).tolist()[0]) is float
  assert type(Tensor([True], device=device).tolist()[0]) is bool
  assert Tensor([[7]], device=device).item() == 7 and type(Tensor(2.5, device=device).item()) is float
  assert Tensor(True, device=device).item() is True
  assert Tensor.zeros(0, 2, device=device).tolist() == [] and Tensor.zeros(2, 0, device=device).tolist() == [[], []]
  # numpy 2's __array__(dtype, copy): no DeprecationWarning, dtype honoured
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    assert np.asarray(t).tolist() == [[1, 2, 3], [4, 5, 6]]
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    assert np.array(t, copy=True).dtype == np.int32
    assert (np.add(t, 1) == np.array([[2, 3, 4], [5, 6, 7]])).all()
  assert t.__array__(np.float32, copy=True).dtype == np.float32

@pytest.mark.parametrize("device", DEVICES)
def test_to_device(device):
  other = "PYTHON" if device == "CPU" else "CPU"
  t = Tensor([[1.5, 2.0], [3.0, -4.0]], device=device)
  assert t.to(device) is t and t.to(None if Device.DEFAULT == device else device) is t
  u = t.to(other)
  assert u.device == other and u.tolist() == t.tolist()
  assert t.T.to(other).tolist() == [[1.5, 3.0], [2.0, -4.0]]       # a view is copied as its values
  assert (t * 2).to(other).to(device).tolist() == [[3.0, 4.0], [6.0, -8.0]]
  assert t.realize().to(other).tolist() == t.tolist()
  assert Tensor.full((2,), 3, device=device).to(other).tolist() == [3, 3]

@pytest.mark.parametrize("device", DEVICES)
def test_lazy_realize_kernelize(device):
  from runtime import Ops
  t = Tensor([1, 2, 3, 4], device=device)
  out = t * 2 + 1
  assert out.uop.op is Ops.ADD                       # lazy: a graph, nothing ran
  assert out.realize() is out
  assert out.uop.op is Ops.BUFFER and out.tolist() == [3, 5, 7, 9]
  k = (t - 1).kernelize()
  assert k.uop.op is Ops.ASSIGN and k.uop.src[1].op is Ops.KERNEL
  assert k.tolist() == [0, 1, 2, 3]
  m = Tensor([[1, 2], [3, 4]], device=device).realize()
  assert m.uop.op in (Ops.BUFFER, Ops.RESHAPE)
  assert m.T.contiguous().tolist() == [[1, 3], [2, 4]]
  assert (m + 0).contiguous().realize().tolist() == [[1, 2], [3, 4]]

@pytest.mark.parametrize("device", DEVICES)
def test_contiguous_of_buffer(device):
  t = Tensor([1, 2], device=device)
  assert t.contiguous().tolist() == [1, 2]                 # CONTIGUOUS(COPY(BUFFER))
  assert t.realize().contiguous().tolist() == [1, 2]       # CONTIGUOUS(BUFFER)

@pytest.mark.parametrize("device", DEVICES)
def test_assign(device):
  t = Tensor([1, 2, 3], device=device).realize()
  t.assign(t * 10 + 1)
  assert t.tolist() == [11, 21, 31]
  t.assign(Tensor([5, 6, 7], device=device) + 0)
  assert t.tolist() == [5, 6, 7]
  t += 1
  assert t.tolist() == [6, 7, 8]
  m = Tensor.zeros(2, 2, device=device).contiguous().realize()
  m.assign(Tensor.ones(2, 2, device=device) * 3)
  assert m.tolist() == [[3.0, 3.0], [3.0, 3.0]]

@pytest.mark.parametrize("device", DEVICES)
def test_assign_plain_tensor(device):
  t = Tensor([1, 2, 3], device=device).realize()
  t.assign(Tensor([4, 5, 6], device=device))
  assert t.tolist() == [4, 5, 6]

# ---- composites (not in the op list, but built from it) ----
@pytest.mark.parametrize("device", DEVICES)
def test_composites(device):
  a = np.array([[1.0, -2.0, 3.0], [0.5, 0.0, -1.0]], np.float32)
  w = np.array([[1.0, 2.0], [0.0, -1.0], [3.0, 0.5]], np.float32)
  t = Tensor(a, device=device)
  check(t @ Tensor(w, device=device), a @ w, dtypes.float32)
  e = np.exp(a - a.max(-1, keepdims=True))
  check(t.softmax(-1), e / e.sum(-1, keepdims=True), dtypes.float32, scale=4)
  check(t.var(1), a.var(1, ddof=1), dtypes.float32, scale=4)
  check(t.clip(-1, 1), np.clip(a, -1, 1), dtypes.float32)
  check((t ** 5), a ** 5, dtypes.float32, scale=4)
  check(Tensor([2, -3, 7], device=device) ** 9, np.array([2, -3, 7], np.int32) ** 9, dtypes.int32)  # an int power stays int, wraps

# ---- the op count ----
CREATION = ["Tensor(list)", "Tensor(ndarray)", "Tensor(scalar)", "zeros", "ones", "full", "empty", "arange", "zeros_like", "ones_like",
            "full_like", "empty_like"]
HOST = ["numpy", "tolist", "item", "__array__", "to", "shape", "dtype", "device", "uop", "realize", "kernelize", "contiguous", "assign"]
OTHER = ["where", "cast", "bitcast", "getitem", "matmul", "softmax", "var", "clip"]
OPS = sorted(set(BINARY) | set(UNARY) | set(REDUCE) | set(MOVEMENT) | set(CREATION) | set(HOST) | set(OTHER))

def test_op_count():
  number = int(__doc__.split("Ops tested on each device: ")[1].split()[0])
  assert len(OPS) == number, f"the module docstring says {number} ops, OPS has {len(OPS)}"
