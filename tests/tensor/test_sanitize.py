"""The C the renderer writes is free of undefined behaviour and out-of-bounds access: a representative op suite runs on
CPU with kernels built by `-fsanitize=address,undefined` (SANITIZE=1, runtime/ops_cpu.py) in a subprocess that preloads
the compiler's libasan, and must finish with no findings and the PYTHON device's values. Canaries first show that
the setup does catch an out-of-bounds read and a bad shift. Skipped when the compiler has no sanitizer runtime.
"""
import os, shutil, subprocess, sys, textwrap
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

def _libasan() -> str | None:
  cc = os.environ.get("CC", "cc")
  if shutil.which(cc) is None: return None
  try: path = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True, text=True, timeout=60).stdout.strip()
  except (OSError, subprocess.TimeoutExpired): return None
  if not os.path.isabs(path) or not os.path.exists(path): return None
  # the compiler must also build a sanitized shared object
  probe = subprocess.run([cc, "-fsanitize=address,undefined", "-shared", "-fPIC", "-x", "c", "-", "-o", os.devnull],
                         input="int f(int x) { return x; }", capture_output=True, text=True, timeout=60)
  return os.path.realpath(path) if probe.returncode == 0 else None

LIBASAN = _libasan()
pytestmark = pytest.mark.skipif(LIBASAN is None, reason="no AddressSanitizer runtime for the C compiler (cc -print-file-name=libasan.so)")

def sanitized(code: str) -> subprocess.CompletedProcess:
  """Run code in a fresh interpreter with sanitized kernels: ASan and UBSan stop at the first finding."""
  env = {**os.environ, "SANITIZE": "1", "LD_PRELOAD": LIBASAN or "", "ASAN_OPTIONS": "detect_leaks=0:halt_on_error=1",
         "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1"}
  env.pop("PYTHONPATH", None)
  return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)

def findings(r: subprocess.CompletedProcess) -> bool:
  return "AddressSanitizer" in r.stderr or "runtime error:" in r.stderr

CANARY = """
import numpy as np
from runtime.device import Buffer, Device
from runtime.dtype import dtypes
prg = Device["CPU"].program({src!r}, "canary")
out, inp = Buffer("CPU", 1, dtypes.int32), Buffer("CPU", 4, dtypes.int32, np.arange(4, dtype=np.int32))
prg([out, inp])
print("no finding", out.numpy())
"""

def test_canary_out_of_bounds_read():
  r = sanitized(CANARY.format(src="void canary(int* restrict data0, int* restrict data1) { data0[0] = data1[4]; }"))
  assert r.returncode != 0 and "heap-buffer-overflow" in r.stderr, r.stdout + r.stderr

def test_canary_undefined_shift():
  r = sanitized(CANARY.format(src="void canary(int* restrict data0, int* restrict data1) { data0[0] = data1[1] << (data1[3] + 30); }"))
  assert r.returncode != 0 and "runtime error:" in r.stderr and "shift" in r.stderr, r.stdout + r.stderr

# every kernel runs on CPU (sanitized) and on PYTHON (the reference); the values must agree
SUITE = """
import math
import numpy as np
from tensor import Tensor, dtypes
from runtime.helpers import GlobalCounters

rng = np.random.default_rng(0)
def data(shape, dt):
  if dt is dtypes.bool: return rng.integers(0, 2, shape).astype(bool)
  if dtypes.is_float(dt):
    a = rng.uniform(-50, 50, shape).astype(dtypes.to_numpy(dt))
    if a.size > 2: a.flat[0], a.flat[1] = np.nan, np.inf
    return a
  info = np.iinfo(dtypes.to_numpy(dt))
  a = rng.integers(max(info.min, -1000), min(info.max, 1000), shape).astype(dtypes.to_numpy(dt))
  if a.size > 2: a.flat[0], a.flat[1] = info.min, 0
  return a

count = 0
def same(fn, *arrays):
  global count
  outs = []
  for device in ("CPU", "PYTHON"):
    out = fn(*[Tensor(a, device=device) for a in arrays])
    outs.append(out.numpy())
  a, b = outs
  assert a.dtype == b.dtype and a.shape == b.shape, (a, b)
  if a.dtype.kind == "f": np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5, equal_nan=True)
  else: np.testing.assert_array_equal(a, b)
  count += 1

I, F, B = dtypes.int32, dtypes.float32, dtypes.bool
SMALL = (dtypes.int8, dtypes.uint8, dtypes.int64, dtypes.float16, dtypes.float64)
x, y, c = data((3, 4), F), data((4,), F), data((3, 1), B)
i, j = data((3, 4), I), data((1, 4), I)
# elementwise binary ops, with broadcasting, in the main dtypes
for op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "lt", "gt", "le", "ge", "eq", "ne"):
  same(lambda a, b: getattr(a, f"__{op}__")(b), x, y)
  same(lambda a, b: getattr(a, f"__{op}__")(b), i, j)
same(lambda a, b: a.maximum(b), x, y); same(lambda a, b: a.minimum(b), i, j)
for op in ("and", "or", "xor", "lshift", "rshift"):
  same(lambda a, b: getattr(a, f"__{op}__")(b), i, j)
  same(lambda a, b: getattr(a, f"__{op}__")(b), data((3, 4), dtypes.int8), np.array([-1, 0, 7, 9], np.int8))
same(lambda a, b: a & b, c, data((3, 4), B))
# division and shifts where C leaves things undefined: by zero, INT_MIN / -1, out-of-range shift amounts
edge = np.array([7, -7, -2**31, -2**31, 5, 0], np.int32)
by = np.array([0, 0, -1, 0, -3, 0], np.int32)
same(lambda a, b: a // b, edge, by); same(lambda a, b: a % b, edge, by)
same(lambda a, b: a << b, edge, np.array([31, 32, -1, 40, 3, 0], np.int32))
same(lambda a, b: a >> b, edge, np.array([31, 32, -1, 40, 3, 0], np.int32))
for dt in SMALL:
  a, b = data((2, 3), dt), data((3,), dt)
  same(lambda p, q: p + q, a, b); same(lambda p, q: p * q, a, b); same(lambda p, q: p < q, a, b)
  if not dtypes.is_float(dt): same(lambda p, q: p // q, a, b); same(lambda p, q: p % q, a, b); same(lambda p, q: p << q, a, b)
# unary ops
for op in ("neg", "abs", "exp", "exp2", "log", "log2", "sqrt", "sin", "cos", "relu", "sigmoid", "tanh", "logical_not"):
  same(lambda a: getattr(a, op)(), x)
  same(lambda a: getattr(a, op)(), i)
same(lambda a: ~a, i); same(lambda a: -a, c)
same(lambda a, b, d: a.where(b, d), c, x, y)
# casts, in range and out of range (nan and inf to int), and bitcasts
for src in (F, dtypes.float64, dtypes.float16, I, dtypes.int64, B):
  for dst in (I, dtypes.int8, dtypes.uint8, dtypes.int64, dtypes.uint32, F, dtypes.float16, B):
    same(lambda a: a.cast(dst), data((5,), src) * (1000 if dtypes.is_float(src) else 1))
same(lambda a: a.bitcast(I), x); same(lambda a: a.bitcast(F), np.array([1, 2**30, -5], np.int32))
# reductions over any axes
for op in ("sum", "prod", "max", "min", "mean"):
  for axis in (None, 0, -1, (0, 1)):
    same(lambda a: getattr(a, op)(axis), x)
    same(lambda a: getattr(a, op)(axis, keepdim=True), i)
# (max over an empty axis raises: any() keeps the identity)
same(lambda a: a.argmax(1), x); same(lambda a: a.argmin(0), i); same(lambda a: a.sum(0), data((3, 4), dtypes.uint8))
same(lambda a: a.sum(), np.zeros((0, 3), np.float32)); same(lambda a: a.any(1), np.zeros((2, 0), np.int32))
# movement ops and indexing, then an op
z = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
for fn in (lambda a: a.reshape(6, 4) + 1, lambda a: a.permute(2, 0, 1) * 2, lambda a: a.transpose(0, 2) - 1,
           lambda a: a.expand(3, 2, 3, 4).sum(0), lambda a: a.shrink(((1, 2), (0, 2), (1, 4))) + 1,
           lambda a: a.flip(0, 2) * 3, lambda a: a.flatten(1) + 0, lambda a: a[1, ::-2, 1:3] + 1,
           lambda a: a[..., None, ::3] * 2, lambda a: a[:, 1] + a[:, 2], lambda a: a.unsqueeze(1).squeeze(1) + 1,
           lambda a: a.pad(((0, 0), (0, 0), (1, 0))) + 1):
  same(fn, z)
# composites
w = data((4, 5), F)
same(lambda a, b: a @ b, x, w); same(lambda a: a.softmax(-1), data((3, 4), F)); same(lambda a: a.var(0), data((3, 4), F))
assert GlobalCounters.kernel_count > 0
print("checked", count, "ops;", GlobalCounters.kernel_count, "kernels")
"""

def test_op_suite_has_no_findings():
  r = sanitized(SUITE)
  assert not findings(r), r.stderr[-6000:]
  assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
  assert "checked" in r.stdout

def test_padded_tensors_have_no_findings():
  """Padding with a nonzero fill around more than 4 elements: guarded loads in a loop (once a heap-buffer-overflow)."""
  code = """
  import numpy as np
  from tensor import Tensor
  a = np.arange(6, dtype=np.int32).reshape(2, 3)
  for pads in (((1, 2),), ((0, 2),), ((2, 0),)):
    assert Tensor(np.arange(3, dtype=np.int32), device="CPU").pad(pads).tolist() == np.pad(np.arange(3), pads).tolist()
  assert Tensor(a, device="CPU").pad(((1, 0), (0, 1))).tolist() == np.pad(a, ((1, 0), (0, 1))).tolist()
  assert (Tensor(a, device="CPU").pad(((1, 1), (2, 1)), value=-1) * 2).tolist() == (np.pad(a, ((1, 1), (2, 1)), constant_values=-1) * 2).tolist()
  print("ok")
  """
  r = sanitized(code)
  assert not findings(r), r.stderr[-4000:]
  assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr[-4000:]
