"""Elementwise activations with torch's definitions (and tinygrad's names and keywords): gelu (exact or tanh), the
hard* family, elu/celu/selu, softplus, logsigmoid, mish, softsign, quick_gelu, and softmin/normalize. Integer inputs
compute in float (relu6 and hardtanh clip in the input's dtype). log1p and expm1 keep small results accurate where
log(1+x) and exp(x)-1 would lose them.
"""
from __future__ import annotations
import math
from typing import TYPE_CHECKING
from runtime.dtype import least_upper_float
from tensor.functional.args import as_int, value_error

if TYPE_CHECKING: from tensor.tensor import Tensor

def _float(x: Tensor) -> Tensor: return x.cast(least_upper_float(x.dtype))

def log1p(x: Tensor) -> Tensor:
  """log(1 + x), accurate for tiny x: log(w) * x / (w - 1) with w = 1 + x cancels the rounding of w (Goldberg)."""
  w = x + 1
  safe = w.eq(1).where(2, w)  # where the ratio is not taken, 2: its gradient stays finite (0 * inf would be nan)
  return w.eq(1).where(x, safe.log() * x / (safe - 1))

def expm1_neg(x: Tensor) -> Tensor:
  """exp(x) - 1 for x <= 0, accurate for tiny x: (u - 1) * x / log(u) with u = exp(x) cancels the rounding of u (Kahan)."""
  u = x.exp()
  safe = (u.eq(1) | u.eq(0)).where(2, u)  # as log1p: a finite gradient in the branch not taken
  return u.eq(1).where(x, u.eq(0).where(-1, (safe - 1) * x / safe.log()))

def erfc(x: Tensor) -> Tensor:
  """1 - erf(x) with relative error below 1.2e-7 on both tails (the Chebyshev fit of Numerical Recipes' erfcc)."""
  z = x.abs()
  t = 1 / (1 + 0.5 * z)
  poly = 0.0
  for c in (0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806, 0.09678418, 0.37409196, 1.00002368):
    poly = (poly + c) * t
  r = t * (poly - 1.26551223 - z * z).exp()
  return (x < 0).where(2 - r, r)

def _softplus(x: Tensor) -> Tensor:  # log(1 + exp(x)) without overflow
  return x.maximum(0) + log1p((-x.abs()).exp())

SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946

class ActivationMixin:
  __slots__ = ()
  def gelu(self: Tensor, approximate: str = "tanh") -> Tensor:
    """x * Phi(x) with tinygrad's tanh approximation by default (tinygrad code ported here gives the same numbers), or
    exactly with erf (approximate="none", torch's F.gelu default)."""
    x = _float(self)
    if approximate == "none": return 0.5 * x * erfc(x * -(1 / math.sqrt(2)))
    if approximate == "tanh": return 0.5 * x * (1 + (math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)).tanh())
    raise value_error(f"gelu: approximate={approximate!r} must be 'none' or 'tanh'")
  def quick_gelu(self: Tensor) -> Tensor: return _float(self) * (_float(self) * 1.702).sigmoid()
  def softsign(self: Tensor) -> Tensor: return _float(self) / (1 + _float(self).abs())
  def relu6(self: Tensor) -> Tensor: return self.clip(0, 6)
  def hardtanh(self: Tensor, min_val: float = -1, max_val: float = 1) -> Tensor: return self.clip(min_val, max_val)
  def hardsigmoid(self: Tensor, alpha: float = 1 / 6, beta: float = 0.5) -> Tensor:
    """clip(alpha*x + beta, 0, 1): torch's relu6(x + 3) / 6 with the defaults."""
    return (_float(self) * alpha + beta).clip(0, 1)
  def hardswish(self: Tensor) -> Tensor: return _float(self) * (_float(self) + 3).clip(0, 6) * (1 / 6)
  def elu(self: Tensor, alpha: float = 1.0) -> Tensor:
    x = _float(self)
    return (x > 0).where(x, alpha * expm1_neg(x.minimum(0)))
  def celu(self: Tensor, alpha: float = 1.0) -> Tensor:
    if alpha == 0: raise value_error("celu: alpha must not be zero")
    x = _float(self)
    return x.maximum(0) + alpha * expm1_neg((x / alpha).minimum(0))
  def selu(self: Tensor, alpha: float = SELU_ALPHA, gamma: float = SELU_SCALE) -> Tensor:
    x = _float(self)
    return gamma * (x > 0).where(x, alpha * expm1_neg(x.minimum(0)))
  def softplus(self: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta*x)) / beta, and x itself where beta*x > threshold, as torch's F.softplus."""
    x = _float(self)
    return (x * beta > threshold).where(x, _softplus(x * beta) / beta)
  def logsigmoid(self: Tensor) -> Tensor: return -_softplus(-_float(self))
  def mish(self: Tensor) -> Tensor: return _float(self) * self.softplus().tanh()
  def softmin(self: Tensor, axis: int = -1) -> Tensor: return (-_float(self)).softmax(axis)
  def normalize(self: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """self divided by its p-norm along dim (at least eps), as torch's F.normalize."""
    dim = as_int(dim, "normalize: dim")
    x = _float(self)
    a = x.abs()
    if p == math.inf: norm = a.max(dim, keepdim=True)
    elif p == -math.inf: norm = a.min(dim, keepdim=True)
    elif p == 0: norm = x.ne(0).sum(dim, keepdim=True).cast(x.dtype)
    elif p == 1: norm = a.sum(dim, keepdim=True)
    elif p == 2: norm = (x * x).sum(dim, keepdim=True).sqrt()
    else: norm = a.pow(p).sum(dim, keepdim=True).pow(1 / p)
    return x / norm.maximum(eps)
