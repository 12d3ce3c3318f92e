"""Convolutions of any number of spatial dims through one path: sliding windows made of movement ops (`windows`),
multiplied by the weight and summed, so a small conv is one reduction kernel (fused with its bias, activation and
pooling). A large one, or one whose output rows don't divide into vectors, is an implicit GEMM (`implicit_gemm`):
channels-last input and weight, so the codegen's matmul register tile applies. conv1d/conv2d/conv3d and the transposed
convs (zero-stuffed input, flipped weight) are thin wrappers. Mixed into Tensor by tensor/functional/__init__.py.
"""
from __future__ import annotations
import math
from typing import TYPE_CHECKING, Any
from runtime.ops import Ops
from tensor.functional.args import as_int, int_tuple, pad_pairs, shape_error, value_error

if TYPE_CHECKING: from tensor.tensor import Tensor

def windows(x: Tensor, kernel: tuple[int, ...], stride: tuple[int, ...], dilation: tuple[int, ...]) -> Tensor:
  """Sliding windows over the last len(kernel) axes: (..., *spatial) -> (..., *out, *kernel), where
  out = (spatial - dilation*(kernel-1) - 1) // stride + 1 and [..., o, t] is x[..., o*stride + t*dilation]."""
  n = len(kernel)
  lead, spatial = x.shape[:-n], x.shape[-n:]
  out = tuple((i - d * (k - 1) - 1) // s + 1 for i, k, s, d in zip(spatial, kernel, stride, dilation))
  keep = [(0, d) for d in lead]
  if all(k <= s for k, s in zip(kernel, stride)) and all(d == 1 for d in dilation):
    # windows that don't overlap: cut each axis into out blocks of `stride` and keep the first `kernel` of each block
    x = x.pad([(0, 0)] * len(lead) + [(0, o * s - i) for o, s, i in zip(out, stride, spatial)])  # negative widths crop
    x = x.reshape(*lead, *[v for o, s in zip(out, stride) for v in (o, s)])
    x = x.shrink(keep + [v for o, k in zip(out, kernel) for v in ((0, o), (0, k))])
  else:
    # Overlapping or dilated windows: repeat each axis e times end to end and read the repeats in rows of (i + d).
    # Row t starts at t*(i+d), which is t*d modulo i, so row t holds x shifted by t*d: the kernel taps as rows.
    reps = [math.ceil(k * (i + d) / i) for k, i, d in zip(kernel, spatial, dilation)]
    x = x.reshape(*lead, *[v for i in spatial for v in (1, i)])
    x = x.expand(*lead, *[v for e, i in zip(reps, spatial) for v in (e, i)])
    x = x.reshape(*lead, *[e * i for e, i in zip(reps, spatial)])
    x = x.shrink(keep + [(0, k * (i + d)) for k, i, d in zip(kernel, spatial, dilation)])
    x = x.reshape(*lead, *[v for k, i, d in zip(kernel, spatial, dilation) for v in (k, i + d)])
    # in each row, every stride-th element, out of them (a long stride may need the row padded: the pad is never read)
    x = x.pad([(0, 0)] * len(lead) + [v for o, s, i, d in zip(out, stride, spatial, dilation) for v in ((0, 0), (0, o * s - i - d))])
    x = x.reshape(*lead, *[v for k, o, s in zip(kernel, out, stride) for v in (k, o, s)])
    x = x.shrink(keep + [v for k, o in zip(kernel, out) for v in ((0, k), (0, o), (0, 1))])
    x = x.reshape(*lead, *[v for k, o in zip(kernel, out) for v in (k, o)])
    x = x.permute(*range(len(lead)), *[len(lead) + 2 * j + 1 for j in range(n)], *[len(lead) + 2 * j for j in range(n)])
    return x
  # (..., o0, k0, o1, k1, ...) -> (..., *out, *kernel)
  return x.permute(*range(len(lead)), *[len(lead) + 2 * j for j in range(n)], *[len(lead) + 2 * j + 1 for j in range(n)])

# Multiply-adds from which a conv runs as an implicit GEMM. Below, the one fused kernel is as fast (no layout copies, and
# the bias, activation and pooling fuse into it) when its output rows divide into vectors: it tiles them as a matmul's
# columns. Rows that don't (54, 30, 14 columns) leave that kernel gathering weights, 10x slower: from
# IMPLICIT_GEMM_UNALIGNED_MIN_MACS such a conv takes the GEMM (AVX-512, 1 thread: (8,16,32,32) x (32,16,3,3) 4.2 -> 42
# GFLOP/s, (8,16,16,16) x 32 6.8 -> 52; aligned (4,32,34,34) x 32 59 fused, 53 as a GEMM). conv2d (8,64,56,56) x
# (64,64,3,3) (860M) ran 5x faster as a GEMM. Module-level so tests can move them to run both paths at small sizes.
IMPLICIT_GEMM_MIN_MACS = 1 << 26
IMPLICIT_GEMM_UNALIGNED_MIN_MACS = 1 << 18
# the GEMM's vector columns are output channels (per group) and its reduction the input channels times the taps
IMPLICIT_GEMM_MIN_COUT = 16
IMPLICIT_GEMM_MIN_REDUCE = 32

def vector_floats(device: str) -> int:
  """The floats in one vector register of the device the kernels compile for (the PYTHON device: an AVX2 CPU's)."""
  from tensor.codegen.heuristic import VECTOR_CAPS
  from tensor.engine.state import ENGINE
  return max(1, (ENGINE.target(device).caps or VECTOR_CAPS).register_bytes // 4)

def use_implicit_gemm(bs: int, rcout: int, cin_g: int, groups: int, out: tuple[int, ...], kernel: tuple[int, ...], width: int) -> bool:
  """Whether a conv runs as an implicit GEMM: enough output channels and reduction for its tile, and enough work; less
  work when the output rows don't divide into vectors of `width` (the fused kernel's tile needs them to)."""
  red = cin_g * math.prod(kernel)
  macs = bs * groups * rcout * math.prod(out) * red
  return rcout >= IMPLICIT_GEMM_MIN_COUT and red >= IMPLICIT_GEMM_MIN_REDUCE and \
    (macs >= IMPLICIT_GEMM_MIN_MACS or macs >= IMPLICIT_GEMM_UNALIGNED_MIN_MACS and out[-1] % width != 0)

def contiguous_backward(t: Tensor) -> Tensor:
  """t itself; its gradient is made contiguous in t's layout (a kernel boundary with that store) before it flows on."""
  from runtime.uop import uop
  return type(t)(uop(Ops.CONTIGUOUS_BACKWARD, t.dtype, (t.uop,)))

def implicit_gemm(x: Tensor, weight: Tensor, bias: Tensor | None, groups: int, stride: tuple[int, ...], dilation: tuple[int, ...],
                  dtype: Any) -> Tensor:
  """x (bs, cin, *spatial) already padded, weight (cout, cin/groups, *kernel), bias (cout,) or None -> (bs, cout, *out)
  as a GEMM per group: out[n, *o, g, oc] = sum over the input channels c and taps k of
  x[n, g, c, *(o*stride + k*dilation)] * w[g, c, *k, oc]. The output channels are consecutive in the weight and the store
  (the tile's vector columns); the rows are output positions, which share the weights. An input already in memory (a
  realized buffer: no padding) is read in place, the taps innermost in the reduction (its steps read along one row of a
  channel); any other is copied channels-last first (with its padding: a kernel reading the padding through guards
  would not vectorize), the channels innermost. The result is made contiguous in that layout (a store with the GEMM's
  own strides), then viewed as (bs, cout, *out): a consumer reads it through the permute, or a copy makes it NCHW.
  Reading in place saves the copy (conv2d (8,64,56,56) x (64,64,3,3), 1 thread: 0.77x -> 0.88x torch)."""
  nd = len(stride)
  bs, cout, cin_g, kernel = x.shape[0], weight.shape[0], weight.shape[1], weight.shape[2:]
  rcout = cout // groups
  # the reduction's order, as axes of the windows (bs, g, cin_g, *out, *k) and of the weight (g, rcout, cin_g, *k):
  # (c, *k) in place, (*k, c) channels-last
  taps, wtaps = tuple(range(3 + nd, 3 + 2 * nd)), tuple(range(3, 3 + nd))
  in_place = x.is_realized()
  red, wred = ((2, *taps), (2, *wtaps)) if in_place else ((*taps, 2), (*wtaps, 2))
  if not in_place: x = x.permute(0, *range(2, 2 + nd), 1).contiguous().permute(0, 1 + nd, *range(1, 1 + nd))  # (bs, cin, *spatial)
  win = windows(x, kernel, stride, dilation)                                                  # (bs, cin, *out, *k)
  out = win.shape[2:2 + nd]
  win = win.reshape(bs, groups, cin_g, *out, *kernel).permute(0, *range(3, 3 + nd), 1, *red)    # (bs, *out, g, [red])
  win = win.reshape(bs, *out, groups, 1, *win.shape[2 + nd:])                                   # (bs, *out, g, 1, [red])
  w = weight.reshape(groups, rcout, cin_g, *kernel).permute(0, *wred, 1).contiguous()          # (g, [red], rcout)
  w = contiguous_backward(w)  # the weight's gradient is a GEMM too when stored in this layout (rcout consecutive)
  w = w.permute(0, 2 + nd, *range(1, 2 + nd)).reshape(1, *[1] * nd, groups, rcout, *w.shape[1:1 + 1 + nd])
  ret = (win * w).sum(tuple(range(-1 - nd, 0)), dtype=dtype)                                    # (bs, *out, g, rcout)
  if bias is not None: ret = ret + bias.reshape(groups, rcout)                                    # in the GEMM's kernel
  ret = contiguous_backward(ret.contiguous())  # the incoming gradient made channels-last: the weight gradient's vectors
  return ret.reshape(bs, *out, cout).permute(0, 1 + nd, *range(1, 1 + nd))

def _conv_pads(padding: Any, kernel: tuple[int, ...], stride: tuple[int, ...], dilation: tuple[int, ...], name: str) -> list[tuple[int, int]]:
  if isinstance(padding, str):
    if padding == "valid": return [(0, 0)] * len(kernel)
    if padding != "same": raise value_error(f"{name}: padding={padding!r} must be 'same', 'valid', an int or a tuple of ints")
    if any(s != 1 for s in stride): raise value_error(f"{name}: padding='same' is not supported for strided convolutions (stride={stride})")
    # as torch: the odd one of an uneven total goes after
    return [((d * (k - 1)) // 2, d * (k - 1) - (d * (k - 1)) // 2) for k, d in zip(kernel, dilation)]
  return pad_pairs(padding, len(kernel), f"{name}: padding")  # a negative width crops the input (tinygrad's; torch refuses)

def conv(x: Tensor, weight: Tensor, bias: Tensor | None, groups: Any, stride: Any, dilation: Any, pads: list[tuple[int, int]],
         dtype: Any, name: str) -> Tensor:
  """x (bs, cin, *spatial) or (cin, *spatial) with weight (cout, cin/groups, *kernel) and resolved (before, after) pads
  (negative ones crop) -> (bs, cout, *out)."""
  nd = weight.ndim - 2
  unbatched = x.ndim == nd + 1
  if unbatched: x = x.reshape(1, *x.shape)
  bs, cin, cout, cin_g, kernel = x.shape[0], x.shape[1], weight.shape[0], weight.shape[1], weight.shape[2:]
  if groups * cin_g != cin:
    raise shape_error(f"{name}: input of shape {x.shape} has {cin} channels but weight of shape {weight.shape} with groups={groups} "
                      f"takes {groups * cin_g} (groups * weight.shape[1])")
  if cout % groups: raise shape_error(f"{name}: weight of shape {weight.shape} has {cout} output channels, not divisible by groups={groups}")
  if bias is not None and bias.shape != (cout,):
    raise shape_error(f"{name}: bias of shape {bias.shape} does not fit weight of shape {weight.shape}: expected ({cout},)")
  stride, dilation = int_tuple(stride, nd, f"{name}: stride", 1), int_tuple(dilation, nd, f"{name}: dilation", 1)
  if any(i + b + a < d * (k - 1) + 1 for i, (b, a), k, d in zip(x.shape[2:], pads, kernel, dilation)):
    raise shape_error(f"{name}: input of shape {x.shape} padded by {pads} is smaller than the kernel of weight {weight.shape} "
                      f"dilated by {dilation}")
  x = x.pad([(0, 0), (0, 0), *pads])
  rcout = cout // groups
  out = tuple((i - d * (k - 1) - 1) // s + 1 for i, k, s, d in zip(x.shape[2:], kernel, stride, dilation))
  if use_implicit_gemm(bs, rcout, cin_g, groups, out, kernel, vector_floats(x.device)):
    ret = implicit_gemm(x, weight, bias, groups, stride, dilation, dtype)
    return ret.reshape(ret.shape[1:]) if unbatched else ret
  win = windows(x, kernel, stride, dilation)                                                # (bs, cin, *out, *k)
  win = win.reshape(bs, groups, cin_g, *out, *kernel).permute(0, 1, *range(3, 3 + nd), 2, *range(3 + nd, 3 + 2 * nd))
  win = win.reshape(bs, groups, 1, *out, cin_g, *kernel)                                      # (bs, g, 1, *out, cin_g, *k)
  w = weight.reshape(1, groups, rcout, *[1] * nd, cin_g, *kernel)                             # (1, g, rcout, 1.., cin_g, *k)
  ret = (win * w).sum(tuple(range(-1 - nd, 0)), dtype=dtype).reshape(bs, cout, *out)
  if bias is not None: ret = ret + bias.reshape(1, cout, *[1] * nd)
  return ret.reshape(ret.shape[1:]) if unbatched else ret

def _check_operands(x: Tensor, weight: Tensor, nd: int | None, name: str) -> int:
  if weight.ndim < 3: raise shape_error(f"{name}: weight of shape {weight.shape} must be (out_channels, in_channels/groups, *kernel)")
  n = weight.ndim - 2
  if nd is not None and n != nd: raise shape_error(f"{name}: weight of shape {weight.shape} has {n} spatial dims, expected {nd}")
  if x.ndim not in (n + 1, n + 2):
    raise shape_error(f"{name}: input of shape {x.shape} does not fit weight of shape {weight.shape}: expected a {n + 2}-d (batched) "
                      f"or {n + 1}-d (unbatched) input")
  return n

def _conv_nd(x: Tensor, weight: Tensor, bias, groups, stride, dilation, padding, dtype, nd: int | None, name: str) -> Tensor:
  n = _check_operands(x, weight, nd, name)
  groups = as_int(groups, f"{name}: groups")
  if groups < 1: raise value_error(f"{name}: groups={groups} must be at least 1")
  kernel = weight.shape[2:]
  st, dl = int_tuple(stride, n, f"{name}: stride", 1), int_tuple(dilation, n, f"{name}: dilation", 1)
  return conv(x, weight, bias, groups, st, dl, _conv_pads(padding, kernel, st, dl, name), dtype, name)

def _conv_transpose_nd(x: Tensor, weight: Tensor, bias, groups, stride, dilation, padding, output_padding, nd: int | None, name: str) -> Tensor:
  """The gradient of a conv with respect to its input: the input spread out by the stride (zeros between), padded by
  the dilated kernel minus `padding`, convolved with the weight flipped and with in/out channels swapped."""
  n = _check_operands(x, weight, nd, name)
  groups = as_int(groups, f"{name}: groups")
  if groups < 1: raise value_error(f"{name}: groups={groups} must be at least 1")
  cin, kernel = weight.shape[0], weight.shape[2:]
  if x.shape[-n - 1] != cin:
    raise shape_error(f"{name}: input of shape {x.shape} has {x.shape[-n - 1]} channels but weight of shape {weight.shape} takes {cin} "
                      "(weight.shape[0])")
  if cin % groups: raise shape_error(f"{name}: weight of shape {weight.shape} has {cin} input channels, not divisible by groups={groups}")
  st, dl = int_tuple(stride, n, f"{name}: stride", 1), int_tuple(dilation, n, f"{name}: dilation", 1)
  pads = pad_pairs(padding, n, f"{name}: padding")
  if any(b < 0 or a < 0 for b, a in pads): raise value_error(f"{name}: padding {padding!r} must not be negative")
  op = int_tuple(output_padding, n, f"{name}: output_padding", 0)
  if any(o >= max(s, d) for o, s, d in zip(op, st, dl)):
    raise value_error(f"{name}: output_padding {op} must be smaller than either stride {st} or dilation {dl}")
  spatial = x.shape[-n:]
  if any(i == 0 for i in spatial): raise shape_error(f"{name}: input of shape {x.shape} has an empty spatial dim")
  if any(s > 1 for s in st):  # (..., i) -> (..., i, 1) -> pad to (..., i, s) -> (..., i*s) -> the first (i-1)*s + 1
    lead = x.shape[:-n]
    x = x.reshape(*lead, *[v for i in spatial for v in (i, 1)])
    x = x.pad([(0, 0)] * len(lead) + [p for s in st for p in ((0, 0), (0, s - 1))])
    x = x.reshape(*lead, *[i * s for i, s in zip(spatial, st)])
    x = x.shrink([(0, d) for d in lead] + [(0, (i - 1) * s + 1) for i, s in zip(spatial, st)])
  g, cout_g = groups, weight.shape[1]
  w = weight.reshape(g, cin // g, cout_g, *kernel).permute(0, 2, 1, *range(3, 3 + n)).reshape(g * cout_g, cin // g, *kernel)
  w = w.flip(*range(2, 2 + n))
  full = [(d * (k - 1) - b, d * (k - 1) - a + o) for k, d, (b, a), o in zip(kernel, dl, pads, op)]
  outs = [(i - 1) * s - b - a + d * (k - 1) + o + 1 for i, s, (b, a), d, k, o in zip(spatial, st, pads, dl, kernel, op)]
  if any(o < 1 for o in outs): raise shape_error(f"{name}: input of shape {x.shape} with padding {padding!r} gives an empty output {outs}")
  return conv(x, w, bias, groups, 1, dl, full, None, name)

class ConvMixin:
  __slots__ = ()
  def conv2d(self: Tensor, weight: Tensor, bias: Tensor | None = None, groups: int = 1, stride=1, dilation=1, padding: Any = 0,
             dtype=None) -> Tensor:
    """A convolution of self (N, C_in, *spatial) or (C_in, *spatial) with weight (C_out, C_in/groups, *kernel), as
    torch.nn.functional.conv2d; any number of spatial dims (tinygrad's conv2d is N-d too). padding: an int, one int per
    spatial dim, 2 per dim in F.pad order (last dim first), 'valid' or 'same'. dtype: the accumulation dtype."""
    return _conv_nd(self, weight, bias, groups, stride, dilation, padding, dtype, None, "conv2d")
  def conv1d(self: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding: Any = 0, dilation=1, groups: int = 1,
             dtype=None) -> Tensor:
    """conv2d over one spatial dim: self (N, C_in, L), weight (C_out, C_in/groups, K); torch's argument order."""
    return _conv_nd(self, weight, bias, groups, stride, dilation, padding, dtype, 1, "conv1d")
  def conv3d(self: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding: Any = 0, dilation=1, groups: int = 1,
             dtype=None) -> Tensor:
    """conv2d over three spatial dims: self (N, C_in, D, H, W), weight (C_out, C_in/groups, kD, kH, kW)."""
    return _conv_nd(self, weight, bias, groups, stride, dilation, padding, dtype, 3, "conv3d")
  def conv_transpose2d(self: Tensor, weight: Tensor, bias: Tensor | None = None, groups: int = 1, stride=1, dilation=1, padding: Any = 0,
                       output_padding=0) -> Tensor:
    """The transposed convolution of torch.nn.functional.conv_transpose2d: self (N, C_in, *spatial), weight
    (C_in, C_out/groups, *kernel), output (N, C_out, (i-1)*stride - 2*padding + dilation*(k-1) + output_padding + 1);
    any number of spatial dims."""
    return _conv_transpose_nd(self, weight, bias, groups, stride, dilation, padding, output_padding, None, "conv_transpose2d")
  def conv_transpose1d(self: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding: Any = 0, output_padding=0,
                       groups: int = 1, dilation=1) -> Tensor:
    return _conv_transpose_nd(self, weight, bias, groups, stride, dilation, padding, output_padding, 1, "conv_transpose1d")
  def conv_transpose3d(self: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding: Any = 0, output_padding=0,
                       groups: int = 1, dilation=1) -> Tensor:
    return _conv_transpose_nd(self, weight, bias, groups, stride, dilation, padding, output_padding, 3, "conv_transpose3d")
