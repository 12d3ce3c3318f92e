"""Helpers for rules/gradient.rules: tensor-graph constants and the index bookkeeping of a few derivatives.
Hand-written; imports only runtime. Every node built here is a tensor-graph node (it has a shape and a device).
"""
from __future__ import annotations
from runtime.ops import Ops
from runtime.uop import UOp, uop
from runtime.dtype import dtypes

def device_of(x: UOp) -> UOp:
  """The DEVICE node x lives on (a COPY's gradient goes back there)."""
  return uop(Ops.DEVICE, dtypes.void, (), x.device)

def full_like(x: UOp, value) -> UOp:
  """The constant `value` with x's dtype, shape and device: CONST(DEVICE), reshaped and expanded as Tensor.full builds it."""
  c = uop(Ops.CONST, x.dtype, (device_of(x),), UOp.const(x.dtype, value).arg)
  shape = x.shape
  if not shape: return c
  c = uop(Ops.RESHAPE, x.dtype, (c,), (1,) * len(shape))
  return c if all(d == 1 for d in shape) else uop(Ops.EXPAND, x.dtype, (c,), shape)

def is_const(x: UOp) -> bool:
  """Whether x is a constant as full_like builds it (CONST, reshaped and expanded): it needs no gradient."""
  while x.op in (Ops.RESHAPE, Ops.EXPAND): x = x.src[0]
  return x.op is Ops.CONST

def expanded_axes(x: UOp, u: UOp) -> tuple:
  """The axes an EXPAND from x to u broadcast (where their sizes differ): its gradient sums over them."""
  return tuple(i for i, (a, b) in enumerate(zip(x.shape, u.shape)) if a != b)

def inverse_permutation(order: tuple) -> tuple:
  """The order that undoes a PERMUTE by `order`."""
  return tuple(sorted(range(len(order)), key=order.__getitem__))

def unpad(x: UOp, pads: tuple) -> tuple:
  """The SHRINK arg that takes a PAD by `pads` back off: x's own region of the padded tensor."""
  return tuple((b, b + d) for (b, _), d in zip(pads, x.shape))

def unshrink(x: UOp, region: tuple) -> tuple:
  """The PAD arg that puts a SHRINK's `region` of x back at its place, zeros around it."""
  return tuple((b, d - e) for (b, e), d in zip(region, x.shape))

def is_max(x: UOp, u: UOp) -> UOp:
  """1.0 where x equals its reduction u = max(x) (broadcast back), else 0.0: the elements the maximum came from (a select,
  which vectorizes: rules/vectorize.rules)."""
  return uop(Ops.WHERE, x.dtype, (uop(Ops.CMPEQ, dtypes.bool, (x, uop(Ops.EXPAND, x.dtype, (u,), x.shape))), full_like(x, 1), full_like(x, 0)))

def prod_gradient(ctx: UOp, u: UOp) -> tuple:
  """d prod(x) / dx_i = the product of the other elements, exact where x holds zeros (dividing prod(x) by x_i is not):
  with no zero in the group it is prod(x) / x_i; with one zero, prod(nonzeros) at the zero and 0 elsewhere; with more, 0."""
  x, axes = u.src[0], u.arg[1]
  def back(r: UOp) -> UOp: return uop(Ops.EXPAND, x.dtype, (r,), x.shape)
  zero = x.eq(full_like(x, 0))
  others = back(uop(Ops.REDUCE_AXIS, x.dtype, (zero.where(full_like(x, 1), x),), (Ops.MUL, axes)))
  zeros = back(uop(Ops.REDUCE_AXIS, x.dtype, (zero.cast(x.dtype),), (Ops.ADD, axes)))
  one_zero = zeros.eq(full_like(x, 1)) & zero
  d = zeros.eq(full_like(x, 0)).where(others / x, one_zero.where(others, full_like(x, 0)))
  return (d * back(ctx),)

def _iota(n: int, dtype, device: UOp) -> UOp:
  """[0, 1, ..., n-1] as a tensor-graph node of movement ops on constants (tensor/random.iota's construction)."""
  k = max(1, (n - 1).bit_length())
  out = None
  for b in range(k):
    step = uop(Ops.PAD, dtype, (uop(Ops.RESHAPE, dtype, (uop(Ops.CONST, dtype, (device,), 2**b),), (1,)),), ((1, 0),))
    step = uop(Ops.EXPAND, dtype, (uop(Ops.RESHAPE, dtype, (step,), (1,) * (k - 1 - b) + (2,) + (1,) * b),), (2,) * k)
    out = step if out is None else uop(Ops.ADD, dtype, (out, step))
  return uop(Ops.SHRINK, dtype, (uop(Ops.RESHAPE, dtype, (out,), (2**k,)),), ((0, n),))

def gather_gradient(g: UOp, x: UOp, idx: UOp) -> UOp:
  """The gradient of GATHER(x, idx) with respect to x: g's rows added into the rows of x that idx picked."""
  S, n, R = idx.shape, x.shape[0], x.shape[1:]
  k, dt = len(S), idx.dtype
  rows = uop(Ops.EXPAND, dt, (uop(Ops.RESHAPE, dt, (_iota(n, dt, device_of(x)),), (1,) * k + (n,)),), S + (n,))
  hit = uop(Ops.CMPEQ, dtypes.bool, (uop(Ops.EXPAND, dt, (uop(Ops.RESHAPE, dt, (idx,), S + (1,)),), S + (n,)), rows))
  full = S + (n,) + R
  hit = uop(Ops.EXPAND, dtypes.bool, (uop(Ops.RESHAPE, dtypes.bool, (hit,), S + (n,) + (1,) * len(R)),), full)
  spread = uop(Ops.EXPAND, g.dtype, (uop(Ops.RESHAPE, g.dtype, (g,), S + (1,) + R),), full)
  picked = uop(Ops.WHERE, g.dtype, (hit, spread, full_like(spread, 0)))                            # S + (n,) + R
  summed = uop(Ops.REDUCE_AXIS, g.dtype, (picked,), (Ops.ADD, tuple(range(k)))) if k else picked
  return uop(Ops.RESHAPE, g.dtype, (summed,), (n,) + R)

# ---- convolutions: CONV(value, x, w) with arg a ConvArg (tensor/functional/conv_graph.py), whose `build` makes a conv's value ----

def _mv(op: Ops, x: UOp, arg) -> UOp: return uop(op, x.dtype, (x,), tuple(arg))

def _conv(x: UOp, w: UOp, arg) -> UOp: return uop(Ops.CONV, arg.dtype, (arg.build(x, w, arg), x, w), arg)

def channels_last(g: UOp) -> UOp:
  """g (bs, c, *spatial) stored channels-last and viewed back: both gradient convs read it (the transposed conv copies it
  with its padding, the weight's conv reads it as its weight), not each recomputing it."""
  nd = len(g.shape) - 2
  cl = uop(Ops.CONTIGUOUS, g.dtype, (_mv(Ops.PERMUTE, g, (0, *range(2, 2 + nd), 1)),))
  return _mv(Ops.PERMUTE, cl, (0, 1 + nd, *range(1, 1 + nd)))

def conv_input_gradient(g: UOp, u: UOp) -> UOp:
  """d(loss)/dx of u = CONV(value, x, w) given g (bs, cout, *out): the transposed convolution, a CONV of g by the weight
  flipped with its in/out channels swapped per group, at the forward's dilation, padded so that x[i] sees every output o
  and tap k with o*stride + k*dilation = i + before. A strided, undilated conv's runs per phase (_strided_input_gradient);
  a strided, dilated one's spreads g out by the stride (zeros between) first."""
  _, x, w = u.src
  arg, nd, g = u.arg, len(u.arg.stride), channels_last(g)
  if any(s > 1 for s in arg.stride) and all(d == 1 for d in arg.dilation):
    return transposed_conv_by_phase(g, w.cast(g.dtype), x.shape[2:], arg).cast(x.dtype)
  outs = g.shape[2:]
  if any(s > 1 for s in arg.stride):  # (..., o) -> (..., o, 1) -> pad to (..., o, s) -> (..., o*s) -> the first (o-1)*s + 1
    g = _mv(Ops.RESHAPE, g, (*g.shape[:2], *[v for o in outs for v in (o, 1)]))
    g = _mv(Ops.PAD, g, [(0, 0)] * 2 + [p for s in arg.stride for p in ((0, 0), (0, s - 1))])
    g = _mv(Ops.RESHAPE, g, (*g.shape[:2], *[o * s for o, s in zip(outs, arg.stride)]))
    g = _mv(Ops.SHRINK, g, [(0, d) for d in g.shape[:2]] + [(0, (o - 1) * s + 1) for o, s in zip(outs, arg.stride)])
  wt = _mv(Ops.FLIP, _swapped_weight(w.cast(g.dtype), arg.groups), [i >= 2 for i in range(2 + nd)])  # (cin, cout/groups, *k)
  pads = tuple((d * (k - 1) - b, i + b - (o - 1) * s - 1)
               for d, k, (b, _), i, o, s in zip(arg.dilation, w.shape[2:], arg.pads, x.shape[2:], outs, arg.stride))
  return _conv(g, wt, arg._replace(stride=(1,) * nd, pads=pads, dtype=g.dtype)).cast(x.dtype)

def _swapped_weight(w: UOp, groups: int) -> UOp:
  """w (cout, cin/groups, *k) with its in/out channels swapped per group: (cin, cout/groups, *k)."""
  cout, cin_g, kernel = w.shape[0], w.shape[1], w.shape[2:]
  wt = _mv(Ops.RESHAPE, w, (groups, cout // groups, cin_g, *kernel))
  return _mv(Ops.RESHAPE, _mv(Ops.PERMUTE, wt, (0, 2, 1, *range(3, 3 + len(kernel)))), (groups * cin_g, cout // groups, *kernel))

def transposed_conv_by_phase(g: UOp, w: UOp, spatial: tuple, arg) -> UOp:
  """The transposed conv of g (bs, cout, *out) by w (cout, cin/groups, *k) for a strided, undilated conv (arg: its stride,
  groups and before-padding) whose input is `spatial`: the input gradient, (bs, cin, *spatial) in g's dtype, without
  the zeros a spread-out g would multiply (3 of 4 of its multiply-adds at stride 2 in 2-d). Per dim, x[i] with
  i + before = m*stride + p (its phase p) sees the taps k = p + j*stride and the outputs o = m - j only: for each phase a
  stride-1 transposed conv of g by those taps, whose results interleave into dx (each spread out by the stride at its
  offset, then summed: one elementwise kernel). conv_transpose2d and its kin run this too (tensor/functional/conv.py)."""
  nd, strides, kernel, outs = len(arg.stride), arg.stride, w.shape[2:], g.shape[2:]
  bs, wt = g.shape[0], _swapped_weight(w, arg.groups)                                      # (cin, cout/groups, *k)
  cin = wt.shape[0]
  dx = None
  for phase in _product([range(s) for s in strides]):
    taps = [-(-(k - p) // s) if p < k else 0 for k, p, s in zip(kernel, phase, strides)]     # taps of this phase per dim
    first = [-((p - b) // s) for p, s, (b, _) in zip(phase, strides, arg.pads)]             # its first m with i >= 0
    count = [(i - 1 + b - p) // s - m + 1 for i, b, p, s, m in zip(spatial, (b for b, _ in arg.pads), phase, strides, first)]
    if any(t == 0 for t in taps) or any(c <= 0 for c in count): continue                     # no tap, or no pixel: zeros
    # the phase's taps p, p+s, ...: the tap axis padded to a multiple of s, cut in (taps, s), column p kept; then flipped
    wp = _mv(Ops.PAD, wt, [(0, 0)] * 2 + [(0, -(-k // s) * s - k) for k, s in zip(kernel, strides)])
    wp = _mv(Ops.RESHAPE, wp, (*wt.shape[:2], *[v for k, s in zip(kernel, strides) for v in (-(-k // s), s)]))
    wp = _mv(Ops.SHRINK, wp, [(0, d) for d in wt.shape[:2]] + [r for t, p in zip(taps, phase) for r in ((0, t), (p, p + 1))])
    wp = _mv(Ops.FLIP, _mv(Ops.RESHAPE, wp, (*wt.shape[:2], *taps)), [i >= 2 for i in range(2 + nd)])
    # dx_p[m] = sum over j of g[m - j] * w[p + j*s]: a stride-1 conv of g padded by taps-1-first before (a crop when negative)
    pads = tuple((t - 1 - m, c - o - (t - 1 - m) + t - 1) for t, m, c, o in zip(taps, first, count, outs))
    part = _conv(g, wp, arg._replace(stride=(1,) * nd, dilation=(1,) * nd, pads=pads, dtype=g.dtype))  # (bs, cin, *count)
    # pixel m of the phase is x's i = m*s + p - before: spread out by the stride, then placed at the first one's i
    start = [m * s + p - b for m, s, p, (b, _) in zip(first, strides, phase, arg.pads)]
    part = _mv(Ops.RESHAPE, part, (bs, cin, *[v for c in count for v in (c, 1)]))
    part = _mv(Ops.PAD, part, [(0, 0)] * 2 + [r for s in strides for r in ((0, 0), (0, s - 1))])
    part = _mv(Ops.RESHAPE, part, (bs, cin, *[c * s for c, s in zip(count, strides)]))
    part = _pad_or_crop(part, [(0, 0)] * 2 + [(a, i - a - c * s) for a, i, c, s in zip(start, spatial, count, strides)])
    dx = part if dx is None else uop(Ops.ADD, g.dtype, (dx, part))
  if dx is not None: return dx
  zero = uop(Ops.RESHAPE, g.dtype, (uop(Ops.CONST, g.dtype, (device_of(g),), UOp.const(g.dtype, 0).arg),), (1,) * (2 + nd))
  return uop(Ops.EXPAND, g.dtype, (zero,), (bs, cin, *spatial))                            # no pixel sees a tap

def _product(ranges: list) -> list:
  """Every tuple of one value from each range, the last varying fastest (itertools.product)."""
  out: list = [()]
  for r in ranges: out = [t + (v,) for t in out for v in r]
  return out

def _pad_or_crop(x: UOp, pads: list) -> UOp:
  """x padded by ((before, after), ...) with zeros; a negative width crops."""
  region = [(-min(b, 0), d + min(a, 0)) for (b, a), d in zip(pads, x.shape)]
  if any(r != (0, d) for r, d in zip(region, x.shape)): x = _mv(Ops.SHRINK, x, region)
  pads = [(max(b, 0), max(a, 0)) for b, a in pads]
  return x if all(p == (0, 0) for p in pads) else _mv(Ops.PAD, x, pads)

def conv_weight_gradient(g: UOp, u: UOp) -> UOp:
  """d(loss)/dw of u = CONV(value, x, w) given g (bs, cout, *out): dw[oc, c, k] = sum over n and o of
  g[n, oc, o] * x[n, c, o*stride + k*dilation - before], a CONV too: of x with batch and channels swapped (the input
  channels as its batch, the batch as its channels, per group) by g as the weight (its output positions as the taps), at
  stride `dilation` and dilation `stride`; its output holds at least the kernel's taps. A strided, undilated conv's runs
  per phase of the taps (_strided_weight_gradient)."""
  _, x, w = u.src
  arg, nd, groups, g = u.arg, len(u.arg.stride), u.arg.groups, channels_last(g)
  if any(s > 1 for s in arg.stride) and all(d == 1 for d in arg.dilation): return _strided_weight_gradient(g, x, w, arg).cast(w.dtype)
  gt = _gradient_as_weight(g, groups)
  dw = _conv(_swap_batch_channels(x.cast(g.dtype), groups), gt, arg._replace(stride=arg.dilation, dilation=arg.stride, dtype=g.dtype))
  dw = _mv(Ops.SHRINK, dw, [(0, d) for d in dw.shape[:2]] + [(0, k) for k in w.shape[2:]])  # (cin/groups, cout, *k)
  return _mv(Ops.PERMUTE, dw, (1, 0, *range(2, 2 + nd))).cast(w.dtype)

def _swap_batch_channels(x: UOp, groups: int) -> UOp:
  """x (bs, cin, *spatial) as the weight gradient's conv input: (cin/groups, groups*bs, *spatial)."""
  nd, (bs, cin) = len(x.shape) - 2, x.shape[:2]
  if groups == 1: return _mv(Ops.PERMUTE, x, (1, 0, *range(2, 2 + nd)))  # a plain swap: the GEMM reads x's own copy
  xt = _mv(Ops.RESHAPE, x, (bs, groups, cin // groups, *x.shape[2:]))
  return _mv(Ops.RESHAPE, _mv(Ops.PERMUTE, xt, (2, 1, 0, *range(3, 3 + nd))), (cin // groups, groups * bs, *x.shape[2:]))

def _gradient_as_weight(g: UOp, groups: int) -> UOp:
  """g (bs, cout, *out) as the weight gradient's conv weight: (cout, bs, *out), its output positions as the taps."""
  nd, (bs, cout) = len(g.shape) - 2, g.shape[:2]
  gt = _mv(Ops.RESHAPE, g, (bs, groups, cout // groups, *g.shape[2:]))
  return _mv(Ops.RESHAPE, _mv(Ops.PERMUTE, gt, (1, 2, 0, *range(3, 3 + nd))), (cout, bs, *g.shape[2:]))

def _strided_weight_gradient(g: UOp, x: UOp, w: UOp, arg) -> UOp:
  """The weight gradient of a strided, undilated conv by phase of the taps. With k = j*stride + q (per dim),
  x[o*stride + k - before] is x_q[o + j] where x_q[m] = padded x[m*stride + q]: the taps of phase q are the weight
  gradient of a stride-1 conv of x_q, so each phase is a GEMM over dense, unit-stride windows (the one strided conv read
  every stride-th pixel and computed taps up to a multiple of the stride: 16 for 9 at 3x3/2). The phases' taps interleave
  into dw (cout, cin/groups, *k) in g's dtype."""
  nd, strides, kernel, outs, groups = len(arg.stride), arg.stride, w.shape[2:], g.shape[2:], arg.groups
  gt, xg = _gradient_as_weight(g, groups), x.cast(g.dtype)
  bs, cin = x.shape[:2]
  dw = None
  for phase in _product([range(s) for s in strides]):
    taps = [-(-(k - q) // s) if q < k else 0 for k, q, s in zip(kernel, phase, strides)]
    if any(t == 0 for t in taps): continue                                                    # taps past the kernel
    # x_q: x padded so that it holds (out + taps - 1) blocks of `stride` pixels, then column q of each block
    rows = [o + t - 1 for o, t in zip(outs, taps)]
    xq = _pad_or_crop(xg, [(0, 0)] * 2 + [(b, m * s - i - b) for (b, _), m, s, i in zip(arg.pads, rows, strides, x.shape[2:])])
    xq = _mv(Ops.RESHAPE, xq, (bs, cin, *[v for m, s in zip(rows, strides) for v in (m, s)]))
    xq = _mv(Ops.SHRINK, xq, [(0, bs), (0, cin)] + [r for m, q in zip(rows, phase) for r in ((0, m), (q, q + 1))])
    xq = _mv(Ops.RESHAPE, xq, (bs, cin, *rows))
    one = (1,) * nd
    part = _conv(_swap_batch_channels(xq, groups), gt, arg._replace(stride=one, dilation=one, pads=((0, 0),) * nd, dtype=g.dtype))
    # (cin/groups, cout, *taps) -> tap j at k = j*s + q: spread out by the stride, placed at q, cut to the kernel
    part = _mv(Ops.RESHAPE, _mv(Ops.PERMUTE, part, (1, 0, *range(2, 2 + nd))), (*w.shape[:2], *[v for t in taps for v in (t, 1)]))
    part = _mv(Ops.PAD, part, [(0, 0)] * 2 + [r for s in strides for r in ((0, 0), (0, s - 1))])
    part = _mv(Ops.RESHAPE, part, (*w.shape[:2], *[t * s for t, s in zip(taps, strides)]))
    part = _pad_or_crop(part, [(0, 0)] * 2 + [(q, k - q - t * s) for q, k, t, s in zip(phase, kernel, taps, strides)])
    dw = part if dw is None else uop(Ops.ADD, g.dtype, (dw, part))
  return dw

__all__ = ["device_of", "full_like", "expanded_axes", "inverse_permutation", "unpad", "unshrink",
           "is_max", "prod_gradient", "gather_gradient", "conv_input_gradient", "conv_weight_gradient",
           "transposed_conv_by_phase"]
