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
from tensor import Tensor, Context

SCALE = int(os.environ.get("EXAMPLES_SCALE", "1"))
SIZES = [1, 3, 4, 5, 16, 63, 64, 65, 128, 130]
SMALL = [1, 3, 4, 5, 16]  # the PYTHON interpreter runs a scalar at a time: small graphs only
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
