"""Max and average pooling over the last 1, 2 or 3 axes (the sliding windows of tensor/functional/conv.py, reduced),
max pooling's indices and max_unpool, the partial inverse that puts each maximum back where it came from.
"""
from __future__ import annotations
import math
from typing import TYPE_CHECKING, Any
from runtime.dtype import dtypes, least_upper_float
from runtime.ops import GroupOp, Ops
from runtime.uop import uop
from tensor.functional.args import int_tuple, pad_pairs, shape_error, type_error, value_error
from tensor.functional.conv import windows

if TYPE_CHECKING: from tensor.tensor import Tensor

def _pool_args(x: Tensor, kernel_size, stride, dilation, padding, ceil_mode: bool, nd: int, name: str):
  """Kernel, stride, dilation, the (before, after) pads and the output size of each pooled axis, as torch computes them."""
  kernel = int_tuple(kernel_size, len(kernel_size) if isinstance(kernel_size, (tuple, list)) else nd, f"{name}: kernel_size", 1)
  n = len(kernel)
  if x.ndim < n: raise shape_error(f"{name}: input of shape {x.shape} has fewer dims than the kernel {kernel}")
  st = kernel if stride is None or (isinstance(stride, (tuple, list)) and not stride) else int_tuple(stride, n, f"{name}: stride", 1)
  dl = int_tuple(dilation, n, f"{name}: dilation", 1)
  pads = pad_pairs(padding, n, f"{name}: padding")
  if any(b < 0 or a < 0 or b > k // 2 or a > k // 2 for (b, a), k in zip(pads, kernel)):
    raise value_error(f"{name}: padding {padding!r} must be between 0 and half the kernel size {kernel}")
  spatial = x.shape[-n:]
  outs = []
  for i, k, s, d, (b, a) in zip(spatial, kernel, st, dl, pads):
    span = i + b + a - d * (k - 1) - 1  # how far the first window can slide
    if span < 0: raise shape_error(f"{name}: input of shape {x.shape} padded by {pads} is smaller than the kernel {kernel} dilated by {dl}")
    o = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (o - 1) * s >= i + b: o -= 1  # as torch: the last window must start inside the input or the left padding
    outs.append(o)
  return kernel, st, dl, pads, tuple(outs)

def _pooled(x: Tensor, kernel, st, dl, pads, outs, fill) -> Tensor:
  """x padded with `fill` (and cut or padded on the right so exactly `outs` windows fit), as windows (..., *outs, *kernel)."""
  n = len(kernel)
  spatial = x.shape[-n:]
  # the right pad that makes the last window end at the input's end: ceil_mode adds to it, a short stride cuts from it
  right = [(o - 1) * s + d * (k - 1) + 1 - i - b for o, s, d, k, i, (b, _) in zip(outs, st, dl, kernel, spatial, pads)]
  x = x.pad([(0, 0)] * (x.ndim - n) + [(b, r) for (b, _), r in zip(pads, right)], value=fill)
  return windows(x, kernel, st, dl)

# pooled outputs of fewer pixels stay channels-first (see _max_pool)
CHANNELS_LAST_MIN_PIXELS = 16

def _reads_channels_last(x: Tensor) -> bool:
  """Whether x's values come, through elementwise and movement ops, from a stored tensor viewed with its last axis moved
  to axis 1 (tensor/functional/conv_graph.py's GEMM output, (N, *spatial, C) viewed as (N, C, *spatial))."""
  last = tuple(range(x.ndim))
  order = (0, x.ndim - 1, *range(1, x.ndim - 1))
  stack, seen = [x.uop], set()
  while stack:
    u = stack.pop()
    if u in seen: continue
    seen.add(u)
    if u.op is Ops.PERMUTE and u.arg == order and u.src[0].op in (Ops.CONTIGUOUS, Ops.RESHAPE, Ops.BUFFER): return True
    if u.op in GroupOp.Elementwise or (u.op in GroupOp.Movement and u.shape is not None and len(u.shape) == len(last)) or \
       u.op in (Ops.CONTIGUOUS_BACKWARD, Ops.CONV, Ops.DETACH):
      stack.extend(u.src)
  return False

def _max_pool(x: Tensor, kernel_size, stride, dilation, padding, ceil_mode, return_indices, nd: int, name: str):
  kernel, st, dl, pads, outs = _pool_args(x, kernel_size, stride, dilation, padding, ceil_mode, nd, name)
  n = len(kernel)
  axes = tuple(range(-n, 0))
  lowest = -math.inf if dtypes.is_float(x.dtype) else dtypes.min(x.dtype)
  # the gradient to x (each window's g shared among its maxima) is stored by one kernel, not fused into every kernel reading
  # it (a BatchNorm's backward before the pool reads it in four); a batch of channels (N, C, *spatial) stores it
  # channels-last, the layout of a conv's GEMM output and of the gradient the GEMMs read (each kernel then reads and
  # writes along the channels)
  if not return_indices and dtypes.is_float(x.dtype) and x.ndim >= 3:
    cl = x.ndim == n + 2
    if cl: x = x.permute(0, *range(2, x.ndim), 1)
    x = type(x)(uop(Ops.CONTIGUOUS_BACKWARD, x.dtype, (x.uop,)))
    if cl: x = x.permute(0, x.ndim - 1, *range(1, x.ndim - 1))
  pooled = _pooled(x, kernel, st, dl, pads, outs, lowest)                               # (..., *out, *k)
  if not return_indices and x.ndim == n + 2 and math.prod(outs) >= CHANNELS_LAST_MIN_PIXELS and dtypes.is_float(x.dtype) and \
     _reads_channels_last(x):
    # a batch of channels computed from channels-last data (a conv's GEMM output) is pooled channels-last: the maximum's
    # own layout (where a kernel storing it, the backward's or the next conv's input copy, reads and writes along the
    # channels), viewed back. A few pixels (the seeds' CNN's last 3x3) are more likely flattened into a linear layer,
    # whose GEMM wants them channels-first
    d = pooled.ndim
    best = pooled.permute(0, *range(2, 2 + n), 1, *range(2 + n, d)).max(axes)             # (N, *out, C)
    return best.permute(0, n + 1, *range(1, n + 1))
  best = pooled.max(axes)
  if not return_indices: return best
  # The first maximum of a window is the one with the smallest flat index (indices grow along the window), so the
  # index is the min over the window of where(is max, index, past the end). nan counts as a maximum, as max propagates it.
  spatial = x.shape[-n:]
  size = math.prod(spatial)
  # int32 as tinygrad (torch's are int64), int64 only for a plane past int32's range
  index = type(x).arange(size, dtype=dtypes.int32 if size < 2**31 - 1 else dtypes.int64, device=x.device).reshape(spatial)
  index = _pooled(index, kernel, st, dl, pads, outs, size)
  is_max = pooled == best.reshape(*best.shape, *[1] * n)
  if dtypes.is_float(x.dtype): is_max = is_max | pooled.isnan()
  return best, is_max.where(index, size).min(axes)

def _avg_pool(x: Tensor, kernel_size, stride, dilation, padding, ceil_mode, count_include_pad, divisor_override, nd: int,
              name: str) -> Tensor:
  kernel, st, dl, pads, outs = _pool_args(x, kernel_size, stride, dilation, padding, ceil_mode, nd, name)
  n = len(kernel)
  axes = tuple(range(-n, 0))
  x = x.cast(least_upper_float(x.dtype))
  total = _pooled(x, kernel, st, dl, pads, outs, 0).sum(axes)
  if divisor_override is not None:
    if divisor_override == 0: raise value_error(f"{name}: divisor_override must not be zero")
    return total / divisor_override
  spatial = x.shape[-n:]
  if all(p == (0, 0) for p in pads) and not ceil_mode: return total / math.prod(kernel)
  # the divisor of each window: how many of its taps fall on the input (or on the padding, when it counts)
  ones = type(x).ones(*spatial, dtype=x.dtype, device=x.device)
  if count_include_pad: ones = ones.pad(pads, value=1)
  count = _pooled(ones, kernel, st, dl, [(0, 0)] * n if count_include_pad else pads, outs, 0).sum(axes)
  return total / count

def _max_unpool(x: Tensor, indices: Tensor, kernel_size, stride, dilation, padding, output_size, nd: int, name: str) -> Tensor:
  kernel = int_tuple(kernel_size, len(kernel_size) if isinstance(kernel_size, (tuple, list)) else nd, f"{name}: kernel_size", 1)
  n = len(kernel)
  st = kernel if stride is None else int_tuple(stride, n, f"{name}: stride", 1)
  dl = int_tuple(dilation, n, f"{name}: dilation", 1)
  pads = pad_pairs(padding, n, f"{name}: padding")
  if indices.shape != x.shape: raise shape_error(f"{name}: indices of shape {indices.shape} don't fit input of shape {x.shape}")
  if not dtypes.is_int(indices.dtype): raise type_error(f"{name}: indices must be an integer tensor, got {indices.dtype}")
  if x.ndim < n: raise shape_error(f"{name}: input of shape {x.shape} has fewer dims than the kernel {kernel}")
  lead, spatial = x.shape[:-n], x.shape[-n:]
  default = tuple((i - 1) * s - b - a + d * (k - 1) + 1 for i, s, (b, a), d, k in zip(spatial, st, pads, dl, kernel))
  if output_size is None: size = default
  else:
    size = tuple(output_size)[-n:]
    # as torch: within a stride of the default either way
    if len(size) != n or any(not d - s < v < d + s for v, d, s in zip(size, default, st)):
      raise value_error(f"{name}: output_size {tuple(output_size)} must be within a stride {st} of {default} (exclusive) "
                        f"for input of shape {x.shape}")
  # Window o of tap t came from position o*stride + t*dilation - pad. For each tap, spread the values and their
  # indices onto the output grid at those positions (zeros between, as conv_transpose spreads its input) and keep
  # a value where its index names the position it landed on.
  def spread(src: Tensor, t: tuple[int, ...], fill) -> Tensor:
    if any(s > 1 for s in st):
      src = src.reshape(*lead, *[v for i in spatial for v in (i, 1)])
      src = src.pad([(0, 0)] * len(lead) + [p for s in st for p in ((0, 0), (0, s - 1))], value=fill)
      src = src.reshape(*lead, *[i * s for i, s in zip(spatial, st)])
    starts = [tk * d - b for tk, d, (b, _) in zip(t, dl, pads)]
    return src.pad([(0, 0)] * len(lead) + [(p0, o - p0 - w) for p0, o, w in zip(starts, size, src.shape[-n:])], value=fill)
  grid = type(x).arange(math.prod(size), dtype=dtypes.int64, device=x.device).reshape(size)
  idx = indices.cast(dtypes.int64)
  out = type(x).zeros(*lead, *size, dtype=x.dtype, device=x.device)
  for flat_t in range(math.prod(kernel)):
    t = tuple((flat_t // math.prod(kernel[j + 1:])) % kernel[j] for j in range(n))
    out = (spread(idx, t, -1) == grid).where(spread(x, t, 0), out)
  return out

class PoolMixin:
  __slots__ = ()
  def max_pool2d(self: Tensor, kernel_size: Any = (2, 2), stride=None, dilation=1, padding: Any = 0, ceil_mode: bool = False,
                 return_indices: bool = False):
    """The max over each window of the last len(kernel_size) axes (2 when kernel_size is an int), as torch's
    F.max_pool2d. return_indices: also the flat index, within each (*spatial) plane, of the first maximum of each
    window (int32, as tinygrad; torch's are int64; for max_unpool2d). A window that dilation leaves on padding only is -inf (the dtype's
    min for ints) at index prod(spatial), past the plane (torch gives another position past the input there)."""
    return _max_pool(self, kernel_size, stride, dilation, padding, ceil_mode, return_indices, 2, "max_pool2d")
  def max_pool1d(self: Tensor, kernel_size: Any, stride=None, padding: Any = 0, dilation=1, ceil_mode: bool = False,
                 return_indices: bool = False):
    return _max_pool(self, kernel_size, stride, dilation, padding, ceil_mode, return_indices, 1, "max_pool1d")
  def max_pool3d(self: Tensor, kernel_size: Any, stride=None, padding: Any = 0, dilation=1, ceil_mode: bool = False,
                 return_indices: bool = False):
    return _max_pool(self, kernel_size, stride, dilation, padding, ceil_mode, return_indices, 3, "max_pool3d")

  def avg_pool2d(self: Tensor, kernel_size: Any = (2, 2), stride=None, dilation=1, padding: Any = 0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """The mean over each window of the last len(kernel_size) axes, as torch's F.avg_pool2d (plus tinygrad's dilation).
    count_include_pad: the zero padding counts in the divisor (never the part of a ceil_mode window past the padding)."""
    return _avg_pool(self, kernel_size, stride, dilation, padding, ceil_mode, count_include_pad, divisor_override, 2, "avg_pool2d")
  def avg_pool1d(self: Tensor, kernel_size: Any, stride=None, padding: Any = 0, ceil_mode: bool = False,
                 count_include_pad: bool = True) -> Tensor:
    return _avg_pool(self, kernel_size, stride, 1, padding, ceil_mode, count_include_pad, None, 1, "avg_pool1d")
  def avg_pool3d(self: Tensor, kernel_size: Any, stride=None, padding: Any = 0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    return _avg_pool(self, kernel_size, stride, 1, padding, ceil_mode, count_include_pad, divisor_override, 3, "avg_pool3d")

  def max_unpool2d(self: Tensor, indices: Tensor, kernel_size: Any = (2, 2), stride=None, dilation=1, padding: Any = 0,
                   output_size=None) -> Tensor:
    """The partial inverse of max_pool2d: each value of self written at its index (from max_pool2d(return_indices=True)
    with the same kernel, stride, dilation and padding), zeros elsewhere, as torch's F.max_unpool2d. An index that does
    not lie in the window it was pooled from is dropped (max_pool2d never makes one)."""
    return _max_unpool(self, indices, kernel_size, stride, dilation, padding, output_size, 2, "max_unpool2d")
  def max_unpool1d(self: Tensor, indices: Tensor, kernel_size: Any, stride=None, padding: Any = 0, output_size=None) -> Tensor:
    return _max_unpool(self, indices, kernel_size, stride, 1, padding, output_size, 1, "max_unpool1d")
  def max_unpool3d(self: Tensor, indices: Tensor, kernel_size: Any, stride=None, padding: Any = 0, output_size=None) -> Tensor:
    return _max_unpool(self, indices, kernel_size, stride, 1, padding, output_size, 3, "max_unpool3d")
