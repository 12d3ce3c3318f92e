"""Optimizers: SGD, LARS, Muon (the LARS family), Adam, AdamW, LAMB (the LAMB family), and OptimizerGroup.

An update is lazy tensor math ending in `assign`s to the parameters and the optimizer's state, so one training step is
one schedule: `loss.realize(*optim.schedule_step())`, or `optim.step()` to run it at once. The learning rate is a
tensor (`optim.lr`), so a step captured by TinyJit follows `optim.lr.assign(Tensor([new_lr])).realize()`.
Parameters take their gradients from `.grad` (set by `loss.backward()`); tensors with `requires_grad=False` (batchnorm
running statistics) are not updated but are realized with the step.
"""
from __future__ import annotations
import numpy as np
from runtime.dtype import dtypes
from tensor.engine.storage import realized_buffer
from tensor.tensor import Tensor

def _dedup(ts: list[Tensor]) -> list[Tensor]: return list({id(t): t for t in ts}.values())

def _in_memory(t: Tensor) -> bool: return realized_buffer(t.uop) is not None

def _state(value: float, shape: tuple[int, ...], device: str) -> Tensor:
  """A float32 tensor filled with value, already in memory so an update can assign to it (made on the host: no kernel)."""
  return Tensor(np.full(shape, value, np.float32), device=device).realize()

def _state_like(value: float, p: Tensor, device) -> Tensor:
  """_state in p's shape on the optimizer's device; for a parameter over those devices split on an axis, split as it, so
  each device keeps and updates only its piece of the state (the shards' one allocation each, made on the host)."""
  if device.__class__ is tuple and p.device == device and (axis := p.uop.axis) is not None:
    return Tensor(np.full(p.shape, value, np.float32), device=device[0]).shard(device, axis).contiguous().realize()
  return _state(value, p.shape, device)

class Optimizer:
  """The base of every optimizer: holds the parameters, the learning rate tensor and the step protocol."""
  def __init__(self, params: list[Tensor], lr: float, device: str | None = None):
    if not lr >= 0: raise ValueError(f"learning rate must be >= 0, got {lr}")
    params = list(params)
    for p in params:
      if not isinstance(p, Tensor): raise TypeError(f"an optimizer takes a list of Tensors, got a {type(p).__name__}")
      if p.requires_grad is None: p.requires_grad = True  # asked for by an optimizer: it wants a gradient
    self.params: list[Tensor] = _dedup([p for p in params if p.requires_grad])
    self.buffers: list[Tensor] = _dedup([p for p in params if not p.requires_grad])
    if not self.params: raise ValueError("the optimizer got no parameters to train (all have requires_grad=False, or the list is empty)")
    self.device = device or self.params[0].device
    self.lr = _state(lr, (1,), self.device)
    # updates assign to the parameters, so each must be a buffer in memory (random initial values are lazy until now)
    lazy = [p for p in self.params + self.buffers if not _in_memory(p)]
    if lazy: Tensor.realize(*lazy)

  def zero_grad(self) -> None:
    """Forget the gradients (the next backward() sets them afresh)."""
    for p in self.params: p.grad = None

  def step(self) -> None:
    """Update the parameters now."""
    Tensor.realize(*self.schedule_step())

  def schedule_step(self) -> list[Tensor]:
    """Build the update (nothing runs yet) and return the tensors to realize for it: `loss.realize(*optim.schedule_step())`."""
    if not Tensor.training:
      raise RuntimeError("Tensor.training is False: an optimizer steps only in training mode (use @Tensor.train() or set Tensor.training = True)")
    grads = []
    for i, p in enumerate(self.params):
      if p.grad is None: raise RuntimeError(f"parameter {i} (shape {p.shape}) has no gradient: call loss.backward() before the step")
      if p.grad.shape != p.shape: raise RuntimeError(f"parameter {i} has shape {p.shape} but its gradient has shape {p.grad.shape}")
      grads.append(p.grad.detach().to(self.device).cast(dtypes.float32))  # the update is computed in float32
    updates, extra = self._step(self.params, grads)
    for p, up in zip(self.params, updates): p.assign(self._apply(p, up))
    return extra + self.params + self.buffers

  def _apply(self, p: Tensor, update: Tensor) -> Tensor: return (p.detach() - update.to(p.device)).cast(p.dtype)
  def _step(self, params: list[Tensor], grads: list[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
    """(the amount to subtract from each parameter, the state tensors the update assigned to)."""
    raise NotImplementedError

class OptimizerGroup(Optimizer):
  """Several optimizers stepped as one (e.g. Muon for the matrices and AdamW for the rest)."""
  def __init__(self, *optimizers: Optimizer):  # no super().__init__: the members hold the parameters
    if not optimizers: raise ValueError("OptimizerGroup needs at least one optimizer")
    self.optimizers = optimizers
    self.params = [p for o in optimizers for p in o.params]
    self.buffers = [b for o in optimizers for b in o.buffers]
  def __getitem__(self, i: int) -> Optimizer: return self.optimizers[i]
  def zero_grad(self) -> None:
    for o in self.optimizers: o.zero_grad()
  def schedule_step(self) -> list[Tensor]: return [t for o in self.optimizers for t in o.schedule_step()]

# ---- the LARS family: SGD and Muon are LARS with the trust ratio switched off ----

def newton_schulz(g: Tensor, steps: int, coefficients: tuple[float, ...], eps: float = 1e-7) -> Tensor:
  """An approximately orthogonal matrix with g's singular vectors (g / |g| pushed through an odd polynomial, steps times):
  X <- a*X + b*(X X^T) X + c*(X X^T)^2 X for coefficients (a, b, c). g is (rows, cols); X X^T is taken on the short side."""
  if g.ndim != 2: raise ValueError(f"newton_schulz needs a matrix, got shape {g.shape}")
  if g.shape[0] > g.shape[1]: return newton_schulz(g.T, steps, coefficients, eps).T
  x = g / (g.square().sum().sqrt() + eps)  # Frobenius norm 1: every singular value in [0, 1]
  for _ in range(steps):
    gram = x @ x.T                         # (rows, rows)
    out, power = x * coefficients[0], x
    for c in coefficients[1:]:
      power = gram @ power
      out = out + power * c
    # one buffer per iteration: the same kernels as without it, but the scheduler's fusion analysis is superlinear in the
    # depth of a lazy chain of matmuls (5 iterations took 30 s to schedule, see the nnstate report)
    x = out.contiguous()
  return x

class LARS(Optimizer):
  """Layer-wise adaptive rate scaling (arXiv:1708.03888): SGD with momentum whose step for each parameter is scaled by the
  trust ratio tcoef * |w| / (|g| + wd * |w|). classic momentum scales by lr before the momentum buffer, else after it;
  pre_wd adds weight decay to the gradient, else it shrinks the weights after (as Muon does); ns_steps > 0
  orthogonalizes the update with Newton-Schulz (Muon)."""
  def __init__(self, params: list[Tensor], lr: float = 0.001, momentum: float = 0.9, weight_decay: float = 1e-4, ns_steps: int = 0,
               ns_coefficients: tuple[float, ...] | None = None, nesterov: bool = False, classic: bool = True, pre_wd: bool = True,
               tcoef: float = 0.001, device: str | None = None):
    if momentum < 0: raise ValueError(f"momentum must be >= 0, got {momentum}")
    if weight_decay < 0: raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")
    if nesterov and momentum == 0: raise ValueError("nesterov momentum needs momentum > 0")
    super().__init__(params, lr, device)
    self.momentum, self.wd, self.ns_steps, self.ns_coefficients = momentum, weight_decay, ns_steps, ns_coefficients
    self.nesterov, self.classic, self.pre_wd, self.tcoef = nesterov, classic, pre_wd, tcoef
    self.b = [_state_like(0.0, p, self.device) for p in self.params] if momentum else []

  def _step(self, params: list[Tensor], grads: list[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
    out = []
    for i, (p, g) in enumerate(zip(params, grads)):
      w = p.detach().cast(dtypes.float32)
      ratio: Tensor | float = 1.0
      if self.tcoef != 0:
        wn, gn = w.square().sum().sqrt(), g.square().sum().sqrt()
        ratio = (wn > 0).where((gn > 0).where(self.tcoef * wn / (gn + self.wd * wn), 1.0), 1.0)
      if self.pre_wd and self.wd > 0: g = g + w * self.wd
      if self.classic: g = g * ratio * self.lr
      if self.momentum:
        self.b[i].assign(self.b[i] * self.momentum + g)  # the buffer starts at zero: the first step stores g
        g = g + self.b[i] * self.momentum if self.nesterov else self.b[i]
      if self.ns_coefficients: g = newton_schulz(g.reshape(g.shape[0] if g.ndim else 1, -1), self.ns_steps, self.ns_coefficients).reshape(g.shape)
      if not self.classic: g = g * ratio * self.lr
      if not self.pre_wd and self.wd > 0: g = g + w * (self.wd * self.lr)  # decoupled decay: w * (1 - wd*lr) - step
      out.append(g)
    return out, self.b

def SGD(params: list[Tensor], lr: float = 0.001, momentum: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,
        classic: bool = False, device: str | None = None) -> LARS:
  """Stochastic gradient descent with optional momentum (nesterov too) and L2 weight decay, as torch.optim.SGD
  (classic=True scales by lr before the momentum buffer instead of after: the same steps while lr is constant)."""
  return LARS(params, lr, momentum, weight_decay, 0, None, nesterov, classic=classic, pre_wd=True, tcoef=0.0, device=device)

def Muon(params: list[Tensor], lr: float = 0.001, momentum: float = 0.95, weight_decay: float = 0.1, ns_steps: int = 5,
         ns_coefficients: tuple[float, ...] = (3.4445, -4.775, 2.0315), nesterov: bool = True, device: str | None = None) -> LARS:
  """Momentum whose update is orthogonalized by Newton-Schulz before the step, with decoupled weight decay
  (kellerjordan.github.io/posts/muon). Each parameter is treated as a matrix (shape[0], rest)."""
  return LARS(params, lr, momentum, weight_decay, ns_steps, ns_coefficients, nesterov, classic=False, pre_wd=False, tcoef=0.0, device=device)

# ---- the LAMB family: Adam and AdamW are LAMB with the trust ratio switched off ----

class LAMB(Optimizer):
  """Layer-wise adaptive moments (arXiv:1904.00962): the Adam step plus decoupled weight decay, scaled for each parameter
  by the trust ratio |w| / |step|; adam=True leaves the ratio out (AdamW)."""
  def __init__(self, params: list[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-6, weight_decay: float = 0.0,
               adam: bool = False, device: str | None = None):
    if not (0 <= b1 < 1 and 0 <= b2 < 1): raise ValueError(f"betas must be in [0, 1), got b1={b1} b2={b2}")
    if weight_decay < 0: raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")
    super().__init__(params, lr, device)
    self.b1, self.b2, self.eps, self.wd, self.adam = b1, b2, eps, weight_decay, adam
    self.b1_t, self.b2_t = _state(1.0, (1,), self.device), _state(1.0, (1,), self.device)  # b1**t and b2**t, for the bias correction
    self.m = [_state_like(0.0, p, self.device) for p in self.params]
    self.v = [_state_like(0.0, p, self.device) for p in self.params]

  def _step(self, params: list[Tensor], grads: list[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
    self.b1_t.assign(self.b1_t * self.b1)
    self.b2_t.assign(self.b2_t * self.b2)
    out = []
    for i, (p, g) in enumerate(zip(params, grads)):
      w = p.detach().cast(dtypes.float32)
      self.m[i].assign(self.m[i] * self.b1 + g * (1.0 - self.b1))
      self.v[i].assign(self.v[i] * self.b2 + g * g * (1.0 - self.b2))
      m_hat, v_hat = self.m[i] / (1.0 - self.b1_t), self.v[i] / (1.0 - self.b2_t)
      up = m_hat / (v_hat.sqrt() + self.eps) + w * self.wd
      if not self.adam:
        wn, un = w.square().sum().sqrt(), up.square().sum().sqrt()
        up = up * (wn > 0).where((un > 0).where(wn / un, 1.0), 1.0)
      out.append(up * self.lr)
    return out, [self.b1_t, self.b2_t, *self.m, *self.v]

def AdamW(params: list[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, weight_decay: float = 0.01,
          device: str | None = None) -> LAMB:
  """Adam with decoupled weight decay (arXiv:1711.05101), as torch.optim.AdamW."""
  return LAMB(params, lr, b1, b2, eps, weight_decay, adam=True, device=device)

def Adam(params: list[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, device: str | None = None) -> LAMB:
  """Adam (arXiv:1412.6980), as torch.optim.Adam."""
  return LAMB(params, lr, b1, b2, eps, 0.0, adam=True, device=device)
