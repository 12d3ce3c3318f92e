"""The autograd API (tensor/autograd.py): loss.gradient(*targets), loss.backward() filling .grad of the tensors with
requires_grad=True, its errors, Tensor.train()/Tensor.test(), what stays alive after backward, gradients on the CPU at
the sizes the optimizer splits and upcasts (checked against numpy's closed forms), and the seeds' training pattern.
"""
from __future__ import annotations
import gc, weakref
import numpy as np
import pytest
from runtime import Ops
from tensor import Tensor, dtypes
from tensor.autograd import GradientError

def rand(*shape, seed=0, device=None, **kw) -> Tensor:
  return Tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32), device=device, **kw)

# ---- backward and .grad ----

def test_backward_fills_grad_of_tensors_that_require_it():
  x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
  unset = Tensor([4.0, 5.0, 6.0])                    # requires_grad None: "if something asks"; backward does not
  frozen = Tensor([7.0, 8.0, 9.0], requires_grad=False)
  loss = (x * unset * frozen).sum()
  assert loss.backward() is loss
  assert x.grad.tolist() == [28.0, 40.0, 54.0]
  assert unset.grad is None and frozen.grad is None
  # a tensor with requires_grad None still has a gradient when asked; one with False is excluded
  assert loss.gradient(unset)[0].tolist() == [7.0, 16.0, 27.0]
  with pytest.raises(GradientError, match=r"target 0 \(float \(3,\)\) has requires_grad=False"):
    loss.gradient(frozen)

def test_backward_accumulates_and_requires_grad_():
  x = Tensor([1.0, -2.0]).requires_grad_()
  assert x.requires_grad is True
  (x * x).sum().backward()
  (x * 3).sum().backward()
  assert x.grad.tolist() == [2.0 + 3.0, -4.0 + 3.0]
  x.grad = None  # what an optimizer's zero_grad does
  (x * x).sum().backward()
  assert x.grad.tolist() == [2.0, -4.0]

def test_backward_with_an_explicit_gradient():
  x = Tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
  y = x * x
  y.backward(Tensor([[1.0, 0.5], [0.0, -1.0]]))
  assert x.grad.tolist() == [[2.0, 2.0], [0.0, -8.0]]
  # a gradient of another float type is cast to the tensor's
  g, = (x * 3).gradient(x, gradient=Tensor([[1, 2], [3, 4]], dtype=dtypes.float64))
  assert g.dtype is dtypes.float32 and g.tolist() == [[3.0, 6.0], [9.0, 12.0]]

def test_non_scalar_needs_a_gradient():
  x = Tensor([1.0, 2.0], requires_grad=True)
  with pytest.raises(GradientError, match=r"non-scalar tensor \(float \(2,\)\) needs an explicit gradient argument"):
    (x * 2).backward()
  with pytest.raises(GradientError, match=r"non-scalar tensor \(float \(2,\)\) needs an explicit gradient argument"):
    (x * 2).gradient(x)
  with pytest.raises(GradientError, match=r"gradient of shape \(3,\) for a tensor of shape \(2,\)"):
    (x * 2).backward(Tensor([1.0, 1.0, 1.0]))
  with pytest.raises(GradientError, match=r"gradient on PYTHON for a tensor on CPU"):
    (x.to("CPU") * 2).backward(Tensor([1.0, 1.0], device="PYTHON"))
  with pytest.raises(GradientError, match="gradient must be a float tensor, not bool"):
    (x * 2).backward(Tensor([True, False]))
  with pytest.raises(TypeError, match="gradient must be a Tensor, not list"):
    (x * 2).backward([1.0, 1.0])

def test_gradient_errors_name_what_is_wrong():
  x, i = Tensor([1.0, 2.0]), Tensor([1, 2])
  loss = (x * 2).sum()
  with pytest.raises(GradientError, match="needs the tensors to differentiate with respect to"):
    loss.gradient()
  with pytest.raises(TypeError, match="target 0 is a ndarray, not a Tensor"):
    loss.gradient(np.ones(2))
  with pytest.raises(GradientError, match=r"only float tensors have gradients: target 0 is int \(2,\)"):
    (x * i).sum().gradient(i)
  with pytest.raises(GradientError, match=r"only a float tensor can be differentiated, this one is long long \(\)"):
    (i * 2).sum().gradient(x)
  other = Tensor([3.0])
  with pytest.raises(GradientError, match=r"target 1 \(float \(1,\)\) is not in the graph of this float \(\) tensor"):
    loss.gradient(x, other)
  gx, gother = loss.gradient(x, other, materialize_grads=True)
  assert gx.tolist() == [2.0, 2.0] and gother.tolist() == [0.0]

def test_backward_errors():
  # nothing asked by name: the graph's float tensors left at requires_grad=None get gradients (tinygrad's default)
  x = Tensor([1.0, 2.0])
  loss = (x * 2).sum().backward()
  assert x.grad.tolist() == [2.0, 2.0] and loss.grad.item() == 1.0
  # something asked by name (as an optimizer does): only it
  w, x = Tensor([3.0, 4.0], requires_grad=True), Tensor([1.0, 2.0])
  (w * x).sum().backward()
  assert w.grad.tolist() == [1.0, 2.0] and x.grad is None
  with pytest.raises(GradientError, match=r"no tensor in the graph of this float \(\) tensor has requires_grad=True"):
    Tensor([1.0, 2.0], requires_grad=False).sum().requires_grad_(False).backward()
  # two tensors made from equal numbers are two tensors (each constant has a UNIQUE): separate buffers, separate gradients
  a, b = Tensor.ones(3).requires_grad_(), Tensor.ones(3).requires_grad_()
  a.realize()
  assert a.uop is not b.uop and a.uop.op is Ops.BUFFER
  (a * x.sum() + b).sum().backward()
  assert a.grad.tolist() == [3.0, 3.0, 3.0] and b.grad.tolist() == [1.0, 1.0, 1.0]

def test_a_tensor_made_from_a_number_is_a_target_of_its_own():
  # Tensor(2.0) is not the 2.0 that x * 2.0 multiplies by: d/dx is 2, not 4
  x = Tensor(2.0, requires_grad=True)
  (x * 2.0).backward()
  assert x.grad.item() == 2.0
  # Tensor.ones(3) twice is two tensors: the second is not in the graph of the first
  with pytest.raises(GradientError):
    (Tensor.ones(3) * Tensor([1.0, 2.0, 3.0])).sum().gradient(Tensor.ones(3))
  x = Tensor(np.float32(2.0), requires_grad=True)  # from data: a buffer of its own
  (x * 2.0).backward()
  assert x.grad.item() == 2.0

def test_detach_stops_the_gradient():
  x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
  loss = (x * x.detach()).sum()  # d/dx = x.detach(), not 2x
  loss.backward()
  assert x.grad.tolist() == [1.0, 2.0, 3.0]
  # x is in the graph, only under a detach: a zero gradient, as torch and tinygrad give
  assert (x.detach() * 2).sum().gradient(x)[0].tolist() == [0.0, 0.0, 0.0]

def test_reading_values_keeps_the_graph():
  x = Tensor([1.0, 2.0], requires_grad=True)
  y = x * x
  assert y.tolist() == [1.0, 4.0]          # read through a copy: y is still the product of x with itself
  assert y.uop.op is Ops.MUL
  assert y.sum().gradient(x)[0].tolist() == [2.0, 4.0]
  y.realize()                               # realize() itself puts the values in place of the graph
  with pytest.raises(GradientError, match="not in the graph"):
    y.sum().gradient(x)

def test_reading_values_keeps_the_graph_when_a_reduction_is_its_own_kernel():
  x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
  y = (x - x.mean(0)) * x  # the column mean, broadcast over rows, is a kernel of its own
  y.numpy()
  # the mean's buffer is not put into y's graph (no tensor holds the mean): d/dx sum((x - m) x) = 2 (x - m), not 2x - m
  g, = y.sum().gradient(x)
  np.testing.assert_allclose(g.numpy(), 2 * (x.numpy() - x.numpy().mean(0)))
  np.testing.assert_allclose(y.numpy(), (x.numpy() - x.numpy().mean(0)) * x.numpy())  # and y still computes right

def test_a_held_intermediate_is_shared_after_realize():
  # an intermediate a tensor holds is replaced by its buffer in the graphs that use it (computed once), so gradients
  # through it stop there, as through any realized tensor
  x = Tensor([1.0, 2.0, 3.0])
  m = x.mean()
  y = (x - m) * x
  m.realize()
  assert m.is_realized() and m.uop in y.uop.toposort()

def test_gradients_on_the_gradient_graph():
  # several targets at once, one of them computed from another: each gets its total derivative
  x = Tensor([1.0, 2.0], requires_grad=True)
  y = x * x
  dx, dy = (y * 3 + x).sum().gradient(x, y)
  assert dx.tolist() == [7.0, 13.0] and dy.tolist() == [3.0, 3.0]

# ---- Tensor.train and Tensor.test ----

def test_train_as_a_context_manager_and_a_decorator():
  assert Tensor.training is False
  with Tensor.train():
    assert Tensor.training is True
    with Tensor.train(mode=False):
      assert Tensor.training is False
    assert Tensor.training is True
  assert Tensor.training is False

  @Tensor.train()
  def step(depth: int) -> list[bool]:
    seen = [Tensor.training]
    if depth: seen += step(depth - 1)  # re-entering the same decorator restores the right value on the way out
    return seen
  assert step(2) == [True, True, True] and Tensor.training is False

  with pytest.raises(ValueError, match="inside"):
    with Tensor.train():
      raise ValueError("inside")
  assert Tensor.training is False

def test_test_turns_gradients_off():
  x = Tensor([1.0], requires_grad=True)
  assert Tensor.no_grad is False
  with Tensor.test():
    assert Tensor.no_grad is True
    with pytest.raises(GradientError, match="backward\\(\\) inside Tensor.test\\(\\)"):
      (x * 2).sum().backward()
  assert Tensor.no_grad is False
  (x * 2).sum().backward()
  assert x.grad.tolist() == [2.0]

# ---- nothing keeps the forward graph alive ----

def forward_nodes(loss: Tensor, *leaves: Tensor) -> list[weakref.ref]:
  """Weak references to the nodes of loss's graph computed from the leaves (not the leaves' own nodes)."""
  own = set().union(*(t.uop.toposort() for t in leaves))
  return [weakref.ref(u) for u in loss.uop.toposort() if u not in own and any(t.uop in u.toposort() for t in leaves)]

@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_after_backward_only_what_the_user_holds_is_alive(device):
  w = rand(6, 4, seed=1, device=device, requires_grad=True).realize()
  x = rand(5, 6, seed=2, device=device).realize()
  loss = (x @ w).relu().softmax(1).max(1).sum()
  refs = forward_nodes(loss, w, x)
  assert len(refs) > 10
  loss.backward()
  del loss
  gc.collect()
  # w.grad is lazy: it holds the forward nodes it is computed from, and nothing else does
  assert any(r() is not None for r in refs)
  w.grad = None
  gc.collect()
  assert [r() for r in refs if r() is not None] == []
  # realized together with the loss, as a training step does: afterwards the gradient is a buffer
  loss = (x @ w).relu().softmax(1).max(1).sum()
  refs = forward_nodes(loss, w, x)
  loss.backward()
  loss.realize(w.grad)
  assert w.grad.uop.op in (Ops.BUFFER, Ops.RESHAPE) and w.grad.uop.toposort().keys() <= {w.grad.uop, *w.grad.uop.src, *w.grad.uop.src[0].src}
  del loss
  gc.collect()
  assert [r() for r in refs if r() is not None] == []

# ---- CPU, at sizes the optimizer splits (reductions of 64 and more) and upcasts, against numpy's closed forms ----

def test_matmul_gradient_on_cpu():
  rng = np.random.default_rng(3)
  a, b, g = rng.standard_normal((70, 130)), rng.standard_normal((130, 3)), rng.standard_normal((70, 3))
  ta, tb = Tensor(a.astype(np.float32), device="CPU"), Tensor(b.astype(np.float32), device="CPU")
  da, db = (ta @ tb).gradient(ta, tb, gradient=Tensor(g.astype(np.float32), device="CPU"))
  np.testing.assert_allclose(da.numpy(), g @ b.T, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(db.numpy(), a.T @ g, rtol=1e-4, atol=1e-4)

def test_cross_entropy_gradient_on_cpu():
  # mean over the batch of -log_softmax(logits)[label]: d/dlogits = (softmax - onehot) / batch
  rng = np.random.default_rng(4)
  logits, labels = rng.standard_normal((100, 10)).astype(np.float32) * 3, rng.integers(0, 10, 100)
  onehot = np.eye(10, dtype=np.float32)[labels]
  t = Tensor(logits, device="CPU")
  loss = -(t.log_softmax(1) * Tensor(onehot, device="CPU")).sum() / 100
  g, = loss.gradient(t)
  e = np.exp(logits - logits.max(1, keepdims=True))
  np.testing.assert_allclose(g.numpy(), (e / e.sum(1, keepdims=True) - onehot) / 100, rtol=1e-4, atol=1e-6)

def test_reduction_gradients_on_cpu():
  rng = np.random.default_rng(5)
  a = rng.permutation(300 * 4).reshape(300, 4).astype(np.float32) / 100  # no ties
  t = Tensor(a, device="CPU")
  gsum, = (t.sum(0) * Tensor([1.0, 2.0, 3.0, 4.0], device="CPU")).sum().gradient(t)
  np.testing.assert_array_equal(gsum.numpy(), np.broadcast_to([1.0, 2.0, 3.0, 4.0], (300, 4)))
  gmax, = t.max(0).sum().gradient(t)
  np.testing.assert_array_equal(gmax.numpy(), (a == a.max(0)).astype(np.float32))
  gmean, = t.mean(1).sum().gradient(t)
  np.testing.assert_allclose(gmean.numpy(), np.full((300, 4), 0.25))

# ---- the seeds' training pattern ----

def test_training_pattern_learns_a_synthetic_task():
  """@Tensor.train() step: zero the grads, loss.backward(), realize the loss with the parameter updates; plain SGD here,
  checked step by step against the same SGD in numpy."""
  rng = np.random.default_rng(6)
  X = rng.standard_normal((256, 8)).astype(np.float32)
  y = (X @ rng.standard_normal((8, 1)) + 0.5).astype(np.float32)
  w0 = (rng.standard_normal((8, 1)) * 0.1).astype(np.float32)
  Xt, yt = Tensor(X).realize(), Tensor(y).realize()
  w, b = Tensor(w0, requires_grad=True).realize(), Tensor([0.0], requires_grad=True).realize()
  lr = 0.1

  @Tensor.train()
  def train_step() -> Tensor:
    assert Tensor.training
    w.grad = b.grad = None
    loss = ((Xt @ w + b - yt) ** 2).mean().backward()
    return loss.realize(*[p.assign(p - lr * p.grad) for p in (w, b)])

  nw, nb = w0.astype(np.float64), 0.0
  for step in range(40):
    loss = train_step().item()
    err = X @ nw + nb - y
    assert loss == pytest.approx(float((err ** 2).mean()), rel=1e-4), step
    nw, nb = nw - lr * 2 * X.T @ err / len(X), nb - lr * 2 * err.mean()
  np.testing.assert_allclose(w.numpy(), nw, rtol=1e-3, atol=1e-5)
  assert loss < 1e-3 and b.item() == pytest.approx(0.5, abs=0.02)
