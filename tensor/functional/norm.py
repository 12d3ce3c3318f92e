"""Normalization functionals: tinygrad's layernorm(axis, eps) and batchnorm(weight, bias, mean, invstd, axis), and
torch's group_norm as groupnorm(num_groups, weight, bias, eps). Statistics are the biased (population) ones.
"""
from __future__ import annotations
from typing import TYPE_CHECKING, Any
from runtime.dtype import least_upper_float
from tensor.functional.args import as_int, shape_error, value_error

if TYPE_CHECKING: from tensor.tensor import Tensor

def _axes(x: Tensor, axis: Any, name: str) -> tuple[int, ...]:
  items = axis if isinstance(axis, (tuple, list)) else (axis,)
  out = []
  for a in items:
    a = as_int(a, f"{name}: axis")
    if not -x.ndim <= a < x.ndim: raise shape_error(f"{name}: axis {a} is out of range for a tensor of shape {x.shape}")
    out.append(a % x.ndim)
  return tuple(sorted(set(out)))

class NormMixin:
  __slots__ = ()
  def layernorm(self: Tensor, axis: Any = -1, eps: float = 1e-5) -> Tensor:
    """(x - mean) / sqrt(var + eps) over `axis` (an int or a tuple), without a learned scale: tinygrad's layernorm."""
    axes = _axes(self, axis, "layernorm")
    x = self.cast(least_upper_float(self.dtype))
    y = x - x.mean(axes, keepdim=True)
    return y * ((y * y).mean(axes, keepdim=True) + eps).rsqrt()

  def batchnorm(self: Tensor, weight: Tensor | None, bias: Tensor | None, mean: Tensor, invstd: Tensor, axis: Any = 1) -> Tensor:
    """(x - mean) * weight * invstd + bias with the parameters laid along `axis` (the channels: 1 by default, or a
    tuple of axes whose sizes the parameters have): tinygrad's batchnorm. invstd may also be a broadcastable tensor."""
    axes = _axes(self, axis, "batchnorm")
    shape = tuple(s if i in axes else 1 for i, s in enumerate(self.shape))
    want = tuple(self.shape[i] for i in axes)
    def param(p: Tensor, what: str) -> Tensor:
      if p.shape != want and p.numel() != 1:
        raise shape_error(f"batchnorm: {what} of shape {p.shape} does not fit input of shape {self.shape} on axes {axes}: expected {want}")
      return p.reshape(shape) if p.shape == want else p  # a one-element parameter broadcasts as it is
    x = self - param(mean, "mean")
    if weight is not None: x = x * param(weight, "weight")
    x = x * (param(invstd, "invstd") if invstd.ndim == len(axes) else invstd)
    return x + param(bias, "bias") if bias is not None else x

  def groupnorm(self: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """torch's F.group_norm: self (N, C, *d) normalized over each group of C // num_groups channels (and *d), then
    scaled by weight (C,) and shifted by bias (C,)."""
    num_groups = as_int(num_groups, "groupnorm: num_groups")
    if self.ndim < 2: raise shape_error(f"groupnorm: input of shape {self.shape} needs (N, C, ...)")
    n, c = self.shape[:2]
    if num_groups < 1 or c % num_groups: raise value_error(f"groupnorm: {c} channels (shape {self.shape}) don't split into {num_groups} groups")
    for p, what in ((weight, "weight"), (bias, "bias")):
      if p is not None and p.shape != (c,): raise shape_error(f"groupnorm: {what} of shape {p.shape} does not fit {c} channels (input {self.shape})")
    x = self.reshape(n, num_groups, -1).layernorm(-1, eps).reshape(self.shape)
    pshape = (1, c) + (1,) * (self.ndim - 2)
    if weight is not None: x = x * weight.reshape(pshape)
    return x + bias.reshape(pshape) if bias is not None else x
