"""Autograd: reverse-mode differentiation of the lazy tensor graph, mixed into Tensor (tensor/tensor.py).
Each op's derivative is a rule in rules/gradient.rules; this module only walks the graph from the loss back to the
targets, applies that rule set once per node and sums what each source receives. The result is more lazy graph.
"""
from __future__ import annotations
import weakref
from contextlib import ContextDecorator
from typing import TYPE_CHECKING, ClassVar
from runtime.dtype import dtypes
from runtime.helpers import ContextVar, getenv
from runtime.ops import Ops
from runtime.uop import UOp
from rules.gradient import gradient as gradient_rules
from tensor.engine.state import ENGINE

if TYPE_CHECKING:
  from tensor.tensor import Tensor

class GradientError(RuntimeError):
  """A gradient that can't be computed as asked: a non-scalar loss without a gradient, a target not in the graph, ..."""

def _paths(root: UOp, targets: set[UOp]) -> dict[UOp, bool]:
  """Every node under root, sources before users, mapped to whether it lies on a path to a target (DETACH cuts paths)."""
  on: dict[UOp, bool] = {}
  for u in root.toposort(gate=lambda u: u.op is not Ops.DETACH):
    on[u] = u in targets or (u.op is not Ops.DETACH and any(on[s] for s in u.src))
  return on

def compute_gradients(root: UOp, root_grad: UOp, targets: set[UOp]) -> dict[UOp, UOp]:
  """d(root)/d(node) for the nodes on the paths from root to the targets, given d(loss)/d(root) = root_grad: users before
  sources, each node's gradient complete (summed over its users) before its rule gives its sources theirs."""
  on = _paths(root, targets)
  grads: dict[UOp, UOp] = {root: root_grad}
  for u in reversed(list(on)):
    g = grads.get(u)
    if g is None or not any(on[s] for s in u.src): continue
    per_source = gradient_rules.rewrite(u, g)
    if per_source is None:
      raise GradientError(f"no gradient rule for {u.op} (shape {u.shape}, dtype {u.dtype}) on the way to the targets: "
                          f"{_no_rule_hint(u)}")
    for s, d in zip(u.src, per_source):
      if d is None or not on[s]: continue
      assert d.shape == s.shape and d.dtype is s.dtype, f"gradient rule for {u.op} gave {d.dtype} {d.shape} for a source of {s.dtype} {s.shape}"
      grads[s] = grads[s] + d if s in grads else d
  return grads

# a value the frontend computed without reading its operands (a sum over no elements is 0, a pad of nothing all padding)
# -> those operands: the loss still depends on them for the gradient rule below (their gradient is zero)
_folded: weakref.WeakKeyDictionary[UOp, tuple[UOp, ...]] = weakref.WeakKeyDictionary()

def note_folded(result: UOp, *operands: UOp) -> None:
  """Records that `result` stands for an op of `operands` the frontend folded to a constant (their gradients are zeros)."""
  _folded[result] = operands

def _reads(root: UOp) -> set[UOp]:
  """Every node the value of root depends on: its graph, and the operands of the folds in it."""
  seen, stack = set(), [root]
  while stack:
    if (u := stack.pop()) in seen: continue
    seen.add(u)
    stack.extend(u.src)
    stack.extend(_folded.get(u, ()))
  return seen

def _no_rule_hint(u: UOp) -> str:
  if Ops.KERNEL in (u.op, *(s.op for s in u.src)):
    return "a tensor of the graph was kernelized or realized in between; take gradients before realizing"
  return "rules/gradient.rules has none for it"

def _is_constant(u: UOp) -> bool:
  """A graph of shared constants only (the numbers ops combine with), no buffer and no tensor's own constant (UNIQUE) under
  it: hash-consing makes it the same node as every equal constant."""
  return not any(n.op in (Ops.BUFFER, Ops.UNIQUE) for n in u.toposort())

def _describe(t: Tensor) -> str: return f"{t.dtype.name} {t.shape}"

class _FlagContext(ContextDecorator):
  """Sets a class flag of Tensor inside a `with` block or a decorated call, and puts back what it was after (nesting and
  recursion included). `owner`: the Tensor class, recorded when it derives from AutogradMixin (tensor/tensor.py)."""
  flag = ""
  owner: type = object
  def __init__(self, mode: bool = True): self.mode, self._saved = mode, []
  def __enter__(self):
    self._saved.append(getattr(self.owner, self.flag))
    setattr(self.owner, self.flag, self.mode)
    return self
  def __exit__(self, *exc) -> bool:
    setattr(self.owner, self.flag, self._saved.pop())
    return False

class _ClassFlag(ContextVar):
  """A ContextVar that is a class flag of Tensor: `Context(TRAINING=1)` (tinygrad's training switch) is `Tensor.train()`,
  and `Tensor.training` reads the same value; both set one flag, so neither can go stale."""
  def __init__(self, key: str, flag: str):
    self.flag = flag
    super().__init__(key, 0)
  @property  # type: ignore[override]
  def value(self) -> int: return int(bool(getattr(_FlagContext.owner, self.flag, False)))
  @value.setter
  def value(self, v) -> None:
    if _FlagContext.owner is not object: setattr(_FlagContext.owner, self.flag, bool(v))

TRAINING = _ClassFlag("TRAINING", "training")

class AutogradMixin:
  """Tensor's autograd methods: `loss.gradient(x)`, `loss.backward()`, `Tensor.train()`, `Tensor.test()`."""
  __slots__ = ()
  # the flags of tensor.py's Tensor: a tensor's requires_grad (None: "if something asks", an optimizer sets True), and the
  # class flags Tensor.training (Tensor.train()) and Tensor.no_grad (Tensor.test())
  no_grad: ClassVar[bool] = False

  def __init_subclass__(cls, **kwargs):
    super().__init_subclass__(**kwargs)
    # the class whose flags train() and test() set, Tensor: the first to derive from this mixin (a user's subclass of Tensor
    # reads Tensor's flags too); so this module needs nothing of tensor.py
    if _FlagContext.owner is object:
      _FlagContext.owner = cls
      if getenv("TRAINING", 0): cls.training = True  # TRAINING=1 in the environment, as Context(TRAINING=1)

  class train(_FlagContext):
    """`Tensor.training = mode` inside: `with Tensor.train(): ...` or `@Tensor.train()` on a training step (dropout and
    batch norm read the flag)."""
    flag = "training"

  class test(_FlagContext):
    """`Tensor.no_grad = mode` inside: `with Tensor.test(): ...` or `@Tensor.test()`; backward() refuses to run there."""
    flag = "no_grad"

  def requires_grad_(self: Tensor, requires_grad: bool | None = True) -> Tensor:  # type: ignore[misc]
    self.requires_grad = requires_grad
    return self

  def gradient(self: Tensor, *targets: Tensor, gradient: Tensor | None = None, materialize_grads: bool = False) -> list[Tensor]:  # type: ignore[misc]
    """d(self)/d(target) for each target, as lazy tensors: `dx, dy = loss.gradient(x, y)`. A scalar's gradient starts at 1;
    any other shape needs `gradient` (d(loss)/d(self), the shape of self). A target with no elements, or that the loss reads
    only through ops without a derivative (comparisons, casts to int, detach), gets zeros; a tensor the loss does not read at
    all is an error, or zeros with materialize_grads=True."""
    T = type(self)
    if not targets: raise GradientError("gradient() needs the tensors to differentiate with respect to: loss.gradient(x, y, ...)")
    for i, t in enumerate(targets):
      if not isinstance(t, T): raise TypeError(f"gradient() target {i} is a {type(t).__name__}, not a Tensor")
      if not dtypes.is_float(t.dtype): raise GradientError(f"only float tensors have gradients: target {i} is {_describe(t)}")
      if t.requires_grad is False: raise GradientError(f"target {i} ({_describe(t)}) has requires_grad=False")
      if _is_constant(t.uop):
        raise GradientError(f"target {i} ({_describe(t)}) is a shared constant (a number an op combines with): equal ones are one node, "
                            "so its gradient would mix every use of its value in the graph; make a tensor of its own: Tensor(2.0), "
                            "Tensor.ones(3), Tensor([2.0])")
    if not dtypes.is_float(self.dtype): raise GradientError(f"only a float tensor can be differentiated, this one is {_describe(self)}")
    root_grad = self._root_gradient(gradient)
    grads = compute_gradients(self.uop, root_grad, {t.uop for t in targets})
    out, in_graph = [], None
    for i, t in enumerate(targets):
      g = grads.get(t.uop)
      if g is None:
        # torch's and tinygrad's rule: a target with no elements, or one the loss reads only through ops without a
        # derivative, has a zero gradient; only a tensor the loss does not read at all is an error
        if in_graph is None: in_graph = _reads(self.uop)
        if not materialize_grads and t.numel() != 0 and t.uop not in in_graph:
          raise GradientError(f"target {i} ({_describe(t)}) is not in the graph of this {_describe(self)} tensor: the loss does not read "
                              "it (pass materialize_grads=True for zeros)")
        g = t.zeros_like().uop
      out.append(T(g))
    return out

  def _root_gradient(self: Tensor, gradient) -> UOp:  # type: ignore[misc]
    T = type(self)
    if gradient is None:
      if self.shape != ():
        raise GradientError(f"the gradient of a non-scalar tensor ({_describe(self)}) needs an explicit gradient argument of its shape: "
                            "loss.backward(gradient) or loss.gradient(x, gradient=...); or reduce it first (loss.sum())")
      return T(1.0, device=self.device, dtype=self.dtype).uop
    if not isinstance(gradient, T): raise TypeError(f"gradient must be a Tensor, not {type(gradient).__name__}")
    if gradient.shape != self.shape and [d for d in gradient.shape if d != 1] == [d for d in self.shape if d != 1]:
      gradient = gradient.reshape(self.shape)  # the same values up to axes of 1 (a (1,) gradient for a scalar loss, as tinygrad)
    if gradient.shape != self.shape:
      raise GradientError(f"gradient of shape {gradient.shape} for a tensor of shape {self.shape}: they must be the same")
    if gradient.device != self.device:
      raise GradientError(f"gradient on {gradient.device} for a tensor on {self.device}: they must be on one device")
    if not dtypes.is_float(gradient.dtype): raise GradientError(f"gradient must be a float tensor, not {_describe(gradient)}")
    return gradient.cast(self.dtype).uop

  def backward(self: Tensor, gradient: Tensor | None = None) -> Tensor:  # type: ignore[misc]
    """Add d(self)/d(t) to t.grad for every live tensor t with requires_grad=True in this tensor's graph (a scalar's
    gradient starts at 1; otherwise pass `gradient`). Returns self, so `loss = f(x).backward()` keeps the loss."""
    if self.no_grad: raise GradientError("backward() inside Tensor.test() (Tensor.no_grad is True): gradients are off there")
    in_graph = self.uop.toposort()
    live = [t for t in ENGINE.storage.live_holders() if t.uop in in_graph]
    need = [t for t in live if t.requires_grad]
    if not need:
      # nothing asked by name (requires_grad=True, as an optimizer sets): every float tensor of the graph left at None gets
      # one, as tinygrad's default does (when some did ask, only those: a training step computes no other gradients)
      need = [t for t in live if t.requires_grad is None and dtypes.is_float(t.dtype) and not _is_constant(t.uop)]
    if not need:
      raise GradientError(f"backward(): no tensor in the graph of this {_describe(self)} tensor has requires_grad=True "
                          "(set it on the tensors to train, or use loss.gradient(*tensors))")
    owner: dict[UOp, Tensor] = {}
    for t in need:
      if owner.setdefault(t.uop, t) is not t and t.requires_grad:
        raise GradientError(f"two tensors with requires_grad=True ({_describe(t)}) are one and the same lazy graph (the same expression of "
                            "the same tensors, built twice, is one node), so they can't get separate gradients: make each a tensor of its own")
    grads = dict(zip(owner, self.gradient(*owner.values(), gradient=gradient, materialize_grads=True)))
    for t in need:
      g = grads[t.uop]
      # accumulated in place (torch's and tinygrad's): an optimizer or a user holding t.grad sees the sum
      if t.grad is None: t.grad = g
      else: t.grad.assign(t.grad + g)
    return self

__all__ = ["AutogradMixin", "GradientError", "compute_gradients", "note_folded", "TRAINING"]
