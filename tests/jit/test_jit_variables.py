"""Bound Variables (`Variable("n", 1, 64).bind(8)`) as kernel arguments: eager values, one TinyJit capture replayed with
each call's value (batched native replay and kernel by kernel), values bound inside the function kept from the capture,
mismatches, pickling. Symbolic shapes: a bound Variable as a size (reshape/expand), one capture for every size."""
import pickle
import numpy as np
from runtime.device import Device
import pytest
from tensor import Tensor, TinyJit, Context, Variable
from tensor.engine import realize
from tensor.engine.jit import JitError
from tensor.errors import ArgumentTypeError, ShapeError

def _n(value: int, name: str = "n"): return Variable(name, 1, 64).bind(value)

@pytest.mark.parametrize("n", [1, 3, 64])
def test_eager_ops_with_a_bound_variable(n):
  x = np.arange(-5, 75, dtype=np.float32)  # 80 elements: the output loop is upcast
  t = Tensor(x)
  np.testing.assert_allclose((t * _n(n)).numpy(), x * n)
  np.testing.assert_allclose((_n(n) - t).numpy(), n - x)
  np.testing.assert_array_equal((t.int() + _n(n)).numpy(), x.astype(np.int32) + n)
  np.testing.assert_allclose(((t * _n(n)).sum() / _n(n)).numpy(), x.sum(), rtol=1e-6)

def test_gradient_through_a_bound_variable():
  x = Tensor([1.0, -2.0, 3.0], requires_grad=True)
  ((x * _n(4) + _n(4)) * x).sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), 2 * 4 * np.array([1.0, -2.0, 3.0]) + 4)

def test_one_program_serves_every_value():
  t = Tensor(np.arange(40, dtype=np.float32)).realize()
  for n in (2, 9, 17): np.testing.assert_allclose((t * 3.0 + _n(n, "only_here")).numpy(), np.arange(40) * 3.0 + n)
  runners = [r for r in realize.ENGINE.programs.values()
             if isinstance(r, realize.BoundRunner) and any(v.arg[0] == "only_here" for v in r.program.vars)]
  assert sorted(r.var_vals for r in runners) == [(2,), (9,), (17,)] and len({id(r.base) for r in runners}) == 1

def _jitted():
  calls = []
  @TinyJit
  def f(x, v):
    calls.append(1)
    return (((x * v).contiguous() + v).sum(axis=1) - v).realize()
  return f, calls

def _want(x, n): return (x * n + n).sum(axis=1) - n

@pytest.mark.parametrize("jit_mode", [1, 2])  # JIT=1: one native call per replay; JIT=2: kernel by kernel in Python
def test_one_capture_replays_every_value(jit_mode):
  rng = np.random.default_rng(0)
  f, calls = _jitted()
  with Context(JIT=jit_mode):
    for n in (8, 3, 64, 1, 5, 8, 40):
      x = rng.standard_normal((6, 70)).astype(np.float32)
      np.testing.assert_allclose(f(Tensor(x), _n(n)).numpy(), _want(x, n), rtol=1e-5, atol=1e-4)
  assert len(calls) == 2 and f.cnt == 7
  # JIT=1 replays a CPU capture through the generated native function (JIT=2 bypasses it; other devices replay kernel by kernel)
  if Device.DEFAULT == "CPU": assert f.captured._native not in (None, False)

def test_keyword_variable():
  @TinyJit
  def f(x, *, scale): return (x * scale).realize()
  x = Tensor(np.ones(20, dtype=np.float32)).realize()
  for n in (4, 6, 11, 2): np.testing.assert_allclose(f(x, scale=_n(n)).numpy(), np.full(20, n))

def test_variable_bound_inside_the_function_keeps_its_capture_value():
  values = iter([5, 7, 9, 11])
  @TinyJit
  def f(x): return (x + _n(next(values))).realize()
  x = Tensor(np.zeros(10, dtype=np.float32)).realize()
  got = [f(x).numpy()[0] for _ in range(4)]
  assert got == [5, 7, 7, 7]  # call 1 runs, call 2 captures with 7, replays keep 7 (Python is not run again)

def test_variable_mismatch_is_args_mismatch():
  f, _ = _jitted()
  x = Tensor(np.ones((2, 3), dtype=np.float32)).realize()
  for n in (1, 2): f(x, _n(n))
  with pytest.raises(JitError, match=r"args mismatch in JIT: the captured call bound the Variables \['n'\], this call binds \['m'\]"):
    f(x, _n(3, "m"))
  with pytest.raises(JitError, match=r"args mismatch in JIT: .*Variables \['n'\], this call binds \[\]"): f(x, 3)

def test_a_reserved_variable_name_is_an_error():
  with pytest.raises(ValueError, match="Variable name 'cvar0' is reserved"): (Tensor.ones(4) * Variable("cvar0", 1, 9).bind(2)).realize()

def test_a_variable_out_of_range_is_an_error():
  with pytest.raises(ValueError, match=r"65 is outside n's range \[1, 64\]"): _n(65)

def test_pickled_capture_replays_new_values():
  f, _ = _jitted()
  x = np.arange(12, dtype=np.float32).reshape(2, 6)
  for n in (1, 2): f(Tensor(x), _n(n))
  g = pickle.loads(pickle.dumps(f))
  for n in (3, 30): np.testing.assert_allclose(g(Tensor(x), _n(n)).numpy(), _want(x, n), rtol=1e-6)

# ---- symbolic shapes: a bound Variable as a size ----

def test_symbolic_shape_one_capture_several_sizes():
  calls = []
  @TinyJit
  def f(a, b):
    calls.append(1)
    return (a + b).realize()
  rng = np.random.default_rng(1)
  for i in range(1, 6):
    v = Variable("i", 1, 10).bind(i)
    a, b = rng.random((3, i), dtype=np.float32), rng.random((3, i), dtype=np.float32)
    out = f(Tensor(a).reshape(3, v), Tensor(b).reshape(3, v)).reshape(3, i)
    np.testing.assert_allclose(out.numpy(), a + b)
  assert len(calls) == 2 and f.cnt == 5

def _sym_step():
  calls = []
  @TinyJit
  def f(x, y):
    calls.append(1)
    z = (x * 2.0 + y).contiguous()
    return z.sum(axis=1).realize(), (z * y).sum().realize(), (z - 1.0).realize()
  return f, calls

@pytest.mark.parametrize("jit_mode", [1, 2])
def test_symbolic_shape_replays_sums_over_the_symbolic_axis(jit_mode):
  f, calls = _sym_step()
  rng = np.random.default_rng(2)
  with Context(JIT=jit_mode):
    for n in (5, 8, 3, 17, 64, 1, 3):  # captured at 8, replayed at the rest (64 is the Variable's max)
      x, y = rng.standard_normal((4, n)).astype(np.float32), rng.standard_normal((4, n)).astype(np.float32)
      s, total, d = f(Tensor(x).reshape(4, _n(n)), Tensor(y).reshape(4, _n(n)))
      z = x * 2 + y
      np.testing.assert_allclose(s.numpy(), z.sum(axis=1), rtol=1e-5, atol=1e-5)
      np.testing.assert_allclose(total.numpy(), (z * y).sum(), rtol=1e-5, atol=1e-4)
      assert d.shape[1].src[1].arg == n  # the returned tensor's Variable is bound to this call's value
      np.testing.assert_allclose(d.numpy(), z - 1, rtol=1e-6, atol=1e-6)
      np.testing.assert_allclose(d.reshape(4 * n).numpy(), (z - 1).reshape(-1), rtol=1e-6, atol=1e-6)
  assert len(calls) == 2 and f.cnt == 7

def test_symbolic_shape_mismatch_is_args_mismatch():
  f, _ = _sym_step()
  for n in (2, 3): f(Tensor.ones(4, n).reshape(4, _n(n)), Tensor.ones(4, n).reshape(4, _n(n)))
  with pytest.raises(JitError, match="args mismatch in JIT"): f(Tensor.ones(5, 3).reshape(5, _n(3)), Tensor.ones(5, 3).reshape(5, _n(3)))
  with pytest.raises(JitError, match="args mismatch in JIT"): f(Tensor.ones(4, 3), Tensor.ones(4, 3))

@pytest.mark.parametrize("n", [1, 7, 64])
def test_symbolic_shape_eager(n):
  x = np.arange(3 * n, dtype=np.float32).reshape(3, n) - 20
  t = Tensor(x).reshape(3, _n(n))
  assert t.numel() == 3 * n and t.shape[0] == 3 and t.shape[1].src[1].arg == n
  np.testing.assert_allclose((t * 3.0 + 1.0).numpy(), x * 3 + 1)
  np.testing.assert_allclose(t.sum(axis=1).numpy(), x.sum(axis=1))
  np.testing.assert_allclose(t.max(axis=0).numpy(), x.max(axis=0))
  np.testing.assert_allclose((t + Tensor(np.ones((3, 1), dtype=np.float32))).numpy(), x + 1)  # a size-1 dim broadcast to n
  np.testing.assert_allclose(t.sum().numpy(), x.sum())

def test_symbolic_reshape_errors():
  t = Tensor(np.zeros((3, 4), dtype=np.float32))
  with pytest.raises(ShapeError, match=r"can't reshape a tensor of shape \(3, 4\) \(12 elements\) to \(3, n=5\) \(15 elements at the bound values"):
    t.reshape(3, _n(5))
  with pytest.raises(ArgumentTypeError, match="must be an integer or a bound Variable, got the unbound Variable 'n': bind it first"):
    t.reshape(3, Variable("n", 1, 64))
