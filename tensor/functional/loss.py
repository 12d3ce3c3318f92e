"""Losses with torch's semantics and tinygrad's names: nll_loss, cross_entropy (class indices or probabilities,
weight, ignore_index, label_smoothing), tinygrad's sparse_categorical_crossentropy (classes on the last axis), and
the binary cross-entropies. A class index is picked with a one-hot compare, so a target outside [0, C) that is not
ignore_index picks nothing: it adds 0 to the loss and 0 to the mean's divisor (torch raises on the host instead).
"""
from __future__ import annotations
from typing import TYPE_CHECKING
from runtime.dtype import dtypes, least_upper_float
from tensor.functional.activation import log1p
from tensor.functional.args import check_reduction, shape_error, type_error, value_error

if TYPE_CHECKING: from tensor.tensor import Tensor

def _reduce(loss: Tensor, reduction: str) -> Tensor:
  return loss if reduction == "none" else loss.sum() if reduction == "sum" else loss.mean()

def _class_mask(Y: Tensor, n_classes: int, axis: int) -> Tensor:
  """Bool (..., C at `axis`, ...): where each target names a class."""
  classes = type(Y).arange(n_classes, dtype=Y.dtype, device=Y.device).reshape(n_classes, *[1] * (Y.ndim - axis))
  return Y.unsqueeze(axis) == classes

def _check_targets(x: Tensor, Y: Tensor, name: str) -> int:
  """The class axis of x (1, or 0 for an unbatched (C,) input), after checking Y holds one int class per position."""
  if not dtypes.is_int(Y.dtype): raise type_error(f"{name}: class-index targets must be an integer tensor, got {Y.dtype} (shape {Y.shape})")
  if x.ndim == 0: raise shape_error(f"{name}: input of shape {x.shape} needs a class dimension")
  axis = 0 if x.ndim == 1 else 1
  if Y.shape != x.shape[:axis] + x.shape[axis + 1:]:
    raise shape_error(f"{name}: target of shape {Y.shape} does not fit input of shape {x.shape}: expected {x.shape[:axis] + x.shape[axis + 1:]}")
  if Y.device != x.device: raise shape_error(f"{name}: input on {x.device} and target on {Y.device}")
  return axis

def _class_weight(weight: Tensor | None, n_classes: int, name: str) -> Tensor | None:
  if weight is not None and weight.shape != (n_classes,):
    raise shape_error(f"{name}: weight of shape {weight.shape} does not fit {n_classes} classes: expected ({n_classes},)")
  return weight

class LossMixin:
  __slots__ = ()
  def nll_loss(self: Tensor, Y: Tensor, weight: Tensor | None = None, ignore_index: int = -100, reduction: str = "mean") -> Tensor:
    """The negative log likelihood of log-probabilities self (N, C, *d) or (C,) at class indices Y (N, *d) or (), as
    torch's F.nll_loss: -weight[y] * self[y]; "mean" divides by the summed weight of the targets not ignored."""
    check_reduction(reduction)
    axis = _check_targets(self, Y, "nll_loss")
    n_classes = self.shape[axis]
    weight = _class_weight(weight, n_classes, "nll_loss")
    mask = _class_mask(Y, n_classes, axis) & Y.ne(ignore_index).unsqueeze(axis)      # (N, C, *d)
    w = mask.cast(self.dtype) if weight is None else mask.where(weight.reshape(n_classes, *[1] * (self.ndim - axis - 1)), 0)
    loss = -(mask.where(self, 0) * w).sum(axis)
    if reduction != "mean": return _reduce(loss, reduction)
    return loss.sum() / w.sum()

  def cross_entropy(self: Tensor, Y: Tensor, reduction: str = "mean", label_smoothing: float = 0.0, weight: Tensor | None = None,
                    ignore_index: int = -100) -> Tensor:
    """The cross entropy of logits self (N, C, *d) or (C,) against class indices Y (N, *d) or class probabilities (same
    shape as self), as torch's F.cross_entropy, with label_smoothing mixing in the uniform distribution."""
    check_reduction(reduction)
    if not 0.0 <= label_smoothing <= 1.0: raise value_error(f"cross_entropy: label_smoothing={label_smoothing} must be in [0, 1]")
    if self.ndim == 0: raise shape_error(f"cross_entropy: input of shape {self.shape} needs a class dimension")
    axis = 0 if self.ndim == 1 else 1
    n_classes = self.shape[axis]
    weight = _class_weight(weight, n_classes, "cross_entropy")
    logp = self.log_softmax(axis)
    wshape = (n_classes, *[1] * (self.ndim - axis - 1))
    if dtypes.is_float(Y.dtype):  # class probabilities
      if Y.shape != self.shape:
        raise shape_error(f"cross_entropy: target of shape {Y.shape} does not fit input of shape {self.shape}: class probabilities "
                          f"take the input's shape, class indices are an integer tensor of shape {self.shape[:axis] + self.shape[axis + 1:]}")
      target = Y * (1 - label_smoothing) + label_smoothing / n_classes if label_smoothing else Y
      per_class = logp * target if weight is None else logp * target * weight.reshape(wshape)
      return _reduce(-per_class.sum(axis), reduction)
    _check_targets(self, Y, "cross_entropy")
    nll = logp.nll_loss(Y, weight, ignore_index, reduction)
    if not label_smoothing: return nll
    keep = Y.ne(ignore_index)
    smooth = -(logp if weight is None else logp * weight.reshape(wshape)).sum(axis) * keep
    if reduction == "mean":  # as torch: over the targets' summed weight (or their count), like the nll part
      picked = keep if weight is None else (_class_mask(Y, n_classes, axis) & keep.unsqueeze(axis)).where(weight.reshape(wshape), 0).sum(axis)
      smooth = smooth.sum() / picked.sum()
    else: smooth = _reduce(smooth, reduction)
    return nll * (1 - label_smoothing) + smooth * (label_smoothing / n_classes)

  def sparse_categorical_crossentropy(self: Tensor, Y: Tensor, ignore_index: int = -1, label_smoothing: float = 0.0,
                                      reduction: str = "mean") -> Tensor:
    """tinygrad's cross entropy of logits self (..., C), classes on the last axis, at class indices Y (...). Positions
    where Y == ignore_index count for nothing (-1, the default, ignores nothing: a -1 target picks no class)."""
    check_reduction(reduction)
    if not 0.0 <= label_smoothing <= 1.0: raise value_error(f"sparse_categorical_crossentropy: label_smoothing={label_smoothing} must be in [0, 1]")
    if not dtypes.is_int(Y.dtype): raise type_error(f"sparse_categorical_crossentropy: targets must be an integer tensor, got {Y.dtype}")
    if self.ndim == 0 or Y.shape != self.shape[:-1]:
      raise shape_error(f"sparse_categorical_crossentropy: target of shape {Y.shape} does not fit logits of shape {self.shape}: "
                        f"expected {self.shape[:-1]}")
    logp = self.log_softmax(-1)
    keep = Y.ne(ignore_index) if ignore_index != -1 else type(Y).full(Y.shape, True, dtype=dtypes.bool, device=Y.device)
    picked = (_class_mask(Y, self.shape[-1], Y.ndim) & keep.unsqueeze(-1)).where(logp, 0).sum(-1)
    loss = -(picked * (1 - label_smoothing) + logp.mean(-1) * keep * label_smoothing)
    return loss.sum() / keep.sum() if reduction == "mean" else _reduce(loss, reduction)

  def binary_crossentropy(self: Tensor, Y: Tensor, reduction: str = "mean", weight: Tensor | None = None) -> Tensor:
    """-(Y*log(self) + (1-Y)*log(1-self)) for probabilities self, each log clamped at -100, as torch's F.binary_cross_entropy."""
    check_reduction(reduction)
    if Y.shape != self.shape: raise shape_error(f"binary_crossentropy: target of shape {Y.shape} does not fit input of shape {self.shape}")
    p = self.cast(least_upper_float(self.dtype))
    loss = -(Y * p.log().maximum(-100) + (1 - Y) * (1 - p).log().maximum(-100))
    return _reduce(loss if weight is None else loss * weight, reduction)

  def binary_crossentropy_logits(self: Tensor, Y: Tensor, reduction: str = "mean", pos_weight: Tensor | None = None,
                                 weight: Tensor | None = None) -> Tensor:
    """binary_crossentropy of sigmoid(self), computed stably from the logits, as torch's F.binary_cross_entropy_with_logits:
    pos_weight scales the positive term (per class, broadcast on the last axis)."""
    check_reduction(reduction)
    if Y.shape != self.shape:
      raise shape_error(f"binary_crossentropy_logits: target of shape {Y.shape} does not fit input of shape {self.shape}")
    x = self.cast(least_upper_float(self.dtype))
    softplus_neg = (-x).maximum(0) + log1p((-x.abs()).exp())                                 # -log(sigmoid(x))
    loss = (1 - Y) * x + (softplus_neg if pos_weight is None else (1 + (pos_weight - 1) * Y) * softplus_neg)
    return _reduce(loss if weight is None else loss * weight, reduction)
