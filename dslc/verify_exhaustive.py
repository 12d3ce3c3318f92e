"""`dslc verify` for approximate rules: a rule whose result only approximates its node (exp2 as a polynomial) states its
tolerance in a comment above it, `# verify: exp2 within 0.501 ulp`, and is checked on every value of its input when the
input has 16 bits (65,536 values: a proof by exhaustion), against the reference function in float64 (numpy), in ulps of the
result's dtype. The rule's result is evaluated on all inputs at once with numpy, with exec_alu's semantics; a sample is
evaluated with exec_alu itself too, and any difference is reported rather than trusted.
"""
from __future__ import annotations
import math, os, re, sys, time
from typing import Any, Callable
import numpy as np
from runtime.dtype import DType, dtypes
from runtime.ops import GroupOp, Ops
from runtime.uop import UOp, uop
from dslc.ir import Rule
from dslc.smt import dname

ANNOTATION = re.compile(r"#\s*verify:\s*(\w+)\s+within\s+([0-9.]+)\s+ulp")
REFERENCES: dict[str, Callable] = {"exp2": np.exp2, "log2": np.log2, "sqrt": np.sqrt, "sin": np.sin, "reciprocal": lambda x: 1.0 / x}
# (mantissa bits, exponent of the smallest subnormal) of each float format
FORMATS = {dtypes.float16: (10, -24), dtypes.bfloat16: (7, -133), dtypes.float32: (23, -149), dtypes.float64: (52, -1074)}
NP_FLOAT = {dtypes.float16: np.float16, dtypes.float32: np.float32, dtypes.float64: np.float64}
MAX_VALUES = 1 << 16

def annotation(rule: Rule, source: str) -> tuple[str, float] | None:
  """The `# verify: FN within K ulp` line in the comment block right above the rule, if any."""
  lines = source.splitlines()
  i = rule.span.line - 2
  while i >= 0 and lines[i].lstrip().startswith("#"):
    if (m := ANNOTATION.search(lines[i])) is not None: return m.group(1), float(m.group(2))
    i -= 1
  return None

def all_values(d: DType) -> np.ndarray:
  """Every value of a 16-bit float dtype, as float64 (bfloat16: each bit pattern as the top half of a float32)."""
  bits = np.arange(1 << 16, dtype=np.uint32)
  with np.errstate(all="ignore"):
    if d is dtypes.bfloat16: return (bits << 16).view(np.float32).astype(np.float64)
    return bits.astype(np.uint16).view(np.float16).astype(np.float64)

def round_to(d: DType, x: np.ndarray) -> np.ndarray:
  """float64 values rounded to dtype d as runtime/dtype.truncate does, kept as float64 (bfloat16 through float32)."""
  with np.errstate(all="ignore"):
    if d is dtypes.float64: return x.astype(np.float64)
    if d is not dtypes.bfloat16: return x.astype(NP_FLOAT[d]).astype(np.float64)
    f = x.astype(np.float32)
    b = f.view(np.uint32).astype(np.uint64)
    b = (((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16).astype(np.uint32)
    out = b.view(np.float32).astype(np.float64)
    return np.where(np.isnan(f), np.nan, out)

class Unevaluable(Exception):
  """An op this evaluator does not follow: the rule is checked with exec_alu value by value, or not at all."""

def _bits_of(d: DType) -> int: return 8 * d.itemsize

def evaluate(root: UOp, var: UOp, xs: np.ndarray) -> np.ndarray:
  """root's value for each value of the variable var (float64 array of values of var's dtype), with exec_alu's semantics.
  Floats are float64 arrays holding values of their dtype; ints int64 or uint64 arrays; bools bool arrays."""
  vals: dict[UOp, np.ndarray] = {var: xs}
  with np.errstate(all="ignore"):
    for u in root.toposort():
      if u in vals: continue
      vals[u] = _eval(u, [vals[s] for s in u.src], len(xs))
  return vals[root]

def _int_np(d: DType):
  return {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}[d.itemsize] if not dtypes.is_unsigned(d) else \
         {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[d.itemsize]

def _fma_to_odd(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
  """x*y + z of float32 values as a double rounded to odd (exec_alu's _fma_float): rounded once more to float32 it is
  the fused multiply-add, correctly rounded (x*y is exact in a double; TwoSum gives the sum's error)."""
  p = x * y
  t = p + z
  b = t - p
  e = (p - (t - b)) + (z - b)
  fix = np.isfinite(t) & (e != 0) & ((np.ascontiguousarray(t, np.float64).view(np.int64) & 1) == 0)
  return np.where(fix, np.nextafter(t, np.where(e > 0, np.inf, -np.inf)), t)

def _eval(u: UOp, s: list, n: int) -> np.ndarray:
  d, op = u.dtype, u.op
  if d.count != 1: raise Unevaluable(f"a vector {d}")
  if op is Ops.CONST:  # one value broadcast (no copy): ufuncs read it as n of them
    if dtypes.is_float(d): return np.broadcast_to(np.float64(u.arg), n)
    if d is dtypes.bool: return np.broadcast_to(np.bool_(u.arg), n)
    return np.broadcast_to(np.array(u.arg, dtype=_int_np(d)), n)
  if op is Ops.CAST:
    src = u.src[0].dtype
    if dtypes.is_float(d):
      x = s[0].astype(np.float64) if not dtypes.is_int(src) or src.itemsize < 8 else s[0].astype(np.float64)
      return round_to(d, x)
    if dtypes.is_float(src) and dtypes.is_int(d):
      if np.any(np.abs(s[0][np.isfinite(s[0])]) >= 2.0 ** 63): raise Unevaluable("a float cast to an int out of range")
      return np.where(np.isfinite(s[0]), np.trunc(np.nan_to_num(s[0])), 0).astype(np.int64).astype(_int_np(d))
    if d is dtypes.bool: return s[0] != 0
    return s[0].astype(_int_np(d))
  if op is Ops.BITCAST:
    src = u.src[0].dtype
    if src is dtypes.bfloat16 or d is dtypes.bfloat16: raise Unevaluable("a bfloat16 bitcast")
    raw = s[0].astype(NP_FLOAT[src]) if dtypes.is_float(src) else s[0]
    out = raw.view(NP_FLOAT[d] if dtypes.is_float(d) else _int_np(d))
    return out.astype(np.float64) if dtypes.is_float(d) else out
  if op not in GroupOp.ALU: raise Unevaluable(f"{op.name}")
  if op is Ops.WHERE: return np.where(s[0], s[1], s[2])
  if op in GroupOp.Comparison:
    return {Ops.CMPLT: np.less, Ops.CMPNE: np.not_equal, Ops.CMPEQ: np.equal}[op](s[0], s[1])
  if dtypes.is_float(d):
    x = s[0]
    if op is Ops.NEG: return -x
    if op is Ops.MAX: return np.where(np.isnan(x), x, np.where(x > s[1], x, s[1]))
    f = {Ops.ADD: np.add, Ops.SUB: np.subtract, Ops.MUL: np.multiply, Ops.FDIV: np.divide}.get(op)
    if f is not None: return round_to(d, f(x, s[1]))  # exec_alu: in double, rounded to the dtype
    if op is Ops.SQRT: return round_to(d, np.sqrt(x))
    if op is Ops.MULACC and d is dtypes.float32: return round_to(d, _fma_to_odd(x, s[1], s[2]))
    raise Unevaluable(f"{op.name} on {d}")
  if dtypes.is_int(d):
    x, bits = s[0], _bits_of(d)
    if op in (Ops.ADD, Ops.SUB, Ops.MUL): return {Ops.ADD: np.add, Ops.SUB: np.subtract, Ops.MUL: np.multiply}[op](x, s[1])
    if op in (Ops.AND, Ops.OR, Ops.XOR): return {Ops.AND: np.bitwise_and, Ops.OR: np.bitwise_or, Ops.XOR: np.bitwise_xor}[op](x, s[1])
    if op in (Ops.SHL, Ops.SHR):
      y = s[1].astype(np.int64)
      out = (y < 0) | (y >= bits)
      k = np.where(out, 0, y).astype(x.dtype)
      if op is Ops.SHL: return np.where(out, 0, np.left_shift(x, k)).astype(x.dtype)
      return np.where(out, np.where(x < 0, -1, 0), np.right_shift(x, k)).astype(x.dtype)
  raise Unevaluable(f"{op.name} on {d}")

def ulps(got: np.ndarray, ref: np.ndarray, d: DType) -> np.ndarray:
  """|got - ref| in ulps of d at ref's binade; 0 where got is ref correctly rounded (an overflow to inf, a zero, both nan)."""
  mantissa, min_exp = FORMATS[d]
  with np.errstate(all="ignore"):
    exact = round_to(d, ref)
    same = (got == exact) | (np.isnan(got) & np.isnan(exact))
    mag = np.abs(ref)
    e = np.floor(np.log2(np.where(mag > 0, mag, 1.0)))
    ulp = np.exp2(np.maximum(np.where(mag > 0, e, min_exp) - mantissa, min_exp))
    err = np.abs(got - ref) / ulp
    err = np.where(np.isfinite(got) & np.isfinite(ref), err, np.inf)
    return np.where(same, 0.0, err)

def check(rule: Rule, fn: str, tolerance: float, d: DType, rule_fn: Callable, scalar_eval: Callable) -> tuple[str, str]:
  """(status, detail) of an approximate rule on every value of its input of dtype d, against REFERENCES[fn]."""
  if fn not in REFERENCES: return "unsupported", f"no reference function {fn!r} (one of {', '.join(REFERENCES)})"
  wide = d.itemsize * 8 > 16
  if wide and (d is not dtypes.float32 or os.environ.get("DSLC_VERIFY_ALL32") != "1"):
    return "unsupported", f"{dname(d)} has {2 ** (8 * d.itemsize):,} values: too many to check them all" + \
      (" (`--all-float32` checks them: minutes of CPU)" if d is dtypes.float32 else "")
  var = uop(Ops.DEFINE_VAR, d, (), ("x", -math.inf, math.inf))
  node = next((uop(op, d, (var,)) for op in rule.pattern.ops or ()), None)
  if node is None: return "unsupported", "an approximate rule whose pattern is not one op of one variable"
  out = rule_fn(node, None)
  if out is None: return "unsupported", f"the rule does not fire on ({node.op.name}:{d.name} x)"
  if wide: return check_all32(out, var, fn, tolerance, scalar_eval)
  xs = all_values(d)
  try: got = evaluate(out, var, xs)
  except Unevaluable as e: return "unsupported", f"the result has {e}, which the exhaustive check does not evaluate"
  # the numpy evaluation against exec_alu's, value by value, on a sample: a mismatch is a bug here, never a proof
  for i in list(range(0, len(xs), 257)) + [int(j) for j in np.flatnonzero(~np.isfinite(xs))[:8]]:
    want = scalar_eval(out, {"x": float(xs[i])})
    if not (math.isnan(want) and math.isnan(got[i]) or math.copysign(1, want) == math.copysign(1, got[i]) and want == got[i]):
      return "unsupported", (f"the exhaustive evaluator gives {got[i]!r} where exec_alu gives {want!r} (x = {xs[i]!r}): "
                             "a bug in dslc/verify_exhaustive.py")
  with np.errstate(all="ignore"): ref = REFERENCES[fn](xs)
  err = ulps(got, ref, d)
  worst = int(np.argmax(err))
  if err[worst] > tolerance:
    return "counterexample", (f"x = {xs[worst]!r}:{dname(d)}: the result {got[worst]!r} is {err[worst]:.3f} ulp from {fn}(x) = {ref[worst]!r}, "
                              f"over the {tolerance} ulp stated")
  how = "correctly rounded" if err[worst] == 0 else f"within {err[worst]:.3f} ulp (stated: {tolerance})"
  return "proved", f"{fn} of all {len(xs):,} values of {dname(d)} {how}"

CHUNK = 1 << 20  # float32 inputs a step: ~40 arrays of 8 MB while the result is evaluated

def check_all32(out: UOp, var: UOp, fn: str, tolerance: float, scalar_eval: Callable, progress: bool = True,
                span: tuple[int, int] = (0, 1 << 32)) -> tuple[str, str]:
  """An approximate float32 rule on all 2^32 bit patterns of its input, CHUNK at a time, as check() does 16-bit inputs: the
  worst error in ulps over all of them, against REFERENCES[fn] in float64; the numpy evaluation compared with exec_alu's on
  a sample of each 256th chunk."""
  d, t0 = dtypes.float32, time.perf_counter()
  worst, worst_x, worst_got, worst_ref = -1.0, 0.0, 0.0, 0.0
  for start in range(span[0], span[1], CHUNK):  # span: the bit patterns checked, all of them unless a test asks for fewer
    with np.errstate(invalid="ignore"):  # a signaling nan's bits, widened, are a quiet nan
      xs = np.arange(start, start + CHUNK, dtype=np.uint64).astype(np.uint32).view(np.float32).astype(np.float64)
    try: got = evaluate(out, var, xs)
    except Unevaluable as e: return "unsupported", f"the result has {e}, which the exhaustive check does not evaluate"
    if (start // CHUNK) % 256 == 0:
      for i in list(range(0, CHUNK, 65537)) + [int(j) for j in np.flatnonzero(~np.isfinite(xs))[:4]]:
        want = scalar_eval(out, {"x": float(xs[i])})
        if not (math.isnan(want) and math.isnan(got[i]) or math.copysign(1, want) == math.copysign(1, got[i]) and want == got[i]):
          return "unsupported", (f"the exhaustive evaluator gives {got[i]!r} where exec_alu gives {want!r} (x = {xs[i]!r}): "
                                 "a bug in dslc/verify_exhaustive.py")
    with np.errstate(all="ignore"): ref = REFERENCES[fn](xs)
    err = ulps(got, ref, d)
    i = int(np.argmax(err))
    if progress and (start // CHUNK) % 256 == 255:
      print(f"  {fn} float32: {(start + CHUNK) / (1 << 32):.0%} of the inputs, {time.perf_counter() - t0:.0f} s, worst so far "
            f"{max(worst, float(err[i])):.3f} ulp", file=sys.stderr, flush=True)
    if err[i] > worst: worst, worst_x, worst_got, worst_ref = float(err[i]), float(xs[i]), float(got[i]), float(ref[i])
  secs = time.perf_counter() - t0
  if worst > tolerance:
    return "counterexample", (f"x = {worst_x!r}:float32: the result {worst_got!r} is {worst:.3f} ulp from {fn}(x) = {worst_ref!r}, "
                              f"over the {tolerance} ulp stated")
  how = "correctly rounded" if worst == 0 else f"within {worst:.3f} ulp (stated: {tolerance})"
  which = f"all {1 << 32:,}" if span == (0, 1 << 32) else f"{span[1] - span[0]:,}"
  return "proved", f"{fn} of {which} values of float32 {how} ({secs:.0f} s)"

def scalar(out: UOp, env: dict) -> Any:
  from dslc.verify_replay import evaluate as exec_evaluate
  return exec_evaluate(out, env)
