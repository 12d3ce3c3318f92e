"""tensor/nn/optim.py: each optimizer's steps against a float64 numpy transcription of its published update rule, and against
torch.optim where torch has the optimizer (skipped without torch). Gradients are set by hand, several steps in a row, on
a matrix big enough that its norms are split reductions (>= 64 elements) and a short vector (an upcast output loop)."""
import numpy as np
import pytest
from tensor import Tensor
from tensor import nn
from tensor.nn import optim
from tensor.nn.state import get_parameters

SHAPES = [(70, 33), (3,)]
STEPS = 4

@pytest.fixture(autouse=True)
def training():
  old, Tensor.training = Tensor.training, True
  yield
  Tensor.training = old

def _data(shapes=SHAPES, steps=STEPS, seed=0):
  rng = np.random.default_rng(seed)
  w0 = [rng.standard_normal(s).astype(np.float32) for s in shapes]
  grads = [[rng.standard_normal(s).astype(np.float32) for s in shapes] for _ in range(steps)]
  return w0, grads

def run_ours(make, w0, grads):
  params = [Tensor(w.copy()) for w in w0]
  opt = make(params)
  history = []
  for gs in grads:
    for p, g in zip(params, gs): p.grad = Tensor(g)
    opt.step()
    history.append([p.numpy() for p in params])
  return history

def _norm(x): return np.sqrt(np.sum(np.square(x)))

# float64 references, written from the papers' and torch's documented update rules
def ref_sgd(w0, grads, lr, momentum=0.0, wd=0.0, nesterov=False):
  w, buf, out = [x.astype(np.float64) for x in w0], [None] * len(w0), []
  for gs in grads:
    for i, g in enumerate(gs):
      g = g + wd * w[i]
      if momentum:
        buf[i] = g if buf[i] is None else momentum * buf[i] + g
        g = g + momentum * buf[i] if nesterov else buf[i]
      w[i] = w[i] - lr * g
    out.append([x.copy() for x in w])
  return out

def ref_adam(w0, grads, lr, b1=0.9, b2=0.999, eps=1e-8, wd=0.0, lamb=False):
  w = [x.astype(np.float64) for x in w0]
  m, v, out = [np.zeros_like(x) for x in w], [np.zeros_like(x) for x in w], []
  for t, gs in enumerate(grads, 1):
    for i, g in enumerate(gs):
      m[i] = b1 * m[i] + (1 - b1) * g
      v[i] = b2 * v[i] + (1 - b2) * g * g
      step = (m[i] / (1 - b1 ** t)) / (np.sqrt(v[i] / (1 - b2 ** t)) + eps) + wd * w[i]
      trust = _norm(w[i]) / _norm(step) if lamb and _norm(w[i]) > 0 and _norm(step) > 0 else 1.0
      w[i] = w[i] - lr * trust * step
    out.append([x.copy() for x in w])
  return out

def ref_lars(w0, grads, lr, momentum=0.9, wd=1e-4, tcoef=0.001):
  w, buf, out = [x.astype(np.float64) for x in w0], [np.zeros_like(x, dtype=np.float64) for x in w0], []
  for gs in grads:
    for i, g in enumerate(gs):
      wn, gn = _norm(w[i]), _norm(g)
      trust = tcoef * wn / (gn + wd * wn) if wn > 0 and gn > 0 else 1.0
      buf[i] = momentum * buf[i] + lr * trust * (g + wd * w[i])
      w[i] = w[i] - buf[i]
    out.append([x.copy() for x in w])
  return out

def ref_newton_schulz(g, steps=5, abc=(3.4445, -4.775, 2.0315), eps=1e-7):
  if g.shape[0] > g.shape[1]: return ref_newton_schulz(g.T, steps, abc, eps).T
  x = g / (_norm(g) + eps)
  a, b, c = abc
  for _ in range(steps):
    gram = x @ x.T
    x = a * x + (b * gram + c * gram @ gram) @ x
  return x

def ref_muon(w0, grads, lr, momentum=0.95, wd=0.1, nesterov=True):
  w, buf, out = [x.astype(np.float64) for x in w0], [np.zeros_like(x, dtype=np.float64) for x in w0], []
  for gs in grads:
    for i, g in enumerate(gs):
      buf[i] = momentum * buf[i] + g
      u = g + momentum * buf[i] if nesterov else buf[i]
      u = ref_newton_schulz(u.reshape(u.shape[0], -1)).reshape(u.shape)
      w[i] = w[i] * (1 - lr * wd) - lr * u
    out.append([x.copy() for x in w])
  return out

CASES = {
  "sgd": (lambda p: optim.SGD(p, lr=0.1), lambda w, g: ref_sgd(w, g, 0.1)),
  "sgd momentum wd": (lambda p: optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=0.01), lambda w, g: ref_sgd(w, g, 0.05, 0.9, 0.01)),
  "sgd nesterov": (lambda p: optim.SGD(p, lr=0.05, momentum=0.8, nesterov=True), lambda w, g: ref_sgd(w, g, 0.05, 0.8, nesterov=True)),
  "sgd classic": (lambda p: optim.SGD(p, lr=0.05, momentum=0.8, classic=True), lambda w, g: ref_sgd(w, g, 0.05, 0.8)),
  "adam": (lambda p: optim.Adam(p, lr=0.01), lambda w, g: ref_adam(w, g, 0.01)),
  "adam betas": (lambda p: optim.Adam(p, lr=0.02, b1=0.5, b2=0.9, eps=1e-6), lambda w, g: ref_adam(w, g, 0.02, 0.5, 0.9, 1e-6)),
  "adamw": (lambda p: optim.AdamW(p, lr=0.01, weight_decay=0.1), lambda w, g: ref_adam(w, g, 0.01, wd=0.1)),
  "lamb": (lambda p: optim.LAMB(p, lr=0.01, weight_decay=0.01), lambda w, g: ref_adam(w, g, 0.01, eps=1e-6, wd=0.01, lamb=True)),
  "lars": (lambda p: optim.LARS(p, lr=0.1), lambda w, g: ref_lars(w, g, 0.1)),
  "muon": (lambda p: optim.Muon(p, lr=0.02), lambda w, g: ref_muon(w, g, 0.02)),
}

@pytest.mark.parametrize("name", CASES)
def test_steps_match_the_update_rule(name):
  make, ref = CASES[name]
  w0, grads = _data()
  for step, (ours, want) in enumerate(zip(run_ours(make, w0, grads), ref(w0, grads))):
    for i, (a, b) in enumerate(zip(ours, want)):
      np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5, err_msg=f"{name}: step {step + 1}, parameter {i}")

def test_newton_schulz_orthogonalizes():
  g = np.random.default_rng(1).standard_normal((20, 90)).astype(np.float32)
  x = optim.newton_schulz(Tensor(g), 5, (3.4445, -4.775, 2.0315)).numpy()
  np.testing.assert_allclose(x, ref_newton_schulz(g.astype(np.float64)), rtol=1e-4, atol=1e-5)
  s = np.linalg.svd(x, compute_uv=False)
  assert 0.5 < s.min() and s.max() < 1.5  # the quintic's coefficients aim for singular values near 1, not exactly 1
  with pytest.raises(ValueError, match="needs a matrix"): optim.newton_schulz(Tensor([1.0, 2.0]), 5, (1.0,))

# ---- against torch ----

def run_torch(torch, make, w0, grads):
  params = [torch.tensor(w, requires_grad=True) for w in w0]
  opt = make(params)
  out = []
  for gs in grads:
    for p, g in zip(params, gs): p.grad = torch.tensor(g)
    opt.step()
    out.append([p.detach().numpy().copy() for p in params])
  return out

TORCH = {
  "sgd momentum nesterov wd": (lambda p: optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=0.01, nesterov=True),
                               lambda t, p: t.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=0.01, nesterov=True)),
  "adam": (lambda p: optim.Adam(p, lr=0.01), lambda t, p: t.optim.Adam(p, lr=0.01)),
  "adamw": (lambda p: optim.AdamW(p, lr=0.01, weight_decay=0.1), lambda t, p: t.optim.AdamW(p, lr=0.01, weight_decay=0.1)),
}

@pytest.mark.parametrize("name", TORCH)
def test_steps_match_torch(name):
  torch = pytest.importorskip("torch")
  ours_make, theirs_make = TORCH[name]
  w0, grads = _data()
  for step, (a, b) in enumerate(zip(run_ours(ours_make, w0, grads), run_torch(torch, lambda p: theirs_make(torch, p), w0, grads))):
    for i in range(len(a)): np.testing.assert_allclose(a[i], b[i], rtol=1e-5, atol=1e-6, err_msg=f"{name}: step {step + 1}, parameter {i}")

def test_muon_matches_torch():
  # torch's Muon runs Newton-Schulz in bfloat16 and keeps its momentum as a running average (a constant factor that the
  # normalization removes); on a wide matrix its learning rate is not rescaled, so the steps agree to bfloat16 precision
  torch = pytest.importorskip("torch")
  w0, grads = _data(shapes=[(16, 40)])
  ours = run_ours(lambda p: optim.Muon(p, lr=0.02), w0, grads)
  theirs = run_torch(torch, lambda p: torch.optim.Muon(p, lr=0.02), w0, grads)
  for a, b in zip(ours, theirs): np.testing.assert_allclose(a[0], b[0], atol=5e-4)
  assert not np.allclose(ours[-1][0], w0[0], atol=1e-2)  # it moved

# ---- the step protocol ----

def test_learning_rate_is_a_tensor_a_step_reads():
  w0, grads = _data(steps=2)
  params = [Tensor(w.copy()) for w in w0]
  opt = optim.SGD(params, lr=0.1)
  for p, g in zip(params, grads[0]): p.grad = Tensor(g)
  opt.step()
  opt.lr.assign(Tensor([0.01])).realize()  # what a scheduler does between captured steps
  for p, g in zip(params, grads[1]): p.grad = Tensor(g)
  opt.step()
  for p, w, g1, g2 in zip(params, w0, *grads): np.testing.assert_allclose(p.numpy(), w - 0.1 * g1 - 0.01 * g2, rtol=1e-5, atol=1e-6)

def test_schedule_step_realizes_with_the_loss_and_keeps_buffers():
  w = Tensor(np.ones((4, 3), np.float32))
  stats = Tensor(np.zeros(3, np.float32))
  stats.requires_grad = False  # a running statistic: realized with the step, never updated by it
  opt = optim.Adam([w, stats], lr=0.1)
  assert w.requires_grad is True and opt.params == [w] and opt.buffers == [stats]
  w.grad = Tensor(np.full((4, 3), 2.0, np.float32))
  stats.assign(stats + 1)
  loss = (w * 3).sum()
  todo = opt.schedule_step()
  assert [id(t) for t in todo[-2:]] == [id(w), id(stats)] and len(todo) == 2 + 2 + 2  # b1**t, b2**t, m, v, w, stats
  assert loss.realize(*todo).item() == 36.0  # the loss reads the weights from before the step
  np.testing.assert_allclose(w.numpy(), np.full((4, 3), 0.9), rtol=1e-6)  # Adam's first step moves each weight by lr
  assert stats.tolist() == [1.0, 1.0, 1.0]
  opt.zero_grad()
  assert w.grad is None

def test_optimizer_group_steps_each_member():
  w0, grads = _data(steps=2)
  a, b = Tensor(w0[0].copy()), Tensor(w0[1].copy())
  group = optim.OptimizerGroup(optim.Muon([a], lr=0.02), optim.AdamW([b], lr=0.01, weight_decay=0.1))
  assert group.params == [a, b] and isinstance(group[1], optim.LAMB)
  for gs in grads:
    a.grad, b.grad = Tensor(gs[0]), Tensor(gs[1])
    group.step()
  np.testing.assert_allclose(a.numpy(), ref_muon([w0[0]], [[g[0]] for g in grads], 0.02)[-1][0], rtol=2e-5, atol=2e-5)
  np.testing.assert_allclose(b.numpy(), ref_adam([w0[1]], [[g[1]] for g in grads], 0.01, wd=0.1)[-1][0], rtol=2e-5, atol=2e-5)
  group.zero_grad()
  assert a.grad is None and b.grad is None

def test_optimizer_takes_lazy_parameters_and_a_model():
  class Model:
    def __init__(self): self.w, self.b = Tensor.ones(5, 3) * 2, Tensor.zeros(3) + 1  # lazy: not buffers yet
  m = Model()
  opt = optim.SGD(get_parameters(m), lr=0.5)
  m.w.grad, m.b.grad = Tensor.ones(5, 3), Tensor.ones(3)
  opt.step()
  assert m.w.tolist() == [[1.5] * 3] * 5 and m.b.tolist() == [0.5] * 3

def test_bad_use_is_a_clear_error():
  w = Tensor([1.0, 2.0])
  with pytest.raises(ValueError, match="learning rate must be >= 0"): optim.SGD([w], lr=-1)
  with pytest.raises(ValueError, match="no parameters to train"): optim.Adam([])
  with pytest.raises(ValueError, match="momentum must be >= 0"): optim.SGD([w], momentum=-0.1)
  with pytest.raises(ValueError, match="nesterov momentum needs momentum"): optim.SGD([w], nesterov=True)
  with pytest.raises(ValueError, match="betas must be in"): optim.Adam([w], b1=1.0)
  with pytest.raises(TypeError, match="list of Tensors"): optim.SGD([np.zeros(2)])
  opt = optim.SGD([w], lr=0.1)
  with pytest.raises(RuntimeError, match=r"parameter 0 \(shape \(2,\)\) has no gradient"): opt.step()
  w.grad = Tensor([1.0, 2.0, 3.0])
  with pytest.raises(RuntimeError, match=r"has shape \(2,\) but its gradient has shape \(3,\)"): opt.step()
  w.grad = Tensor([1.0, 2.0])
  Tensor.training = False
  with pytest.raises(RuntimeError, match="Tensor.training is False"): opt.step()

def test_seed_training_pattern_learns_with_hand_written_gradients():
  # the seeds' loop (zero_grad, a loss, gradients, loss.realize(*optim.schedule_step())) on least squares, whose gradient
  # is written out until autograd lands: d/dW mean((xW^T + b - y)^2) = 2/N (err^T x), d/db = 2/N sum(err)
  from tensor import nn
  rng = np.random.default_rng(0)
  X = rng.standard_normal((256, 70)).astype(np.float32)
  true_w = rng.standard_normal((3, 70)).astype(np.float32)
  Y = X @ true_w.T + 0.5
  model = nn.Linear(70, 3)
  opt = optim.Adam(get_parameters(model), lr=0.05)
  x, y = Tensor(X), Tensor(Y)
  def train_step():
    opt.zero_grad()
    err = x @ model.weight.T + model.bias - y
    loss = err.square().mean()
    model.weight.grad = (err.T @ x) * (2 / err.numel())
    model.bias.grad = err.sum(0) * (2 / err.numel())
    return loss.realize(*opt.schedule_step())
  losses = [train_step().item() for _ in range(150)]
  assert losses[-1] < 0.01 * losses[0] and losses[-1] < 0.05
  np.testing.assert_allclose(model.weight.numpy(), true_w, atol=0.05)

def test_half_parameters_update_in_float32():
  from tensor import dtypes
  w = Tensor(np.full((3, 70), 1.0, np.float16))
  opt = optim.Adam([w], lr=1e-3)
  assert opt.m[0].dtype is dtypes.float32
  for _ in range(3):
    w.grad = Tensor(np.full((3, 70), 0.5, np.float16))
    opt.step()
  assert w.dtype is dtypes.float16
  np.testing.assert_allclose(w.numpy().astype(np.float32), 1 - 3e-3, atol=1e-3)  # Adam moves by ~lr per step; float16 spacing near 1 is 1e-3

def test_parameters_made_from_equal_numbers_are_separate():
  # two BatchNorm(4) start from Tensor.ones(4): two tensors, two buffers, updated apart (they were one node, one buffer)
  a, b = nn.BatchNorm(4), nn.BatchNorm(4)
  assert a.weight.uop is not b.weight.uop
  opt = nn.optim.SGD([a.weight, b.weight, a.bias, b.bias], lr=0.1)
  a.weight.grad, b.weight.grad = Tensor.ones(4), Tensor.full((4,), 2.0)
  a.bias.grad, b.bias.grad = Tensor.zeros(4), Tensor.zeros(4)
  with Tensor.train(): opt.step()
  np.testing.assert_allclose(a.weight.numpy(), np.full(4, 0.9, np.float32))
  np.testing.assert_allclose(b.weight.numpy(), np.full(4, 0.8, np.float32))
