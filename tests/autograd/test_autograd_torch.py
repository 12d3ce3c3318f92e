"""Gradients against torch's autograd on the CPU device, at the sizes users run: reductions of 64 and more (the optimizer
splits them), short output loops (it upcasts them), matmuls, a 784-128-10 MLP, a convolution built from movement ops,
and second derivatives (Hessian-vector products). Skipped as a whole when torch is not installed; the finite-difference
tests in test_gradient_rules.py check the same rules without it.
"""
from __future__ import annotations
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from tensor import Tensor

torch = pytest.importorskip("torch")

def both(*arrays: np.ndarray) -> tuple[list[Tensor], list]:
  ours = [Tensor(a.astype(np.float32), device="CPU") for a in arrays]
  theirs = [torch.tensor(a.astype(np.float32), requires_grad=True) for a in arrays]
  return ours, theirs

def compare(f, tf, *arrays: np.ndarray, rtol=1e-4, atol=1e-5, seed=0) -> None:
  """The gradient of sum(f(...) * w) for random weights w, ours against torch's, for every input."""
  ours, theirs = both(*arrays)
  out, tout = f(*ours), tf(*theirs)
  assert out.shape == tuple(tout.shape)
  w = np.random.default_rng(seed).standard_normal(out.shape).astype(np.float32)
  grads = (out * Tensor(w, device="CPU")).sum().gradient(*ours)
  (tout * torch.tensor(w)).sum().backward()
  for i, (g, t) in enumerate(zip(grads, theirs)):
    np.testing.assert_allclose(g.numpy(), t.grad.numpy(), rtol=rtol, atol=atol, err_msg=f"input {i}")

rng = np.random.default_rng(0)
def normal(*shape) -> np.ndarray: return rng.standard_normal(shape)
def positive(*shape) -> np.ndarray: return rng.uniform(0.5, 2.0, shape)

ELEMENTWISE = [
  ("add mul sub", lambda a, b: a * b + a - b, lambda a, b: a * b + a - b, [normal(64, 70), normal(64, 70)]),
  ("div", lambda a, b: a / b, lambda a, b: a / b, [normal(64, 70), positive(64, 70)]),
  ("broadcast", lambda a, b: a * b, lambda a, b: a * b, [normal(64, 70), normal(70)]),
  ("maximum minimum", lambda a, b: a.maximum(b) + a.minimum(b * 2), lambda a, b: torch.maximum(a, b) + torch.minimum(a, b * 2),
   [normal(64, 70), normal(64, 70)]),
  ("exp log", lambda a, b: a.exp() + b.log(), lambda a, b: a.exp() + b.log(), [normal(64, 70), positive(64, 70)]),
  ("exp2 log2", lambda a, b: a.exp2() + b.log2(), lambda a, b: a.exp2() + b.log2(), [normal(64, 70), positive(64, 70)]),
  ("sin cos", lambda a: a.sin() * a.cos(), lambda a: a.sin() * a.cos(), [normal(64, 70) * 3]),
  ("sqrt rsqrt reciprocal", lambda a: a.sqrt() + a.rsqrt() + a.reciprocal(), lambda a: a.sqrt() + a.rsqrt() + a.reciprocal(),
   [positive(64, 70)]),
  ("pow", lambda a, b: a ** b + a ** 1.5 + 1.5 ** b, lambda a, b: a ** b + a ** 1.5 + 1.5 ** b, [positive(64, 70), normal(64, 70)]),
  ("relu sigmoid tanh", lambda a: a.relu() + a.sigmoid() + a.tanh(), lambda a: a.relu() + a.sigmoid() + a.tanh(), [normal(64, 70)]),
  ("gelu silu leaky_relu", lambda a: a.gelu() + a.silu() + a.leaky_relu(0.1),
   lambda a: torch.nn.functional.gelu(a, approximate="tanh") + torch.nn.functional.silu(a) + torch.nn.functional.leaky_relu(a, 0.1),
   [normal(64, 70)]),
  ("where clip abs", lambda a, b: (a > b).where(a, b * 3) + a.clip(-0.5, 0.5) + b.abs(),
   lambda a, b: torch.where(a > b, a, b * 3) + a.clip(-0.5, 0.5) + b.abs(), [normal(64, 70), normal(64, 70)]),
  ("cast to half and back", lambda a: a.half().float() * a, lambda a: a.half().float() * a, [normal(64, 70)]),
]

@pytest.mark.parametrize("name,f,tf,arrays", ELEMENTWISE, ids=[c[0] for c in ELEMENTWISE])
def test_elementwise(name, f, tf, arrays):
  compare(f, tf, *arrays, rtol=1e-3 if "half" in name else 1e-4)

REDUCTIONS = [
  ("sum", lambda a: a.sum(1), lambda a: a.sum(1), [normal(20, 300)]),
  ("sum of all", lambda a: a.sum() * a.sum(0), lambda a: a.sum() * a.sum(0), [normal(100, 7)]),
  ("max min", lambda a: a.max(1) + a.min(0).sum(), lambda a: a.amax(1) + a.amin(0).sum(), [normal(90, 130)]),
  ("prod", lambda a: a.prod(1), lambda a: a.prod(1), [rng.uniform(0.9, 1.1, (5, 200))]),
  ("mean var std", lambda a: a.mean(0) + a.var(0) + a.std(0), lambda a: a.mean(0) + a.var(0) + a.std(0), [normal(150, 9)]),
  ("softmax log_softmax", lambda a: a.softmax(1) + a.log_softmax(1), lambda a: a.softmax(1) + a.log_softmax(1), [normal(33, 100)]),
  ("logsumexp", lambda a: a.logsumexp(1), lambda a: a.logsumexp(1), [normal(33, 100) * 4]),
  ("keepdim over two axes", lambda a: a.sum((0, 2), keepdim=True) * a, lambda a: a.sum((0, 2), keepdim=True) * a, [normal(8, 5, 70)]),
]

@pytest.mark.parametrize("name,f,tf,arrays", REDUCTIONS, ids=[c[0] for c in REDUCTIONS])
def test_reductions(name, f, tf, arrays):
  compare(f, tf, *arrays, atol=1e-4)

MOVEMENT = [
  ("reshape permute", lambda a: a.reshape(10, 20, 7).permute(2, 0, 1), lambda a: a.reshape(10, 20, 7).permute(2, 0, 1), [normal(200, 7)]),
  ("expand", lambda a: a.reshape(1, 70).expand(64, 70) * a.reshape(70, 1)[:64],
   lambda a: a.reshape(1, 70).expand(64, 70) * a.reshape(70, 1)[:64], [normal(70)]),
  ("pad", lambda a: a.pad(((3, 1), (0, 5))), lambda a: torch.nn.functional.pad(a, (0, 5, 3, 1)), [normal(64, 70)]),
  ("slices with steps and flips", lambda a: a[5:60:3, ::-2].flip(0), lambda a: a[5:60:3].flip(1)[:, ::2].flip(0), [normal(64, 70)]),
  ("transpose matmul", lambda a: a.T @ a, lambda a: a.T @ a, [normal(65, 9)]),
  ("tensor index", lambda a: a[Tensor(np.array([3, 0, 63, 3, 10] * 20), device="CPU")],
   lambda a: a[torch.tensor([3, 0, 63, 3, 10] * 20)], [normal(64, 7)]),
]

@pytest.mark.parametrize("name,f,tf,arrays", MOVEMENT, ids=[c[0] for c in MOVEMENT])
def test_movement(name, f, tf, arrays):
  compare(f, tf, *arrays, atol=1e-4)

@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(st.integers(1, 80), st.integers(1, 150), st.integers(1, 70), st.booleans())
def test_matmul(n, k, m, batched):
  a, b = normal(*((2, n, k) if batched else (n, k))), normal(k, m)
  compare(lambda x, y: x @ y, lambda x, y: x @ y, a, b, rtol=1e-4, atol=1e-4)

# ---- models ----

def mlp_grads(x, labels, params, lib):
  """The gradients of a 784-128-10 MLP's mean cross-entropy with respect to its four parameters, in either library."""
  w1, b1, w2, b2 = params
  logits = (x @ w1 + b1).relu() @ w2 + b2
  if lib == "ours":
    loss = -(logits.log_softmax(1) * labels).sum() / x.shape[0]
    return loss.gradient(*params), loss
  loss = -(logits.log_softmax(1) * labels).sum() / x.shape[0]
  return torch.autograd.grad(loss, params), loss

def test_mlp():
  r = np.random.default_rng(1)
  x = r.standard_normal((64, 784)).astype(np.float32)
  labels = np.eye(10, dtype=np.float32)[r.integers(0, 10, 64)]
  arrays = [r.uniform(-1, 1, (784, 128)) / 28, r.uniform(-1, 1, 128) / 28, r.uniform(-1, 1, (128, 10)) / 11, r.uniform(-1, 1, 10) / 11]
  ours, theirs = both(*arrays)
  grads, loss = mlp_grads(Tensor(x, device="CPU"), Tensor(labels, device="CPU"), ours, "ours")
  tgrads, tloss = mlp_grads(torch.tensor(x), torch.tensor(labels), theirs, "torch")
  assert loss.item() == pytest.approx(tloss.item(), rel=1e-5)
  for g, t in zip(grads, tgrads): np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-4, atol=1e-6)

def conv2d(x: Tensor, w: Tensor) -> Tensor:
  """A stride-1, unpadded 2-d convolution from movement ops: one shifted window of x per kernel offset, times that
  offset's weights, summed over input channels and offsets. (N, C, H, W) x (O, C, kh, kw) -> (N, O, H-kh+1, W-kw+1)."""
  (n, c, h, wd), (o, _, kh, kw) = x.shape, w.shape
  ho, wo = h - kh + 1, wd - kw + 1
  out = None
  for i in range(kh):
    for j in range(kw):
      window = x[:, :, i:i + ho, j:j + wo].reshape(n, 1, c, ho, wo)
      term = (window * w[:, :, i, j].reshape(1, o, c, 1, 1)).sum(2)
      out = term if out is None else out + term
  return out

def test_convolution_from_movement_ops():
  x, w = normal(4, 3, 12, 12), normal(8, 3, 3, 3)
  compare(lambda a, b: conv2d(a, b).relu().max(3), lambda a, b: torch.nn.functional.conv2d(a, b).relu().amax(3), x, w)

def test_conv2d():
  x, w, b = normal(4, 3, 16, 16), normal(8, 3, 3, 3), normal(8)
  compare(lambda a, k, c: a.conv2d(k, c, padding=1, stride=2).relu(),
          lambda a, k, c: torch.nn.functional.conv2d(a, k, c, padding=1, stride=2).relu(), x, w, b)

# ---- second derivatives ----

def test_hessian_vector_product():
  """d/dw <d loss/dw, v> for a tanh network: the gradient graph differentiated again, against torch's double backward."""
  r = np.random.default_rng(2)
  x, w1, w2, v = r.standard_normal((100, 20)), r.standard_normal((20, 30)) / 5, r.standard_normal((30, 1)) / 5, r.standard_normal((20, 30))
  (tx, tw1, tw2, tv), (px, pw1, pw2, pv) = both(x, w1, w2, v)
  loss = ((tx @ tw1).tanh() @ tw2).square().mean()
  g1, = loss.gradient(tw1)
  hv1, hv2 = (g1 * tv).sum().gradient(tw1, tw2)
  tloss = ((px @ pw1).tanh() @ pw2).square().mean()
  tg1, = torch.autograd.grad(tloss, pw1, create_graph=True)
  thv1, thv2 = torch.autograd.grad((tg1 * pv).sum(), (pw1, pw2))
  np.testing.assert_allclose(hv1.numpy(), thv1.numpy(), rtol=1e-3, atol=1e-5)
  np.testing.assert_allclose(hv2.numpy(), thv2.numpy(), rtol=1e-3, atol=1e-5)

def test_second_derivatives_of_elementwise_ops():
  a = positive(64, 70)
  (t,), (p,) = both(a)
  def f(x): return (x.exp() * x.sin() + x.log() * x.sqrt()) / (1 + x * x)
  g, = f(t).sum().gradient(t)
  gg, = g.sum().gradient(t)
  tg, = torch.autograd.grad(f(p).sum(), p, create_graph=True)
  tgg, = torch.autograd.grad(tg.sum(), p)
  np.testing.assert_allclose(gg.numpy(), tgg.numpy(), rtol=1e-4, atol=1e-5)
