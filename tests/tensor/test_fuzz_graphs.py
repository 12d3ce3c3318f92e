"""Differential fuzz of whole op graphs: random compositions of 2-4 ops (matmul, sum, max, mean, softmax, transpose,
elementwise, and chains of several reductions and matmuls) run on the CPU with the optimizer on, against numpy (float64),
and small ones on the PYTHON interpreter too.

Sizes are drawn on both sides of every threshold the optimizer uses (tensor/codegen/opt.py): a reduction of >= 64
consecutive elements is split into 16 lanes when its length divides by 16 (63, 64, 65, 128, 130), an innermost output
loop of <= 4 is upcast (3, 4, 5), and size-1 dims need no loop (1). CI runs EXAMPLES examples per test (~20 s cold);
`EXAMPLES_SCALE=50 python -m pytest tests/tensor/test_fuzz_graphs.py` is a deeper fuzzing session.
"""
from __future__ import annotations
import os
import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st
from tensor import Tensor, Context, dtypes
from runtime.dtype import least_upper_float

SCALE = int(os.environ.get("EXAMPLES_SCALE", "1"))
SIZES = [1, 3, 4, 5, 16, 63, 64, 65, 128, 130]
SMALL = [1, 3, 4, 5, 16, 64, 65]  # the PYTHON interpreter runs a scalar at a time: graphs over PYTHON_MAX_WORK are skipped
PYTHON_MAX_WORK = 30_000  # scalar multiply-adds, about a second on the interpreter

class Case:
  """The same graph built on each device, its float64 numpy twin, and the numbers the comparison needs: the largest
  magnitude an intermediate reached and the longest chain of sums (float32 error grows as eps * sqrt(terms) * magnitude),
  and the scalar work so far (the PYTHON device is slow)."""
  def __init__(self, ts: dict[str, Tensor], a: np.ndarray, steps: list[str]):
    self.ts, self.a, self.steps = ts, a, steps
    self.mag, self.terms, self.work = float(np.abs(a).max(initial=1.0)), 1, a.size

  def then(self, fn, a: np.ndarray, step: str, terms: int = 1, work: int = 0) -> Case:
    out = Case({d: fn(t) for d, t in self.ts.items()}, a, self.steps + [step])
    out.mag = max(self.mag, out.mag)
    out.terms, out.work = self.terms * max(terms, 1), self.work + max(work, a.size)
    return out

def rand(rng: np.random.Generator, shape) -> np.ndarray: return rng.uniform(-1, 1, shape).astype(np.float32)

def np_softmax(a: np.ndarray, axis: int) -> np.ndarray:
  e = np.exp(a - a.max(axis, keepdims=True))
  return e / e.sum(axis, keepdims=True)

def step(c: Case, kind: str, draw, rng: np.random.Generator, sizes: list[int]) -> Case:
  """One op applied to the case (a kind that does not fit the tensor's rank falls back to an elementwise op)."""
  a = c.a
  nd = a.ndim
  if kind == "matmul" and nd == 2:
    w = rand(rng, (a.shape[-1], draw(st.sampled_from(sizes))))
    return c.then(lambda t: t @ Tensor(w, device=t.device), a @ w.astype(np.float64), f"@ w{w.shape}", a.shape[-1], a.size * w.shape[1])
  if kind == "matmul" and nd == 1:  # a vector times a matrix's columns: one dot product each (numpy's vec @ mat)
    w = rand(rng, (a.shape[0], draw(st.sampled_from(sizes))))
    return c.then(lambda t: (t.reshape(-1, 1) * Tensor(w, device=t.device)).sum(0), a @ w.astype(np.float64), f"@ w{w.shape}", a.shape[0], w.size)
  if kind in ("sum", "max", "mean") and nd >= 1:
    axis = draw(st.sampled_from([None, *range(nd), *range(-nd, 0)]))
    keep = draw(st.booleans())
    want = {"sum": np.sum, "max": np.max, "mean": np.mean}[kind](a, axis=axis, keepdims=keep)
    n = a.size if axis is None else a.shape[axis]
    return c.then(lambda t: getattr(t, kind)(axis, keepdim=keep), np.asarray(want), f".{kind}({axis}, keepdim={keep})", n if kind != "max" else 1)
  if kind == "softmax" and nd >= 1:
    axis = draw(st.sampled_from(range(-nd, nd)))
    return c.then(lambda t: t.softmax(axis), np_softmax(a, axis), f".softmax({axis})", a.shape[axis])
  if kind == "transpose" and nd >= 2: return c.then(lambda t: t.transpose(), np.swapaxes(a, 0, 1), ".transpose()")
  if kind == "broadcast" and nd <= 1:
    # back up to 2-D: an outer product with a new vector, so later reductions have something to reduce
    v = rand(rng, (draw(st.sampled_from(sizes)), 1))
    return c.then(lambda t: Tensor(v, device=t.device) * t, v.astype(np.float64) * a, f"v{v.shape} *")
  fn = draw(st.sampled_from(["relu", "affine", "tanh", "add", "square"]))
  if fn == "relu": return c.then(lambda t: t.relu(), np.maximum(a, 0), ".relu()")
  if fn == "affine": return c.then(lambda t: t * 0.5 + 0.25, a * 0.5 + 0.25, "* 0.5 + 0.25")
  if fn == "tanh": return c.then(lambda t: t.tanh(), np.tanh(a), ".tanh()")
  if fn == "square": return c.then(lambda t: t * t, a * a, ".square()")
  # add a tensor broadcast along some dims
  b = rand(rng, tuple(d if draw(st.booleans()) else 1 for d in a.shape))
  return c.then(lambda t: t + Tensor(b, device=t.device), a + b, f"+ b{b.shape}")

KINDS = ["matmul", "sum", "max", "mean", "softmax", "transpose", "elementwise", "broadcast"]

@st.composite
def programs(draw, sizes: list[int]):
  """(seed, input shape, op kinds): reductions and matmuls twice as likely as the rest."""
  shape = tuple(draw(st.lists(st.sampled_from(sizes), min_size=1, max_size=2)))
  kinds = draw(st.lists(st.sampled_from(KINDS + ["matmul", "sum", "max", "mean"]), min_size=2, max_size=4))
  return draw(st.integers(0, 2**32 - 1)), shape, kinds

def build(devices: list[str], seed: int, shape: tuple, kinds: list[str], draw, sizes: list[int]) -> Case:
  rng = np.random.default_rng(seed)
  a = rand(rng, shape)
  c = Case({d: Tensor(a, device=d) for d in devices}, a.astype(np.float64), [f"x{shape}"])
  for k in kinds: c = step(c, k, draw, rng, sizes)
  return c

def expect_close(got: np.ndarray, c: Case, what: str) -> None:
  want = c.a
  assert got.shape == want.shape, f"{what}: shape {got.shape}, numpy {want.shape}; program: {' '.join(c.steps)}"
  tol = 1e-6 * c.mag * max(c.terms, 1) ** 0.5 * 8 + 1e-6
  err = np.abs(got.astype(np.float64) - want)
  assert np.all(err <= tol + 1e-4 * np.abs(want)), f"{what}: max error {err.max():.3g} (tolerance {tol:.3g}); program: {' '.join(c.steps)}"

def run(fn, strategy, examples: int) -> None:
  settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)(given(strategy, st.data())(fn))()

def test_random_graphs_cpu_against_numpy():
  def check(prog, data):
    with Context(NOOPT=0):
      c = build(["CPU"], *prog, data.draw, SIZES)
      expect_close(c.ts["CPU"].numpy(), c, "CPU")
  run(check, programs(SIZES), 40 * SCALE)

def test_small_random_graphs_cpu_against_python():
  def check(prog, data):
    with Context(NOOPT=0):
      c = build(["CPU", "PYTHON"], *prog, data.draw, SMALL)
      if c.work > PYTHON_MAX_WORK: return
      py = c.ts["PYTHON"].numpy()
      expect_close(py, c, "PYTHON")
      np.testing.assert_allclose(c.ts["CPU"].numpy(), py, rtol=1e-5, atol=1e-5 * c.mag, err_msg=f"CPU vs PYTHON: {' '.join(c.steps)}")
  run(check, programs(SMALL), 15 * SCALE)

# ---- CPU and PYTHON agree bit for bit on every dtype, bool and bfloat16 included ----

DTYPES = [dtypes.bool, dtypes.int8, dtypes.uint8, dtypes.int32, dtypes.int64, dtypes.float16, dtypes.bfloat16, dtypes.float32]
BINARY = ["add", "sub", "mul", "floordiv", "mod", "maximum", "lt", "eq", "where"]
UNARY = ["neg", "exp2", "sqrt", "sin", "trunc", "sum", "max", "min", "cast"]

def values(draw, dtype, n: int) -> np.ndarray:
  if dtype is dtypes.bool: return np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
  if dtypes.is_int(dtype):
    lo, hi = dtypes.min(dtype), dtypes.max(dtype)
    return np.array(draw(st.lists(st.one_of(st.integers(-3, 3), st.integers(lo, hi)).filter(lambda v: lo <= v <= hi), min_size=n, max_size=n)),
                    dtypes.to_numpy(dtype))
  special = st.sampled_from([0.0, -0.0, 1.0, -1.5, np.inf, -np.inf, np.nan, 0.1, 300.0, 1e-3])
  xs = draw(st.lists(st.one_of(special, st.floats(-1e4, 1e4, width=32)), min_size=n, max_size=n))
  return np.array(xs, np.float32)  # bfloat16 tensors are made from float32 values (rounded)

def apply(t: Tensor, other: Tensor, op: str) -> Tensor:
  # libm's float functions (sinf, exp2f) may differ from a double result rounded by an ulp: exact only for bfloat16 and double
  if op in ("exp2", "sin") and least_upper_float(t.dtype) in (dtypes.float16, dtypes.float32): op = "neg"
  if op == "sub" and t.dtype is dtypes.bool: return t ^ other  # bool - bool is refused, as torch and numpy do
  if op in ("lt", "eq"): return t < other if op == "lt" else t == other
  if op == "where": return (t < other).where(t, other)
  if op == "neg": return -t
  if op in ("exp2", "sqrt", "sin", "trunc"): return getattr(t, op)() if op != "trunc" or dtypes.is_float(t.dtype) else t
  if op in ("sum", "max", "min"): return getattr(t, op)(0)
  if op == "cast": return t.cast(dtypes.float32 if not dtypes.is_float(t.dtype) else dtypes.int32)
  return getattr(t, op)(other)

def test_every_dtype_cpu_and_python_agree_bit_for_bit():
  def check(data):
    dtype = data.draw(st.sampled_from(DTYPES))
    n = data.draw(st.sampled_from([1, 3, 4, 5, 16, 17, 64, 100]))  # 64+: reductions become vectors of 16 lanes
    a, b = values(data.draw, dtype, n), values(data.draw, dtype, n)
    steps = data.draw(st.lists(st.sampled_from(BINARY + UNARY), min_size=1, max_size=3))
    steps += data.draw(st.sampled_from([[], [], ["max"], ["min"], ["sum"]]))  # often ending in a reduction (of bools after lt/eq)
    outs = {}
    for dev in ("CPU", "PYTHON"):
      x, y = Tensor(a, device=dev, dtype=dtype), Tensor(b, device=dev, dtype=dtype)
      for op in steps:
        if x.ndim == 0: x = x.reshape(1).expand(n)
        x = apply(x, y.cast(x.dtype) if x.dtype is not y.dtype else y, op)
      with np.errstate(all="ignore"): outs[dev] = x.numpy()
    c, p = outs["CPU"], outs["PYTHON"]
    assert c.dtype == p.dtype and c.shape == p.shape, (c.dtype, p.dtype, c.shape, p.shape)
    # bit for bit (so -0.0 is not 0.0), except that a nan's sign and payload may differ (x86 makes negative nans)
    nan = np.isnan(c) & np.isnan(p) if c.dtype.kind == "f" else np.zeros(c.shape, bool)
    bits = f"u{c.dtype.itemsize}" if c.dtype != np.bool_ else "u1"
    same = np.array_equal(np.where(nan, 0, c.view(bits)), np.where(nan, 0, p.view(bits)))
    assert same, f"{dtype} {steps} on {a} and {b}: CPU {c}, PYTHON {p}"
  settings(max_examples=40 * SCALE, deadline=None, suppress_health_check=list(HealthCheck), database=None)(given(st.data())(check))()
