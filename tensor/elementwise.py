"""Elementwise math beyond the ALU ops: exp, log, trig and hyperbolic functions and their inverses, erf, rounding,
activations, clip, and the float predicates (isnan, isinf, isfinite, isclose, signbit). Part of the Tensor frontend:
ElementwiseMixin is a base class of Tensor (tensor/tensor.py); this module needs nothing of tensor.py to load (every Tensor
is an ElementwiseMixin).

Float results take the input's float type (ints compute in float32). The inverse trig functions, erf, expm1 and log1p
are series and identities over exp2/log2/sqrt evaluated in float64 and cast back, so float32 results are correctly
rounded almost always and float64 ones are within a few ulp (docs/tensor.md).
"""
from __future__ import annotations
import math
from typing import TYPE_CHECKING, Any
from runtime.dtype import DType, dtypes, least_upper_float
from runtime.ops import Ops
from tensor.errors import ArgumentValueError, DTypeError

if TYPE_CHECKING: from tensor.tensor import Tensor

F64 = dtypes.float64
_UINT = {2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}
_INT = {2: dtypes.int16, 4: dtypes.int32, 8: dtypes.int64}

def _wide(x: Tensor) -> tuple[Tensor, DType]:
  """x in float64 (where the series below are exact enough), and the float type the result goes back to."""
  out = least_upper_float(x.dtype)
  return x.cast(F64), out

def _atan_reduced(t: Tensor) -> Tensor:
  """atan(t) for 0 <= t <= 1 (float64): atan(t) = pi/6 + atan((sqrt(3) t - 1) / (sqrt(3) + t)) above tan(pi/12), then
  the Taylor series on |u| <= tan(pi/12) = 0.268 (17 terms reach float64's precision)."""
  big = t > 2 - math.sqrt(3)
  u = big.where((math.sqrt(3) * t - 1) / (math.sqrt(3) + t), t)
  z = u * u
  acc = u.zeros_like()
  for k in range(17, -1, -1): acc = acc * z + (-1) ** k / (2 * k + 1)
  return big.where(acc * u + math.pi / 6, acc * u)

def _atan64(x: Tensor) -> Tensor:
  """atan of a float64 tensor: odd, and atan(a) = pi/2 - atan(1/a) above 1."""
  a = x.abs()
  inv = a > 1
  r = _atan_reduced(inv.where(1 / a, a))
  r = inv.where(math.pi / 2 - r, r)
  return x.signbit().where(-r, r)

def _log1p64(x: Tensor) -> Tensor:
  """log(1 + x) without losing the low bits of a small x (Kahan: log(u) * x / (u - 1) with u = 1 + x)."""
  u = 1 + x
  # the ratio's operands where it is not taken are a harmless 2: a where's gradient of 0 times an inf would be nan
  safe = ((u == 1) | u.isinf() | (u == 0)).where(2, u)
  return (u == 1).where(x, (u.isinf() | (u == 0)).where(u.log(), safe.log() * x / (safe - 1)))

def _expm1_64(x: Tensor) -> Tensor:
  """exp(x) - 1 without cancellation for a small x (Kahan: (u - 1) * x / log(u) with u = exp(x))."""
  u = x.exp()
  safe = ((u == 1) | u.isinf() | (u == 0)).where(2, u)  # as _log1p64: no inf or 0/0 in the branch not taken
  return (u == 1).where(x, (u.isinf() | (u == 0)).where(u - 1, (safe - 1) * x / safe.log()))

_ERF_SERIES = [(-1) ** k / (math.factorial(k) * (2 * k + 1)) for k in range(31)]

def _erf64(x: Tensor) -> Tensor:
  """erf of a float64 tensor: the Taylor series below |x| = 2 (30 terms), above it 1 - erfc by its continued fraction
  (40 terms); both reach float64's precision there."""
  a = x.abs()
  small = a < 2
  s = small.where(a, 0)                                      # keep the unused branch finite
  z = s * s
  acc = s.zeros_like()
  for c in reversed(_ERF_SERIES): acc = acc * z + c
  series = acc * s * (2 / math.sqrt(math.pi))
  b = small.where(2, a)
  t = b
  for k in range(40, 0, -1): t = b + (k / 2) / t             # erfc(b) = exp(-b^2) / sqrt(pi) / t
  tail = 1 - (-(b * b)).exp() / (math.sqrt(math.pi) * t)
  r = small.where(series, tail)
  return x.signbit().where(-r, r)

def _nan_with_gradient(x: Tensor, d: Tensor) -> Tensor:
  """nan (the value outside a function's domain) whose gradient is d (a formula in x): torch gives acosh and atanh
  their derivative's formula everywhere, a number where the value is nan (acosh'(-300) = 1/sqrt(300^2 - 1))."""
  return (x - x.detach()) * d.detach() + math.nan

class ElementwiseMixin:
  """Tensor's elementwise math (numpy's and torch's names)."""
  __slots__ = ()

  # ---- the basics (float ops compute in the least float type that holds the input) ----
  def neg(self: Tensor) -> Tensor: return -self
  def abs(self: Tensor) -> Tensor:
    if dtypes.is_unsigned(self.dtype) or self.dtype is dtypes.bool: return self
    # abs(-0.0) == 0.0, and at 0 the gradient is 0 (torch's sign(x) * grad): zeros give the constant 0
    if dtypes.is_float(self.dtype): return (self < 0).where(-self, (self == 0).where(0, self))
    return (self < 0).where(-self, self)
  def sign(self: Tensor) -> Tensor:
    s = (self > 0).cast(self.dtype) - (self < 0).cast(self.dtype)
    return self.isnan().where(self, s) if dtypes.is_float(self.dtype) else s  # sign(nan) is nan
  def signbit(self: Tensor) -> Tensor:
    """Whether the sign bit is set: True for -0.0 and negative nans, as numpy."""
    if dtypes.is_float(self.dtype): return self.bitcast(_INT[self.dtype.itemsize]) < 0
    return self < 0 if not dtypes.is_unsigned(self.dtype) and self.dtype is not dtypes.bool else self.full_like(False, dtype=dtypes.bool)
  def exp2(self: Tensor) -> Tensor: return self._float()._alu(Ops.EXP2)
  def log2(self: Tensor) -> Tensor: return self._float()._alu(Ops.LOG2)
  def exp(self: Tensor) -> Tensor: return (self._float() * (1 / math.log(2))).exp2()
  def log(self: Tensor) -> Tensor: return self.log2() * math.log(2)
  def log10(self: Tensor) -> Tensor: return self.log2() * math.log10(2)
  def log1p(self: Tensor) -> Tensor:
    x, out = _wide(self)
    return _log1p64(x).cast(out)
  def expm1(self: Tensor) -> Tensor:
    x, out = _wide(self)
    return _expm1_64(x).cast(out)
  def sqrt(self: Tensor) -> Tensor: return self._float()._alu(Ops.SQRT)
  def rsqrt(self: Tensor) -> Tensor: return self.sqrt().reciprocal()
  def reciprocal(self: Tensor) -> Tensor: return self._float()._alu(Ops.RECIPROCAL)
  def square(self: Tensor) -> Tensor: return self * self

  # ---- trigonometric and hyperbolic ----
  def sin(self: Tensor) -> Tensor: return self._float()._alu(Ops.SIN)
  def cos(self: Tensor) -> Tensor: return (math.pi / 2 - self._float()).sin()
  def tan(self: Tensor) -> Tensor: return self.sin() / self.cos()
  def atan(self: Tensor) -> Tensor:
    x, out = _wide(self)
    return _atan64(x).cast(out)
  def asin(self: Tensor) -> Tensor:
    x, out = _wide(self)
    return _atan64(x / ((1 - x) * (1 + x)).sqrt()).cast(out)     # +-1 give +-inf inside: atan makes them +-pi/2
  def acos(self: Tensor) -> Tensor:
    x, out = _wide(self)
    return (2 * _atan64(((1 - x) / (1 + x)).sqrt())).cast(out)   # no cancellation near 1, unlike pi/2 - asin(x)
  def sinh(self: Tensor) -> Tensor:
    x, out = _wide(self)
    return ((_expm1_64(x) - _expm1_64(-x)) * 0.5).cast(out)
  def cosh(self: Tensor) -> Tensor:
    x, out = _wide(self)
    return ((x.exp() + (-x).exp()) * 0.5).cast(out)
  def tanh(self: Tensor) -> Tensor: return 2.0 * (2.0 * self._float()).sigmoid() - 1.0
  def asinh(self: Tensor) -> Tensor:
    x, out = _wide(self)
    a = x.abs()
    big = a > 2.0**28                                             # x*x would overflow: asinh(a) = log(2a) there
    s = big.where(0, a)
    r = big.where(a.log() + math.log(2), _log1p64(s + s * s / (1 + (1 + s * s).sqrt())))
    return x.signbit().where(-r, r).cast(out)
  def acosh(self: Tensor) -> Tensor:
    x, out = _wide(self)
    inside = x >= 1
    x_in = inside.where(x, 2)                                     # the series only sees its domain (finite gradients)
    big = x_in > 2.0**28
    t = big.where(0, x_in - 1)                                    # x - 1 is exact near 1
    r = big.where(x_in.log() + math.log(2), _log1p64(t + (t * (t + 2)).sqrt()))
    return inside.where(r, _nan_with_gradient(x, 1 / (x * x - 1).sqrt())).cast(out)
  def atanh(self: Tensor) -> Tensor:
    x, out = _wide(self)
    inside = x.abs() <= 1
    x_in = inside.where(x, 0)
    return inside.where(0.5 * _log1p64(2 * x_in / (1 - x_in)), _nan_with_gradient(x, 1 / (1 - x * x))).cast(out)
  def erf(self: Tensor) -> Tensor:
    x, out = _wide(self)
    return _erf64(x).cast(out)

  # ---- rounding ----
  def trunc(self: Tensor) -> Tensor: return self._alu(Ops.TRUNC) if dtypes.is_float(self.dtype) else self
  def floor(self: Tensor) -> Tensor:
    if not dtypes.is_float(self.dtype): return self
    t = self.trunc()
    return (self < t).where(t - 1, t)
  def ceil(self: Tensor) -> Tensor:
    if not dtypes.is_float(self.dtype): return self
    t = self.trunc()
    return (self > t).where(t + 1, t)
  def round(self: Tensor) -> Tensor:
    if not dtypes.is_float(self.dtype): return self
    # half to even, as numpy and torch round
    f = self.floor()
    d = self - f
    even = (f * 0.5).floor() * 2 == f
    # the sign of x: round(-0.5) and round(-0.4) are -0.0, as C's rint and torch give
    return (d > 0.5).where(f + 1, (d < 0.5).where(f, even.where(f, f + 1))).copysign(self)

  # ---- activations the core keeps (the functional mixin has the rest) ----
  def relu(self: Tensor) -> Tensor:
    """max(x, 0) as torch: nan stays nan (and passes its gradient), -0.0 stays -0.0, and the gradient at 0 is 0. Bool stays bool."""
    if self.dtype is dtypes.bool: return self
    return (self < 0).where(0, (self == 0).where(self.detach(), self))
  def sigmoid(self: Tensor) -> Tensor:
    """1 / (1 + e) for x >= 0 and e / (1 + e) below, with e = exp(-|x|) <= 1 (one exp), so neither the value nor the
    gradient meets an inf (at x = -100 the plain form's gradient is 0 * inf = nan). |x| as a select: at 0 its gradient
    is +1 (the x >= 0 side), which the sigmoid's derivative there needs."""
    x = self._float()
    pos = x >= 0
    e = (-pos.where(x, -x)).exp()
    return pos.where(1 / (1 + e), e / (1 + e))
  def leaky_relu(self: Tensor, neg_slope: float = 0.01) -> Tensor: return (self > 0).where(self, self * neg_slope)
  def gelu(self: Tensor) -> Tensor: return 0.5 * self * (1 + (math.sqrt(2 / math.pi) * (self + 0.044715 * self * self * self)).tanh())
  def silu(self: Tensor) -> Tensor: return self * self.sigmoid()
  def swish(self: Tensor) -> Tensor: return self.silu()

  # ---- two operands ----
  def copysign(self: Tensor, other: Tensor | float) -> Tensor:
    """The magnitude of self with the sign bit of other (floats; ints compute in float32), exact for zeros and nans."""
    a, b = self._operands(other)
    a, b = a._float(), b._float()
    u = _UINT[a.dtype.itemsize]
    sign = 1 << (8 * a.dtype.itemsize - 1)
    bits = ((a.bitcast(u) & (sign - 1)) | (b.bitcast(u) & sign)).bitcast(a.dtype)
    # the bits carry no gradient: torch's is g * result / self (+-1), 0 where self is 0; added as a zero that is exact
    # where self is finite and nonzero (elsewhere the bits alone: their gradient is 0)
    flip = (a.signbit() != b.signbit()).detach().where(-1.0, 1.0).cast(a.dtype)
    plain = a.isfinite() & a.ne(0)
    return plain.where(bits.detach() + (a - a.detach()) * flip, bits)
  def fmod(self: Tensor, other) -> Tensor:
    """C's fmod: the remainder of division toward zero, with the dividend's sign; ints: x fmod 0 is 0 (as numpy)."""
    a, b = self._operands(other)
    if dtypes.is_float(a.dtype): return a._alu(Ops.MOD, b)
    if a.dtype is dtypes.bool: a, b = a.cast(dtypes.default_int), b.cast(dtypes.default_int)
    return b.eq(0).where(0, a._alu(Ops.MOD, b))
  def lerp(self: Tensor, end: Tensor | float, weight: Tensor | float) -> Tensor:
    """self + weight * (end - self), computed from the nearer end (as torch) so weight 1 gives end exactly."""
    if not dtypes.is_float(self.dtype): raise DTypeError(f"lerp needs float tensors, got {self.dtype!r}")
    end_t = end if isinstance(end, ElementwiseMixin) else self._const_like(end)
    w = weight if isinstance(weight, ElementwiseMixin) else self._const_like(weight)
    diff = end_t - self
    return (w.abs() < 0.5).where(self + w * diff, end_t - diff * (1 - w))
  def logaddexp(self: Tensor, other) -> Tensor:
    """log(exp(self) + exp(other)) without overflow: max + log1p(exp(-|self - other|))."""
    a, b = self._operands(other)
    a, b = a._float(), b._float()
    m = a.maximum(b)
    # equal (inf with inf: the formula's inf - inf): (a + b) / 2 + log 2, so each side gets half the gradient, as torch
    return a.eq(b).where((a + b) * 0.5 + math.log(2), m + (-(a - b).abs()).exp().log1p())

  # ---- float predicates ----
  def isnan(self: Tensor) -> Tensor: return self.ne(self)
  def isinf(self: Tensor, detect_positive: bool = True, detect_negative: bool = True) -> Tensor:
    if not dtypes.is_float(self.dtype): return self.full_like(False, dtype=dtypes.bool)
    out = self.full_like(False, dtype=dtypes.bool)
    if detect_positive: out = out | self.eq(math.inf)
    if detect_negative: out = out | self.eq(-math.inf)
    return out
  def isfinite(self: Tensor) -> Tensor:
    if not dtypes.is_float(self.dtype): return self.full_like(True, dtype=dtypes.bool)
    return (self.isnan() | self.isinf()).logical_not()
  def isclose(self: Tensor, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    """|self - other| <= atol + rtol * |other| elementwise (torch's definition); equal infinities are close, nan is close
    to nan only with equal_nan."""
    if rtol < 0 or atol < 0: raise ArgumentValueError(f"isclose tolerances must be >= 0, got rtol={rtol} atol={atol}")
    a, b = self._operands(other)
    if not dtypes.is_float(a.dtype): return a.eq(b)
    close = a.eq(b) | (a.isfinite() & b.isfinite() & ((a - b).abs() <= atol + rtol * b.abs()))  # an inf is close only to itself
    return close | (a.isnan() & b.isnan()) if equal_nan else close
  def allclose(self: Tensor, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    return bool(self.isclose(other, rtol, atol, equal_nan).all().item())

  def clip(self: Tensor, min_: Any = None, max_: Any = None, **kw) -> Tensor:
    """Elementwise max(min_, min(x, max_)); either bound may be None (not both), a number or a Tensor. torch's keyword
    names min= and max= work too."""
    min_, max_ = kw.pop("min", min_), kw.pop("max", max_)
    if kw: raise TypeError(f"clip got unexpected keyword arguments {sorted(kw)}")
    if min_ is None and max_ is None: raise ArgumentValueError("clip needs at least one of min and max")
    # selects, not maximum/minimum: at a bound the gradient goes to x whole (torch's clamp), not half to each side
    out = self
    if min_ is not None:
      a, b = out._operands(min_)
      out = (a < b).where(b, a)
    if max_ is not None:
      a, b = out._operands(max_)
      out = (a > b).where(b, a)
    return out
  clamp = clip
