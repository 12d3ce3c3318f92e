"""A KV cache written and read at a bound Variable position (issue 25): each case failed on main before this fix.
Oracle: numpy, and the same decode step run eagerly with int positions."""
import numpy as np
import pytest
from tensor import Tensor, TinyJit, Variable
from tensor.errors import ArgumentValueError, ShapeError

def _cache(): return Tensor.zeros(1, 2, 8, 4).contiguous().realize()

def test_assign_into_a_slice_of_a_realized_cache_int_bounds():
  c = _cache()
  c[:, :, 2:4].assign(Tensor.ones(1, 2, 2, 4)).realize()
  want = np.zeros((1, 2, 8, 4), np.float32)
  want[:, :, 2:4] = 1
  np.testing.assert_array_equal(c.numpy(), want)

@pytest.mark.parametrize("how", ["assign", "setitem"])
def test_write_at_a_variable_position(how):
  c = _cache()
  sp = Variable("sp", 0, 7).bind(3)
  vals = Tensor(np.arange(8, dtype=np.float32).reshape(1, 2, 1, 4))
  if how == "assign": c[:, :, sp:sp + 1].assign(vals).realize()
  else: c[:, :, sp:sp + 1] = vals  # was: "padding ... this op takes no symbolic sizes", an op the user never called
  want = np.zeros((1, 2, 8, 4), np.float32)
  want[:, :, 3:4] = np.arange(8).reshape(1, 2, 1, 4)
  np.testing.assert_array_equal(c.numpy(), want)

def test_pad_by_a_variable():
  n = Variable("n", 0, 5).bind(2)
  np.testing.assert_array_equal(Tensor([1.0, 2.0]).pad(((n, 5 - n),)).numpy(), [0, 0, 1, 2, 0, 0, 0])
  np.testing.assert_array_equal(Tensor([1, 2]).pad(((n, 1),), value=9).numpy(), [9, 9, 1, 2, 9])
  with pytest.raises(ArgumentValueError, match="is negative"): Tensor([1.0]).pad(((n - 3, 0),))
  np.testing.assert_array_equal(Tensor([1.0]).pad(((n - 1, 0),)).numpy(), [0, 1])  # n - 1 < 0 for n = 0: checked when bound

@pytest.mark.parametrize("k", [0, 3, 7])
def test_triu_by_a_variable(k):
  sp = Variable("sp", 0, 7).bind(k)
  np.testing.assert_array_equal(Tensor.ones(3, 9).triu(sp + 1).numpy(), np.triu(np.ones((3, 9)), k + 1))
  np.testing.assert_array_equal(Tensor.ones(3, 9).tril(sp - 2).numpy(), np.tril(np.ones((3, 9)), k - 2))
  # a causal mask over sp + 2 keys: its width is symbolic too
  m = Tensor.full((2, sp + 2), float("-inf")).triu(sp + 1).numpy()
  np.testing.assert_array_equal(m, np.triu(np.full((2, k + 2), -np.inf), k + 1))

def test_shrink_by_a_variable_that_could_pass_the_end():
  # sp up to 7 on an axis of 8: sp + 4 passes the end for sp > 4. Accepted at a value that fits, checked when bound
  x = Tensor.arange(8).contiguous().realize()
  sp = Variable("sp", 0, 7)
  np.testing.assert_array_equal(x.shrink(((sp.bind(3), sp.bind(3) + 4),)).numpy(), [3, 4, 5, 6])
  with pytest.raises(ShapeError, match=r"keeps \[5, 9\) of 8"): x.shrink(((sp.bind(5), sp.bind(5) + 4),))
  calls = []
  @TinyJit
  def f(x, sp):
    calls.append(1)
    return (x.shrink(((sp, sp + 4),)) * 2).realize()
  for k in (0, 1, 4, 2):
    np.testing.assert_array_equal(f(x, sp.bind(k)).numpy(), 2 * np.arange(k, k + 4))
  assert len(calls) == 2
  with pytest.raises(ShapeError, match=r"the end is past the axis size at sp=6"): f(x, sp.bind(6))  # a replay checks the bound value
  np.testing.assert_array_equal(f(x, sp.bind(3)).numpy(), 2 * np.arange(3, 7))

def test_sizes_like_two_times_v_under_jit():
  x = Tensor.arange(48).reshape(16, 3).contiguous().realize()
  v = Variable("n", 1, 8)
  @TinyJit
  def f(x, n): return (x[:2 * n].reshape(n, 6) + 1).sum(1).realize()
  for k in (1, 3, 8, 2):
    np.testing.assert_array_equal(f(x, v.bind(k)).numpy(), (np.arange(48)[:6 * k].reshape(k, 6) + 1).sum(1))

MAXC, H, D = 16, 2, 8

class _Attention:
  """One attention layer with a KV cache (1, H, MAXC, D) per K and V, written at sp and read over [0, sp + T)."""
  def __init__(self, w: list[np.ndarray]):
    self.wq, self.wk, self.wv = (Tensor(a) for a in w)
    self.cache = Tensor.zeros(2, 1, H, MAXC, D).contiguous().realize()
  def __call__(self, x: Tensor, sp) -> Tensor:
    T = x.shape[1]
    q, k, v = [(x @ w).reshape(1, T, H, D).transpose(1, 2) for w in (self.wq, self.wk, self.wv)]
    self.cache[:, :, :, sp:sp + T].assign(Tensor.stack(k, v)).realize()
    keys, vals = self.cache[0, :, :, 0:sp + T], self.cache[1, :, :, 0:sp + T]
    mask = Tensor.full((1, 1, T, sp + T), float("-inf")).triu(sp + 1)
    att = (q @ keys.transpose(2, 3) / D ** 0.5 + mask).softmax(-1)
    return (att @ vals).transpose(1, 2).reshape(1, T, H * D)

def test_jitted_decode_step_replays_at_every_position():
  rng = np.random.default_rng(0)
  w = [rng.standard_normal((D * H, D * H)).astype(np.float32) * 0.3 for _ in range(3)]
  xs = rng.standard_normal((10, 1, 1, H * D)).astype(np.float32)
  eager, jitted = _Attention(w), _Attention(w)
  # prefill of 3 tokens eagerly in both, then decode: eager with int positions, jitted with a Variable
  prompt = rng.standard_normal((1, 3, H * D)).astype(np.float32)
  eager(Tensor(prompt), 0).realize(), jitted(Tensor(prompt), 0).realize()
  calls = []
  @TinyJit
  def step(x, sp):
    calls.append(1)
    return jitted(x, sp).realize()
  spv = Variable("start_pos", 0, MAXC - 1)
  for i in range(3, 3 + len(xs)):
    want = eager(Tensor(xs[i - 3]), i).numpy()
    np.testing.assert_allclose(step(Tensor(xs[i - 3]), spv.bind(i)).numpy(), want, rtol=1e-6, atol=1e-6, err_msg=f"position {i}")
  assert len(calls) == 2  # one capture serves every later position
  np.testing.assert_array_equal(jitted.cache.numpy(), eager.cache.numpy())
