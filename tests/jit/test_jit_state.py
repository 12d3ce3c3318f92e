"""Device state inside a capture: random numbers (the generator's [seed, counter] buffer) and the optimizer's learning rate
(a tensor) change on every replay; a training step (an MLP with Adam on random data, the seeds' pattern) replayed for 100
steps follows the eager loss curve."""
import numpy as np
from tensor import Tensor, TinyJit, nn
from tensor.nn import optim
from tensor.nn.state import get_parameters

def _draws(jit: bool, fn, n: int = 6) -> list:
  Tensor.manual_seed(1234)
  f = TinyJit(fn) if jit else fn
  return [f().numpy() for _ in range(n)]

def test_rand_and_randint_are_fresh_on_every_replay_and_follow_the_eager_sequence():
  def draw(): return Tensor.rand(1000).realize(), Tensor.randint(3, 70, low=-5, high=5).realize()
  def both(): return np.concatenate([t.numpy().reshape(-1).astype(np.float64) for t in draw()])
  eager = _draws(False, lambda: Tensor(both()))
  jit_fn = TinyJit(draw)
  Tensor.manual_seed(1234)
  replays = []
  for _ in range(6):
    r, k = jit_fn()
    replays.append(np.concatenate([r.numpy().reshape(-1).astype(np.float64), k.numpy().reshape(-1).astype(np.float64)]))
  for e, j in zip(eager, replays): np.testing.assert_array_equal(e, j)  # bit for bit: the same counter advances the same way
  assert all(not np.array_equal(replays[i], replays[i + 1]) for i in range(5))
  u = np.concatenate([r[:1000] for r in replays[2:]])
  assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.03

def test_manual_seed_between_replays_restarts_the_sequence():
  f = TinyJit(lambda: Tensor.randn(64).realize())
  Tensor.manual_seed(7)
  first = [f().numpy() for _ in range(4)]
  Tensor.manual_seed(7)
  again = [f().numpy() for _ in range(4)]  # all replays now: the seed is written into the same state buffer
  for a, b in zip(first, again): np.testing.assert_array_equal(a, b)

def test_learning_rate_changes_reach_the_replay():
  w = Tensor([1.0, 2.0, 3.0], requires_grad=True)
  opt = optim.SGD([w], lr=0.5)
  @TinyJit
  @Tensor.train()
  def step(x):
    opt.zero_grad()
    loss = (w * x).sum().backward()  # d loss / d w = x
    return loss.realize(*opt.schedule_step())
  expect = np.array([1.0, 2.0, 3.0], np.float32)
  for i, lr in enumerate([0.5, 0.5, 0.25, 0.125, 1.0, 0.0]):
    opt.lr.assign(Tensor([lr])).realize()
    x = np.array([1.0, -1.0, float(i)], np.float32)
    step(Tensor(x).realize())
    expect = expect - np.float32(lr) * x
    np.testing.assert_allclose(w.numpy(), expect, rtol=1e-6)
  assert step.captured is not None

class MLP:
  def __init__(self):
    self.l1 = nn.Linear(48, 96)
    self.l2 = nn.Linear(96, 10)
  def __call__(self, x): return self.l1(x).relu().sequential([self.l2])

def _train(jit: bool, steps: int = 100) -> tuple[list[float], MLP]:
  rng = np.random.default_rng(0)
  X = Tensor(rng.standard_normal((512, 48)).astype(np.float32)).realize()
  Y = Tensor(rng.integers(0, 10, 512).astype(np.int32)).realize()
  Tensor.manual_seed(0)
  model = MLP()
  opt = optim.Adam(get_parameters(model), lr=3e-3)
  @Tensor.train()
  def train_step():
    opt.zero_grad()
    samples = Tensor.randint(128, high=X.shape[0])
    loss = model(X[samples]).sparse_categorical_crossentropy(Y[samples]).backward()
    return loss.realize(*opt.schedule_step())
  step = TinyJit(train_step) if jit else train_step
  return [step().item() for _ in range(steps)], model

def test_training_step_replayed_for_100_steps_matches_eager():
  eager, m_eager = _train(False)
  jit, m_jit = _train(True)
  np.testing.assert_allclose(jit, eager, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(m_jit.l1.weight.numpy(), m_eager.l1.weight.numpy(), rtol=1e-5, atol=1e-6)
  assert np.mean(jit[-10:]) < 0.8 * np.mean(jit[:5])  # and it trains
