"""Convolutions of any number of spatial dims: the arguments checked and resolved here, the graph built by
tensor/functional/conv_graph.py as one CONV node (a fused window kernel, or an implicit GEMM for large convs), which
rules/gradient.rules differentiates as two convs (the input's gradient a transposed conv). conv1d/conv2d/conv3d and the
transposed convs (flipped weight; a strided one per phase of its output, a dilated and strided one over a zero-stuffed
input) are thin wrappers. Mixed into Tensor by tensor/functional/__init__.py.
"""
from __future__ import annotations
from typing import TYPE_CHECKING, Any
from runtime.dtype import dtypes, int_acc_dtype, least_upper_dtype
from tensor.functional import conv_graph
from tensor.functional.args import as_int, int_tuple, pad_pairs, shape_error, value_error

if TYPE_CHECKING: from tensor.tensor import Tensor

def windows(x: Tensor, kernel: tuple[int, ...], stride: tuple[int, ...], dilation: tuple[int, ...]) -> Tensor:
  """Sliding windows over the last len(kernel) axes: (..., *spatial) -> (..., *out, *kernel), where
  out = (spatial - dilation*(kernel-1) - 1) // stride + 1 and [..., o, t] is x[..., o*stride + t*dilation] (movement ops
  only: conv_graph.windows)."""
  return type(x)(conv_graph.windows(x.uop, tuple(kernel), tuple(stride), tuple(dilation)))

def vector_floats(device: str) -> int:
  """The floats in one vector register of the device the kernels compile for (the PYTHON device: an AVX2 CPU's)."""
  from tensor.codegen.heuristic import VECTOR_CAPS
  from tensor.engine.state import ENGINE
  return max(1, (ENGINE.target(device).caps or VECTOR_CAPS).register_bytes // 4)

def tile_columns(device: str) -> int:
  """The columns of a matmul's register tile on the device the kernels compile for (tensor/codegen/heuristic.py's)."""
  from tensor.codegen.heuristic import VECTOR_CAPS, register_tile
  from tensor.engine.state import ENGINE
  return register_tile(ENGINE.target(device).caps or VECTOR_CAPS, 4)[1]

def conv_arg(device: str, stride: tuple, dilation: tuple, groups: int, pads, dtype) -> conv_graph.ConvArg:
  """The CONV node's arg for a conv on `device`: its vector width and matmul tile, the builders of its value and gradients."""
  return conv_graph.ConvArg(stride, dilation, groups, tuple(tuple(p) for p in pads), vector_floats(device), dtype, conv_graph.conv_value,
                            tile_columns(device), conv_graph.input_gradient, conv_graph.weight_gradient)

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
  cin, cout, cin_g, kernel = x.shape[1], weight.shape[0], weight.shape[1], weight.shape[2:]
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
  from tensor.errors import to_dtype
  common = least_upper_dtype(x.dtype, weight.dtype)
  acc = to_dtype(dtype) if dtype is not None else int_acc_dtype(common)
  arg = conv_arg(x.device, stride, dilation, groups, pads, acc)
  ret = type(x)(conv_graph.conv(x.cast(common).uop, weight.cast(common).uop, arg))                 # (bs, cout, *out)
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
  out = conv(x, weight, bias, groups, st, dl, _conv_pads(padding, kernel, st, dl, name), dtype, name)
  # ints accumulate in int64 (as sum) and give their own type back, as matmul does
  return out if dtype is not None or out.dtype is (want := least_upper_dtype(x.dtype, weight.dtype)) else out.cast(want)

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
  outs = [(i - 1) * s - b - a + d * (k - 1) + o + 1 for i, s, (b, a), d, k, o in zip(spatial, st, pads, dl, kernel, op)]
  if any(o < 1 for o in outs): raise shape_error(f"{name}: input of shape {x.shape} with padding {padding!r} gives an empty output {outs}")
  if any(s > 1 for s in st) and all(d == 1 for d in dl) and dtypes.is_float(least_upper_dtype(x.dtype, weight.dtype)):
    return _transposed_by_phase(x, weight, bias, groups, st, pads, outs, name)
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
  return conv(x, w, bias, groups, 1, dl, full, None, name)

def _transposed_by_phase(x: Tensor, weight: Tensor, bias, groups: int, stride: tuple, pads: list, outs: list, name: str) -> Tensor:
  """A strided, undilated transposed conv (floats) as one stride-1 conv per phase of its output, interleaved: the input
  gradient of the conv it transposes, built by conv_graph.transposed_by_phase (no multiply by the zeros a spread-out input
  would hold)."""
  n = len(stride)
  unbatched = x.ndim == n + 1
  if unbatched: x = x.reshape(1, *x.shape)
  if bias is not None and bias.shape != (cout := weight.shape[1] * groups,):
    raise shape_error(f"{name}: bias of shape {bias.shape} does not fit weight of shape {weight.shape}: expected ({cout},)")
  common = least_upper_dtype(x.dtype, weight.dtype)
  arg = conv_arg(x.device, stride, (1,) * n, groups, pads, common)
  ret = type(x)(conv_graph.transposed_by_phase(x.cast(common).uop, weight.cast(common).uop, tuple(outs), arg))
  if bias is not None: ret = ret + bias.reshape(1, ret.shape[1], *[1] * n)
  return ret.reshape(ret.shape[1:]) if unbatched else ret

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
