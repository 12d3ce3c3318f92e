"""Random legal Opt lists (tensor/codegen/opt.py, rules/opt.rules) on random kernels, run on the PYTHON device (which raises
on any out-of-bounds access) against the same kernel without Opts, and the heuristic's list on CPU against the PYTHON device."""
from __future__ import annotations
import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st
from runtime.device import Buffer
from runtime.ops import Ops
from runtime.ops_python import program
from tensor import Tensor
from tensor.codegen import lower_kernel, rangeify_simplified, target_for
from tensor.codegen.linearize import linearize
from tensor.codegen.opt import KINDS, Opt, OptError, apply_opts, loops, trip_count
from tensor.engine.realize import kernel_buffers, schedule_of
from tensor.engine.state import ENGINE
buffers = ENGINE.storage.buffers

SETTINGS = settings(deadline=None, suppress_health_check=list(HealthCheck), database=None, max_examples=40)

def kernel_of(t: Tensor):
  """The AST of the one kernel computing t (its inputs realized), and its buffers."""
  t.kernelize()
  root = t.uop.src[0] if t.uop.op is Ops.RESHAPE else t.uop
  (k,) = schedule_of([root])
  bufs = [buffers[b] for b in kernel_buffers(k)]
  for b in bufs: b.ensure_allocated()
  return k.arg.ast, bufs

def run_python(ast, bufs, opts) -> np.ndarray:
  sink, _ = lower_kernel(ast, target_for("PYTHON"), opts)
  out = Buffer("PYTHON", bufs[0].size, bufs[0].dtype)
  program(linearize(sink), "k")([out, *bufs[1:]])
  return out.numpy()

def build(kind: int, shape: tuple[int, int], seed: int, device: str = "PYTHON") -> Tensor:
  """Kernel `kind` over small integers (exact in float32 in any order of summation; exp2 of integers is exact too)."""
  rng = np.random.default_rng(seed)
  m, n = shape
  a = Tensor(rng.integers(-4, 5, (m, n)).astype(np.float32), device=device).realize()
  b = Tensor(rng.integers(-4, 5, (n, m)).astype(np.float32), device=device).realize()
  c = Tensor(rng.integers(-4, 5, (m, n)).astype(np.int32), device=device).realize()
  e = (a - a.max(1, keepdim=True)).exp2()  # powers of two down to 2**-8: their sums are exact too
  return [lambda: a * 2 + a.exp2() * 0, lambda: a.sum(1), lambda: a @ b, lambda: (a - a.max(1, keepdim=True)).exp2(),
          lambda: c.sum(0) + c.max(0), lambda: a.T + 1, lambda: (a @ b).relu() + 1, lambda: e / e.sum(1, keepdim=True),
          lambda: a.sum() + c.max()][kind]()

@st.composite
def opt_lists(draw, ast):
  """Legal Opts drawn one at a time: a kind, a loop, and an amount dividing it (OptError: drawn again, or stop)."""
  sink, ctx = rangeify_simplified(ast)
  ctx.next_range = 1 + max([u.arg for u in sink.toposort() if u.op is Ops.RANGE], default=0)
  opts: list[Opt] = []
  for _ in range(draw(st.integers(0, 4))):
    ls = loops(sink)
    if not ls: break
    axis = draw(st.integers(0, len(ls) - 1))
    # GROUP and LOCAL: GPU targets only (tests/devices/test_group.py, test_local_tile.py); the PYTHON device refuses them at run
    kind = draw(st.sampled_from([k for k in KINDS if k not in ("GROUP", "LOCAL")]))
    n = trip_count(ls[axis]) or 1
    divisors = [d for d in range(0, n + 1) if d == 0 or n % d == 0]
    amount = draw(st.integers(0, len(ls) - 1) if kind == "SWAP" else st.sampled_from(divisors))
    try: sink, done = apply_opts(sink, [Opt(kind, axis, amount)], ctx.new_range)
    except OptError: continue
    opts += done
  return opts

@SETTINGS
@given(st.integers(0, 8), st.sampled_from([(4, 8), (8, 16), (6, 4), (16, 32), (1, 8)]), st.integers(0, 2**31 - 1), st.data())
def test_random_opt_lists_match_no_opts_on_python(kind, shape, seed, data):
  ast, bufs = kernel_of(build(kind, shape, seed))
  opts = data.draw(opt_lists(ast))
  # small integers in float32: every order of a sum gives the same value, so an Opt may not change a bit
  np.testing.assert_array_equal(run_python(ast, bufs, opts), run_python(ast, bufs, []), err_msg=f"opts {opts}")

@SETTINGS
@given(st.integers(0, 8), st.sampled_from([(16, 32), (32, 64), (8, 256)]), st.integers(0, 2**31 - 1))
def test_heuristic_opts_on_cpu_match_python(kind, shape, seed):
  ast, bufs = kernel_of(build(kind, shape, seed))
  want = run_python(ast, bufs, []).reshape(-1)
  np.testing.assert_array_equal(run_python(ast, bufs, None).reshape(-1), want)  # the heuristic's Opts (of the PYTHON device)
  np.testing.assert_array_equal(build(kind, shape, seed, "CPU").numpy().reshape(-1), want)  # the CPU's: vectors, polynomial exp2
