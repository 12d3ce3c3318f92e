"""Random numbers: Threefry-2x32 (Salmon et al., 2011) built from uint32 Tensor ops, so it runs as an ordinary kernel on
the device, and Tensor's random creation methods on top of it (rand, randn, randint, uniform, normal, initializers,
dropout). Part of the Tensor frontend: RandomMixin is a base class of Tensor (tensor/tensor.py); the functions here take
the Tensor class (T) where they make tensors from Python values, so this module needs nothing of tensor.py to load.

State: per device one realized uint64 buffer [seed, counter]. A draw of m blocks assigns counter + m to it and computes
Threefry(key=seed, counter=old counter + j) for j < m inside its kernel, so a replay of the captured kernels (TinyJit)
draws fresh numbers without Python; `manual_seed` writes into the same buffers. Block j gives two 32-bit words (low
word first); the same seed and the same calls give the same numbers on every device.
"""
from __future__ import annotations
import math
from typing import TYPE_CHECKING, Any
from runtime.dtype import DType, dtypes
from runtime.uop import dim_max
from tensor.errors import ArgumentTypeError, ArgumentValueError, DTypeError, ShapeError, as_int, shape_arg, to_dtype

if TYPE_CHECKING: from tensor.tensor import Tensor

U32, U64 = dtypes.uint32, dtypes.uint64
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = 0x1BD11BDA

def threefry2x32(x0: Tensor, x1: Tensor, k0: Tensor, k1: Tensor) -> tuple[Tensor, Tensor]:
  """Threefry-2x32, 20 rounds: the counter words (x0, x1) encrypted with the key words (k0, k1); all uint32 tensors
  (broadcastable). runtime.ops.threefry2x32 is the same function on Python ints."""
  ks = (k0, k1, k0 ^ k1 ^ _PARITY)
  x0, x1 = x0 + ks[0], x1 + ks[1]
  for i in range(5):
    for r in _ROTATIONS[i % 2]:
      x0 = x0 + x1
      x1 = ((x1 << r) | (x1 >> (32 - r))) ^ x0   # rotate left by r, then mix
    x0 = x0 + ks[(i + 1) % 3]                     # key injection every four rounds
    x1 = x1 + ks[(i + 2) % 3] + (i + 1)
  return x0, x1

def iota(T: type[Tensor], n: int, dtype: DType, device: str) -> Tensor:
  """[0, 1, ..., n-1] computed inside the kernel that reads it (no host data): the sum over the bits b of the index of
  [0, 2**b] placed along axis b of a (2, 2, ..., 2) tensor. Padding makes the 2**b a comparison on the index.
  A symbolic n (a causal mask over sp + 1 keys): built for its largest value, then shrunk to n."""
  k = max(1, (dim_max(n) - 1).bit_length())
  out: Tensor | None = None
  for b in range(k):
    step = T(2**b, device, dtype).reshape(1).pad(((1, 0),))                    # [0, 2**b]
    step = step.reshape((1,) * (k - 1 - b) + (2,) + (1,) * b).expand((2,) * k)
    out = step if out is None else out + step
  assert out is not None
  return out.reshape(2**k).shrink(((0, n),))

class _Generator:
  """The seed, and per device its realized [seed, counter] buffer (uint64), made on first use. The frontend's random state,
  one for the process as torch's default generator is (manual_seed sets it): it holds Tensors, which the engine never sees."""
  def __init__(self):
    self.seed = 0
    self.states: dict[str, Tensor] = {}
  def state(self, T: type[Tensor], device: str) -> Tensor:
    if (st := self.states.get(device)) is None: st = self.states[device] = T([self.seed, 0], device, U64).contiguous().realize()
    return st
  def reseed(self, T: type[Tensor], seed: int) -> None:
    self.seed = seed
    for device, st in self.states.items(): st.assign(T([seed, 0], device, U64)).realize()  # the same buffers: a replay sees it
generator = _Generator()

def _blocks(T: type[Tensor], m: int, device: str) -> tuple[Tensor, Tensor]:
  """Threefry of the next m counters of the device: two uint32 tensors of shape (m,). Advances the counter by m."""
  st = generator.state(T, device)
  st.assign(st + T(m, device, U64).reshape(1).pad(((1, 0),)))                       # [seed, counter + m]
  seed, counter = st[0], st[1] - m                                                  # the counter before this draw
  ctr = iota(T, m, U64, device) + counter
  return threefry2x32(ctr.cast(U32), (ctr >> 32).cast(U32), seed.cast(U32), (seed >> 32).cast(U32))

def random_words(T: type[Tensor], n: int, device: str) -> Tensor:
  """n random uint32 words, shape (n,): block j gives words 2j and 2j+1."""
  x0, x1 = _blocks(T, (n + 1) // 2, device)
  m = x0.shape[0]
  pairs = x0.reshape(m, 1).pad(((0, 0), (0, 1))) + x1.reshape(m, 1).pad(((0, 0), (1, 0)))   # (m, 2)
  return pairs.reshape(2 * m).shrink(((0, n),))

def random_u64(T: type[Tensor], n: int, device: str) -> Tensor:
  """n random uint64 values, shape (n,): block j gives value j (its high word from x1)."""
  x0, x1 = _blocks(T, n, device)
  return (x1.cast(U64) << 32) | x0.cast(U64)

# [0, 1) from random bits: the top mantissa bits under the exponent of 1.0 give a float in [1, 2); subtracting 1 is exact
_UNIT = {dtypes.float32: (U32, 9, 0x3F800000), dtypes.float16: (dtypes.uint16, 6, 0x3C00), dtypes.bfloat16: (dtypes.uint16, 9, 0x3F80),
         dtypes.float64: (U64, 12, 0x3FF0000000000000)}

def _unit(T: type[Tensor], n: int, dtype: DType, device: str) -> Tensor:
  """n floats of dtype uniform in [0, 1), with every mantissa bit random (float64: 52 bits)."""
  bits_t, shift, one = _UNIT[dtype]
  if dtype is dtypes.float64: bits = random_u64(T, n, device)
  elif bits_t is U32: bits = random_words(T, n, device)
  else: bits = (random_words(T, n, device) >> 16).cast(bits_t)  # 16-bit types: the top half of each word
  return ((bits >> shift) | one).bitcast(dtype) - 1.0

def _float_dtype(dtype: Any, op: str) -> DType:
  dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
  if not dtypes.is_float(dt): raise DTypeError(f"{op} makes floats: dtype {dt!r} is not a float type")
  return dt

def _finite(v: Any, what: str) -> float:
  if isinstance(v, bool) or not isinstance(v, (int, float)) and not hasattr(v, "__float__"):
    raise ArgumentTypeError(f"{what} must be a number, got {type(v).__name__} {v!r}")
  if not math.isfinite(float(v)): raise ArgumentValueError(f"{what} must be finite, got {v}")
  return float(v)

def _fan_in(shape: tuple[int, ...], op: str) -> int:
  if not shape: raise ArgumentValueError(f"{op} needs a shape of at least one dimension")
  return math.prod(shape[1:])

def _uniform(cls: Any, shape: tuple, dt: DType, device: str | None) -> Any:
  """Uniform in [0, 1) of shape and float dtype dt, lazy: what rand returns and randn, uniform, normal and dropout build on
  (not through cls.rand, so a subclass's or a test's rand doesn't change them: tinygrad's randn doesn't call rand either)."""
  t = cls.zeros(shape, dtype=dt, device=device)  # the device and, for an empty shape, the result
  if t.numel() == 0: return t
  return _unit(cls, t.numel(), dt, t.device).reshape(shape)

class RandomMixin:
  """Tensor's random creation methods (tinygrad's and torch's names and defaults): classmethods, so cls is the Tensor class."""
  __slots__ = ()

  @classmethod
  def manual_seed(cls, seed: int = 0) -> None:
    """Restart every device's random numbers from `seed` (any integer; taken modulo 2**64)."""
    generator.reseed(cls, as_int(seed, "seed") % 2**64)

  @classmethod
  def rand(cls, *shape, device: str | None = None, dtype: DType | None = None, contiguous: bool = True, **kwargs) -> Tensor:
    """Uniform in [0, 1), of a float dtype (default float32)."""
    shape, dt = shape_arg(shape), _float_dtype(dtype, "rand")
    if isinstance(device, (tuple, list)):
      raise ArgumentValueError(f"rand on several devices {tuple(device)}: make it on one and .shard() it (or rand_like a tensor on them)")
    out = _uniform(cls, shape, dt, device)
    return cls((out.contiguous() if contiguous and out.numel() else out).uop, **kwargs)

  @classmethod
  def randn(cls, *shape, device: str | None = None, dtype: DType | None = None, **kwargs) -> Tensor:
    """Standard normal (mean 0, std 1), by Box-Muller on two uniforms, computed in float32 (float64 for float64)."""
    shape, dt = shape_arg(shape), _float_dtype(dtype, "randn")
    wide = dtypes.float64 if dt is dtypes.float64 else dtypes.float32
    u = _uniform(cls, (2,) + shape, wide, device)
    radius = ((1 - u[0]).log() * -2).sqrt()               # 1 - u is in (0, 1]: the log is finite
    return cls((radius * (u[1] * (2 * math.pi)).cos()).cast(dt).contiguous().uop, **kwargs)

  @classmethod
  def randint(cls, *shape, low: int = 0, high: int = 10, device: str | None = None, dtype: DType | None = None, **kwargs) -> Tensor:
    """Integers uniform in [low, high). A range up to 2**32 maps a 32-bit word by multiply-and-shift (bias below
    range / 2**32); a wider one takes a 64-bit value modulo the range (bias below range / 2**64)."""
    shape = shape_arg(shape)
    low, high = as_int(low, "randint low"), as_int(high, "randint high")
    dt = to_dtype(dtype) if dtype is not None else dtypes.int32
    if not dtypes.is_int(dt): raise DTypeError(f"randint makes integers: dtype {dt!r} is not an integer type")
    if low >= high: raise ArgumentValueError(f"randint needs low < high, got low={low} high={high}")
    if low < dtypes.min(dt) or high - 1 > dtypes.max(dt):
      raise ArgumentValueError(f"randint range [{low}, {high}) does not fit {dt!r}")
    t = cls.zeros(shape, dtype=dt, device=device)
    if t.numel() == 0: return cls(t.uop, **kwargs)
    span = high - low
    if span <= 2**32: offset = (random_words(cls, t.numel(), t.device).cast(U64) * span) >> 32
    else: offset = random_u64(cls, t.numel(), t.device) % span
    # low + offset in uint64 wraps to the right two's-complement value for a negative low
    out = (offset + low % 2**64).cast(dt)
    return cls(out.reshape(shape).contiguous().uop, **kwargs)

  @classmethod
  def uniform(cls, *shape, low: float = 0.0, high: float = 1.0, device: str | None = None, dtype: DType | None = None, **kwargs) -> Tensor:
    """Uniform in [low, high)."""
    lo, hi = _finite(low, "uniform low"), _finite(high, "uniform high")
    dt = _float_dtype(dtype, "uniform")
    u = _uniform(cls, shape_arg(shape), dtypes.float64 if dt is dtypes.float64 else dtypes.float32, device)
    return cls((u * (hi - lo) + lo).cast(dt).contiguous().uop, **kwargs)

  @classmethod
  def normal(cls, *shape, mean: float = 0.0, std: float = 1.0, device: str | None = None, dtype: DType | None = None, **kwargs) -> Tensor:
    """Normal with the given mean and standard deviation."""
    mean, std = _finite(mean, "normal mean"), _finite(std, "normal std")
    if std < 0: raise ArgumentValueError(f"normal std must be >= 0, got {std}")
    dt = _float_dtype(dtype, "normal")
    z = cls.randn(*shape_arg(shape), device=device, dtype=dtypes.float64 if dt is dtypes.float64 else dtypes.float32)
    return cls((z * std + mean).cast(dt).uop, **kwargs)

  def rand_like(self: Tensor, **kwargs) -> Tensor:
    dt = kwargs.pop("dtype", None) or (self.dtype if dtypes.is_float(self.dtype) else dtypes.default_float)
    return self._made_like(kwargs.pop("device", None), lambda d: self.rand(*self.shape, device=d, dtype=dt, **kwargs))

  def randn_like(self: Tensor, **kwargs) -> Tensor:
    dt = kwargs.pop("dtype", None) or (self.dtype if dtypes.is_float(self.dtype) else dtypes.default_float)
    return self._made_like(kwargs.pop("device", None), lambda d: self.randn(*self.shape, device=d, dtype=dt, **kwargs))

  # ---- initializers (tinygrad's definitions; fan_in is the product of the dims after the first) ----
  @classmethod
  def scaled_uniform(cls, *shape, **kwargs) -> Tensor:
    """Uniform in [-1, 1) scaled by 1/sqrt(numel)."""
    shape = shape_arg(shape)
    scale = max(math.prod(shape), 1) ** -0.5
    return cls.uniform(*shape, low=-scale, high=scale, **kwargs)

  @classmethod
  def glorot_uniform(cls, *shape, **kwargs) -> Tensor:
    """Uniform in +-sqrt(6 / (fan_in + fan_out)), fan_out the first dim (Glorot & Bengio, 2010)."""
    shape = shape_arg(shape)
    bound = math.sqrt(6 / max(shape[0] + _fan_in(shape, "glorot_uniform"), 1))
    return cls.uniform(*shape, low=-bound, high=bound, **kwargs)

  @classmethod
  def kaiming_uniform(cls, *shape, a: float = 0.01, **kwargs) -> Tensor:
    """Uniform in +-gain * sqrt(3 / fan_in) with gain sqrt(2 / (1 + a**2)) (He et al., 2015; a is the leaky slope)."""
    shape = shape_arg(shape)
    bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + _finite(a, "a") ** 2)) / math.sqrt(max(_fan_in(shape, "kaiming_uniform"), 1))
    return cls.uniform(*shape, low=-bound, high=bound, **kwargs)

  @classmethod
  def kaiming_normal(cls, *shape, a: float = 0.01, **kwargs) -> Tensor:
    """Normal with std gain / sqrt(fan_in), gain sqrt(2 / (1 + a**2))."""
    shape = shape_arg(shape)
    std = math.sqrt(2.0 / (1 + _finite(a, "a") ** 2)) / math.sqrt(max(_fan_in(shape, "kaiming_normal"), 1))
    return cls.normal(*shape, mean=0.0, std=std, **kwargs)

  @classmethod
  def randperm(cls, n: int, device: str | None = None, dtype: DType | None = None, **kwargs) -> Tensor:
    """A random permutation of 0..n-1 (the argsort of n uniform numbers; int32 by default, as tinygrad)."""
    n = as_int(n, "randperm n")
    if n < 0: raise ArgumentValueError(f"randperm n must be >= 0, got {n}")
    return cls.rand(n, device=device, **kwargs).argsort().cast(dtype if dtype is not None else dtypes.int32)

  def multinomial(self: Tensor, num_samples: int = 1, replacement: bool = False) -> Tensor:
    """num_samples indices (int32) drawn from each row of weights self (1-D or 2-D): with replacement by inverting the
    cumulative distribution, without it by the keys u^(1/w) (Efraimidis-Spirakis: the k largest are a weighted draw)."""
    num_samples = as_int(num_samples, "multinomial num_samples")
    if not 1 <= self.ndim <= 2: raise ShapeError(f"multinomial takes 1-D or 2-D weights, got shape {self.shape}")
    if num_samples < 1: raise ArgumentValueError(f"multinomial num_samples must be positive, got {num_samples}")
    w = (self.unsqueeze(0) if self.ndim == 1 else self).float()
    if not replacement and num_samples > w.shape[1]:
      raise ArgumentValueError(f"multinomial without replacement can draw at most {w.shape[1]} samples, asked for {num_samples}")
    if replacement or num_samples == 1:
      cdf = w.cumsum(1)
      cdf = cdf / cdf[:, -1:]
      u = self.rand(w.shape[0], num_samples, 1, device=self.device)
      idx = (u >= cdf.unsqueeze(1)).sum(2).minimum(w.shape[1] - 1)  # (rows, samples)
    else: idx = (self.rand(*w.shape, device=self.device).log() / w).topk(num_samples, dim=1)[1]
    return (idx.squeeze(0) if self.ndim == 1 else idx).cast(dtypes.int32)

  def dropout(self: Tensor, p: float = 0.5) -> Tensor:
    """In training (Tensor.training), zero each element with probability p and scale the rest by 1/(1-p); else self."""
    p = _finite(p, "dropout p")
    if not 0 <= p <= 1: raise ArgumentValueError(f"dropout p must be in [0, 1], got {p}")
    if not self.training or p == 0: return self
    if p == 1: return self.zeros_like()
    keep = self._made_like(None, lambda d: _uniform(type(self), self.shape, dtypes.default_float, d)) >= p
    return keep.where(self, 0) * (1 / (1 - p))
