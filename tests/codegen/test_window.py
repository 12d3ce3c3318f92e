"""WINDOW (tensor/codegen/window.py, rules/opt.rules): an assign into a slice of a realized buffer, with int or bound
Variable bounds, is a kernel that loops over the slice only and writes into the buffer itself, the rest untouched. numpy is
the oracle (at the window's edges, across the buffer, under TinyJit replay at several positions); the rendered kernels show
that it reads no old value and loops over the window, and that a masked write that is not a window keeps its mask."""
from __future__ import annotations
import re
import numpy as np
import pytest
from runtime.helpers import Context
from runtime.ops import Ops
from tensor import Tensor, TinyJit, Variable, dtypes
from tensor.engine.realize import get_runner, schedule_of

rng = np.random.default_rng(0)

def _source(t: Tensor) -> str:
  """The C of the kernel computing t (a pending assign), with the heuristic's Opts (its bound Variables parameters)."""
  t.kernelize()
  root = t.uop.src[0] if t.uop.op is Ops.RESHAPE else t.uop
  with Context(NOOPT=0, BEAM=0): return get_runner(schedule_of([root])[-1].arg.ast, "CPU").program.src

def _window_assign(c: Tensor, box: tuple, v: Tensor) -> Tensor:
  """c.assign(v written into the box of c), lazy: the graph t[box] = v builds (a mask of the box over c)."""
  pads = tuple((b, s - e) for (b, e), s in zip(box, c.shape))
  inside = Tensor.ones(*v.shape, dtype=dtypes.bool).pad(pads, value=False)
  return c.assign(inside.where(v.pad(pads), c))

@pytest.mark.parametrize("box", [(2, 4), (0, 1), (7, 8), (0, 8), (3, 6)])
@pytest.mark.parametrize("how", ["setitem", "assign"])
def test_int_slice_against_numpy(box, how):
  a = rng.standard_normal((2, 3, 8, 5)).astype(np.float32)
  v = rng.standard_normal((2, 3, box[1] - box[0], 5)).astype(np.float32)
  c = Tensor(a).contiguous().realize()
  if how == "setitem": c[:, :, box[0]:box[1]] = Tensor(v)
  else: c[:, :, box[0]:box[1]].assign(Tensor(v)).realize()
  want = a.copy()
  want[:, :, box[0]:box[1]] = v
  np.testing.assert_array_equal(c.numpy(), want)

def test_a_box_in_two_dims_and_a_computed_value():
  a, x, w = (rng.standard_normal(s).astype(np.float32) for s in ((6, 9, 4), (2, 5, 7), (7, 4)))
  c = Tensor(a).contiguous().realize()
  c[1:3, 4:9] = Tensor(x) @ Tensor(w)   # a reduction inside the window's kernel
  want = a.copy()
  want[1:3, 4:9] = x @ w
  np.testing.assert_allclose(c.numpy(), want, rtol=1e-5, atol=1e-5)

def test_the_kernel_loops_over_the_window_and_reads_no_old_value():
  c = Tensor.zeros(2, 64, 16).contiguous().realize()
  src = _source(_window_assign(c, ((0, 2), (5, 8), (0, 16)), Tensor(rng.standard_normal((2, 3, 16)).astype(np.float32)).realize()))
  assert re.search(r"ridx\d+ < 3;", src), src                 # the 3 rows of the window, not 64
  assert not re.search(r"=[^;]*data0", src), src              # the old values are not read
  assert not re.search(r"ridx\d+ < 64;", src), src

def test_a_variable_window_writes_at_the_position():
  c = Tensor.zeros(2, 40, 16).contiguous().realize()
  sp = Variable("sp", 0, 36).bind(5)
  src = _source(_window_assign(c, ((0, 2), (sp, sp + 4), (0, 16)), Tensor(rng.standard_normal((2, 4, 16)).astype(np.float32)).realize()))
  assert re.search(r"ridx\d+ < 4;", src) and "sp" in src, src
  assert not re.search(r"=[^;]*data0", src) and not re.search(r"ridx\d+ < 40;", src), src

def test_a_mask_that_is_no_window_keeps_the_old_values():
  a = rng.standard_normal((4, 16)).astype(np.float32)
  c = Tensor(a).contiguous().realize()
  t = c.assign((c > 0).where(c * 2, c))   # the test reads the data: no window
  src = _source(t)
  assert re.search(r"=[^;]*data0", src) and re.search(r"ridx\d+ < 4;", src), src   # every element, its old value read
  t.realize()
  np.testing.assert_array_equal(c.numpy(), np.where(a > 0, a * 2, a))

@pytest.mark.parametrize("T", [1, 3])
def test_variable_window_under_jit_replay(T):
  L = 12
  cache = Tensor.zeros(2, 1, L, 4).contiguous().realize()
  want = np.zeros((2, 1, L, 4), np.float32)
  calls = []
  @TinyJit
  def step(x: Tensor, sp) -> Tensor:
    calls.append(1)
    cache[:, :, sp:sp + T] = x
    return (cache[:, :, 0:sp + T] * 1).sum(2).realize()
  spv = Variable("start_pos", 0, L - T)
  for p in (0, 3, 1, L - T, 5):
    x = rng.standard_normal((2, 1, T, 4)).astype(np.float32)
    got = step(Tensor(x), spv.bind(p)).numpy()
    want[:, :, p:p + T] = x
    np.testing.assert_allclose(got, want[:, :, :p + T].sum(2), rtol=1e-6, atol=1e-6, err_msg=f"position {p}")
    np.testing.assert_array_equal(cache.numpy(), want, err_msg=f"position {p}")
  assert len(calls) == 2

def test_a_window_that_could_pass_the_end_is_clamped():
  # sp + 3 passes the end of 8 for sp > 5: accepted (checked at the bound value), the loop's length clamped in the kernel
  c = Tensor.zeros(8, 4).contiguous().realize()
  want = np.zeros((8, 4), np.float32)
  sp = Variable("sp", 0, 7)
  for p in (0, 5, 2):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    c[sp.bind(p):sp.bind(p) + 3] = Tensor(x)
    want[p:p + 3] = x
    np.testing.assert_array_equal(c.numpy(), want)
