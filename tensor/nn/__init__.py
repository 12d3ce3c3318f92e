"""nn: layers as plain classes whose tensors are attributes (so get_state_dict finds them) and whose `__call__` is the
forward pass, built on Tensor methods. Initial values follow torch's (and tinygrad's) defaults. Submodules: optim
(optimizers), state (state dicts and safetensors files), datasets (MNIST, digits), progress (a progress bar).

  model = [nn.Linear(784, 128), Tensor.relu, nn.Linear(128, 10)]
  logits = x.sequential(model)
"""
from __future__ import annotations
import math
from typing import Sequence
import numpy as np
from runtime.dtype import dtypes
from tensor.tensor import Tensor
from tensor.nn import datasets, optim, state  # noqa: F401

def _tuple(x: int | Sequence[int], n: int) -> tuple[int, ...]: return (x,) * n if isinstance(x, int) else tuple(x)

def _stat(value: float, shape: tuple[int, ...], dtype=dtypes.float32) -> Tensor:
  """A statistic a layer updates with assign (running mean, batch count): in memory from the start, never trained."""
  t = Tensor(np.full(shape, value, dtypes.to_numpy(dtype)), dtype=dtype).realize()
  t.requires_grad = False
  return t

def _per_channel(x: Tensor, t: Tensor) -> Tensor:
  return t.reshape(1, -1, *[1] * (x.ndim - 2))  # (C,) -> (1, C, 1, ...) against x (N, C, ...)

class Linear:
  """y = x @ weight.T + bias, weight (out_features, in_features); weight and bias uniform in +-1/sqrt(in_features)."""
  def __init__(self, in_features: int, out_features: int, bias: bool = True):
    bound = 1 / math.sqrt(in_features)
    # kaiming_uniform with a=sqrt(5) is uniform in +-1/sqrt(fan_in): torch's default for Linear and Conv
    self.weight = Tensor.kaiming_uniform(out_features, in_features, a=math.sqrt(5))
    self.bias = Tensor.uniform(out_features, low=-bound, high=bound) if bias else None
  def __call__(self, x: Tensor) -> Tensor:
    if x.shape[-1:] != self.weight.shape[1:]:
      n_in, n_out = self.weight.shape[1], self.weight.shape[0]
      raise ValueError(f"Linear({n_in}, {n_out}) got an input of shape {x.shape}: its last dimension must be {n_in}")
    out = x @ self.weight.T
    return out + self.bias if self.bias is not None else out

class Conv2d:
  """A convolution over the last len(kernel_size) axes of (N, C, ...) inputs (2 for a kernel_size int): weight
  (out_channels, in_channels/groups, *kernel_size). padding: an int, a tuple per axis, a flat (left, right, top, bottom)
  tuple as Tensor.conv2d takes, or "same" / "valid"."""
  def __init__(self, in_channels: int, out_channels: int, kernel_size: int | Sequence[int], stride: int | Sequence[int] = 1,
               padding: int | Sequence[int] | str = 0, dilation: int | Sequence[int] = 1, groups: int = 1, bias: bool = True):
    if in_channels % groups or out_channels % groups:
      raise ValueError(f"in_channels ({in_channels}) and out_channels ({out_channels}) must both be divisible by groups ({groups})")
    self.kernel_size = _tuple(kernel_size, 2)
    self.stride, self.dilation, self.groups = stride, dilation, groups
    self.padding = _conv_padding(padding, self.kernel_size, dilation, stride)
    fan_in = in_channels // groups * math.prod(self.kernel_size)
    self.weight = Tensor.kaiming_uniform(out_channels, in_channels // groups, *self.kernel_size, a=math.sqrt(5))
    self.bias = Tensor.uniform(out_channels, low=-1 / math.sqrt(fan_in), high=1 / math.sqrt(fan_in)) if bias else None
  def __call__(self, x: Tensor) -> Tensor:
    return x.conv2d(self.weight, self.bias, groups=self.groups, stride=self.stride, dilation=self.dilation, padding=self.padding)

def _conv_padding(padding, kernel_size: tuple[int, ...], dilation, stride):
  if not isinstance(padding, str): return padding
  if padding.lower() == "valid": return 0
  if padding.lower() != "same": raise ValueError(f"padding {padding!r}: the strings a convolution takes are 'same' and 'valid'")
  if stride != 1 and _tuple(stride, len(kernel_size)) != (1,) * len(kernel_size):
    raise ValueError("padding='same' needs stride 1 (the output of a strided convolution can't have the input's size)")
  # as torch: the total d*(k-1) split with the odd one after; flat pairs, last axis first, as Tensor.pad takes them
  pairs = [(d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2) for k, d in zip(kernel_size, _tuple(dilation, len(kernel_size)))]
  return tuple(p for pair in reversed(pairs) for p in pair)

def Conv1d(in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, padding: int | str = 0, dilation: int = 1, groups: int = 1,
           bias: bool = True) -> Conv2d:
  """A convolution over the last axis of (N, C, L) inputs."""
  return Conv2d(in_channels, out_channels, (kernel_size,), stride, padding, dilation, groups, bias)

class ConvTranspose2d(Conv2d):
  """The transpose (gradient) of a convolution: weight (in_channels, out_channels/groups, *kernel_size)."""
  def __init__(self, in_channels: int, out_channels: int, kernel_size: int | Sequence[int], stride: int | Sequence[int] = 1,
               padding: int | Sequence[int] = 0, output_padding: int | Sequence[int] = 0, dilation: int | Sequence[int] = 1, groups: int = 1,
               bias: bool = True):
    if isinstance(padding, str): raise ValueError(f"ConvTranspose2d takes numeric padding, not {padding!r}")
    super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias)
    # torch takes fan_in from dim 1 of this weight: out_channels/groups * kernel elements
    fan_in = out_channels // groups * math.prod(self.kernel_size)
    self.weight = Tensor.kaiming_uniform(in_channels, out_channels // groups, *self.kernel_size, a=math.sqrt(5))
    self.bias = Tensor.uniform(out_channels, low=-1 / math.sqrt(fan_in), high=1 / math.sqrt(fan_in)) if bias else None
    self.output_padding = output_padding
  def __call__(self, x: Tensor) -> Tensor:
    return x.conv_transpose2d(self.weight, self.bias, groups=self.groups, stride=self.stride, dilation=self.dilation, padding=self.padding,
                              output_padding=self.output_padding)

def ConvTranspose1d(in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, padding: int = 0, output_padding: int = 0,
                    dilation: int = 1, groups: int = 1, bias: bool = True) -> ConvTranspose2d:
  return ConvTranspose2d(in_channels, out_channels, (kernel_size,), stride, padding, output_padding, dilation, groups, bias)

class BatchNorm:
  """Normalizes each channel (axis 1) of (N, C, ...) inputs by its mean and variance over the other axes.

  In training (Tensor.training) it uses the batch's statistics and, with track_running_stats, moves the running ones
  toward them by momentum (the running variance unbiased, as torch; momentum=None: a cumulative average). In eval it
  uses the running statistics (the batch's without track_running_stats)."""
  def __init__(self, sz: int, eps: float = 1e-5, affine: bool = True, track_running_stats: bool = True, momentum: float | None = 0.1):
    self.num_features, self.eps, self.track_running_stats, self.momentum = sz, eps, track_running_stats, momentum
    self.weight: Tensor | None = Tensor.ones(sz) if affine else None
    self.bias: Tensor | None = Tensor.zeros(sz) if affine else None
    if track_running_stats:
      self.running_mean, self.running_var = _stat(0.0, (sz,)), _stat(1.0, (sz,))
      self.num_batches_tracked = _stat(0, (), dtypes.int64)

  def calc_stats(self, x: Tensor) -> tuple[Tensor, Tensor]:
    """(mean, biased variance) per channel, each (C,): the running ones in eval, the batch's otherwise."""
    if self.track_running_stats and not Tensor.training: return self.running_mean, self.running_var
    axes = tuple(a for a in range(x.ndim) if a != 1)
    mean = x.mean(axis=axes)
    # the mean detached inside the variance: d(var)/d(mean) is zero anyway, and it keeps the gradient graph small
    var = (x - _per_channel(x, mean.detach())).square().mean(axis=axes)
    return mean, var

  def __call__(self, x: Tensor) -> Tensor:
    if x.ndim < 2 or x.shape[1] != self.num_features:
      raise ValueError(f"BatchNorm({self.num_features}) needs inputs (N, {self.num_features}, ...), got shape {x.shape}")
    mean, var = self.calc_stats(x)
    if self.track_running_stats and Tensor.training:
      n = x.numel() // x.shape[1]
      if n < 2: raise ValueError(f"BatchNorm in training needs more than one value per channel, got input shape {x.shape}")
      m = self.momentum if self.momentum is not None else 1 / (self.num_batches_tracked.cast(dtypes.float32) + 1)
      self.running_mean.assign((1 - m) * self.running_mean + m * mean.detach())
      self.running_var.assign((1 - m) * self.running_var + m * var.detach() * (n / (n - 1)))
      self.num_batches_tracked.assign(self.num_batches_tracked + 1)
    # 1/sqrt(var + eps) per channel in a kernel of its own: not a square root at every element of every kernel reading it
    return x.batchnorm(self.weight, self.bias, mean, (var + self.eps).rsqrt().contiguous())
BatchNorm1d = BatchNorm2d = BatchNorm3d = BatchNorm

class LayerNorm:
  """Normalizes over the last len(normalized_shape) axes, then scales and shifts elementwise (elementwise_affine)."""
  def __init__(self, normalized_shape: int | Sequence[int], eps: float = 1e-5, elementwise_affine: bool = True):
    self.normalized_shape: tuple[int, ...] = _tuple(normalized_shape, 1)
    self.axis, self.eps = tuple(-1 - i for i in range(len(self.normalized_shape))), eps
    self.weight: Tensor | None = Tensor.ones(*self.normalized_shape) if elementwise_affine else None
    self.bias: Tensor | None = Tensor.zeros(*self.normalized_shape) if elementwise_affine else None
  def __call__(self, x: Tensor) -> Tensor:
    if x.shape[-len(self.normalized_shape):] != self.normalized_shape:
      raise ValueError(f"LayerNorm{self.normalized_shape} got an input of shape {x.shape}: its last dimensions must be {self.normalized_shape}")
    x = x.layernorm(eps=self.eps, axis=self.axis)
    return x if self.weight is None or self.bias is None else x * self.weight + self.bias

class LayerNorm2d(LayerNorm):
  """LayerNorm over the channels of (N, C, H, W) inputs."""
  def __call__(self, x: Tensor) -> Tensor: return super().__call__(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)

class RMSNorm:
  """x / sqrt(mean(x^2) + eps) over the last axis (computed in float32), times weight."""
  def __init__(self, dim: int, eps: float = 1e-6, elementwise_affine: bool = True):
    self.eps = eps
    self.weight: Tensor | None = Tensor.ones(dim) if elementwise_affine else None
  def _norm(self, x: Tensor) -> Tensor: return x * (x.square().mean(-1, keepdim=True) + self.eps).rsqrt()
  def __call__(self, x: Tensor) -> Tensor:
    x = self._norm(x.float()).cast(x.dtype)
    return x if self.weight is None else x * self.weight

class GroupNorm:
  """Normalizes each group of num_channels/num_groups channels of (N, C, ...) inputs, then scales and shifts per channel."""
  def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True):
    if num_channels % num_groups: raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
    self.num_groups, self.num_channels, self.eps = num_groups, num_channels, eps
    self.weight: Tensor | None = Tensor.ones(num_channels) if affine else None
    self.bias: Tensor | None = Tensor.zeros(num_channels) if affine else None
  def __call__(self, x: Tensor) -> Tensor:
    if x.ndim < 2 or x.shape[1] != self.num_channels:
      raise ValueError(f"GroupNorm({self.num_groups}, {self.num_channels}) needs inputs (N, {self.num_channels}, ...), got shape {x.shape}")
    x = x.reshape(x.shape[0], self.num_groups, -1).layernorm(eps=self.eps).reshape(x.shape)
    if self.weight is None or self.bias is None: return x
    return x * _per_channel(x, self.weight) + _per_channel(x, self.bias)

class InstanceNorm:
  """Normalizes each channel of each sample of (N, C, ...) inputs over its other axes, then scales and shifts per channel."""
  def __init__(self, num_features: int, eps: float = 1e-5, affine: bool = True):
    self.num_features, self.eps = num_features, eps
    self.weight: Tensor | None = Tensor.ones(num_features) if affine else None
    self.bias: Tensor | None = Tensor.zeros(num_features) if affine else None
  def __call__(self, x: Tensor) -> Tensor:
    if x.ndim < 3 or x.shape[1] != self.num_features:
      raise ValueError(f"InstanceNorm({self.num_features}) needs inputs (N, {self.num_features}, ...), got shape {x.shape}")
    x = x.reshape(x.shape[0], self.num_features, -1).layernorm(eps=self.eps).reshape(x.shape)
    if self.weight is None or self.bias is None: return x
    return x * _per_channel(x, self.weight) + _per_channel(x, self.bias)

class Embedding:
  """A table of vocab_size vectors of embed_size: idx (any shape, integers) -> idx.shape + (embed_size,). An index outside
  [0, vocab_size) gives a vector of zeros."""
  def __init__(self, vocab_size: int, embed_size: int):
    self.vocab_sz, self.embed_sz = vocab_size, embed_size
    self.weight = Tensor.glorot_uniform(vocab_size, embed_size)
  def __call__(self, idx: Tensor) -> Tensor:
    if not dtypes.is_int(idx.dtype): raise TypeError(f"Embedding indices must be integers, got dtype {idx.dtype.name}")
    return idx.embedding(self.weight)  # a gather: a load of each row, not a sum over the vocabulary

class LSTMCell:
  """One step of an LSTM: (x (N, input_size), (h, c) each (N, hidden_size) or None for zeros) -> (h', c')."""
  def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
    stdv = 1.0 / math.sqrt(hidden_size)
    self.hidden_size = hidden_size
    self.weight_ih = Tensor.uniform(hidden_size * 4, input_size, low=-stdv, high=stdv)
    self.weight_hh = Tensor.uniform(hidden_size * 4, hidden_size, low=-stdv, high=stdv)
    self.bias_ih: Tensor | None = Tensor.uniform(hidden_size * 4, low=-stdv, high=stdv) if bias else None
    self.bias_hh: Tensor | None = Tensor.uniform(hidden_size * 4, low=-stdv, high=stdv) if bias else None
  def __call__(self, x: Tensor, hc: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
    if hc is None: hc = (Tensor.zeros(x.shape[0], self.hidden_size, dtype=x.dtype, device=x.device),) * 2
    h, c = hc
    gates = x @ self.weight_ih.T + h @ self.weight_hh.T                            # (N, 4H): input, forget, cell, output
    if self.bias_ih is not None and self.bias_hh is not None: gates = gates + self.bias_ih + self.bias_hh
    n, H = gates.shape[0], self.hidden_size
    i, f, g, o = (gates.shrink(((0, n), (k * H, (k + 1) * H))) for k in range(4))
    new_c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return o.sigmoid() * new_c.tanh(), new_c

class Dropout:
  """Zeroes each value with probability p and scales the rest by 1/(1-p), in training (Tensor.training) only."""
  def __init__(self, p: float = 0.5):
    if not 0 <= p <= 1: raise ValueError(f"Dropout probability must be in [0, 1], got {p}")
    self.p = p
  def __call__(self, x: Tensor) -> Tensor: return x.dropout(self.p) if Tensor.training and self.p > 0 else x
