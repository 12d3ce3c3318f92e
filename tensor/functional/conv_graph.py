"""The graph of a convolution's value and of its gradients, on tensor-graph UOps: sliding windows of the input (movement
ops), times the weight, summed. tensor/functional/conv.py makes each conv a CONV(value, x, w) node with `conv`; the node's
arg (ConvArg) carries `conv_value`, `input_gradient` and `weight_gradient`, so rules/gradient.rules builds the convs of
its gradients (the input's: a transposed conv, per phase when strided; the weight's: a conv of the input by the output's
gradient) through them, without importing the frontend. Pooling takes `windows` from here too.

A conv's value takes one of two forms:
  fused          windows of x times the weight, summed: one kernel (with the bias, activation and pooling after it), after
                 a padded copy of its input when it is large enough (fused_input)
  implicit GEMM  channels-last input and weight, so the codegen's matmul register tile applies (output channels as vector
                 columns, output positions as rows): for large convs, and smaller ones whose output rows don't divide
                 into vectors (the fused kernel's tile needs them to). A long reduction over few outputs (a weight
                 gradient's: batch x pixels) is summed in blocks that stay in the cache, then the blocks' partial sums.
"""
from __future__ import annotations
import itertools, math
from typing import Callable, NamedTuple
import numpy as np
from runtime.dtype import DType, dtypes
from runtime.ops import Ops
from runtime.uop import UOp, uop

class ConvArg(NamedTuple):
  """A CONV node's arg: x (bs, cin, *spatial) padded by `pads` ((before, after) per spatial dim, negative ones crop), convolved
  with w (cout, cin/groups, *kernel) at `stride` and `dilation`, summed in `dtype` (the result's); `width` is the floats
  per vector register of the target (the GEMM's column vectors, and the fused kernel's); `build` makes the value of a
  conv (conv_value); `panel` the columns of the target's matmul register tile (the GEMM's weight is packed in panels of
  them; 0: one panel); `input_grad` and `weight_grad` build the gradients' convs (input_gradient, weight_gradient here:
  rules/gradient.rules' helpers call them through the arg, without importing the frontend)."""
  stride: tuple
  dilation: tuple
  groups: int
  pads: tuple
  width: int
  dtype: DType
  build: Callable
  panel: int = 0
  input_grad: Callable | None = None
  weight_grad: Callable | None = None

# ---- movement ops on tensor-graph nodes (no-ops left out, as Tensor's methods leave them) ----

def reshape(x: UOp, shape) -> UOp: return x if x.shape == (shape := tuple(shape)) else uop(Ops.RESHAPE, x.dtype, (x,), shape)
def permute(x: UOp, order) -> UOp: return x if (order := tuple(order)) == tuple(range(len(order))) else uop(Ops.PERMUTE, x.dtype, (x,), order)
def expand(x: UOp, shape) -> UOp: return x if x.shape == (shape := tuple(shape)) else uop(Ops.EXPAND, x.dtype, (x,), shape)
def flip(x: UOp, axes) -> UOp: return uop(Ops.FLIP, x.dtype, (x,), tuple(i in axes for i in range(len(x.shape)))) if axes else x
def contiguous(x: UOp) -> UOp: return uop(Ops.CONTIGUOUS, x.dtype, (x,))
def cast(x: UOp, dtype: DType) -> UOp: return x if x.dtype is dtype else uop(Ops.CAST, dtype, (x,))

def c_strides(shape: tuple) -> tuple:
  return tuple(math.prod(shape[i + 1:]) for i in range(len(shape)))

def in_order(view: UOp) -> bool:
  """Whether view, reshapes and permutes of a CONTIGUOUS node, reads that node's memory in order (its elements one after
  another): a copy of it would copy the node as it is."""
  chain, x = [], view
  while x.op in (Ops.RESHAPE, Ops.PERMUTE): chain, x = [x, *chain], x.src[0]
  if x.op is not Ops.CONTIGUOUS or not chain: return False
  # the chain applied to a stand-in of x's strides (no memory: never read), as numpy lays views out
  a = np.lib.stride_tricks.as_strided(np.zeros(1, np.int8), x.shape, c_strides(x.shape))
  for op in chain:
    if op.op is Ops.PERMUTE: a = a.transpose(op.arg)
    else:
      try: a = np.reshape(a, op.arg, copy=False)
      except ValueError: return False
  return all(s == c for s, c, d in zip(a.strides, c_strides(a.shape), a.shape) if d > 1)

def packed(view: UOp) -> UOp:
  """view in its own buffer: a copy, unless it reads a CONTIGUOUS node's memory in order (a weight gradient's packed
  weight is the output gradient's channels-last copy: read in place)."""
  return view if in_order(view) else contiguous(view)

def shrink(x: UOp, region) -> UOp:
  region = tuple(tuple(r) for r in region)
  return x if all(r == (0, d) for r, d in zip(region, x.shape)) else uop(Ops.SHRINK, x.dtype, (x,), region)

def pad(x: UOp, pads) -> UOp:
  """x padded with zeros by ((before, after), ...); negative widths crop."""
  x = shrink(x, [(-min(b, 0), d + min(a, 0)) for (b, a), d in zip(pads, x.shape)])
  pads = tuple((max(b, 0), max(a, 0)) for b, a in pads)
  return x if all(p == (0, 0) for p in pads) else uop(Ops.PAD, x.dtype, (x,), pads)

def mul_sum(a: UOp, b: UOp, axes: tuple, dtype: DType) -> UOp:
  """(a * b) summed over `axes` (dropped from the shape) in `dtype`, both broadcast to their common shape (as a sum of
  Tensor products: half and bfloat16 accumulate in float32)."""
  shape = tuple(max(p, q) for p, q in zip(a.shape, b.shape))
  return total(uop(Ops.MUL, a.dtype, (expand(a, shape), expand(b, shape))), axes, dtype)

def total(x: UOp, axes: tuple, dtype: DType) -> UOp:
  """x summed over `axes` (dropped from the shape) in `dtype`, as Tensor.sum(axes, dtype=dtype)."""
  acc = dtypes.float32 if dtype in (dtypes.float16, dtypes.bfloat16) else dtype
  axes = tuple(a % len(x.shape) for a in axes)
  red = cast(uop(Ops.REDUCE_AXIS, acc, (cast(cast(x, dtype), acc),), (Ops.ADD, axes)), dtype)
  return reshape(red, [d for i, d in enumerate(x.shape) if i not in axes])

def windows(x: UOp, kernel: tuple, stride: tuple, dilation: tuple) -> UOp:
  """Sliding windows over the last len(kernel) axes: (..., *spatial) -> (..., *out, *kernel), where
  out = (spatial - dilation*(kernel-1) - 1) // stride + 1 and [..., o, t] is x[..., o*stride + t*dilation]."""
  n = len(kernel)
  lead, spatial = x.shape[:-n], x.shape[-n:]
  out = tuple((i - d * (k - 1) - 1) // s + 1 for i, k, s, d in zip(spatial, kernel, stride, dilation))
  keep = [(0, d) for d in lead]
  if all(k <= s for k, s in zip(kernel, stride)) and all(d == 1 for d in dilation):
    # windows that don't overlap: cut each axis into out blocks of `stride` and keep the first `kernel` of each block
    x = pad(x, [(0, 0)] * len(lead) + [(0, o * s - i) for o, s, i in zip(out, stride, spatial)])
    x = reshape(x, (*lead, *[v for o, s in zip(out, stride) for v in (o, s)]))
    x = shrink(x, keep + [v for o, k in zip(out, kernel) for v in ((0, o), (0, k))])
    # (..., o0, k0, o1, k1, ...) -> (..., *out, *kernel)
    return permute(x, (*range(len(lead)), *[len(lead) + 2 * j for j in range(n)], *[len(lead) + 2 * j + 1 for j in range(n)]))
  # Overlapping or dilated windows: repeat each axis e times end to end and read the repeats in rows of (i + d).
  # Row t starts at t*(i+d), which is t*d modulo i, so row t holds x shifted by t*d: the kernel taps as rows.
  reps = [math.ceil(k * (i + d) / i) for k, i, d in zip(kernel, spatial, dilation)]
  x = reshape(x, (*lead, *[v for i in spatial for v in (1, i)]))
  x = expand(x, (*lead, *[v for e, i in zip(reps, spatial) for v in (e, i)]))
  x = reshape(x, (*lead, *[e * i for e, i in zip(reps, spatial)]))
  x = shrink(x, keep + [(0, k * (i + d)) for k, i, d in zip(kernel, spatial, dilation)])
  x = reshape(x, (*lead, *[v for k, i, d in zip(kernel, spatial, dilation) for v in (k, i + d)]))
  # in each row, every stride-th element, out of them (a long stride may need the row padded: the pad is never read)
  x = pad(x, [(0, 0)] * len(lead) + [v for o, s, i, d in zip(out, stride, spatial, dilation) for v in ((0, 0), (0, o * s - i - d))])
  x = reshape(x, (*lead, *[v for k, o, s in zip(kernel, out, stride) for v in (k, o, s)]))
  x = shrink(x, keep + [v for k, o in zip(kernel, out) for v in ((0, k), (0, o), (0, 1))])
  x = reshape(x, (*lead, *[v for k, o in zip(kernel, out) for v in (k, o)]))
  return permute(x, (*range(len(lead)), *[len(lead) + 2 * j + 1 for j in range(n)], *[len(lead) + 2 * j for j in range(n)]))

# ---- which form ----

# Multiply-adds from which a conv runs as an implicit GEMM. Below, the one fused kernel is as fast (no layout copies, and
# the bias, activation and pooling fuse into it) when its output rows divide into vectors: it tiles them as a matmul's
# columns. Rows that don't (54, 30, 14 columns) leave that kernel gathering weights, 10x slower: from
# IMPLICIT_GEMM_UNALIGNED_MIN_MACS such a conv takes the GEMM (AVX-512, 1 thread: (8,16,32,32) x (32,16,3,3) 4.2 -> 42
# GFLOP/s, (8,16,16,16) x 32 6.8 -> 52; aligned (4,32,34,34) x 32 59 fused, 53 as a GEMM). conv2d (8,64,56,56) x
# (64,64,3,3) (860M) ran 5x faster as a GEMM. Module-level so tests can move them to run both paths at small sizes.
IMPLICIT_GEMM_MIN_MACS = 1 << 26
IMPLICIT_GEMM_UNALIGNED_MIN_MACS = 1 << 18
# the GEMM's vector columns are output channels (per group) and its reduction the input channels times the taps (from 8:
# the seeds' first conv, 1 channel x 25 taps, ran fused at 6 GFLOP/s and runs as a GEMM at 80-107)
IMPLICIT_GEMM_MIN_COUT = 16
IMPLICIT_GEMM_MIN_REDUCE = 8

def out_size(x: UOp, w: UOp, arg: ConvArg) -> tuple:
  return tuple((i + b + a - d * (k - 1) - 1) // s + 1 for i, (b, a), k, s, d in zip(x.shape[2:], arg.pads, w.shape[2:], arg.stride, arg.dilation))

def use_implicit_gemm(x: UOp, w: UOp, arg: ConvArg) -> bool:
  """Whether a conv runs as an implicit GEMM: enough output channels and reduction for its tile, and enough work; less
  work when the output rows don't divide into vectors (the fused kernel's tile needs them to)."""
  rcout, red, out = w.shape[0] // arg.groups, math.prod(w.shape[1:]), out_size(x, w, arg)
  macs = x.shape[0] * w.shape[0] * math.prod(out) * red
  return rcout >= IMPLICIT_GEMM_MIN_COUT and red >= IMPLICIT_GEMM_MIN_REDUCE and \
    (macs >= IMPLICIT_GEMM_MIN_MACS or macs >= IMPLICIT_GEMM_UNALIGNED_MIN_MACS and out[-1] % arg.width != 0)

def in_memory(x: UOp) -> bool:
  """A whole realized buffer (or a reshape of one): the GEMM reads it in place."""
  return x.op is Ops.BUFFER or (x.op is Ops.RESHAPE and x.src[0].op is Ops.BUFFER)

def gemm_input(x: UOp, arg: ConvArg, nd: int) -> tuple[UOp, bool]:
  """x padded, as the GEMM reads it, and whether the reduction runs channels-last (c innermost). A realized unpadded input
  is read in place (taps innermost: its steps read along one row of a channel); any other is copied channels-last first
  (with its padding: a kernel reading the padding through guards would not vectorize). A weight gradient's input is
  the forward's input with batch and channels swapped: it reads the forward's channels-last copy (the same node: one
  realize point), where its reduction (batch, *taps) is the order in memory."""
  swapped = x.op is Ops.PERMUTE and x.arg == (1, 0, *range(2, 2 + nd))
  src = x.src[0] if swapped else x
  xp = pad(src, [(0, 0), (0, 0), *arg.pads])
  if xp is src and in_memory(src): return x, False
  cl = contiguous(permute(xp, (0, *range(2, 2 + nd), 1)))                                 # (bs, *spatial, cin)
  if swapped: return permute(cl, (1 + nd, 0, *range(1, 1 + nd))), False                   # (cin, bs, *spatial)
  return permute(cl, (0, 1 + nd, *range(1, 1 + nd))), True                                # (bs, cin, *spatial)

def gemm_windows(xg: UOp, w: UOp, arg: ConvArg, channels_last: bool) -> UOp:
  """The windows of the GEMM's input as (bs, *out, groups, [red]): the reduction axes (c, *k) or channels-last (*k, c)."""
  nd, groups = len(arg.stride), arg.groups
  bs, cin_g, kernel = xg.shape[0], w.shape[1], w.shape[2:]
  win = windows(xg, kernel, arg.stride, arg.dilation)                                      # (bs, cin, *out, *k)
  out = win.shape[2:2 + nd]
  taps = tuple(range(3 + nd, 3 + 2 * nd))
  red = (*taps, 2) if channels_last else (2, *taps)
  win = reshape(win, (bs, groups, cin_g, *out, *kernel))
  return permute(win, (0, *range(3, 3 + nd), 1, *red))                                     # (bs, *out, g, [red])

# ---- the value ----

# A GEMM's reduction longer than this (a weight gradient's, over batch x output pixels: 51,200 at the seeds' second conv)
# is summed in blocks of at most this many steps: each register tile of the output would otherwise stream the whole weight
# panel (reduction x columns: 6.5 MB) from memory, one tile after another (37.7 -> 24.2 ms, 1 thread)
GEMM_BLOCK = 4096

def block_split(red: tuple) -> tuple[int, int]:
  """(axis, blocks) cutting a GEMM reduction of shape `red` into blocks of at most GEMM_BLOCK steps: an even number of
  blocks when one exists (the blocks loop is the one the threads share out: 3 blocks on 2 threads left one thread idle a
  third of the time, ResNet's layer4 3x3 (3, 3, 512) 0.5x torch at 2 threads; its channels cut in 2 instead), then the
  outermost axis (a weight gradient's batch: each block a run of whole images), then the fewest. (0, 1): no blocks."""
  if math.prod(red) <= GEMM_BLOCK: return 0, 1
  cands = [(b % 2, j, b) for j, n in enumerate(red) for b in range(2, n + 1) if n % b == 0 and math.prod(red) // b <= GEMM_BLOCK]
  if not cands: return 0, red[0]
  _, j, b = min(cands)
  return j, b

def blocked_sum(win: UOp, wl: UOp, nd: int, dtype: DType) -> UOp:
  """The GEMM sum over the last 1+nd axes (the reduction) of win * wl. A reduction over GEMM_BLOCK steps is cut along one
  of its axes (block_split) into blocks: partial sums per block (the outermost loop, which threads share out: a
  cache-sized piece of the weight panel read by every tile), then the blocks' sum."""
  red = win.shape[-1 - nd:]
  first = len(win.shape) - 1 - nd
  axis, blocks = block_split(red)
  if blocks == 1: return mul_sum(win, wl, tuple(range(-1 - nd, 0)), dtype)
  at = first + axis
  def split(t: UOp) -> UOp:  # (..., r_axis, ...) -> (blocks, ..., r_axis/blocks, ...)
    t = reshape(t, (*t.shape[:at], blocks, red[axis] // blocks, *t.shape[at + 1:]))
    return permute(t, (at, *range(at), *range(at + 1, len(t.shape))))
  win, wl = split(win), split(wl)
  part = contiguous(mul_sum(win, wl, tuple(range(-1 - nd, 0)), dtype))                     # (blocks, ..., [out])
  return total(part, (0,), dtype)

def conv_value(x: UOp, w: UOp, arg: ConvArg) -> UOp:
  """x (bs, cin, *spatial) convolved with w (cout, cin/groups, *kernel) -> (bs, cout, *out) in arg.dtype."""
  nd, groups = len(arg.stride), arg.groups
  bs, cout, cin_g, kernel = x.shape[0], w.shape[0], w.shape[1], w.shape[2:]
  rcout = cout // groups
  if use_implicit_gemm(x, w, arg):
    # out[n, *o, g, oc] = sum over c and the taps k of x[n, g, c, *(o*stride + k*dilation)] * w[g, c, *k, oc]: output
    # channels consecutive in the weight and the store (the tile's vector columns), output positions as rows (they share
    # the weights). The result is stored in that layout, then viewed as (bs, cout, *out): a consumer reads it through the
    # permute, or a copy makes it NCHW.
    xg, channels_last = gemm_input(x, arg, nd)
    win = gemm_windows(xg, w, arg, channels_last)                                          # (bs, *out, g, [red])
    out = win.shape[1:1 + nd]
    # the weight packed in panels of the register tile's columns: (g, panels, [red], cols), one panel's reduction
    # consecutive in memory, so the tile streams it (ResNet's layer4 3x3: 512 columns, 2 KB between steps before)
    cols = arg.panel if arg.panel and rcout % arg.panel == 0 and rcout > arg.panel else rcout
    wred = (*range(4, 4 + nd), 3) if channels_last else (3, *range(4, 4 + nd))
    wl = packed(permute(reshape(w, (groups, rcout // cols, cols, cin_g, *kernel)), (0, 1, *wred, 2)))    # (g, p, [red], cols)
    wl = reshape(permute(wl, (0, 1, 3 + nd, *range(2, 3 + nd))), (1, *[1] * nd, groups, rcout // cols, cols, *wl.shape[2:3 + nd]))
    win = reshape(win, (bs, *out, groups, 1, 1, *win.shape[2 + nd:]))                      # (bs, *out, g, 1, 1, [red])
    ret = contiguous(blocked_sum(win, wl, nd, arg.dtype))                                  # (bs, *out, g, p, cols)
    return permute(reshape(ret, (bs, *out, cout)), (0, 1 + nd, *range(1, 1 + nd)))
  xp, extra = fused_input(x, w, arg)
  win = windows(xp, kernel, arg.stride, arg.dilation)                                      # (bs, cin, *out, *k)
  out = win.shape[2:2 + nd]
  win = permute(reshape(win, (bs, groups, cin_g, *out, *kernel)), (0, 1, *range(3, 3 + nd), 2, *range(3 + nd, 3 + 2 * nd)))
  win = reshape(win, (bs, groups, 1, *out, cin_g, *kernel))                                # (bs, g, 1, *out, cin_g, *k)
  wv = reshape(w, (1, groups, rcout, *[1] * nd, cin_g, *kernel))                          # (1, g, rcout, 1.., cin_g, *k)
  ret = reshape(mul_sum(win, wv, tuple(range(-1 - nd, 0)), arg.dtype), (bs, cout, *out))
  return shrink(contiguous(ret), [(0, d) for d in ret.shape[:-1]] + [(0, out[-1] - extra)]) if extra else ret

# From this many multiply-adds the fused kernel reads a padded copy of its input, rows widened to whole vectors: its tile
# takes output rows as vector columns, which a read through the padding's guards, or a row of 56 (a vector of 16 does not
# divide it), left scalar. One thread, against torch: (8, 64, 112, 112) x (3, 64, 3, 3) padded 1: 5.6 -> 16.7 GFLOP/s (0.42x
# -> 1.25x); at 56x56: 1.9 -> 38.9 (0.14x -> 2.9x); (8, 32, 28, 28) x (8, 32, 3, 3): 2.0 -> 61 (0.04x -> 1.3x).
FUSED_COPY_MIN_MACS = 1 << 20
# widened rows compute at most this share more outputs than they keep
FUSED_WIDEN_MAX_WASTE = 0.25

def fused_input(x: UOp, w: UOp, arg: ConvArg) -> tuple[UOp, int]:
  """The fused kernel's input: x padded, and how many outputs each row computes past the conv's own (cropped after).
  A large enough conv reads a copy of x with its padding, its last axis widened so the output rows are whole vectors
  (when that wastes little): a plain, aligned read the tile vectorizes."""
  pads, out = list(arg.pads), out_size(x, w, arg)
  macs = x.shape[0] * w.shape[0] * math.prod(out) * math.prod(w.shape[1:])
  if macs < FUSED_COPY_MIN_MACS or arg.stride[-1] != 1: return pad(x, [(0, 0), (0, 0), *pads]), 0
  wide = -(-out[-1] // arg.width) * arg.width
  extra = wide - out[-1] if out[-1] >= arg.width and wide - out[-1] <= FUSED_WIDEN_MAX_WASTE * out[-1] else 0
  if extra: pads[-1] = (pads[-1][0], pads[-1][1] + extra)
  if not extra and all(p == (0, 0) for p in pads): return x, 0
  if not extra and out[-1] % arg.width: return pad(x, [(0, 0), (0, 0), *pads]), 0          # the tile would not vectorize anyway
  return contiguous(pad(x, [(0, 0), (0, 0), *pads])), extra

def conv(x: UOp, w: UOp, arg: ConvArg) -> UOp:
  """The CONV node of x convolved with w."""
  return uop(Ops.CONV, arg.dtype, (arg.build(x, w, arg), x, w), arg)

# ---- the gradients: convs again (rules/gradient.rules differentiates a CONV node through its arg's input_grad and weight_grad) ----

def _zeros(like: UOp, shape: tuple) -> UOp:
  """Zeros of like's dtype and device in `shape`."""
  c = uop(Ops.CONST, like.dtype, (uop(Ops.DEVICE, dtypes.void, (), like.device),), UOp.const(like.dtype, 0).arg)
  return expand(reshape(c, (1,) * len(shape)), shape)

def _spread(x: UOp, strides: tuple) -> UOp:
  """x (a, b, *n) spread out by `strides` along its spatial dims, zeros between: (a, b, *(n*s)), x[..., m] at m*s."""
  lead, n = x.shape[:2], x.shape[2:]
  x = reshape(x, (*lead, *[v for d in n for v in (d, 1)]))
  x = pad(x, [(0, 0)] * 2 + [r for s in strides for r in ((0, 0), (0, s - 1))])
  return reshape(x, (*lead, *[d * s for d, s in zip(n, strides)]))

def _swapped_weight(w: UOp, groups: int) -> UOp:
  """w (cout, cin/groups, *k) with its in/out channels swapped per group: (cin, cout/groups, *k)."""
  cout, cin_g, kernel = w.shape[0], w.shape[1], w.shape[2:]
  wt = permute(reshape(w, (groups, cout // groups, cin_g, *kernel)), (0, 2, 1, *range(3, 3 + len(kernel))))
  return reshape(wt, (groups * cin_g, cout // groups, *kernel))

def input_gradient(g: UOp, x: UOp, w: UOp, arg: ConvArg) -> UOp:
  """d(loss)/dx of conv(x, w) given g (bs, cout, *out): the transposed convolution, a conv of g by the weight flipped with
  its in/out channels swapped per group, at the forward's dilation, padded so that x[i] sees every output o and tap k
  with o*stride + k*dilation = i + before. A strided, undilated conv's runs per phase (transposed_by_phase); a strided,
  dilated one's spreads g out by the stride (zeros between) first."""
  nd, outs = len(arg.stride), g.shape[2:]
  if any(s > 1 for s in arg.stride) and all(d == 1 for d in arg.dilation):
    return cast(transposed_by_phase(g, cast(w, g.dtype), x.shape[2:], arg), x.dtype)
  if any(s > 1 for s in arg.stride):  # the first (o-1)*s + 1 of g spread out
    g = shrink(_spread(g, arg.stride), [(0, d) for d in g.shape[:2]] + [(0, (o - 1) * s + 1) for o, s in zip(outs, arg.stride)])
  wt = flip(_swapped_weight(cast(w, g.dtype), arg.groups), range(2, 2 + nd))              # (cin, cout/groups, *k)
  pads = tuple((d * (k - 1) - b, i + b - (o - 1) * s - 1)
               for d, k, (b, _), i, o, s in zip(arg.dilation, w.shape[2:], arg.pads, x.shape[2:], outs, arg.stride))
  return cast(conv(g, wt, arg._replace(stride=(1,) * nd, pads=pads, dtype=g.dtype)), x.dtype)

def transposed_by_phase(g: UOp, w: UOp, spatial: tuple, arg: ConvArg) -> UOp:
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
  for phase in itertools.product(*[range(s) for s in strides]):
    taps = [-(-(k - p) // s) if p < k else 0 for k, p, s in zip(kernel, phase, strides)]     # taps of this phase per dim
    first = [-((p - b) // s) for p, s, (b, _) in zip(phase, strides, arg.pads)]             # its first m with i >= 0
    count = [(i - 1 + b - p) // s - m + 1 for i, b, p, s, m in zip(spatial, (b for b, _ in arg.pads), phase, strides, first)]
    if any(t == 0 for t in taps) or any(c <= 0 for c in count): continue                     # no tap, or no pixel: zeros
    # the phase's taps p, p+s, ...: the tap axis padded to a multiple of s, cut in (taps, s), column p kept; then flipped
    wp = pad(wt, [(0, 0)] * 2 + [(0, -(-k // s) * s - k) for k, s in zip(kernel, strides)])
    wp = reshape(wp, (*wt.shape[:2], *[v for k, s in zip(kernel, strides) for v in (-(-k // s), s)]))
    wp = shrink(wp, [(0, d) for d in wt.shape[:2]] + [r for t, p in zip(taps, phase) for r in ((0, t), (p, p + 1))])
    wp = flip(reshape(wp, (*wt.shape[:2], *taps)), range(2, 2 + nd))
    # dx_p[m] = sum over j of g[m - j] * w[p + j*s]: a stride-1 conv of g padded by taps-1-first before (a crop when negative)
    pads = tuple((t - 1 - m, c - o - (t - 1 - m) + t - 1) for t, m, c, o in zip(taps, first, count, outs))
    part = conv(g, wp, arg._replace(stride=(1,) * nd, dilation=(1,) * nd, pads=pads, dtype=g.dtype))   # (bs, cin, *count)
    # pixel m of the phase is x's i = m*s + p - before: spread out by the stride, then placed at the first one's i
    start = [m * s + p - b for m, s, p, (b, _) in zip(first, strides, phase, arg.pads)]
    part = pad(_spread(part, strides), [(0, 0)] * 2 + [(a, i - a - c * s) for a, i, c, s in zip(start, spatial, count, strides)])
    dx = part if dx is None else uop(Ops.ADD, g.dtype, (dx, part))
  return dx if dx is not None else _zeros(g, (bs, cin, *spatial))                          # no pixel sees a tap

def _swap_batch_channels(x: UOp, groups: int) -> UOp:
  """x (bs, cin, *spatial) as the weight gradient's conv input: (cin/groups, groups*bs, *spatial)."""
  nd, (bs, cin) = len(x.shape) - 2, x.shape[:2]
  if groups == 1: return permute(x, (1, 0, *range(2, 2 + nd)))  # a plain swap: the GEMM reads x's own copy
  xt = permute(reshape(x, (bs, groups, cin // groups, *x.shape[2:])), (2, 1, 0, *range(3, 3 + nd)))
  return reshape(xt, (cin // groups, groups * bs, *x.shape[2:]))

def _gradient_as_weight(g: UOp, groups: int) -> UOp:
  """g (bs, cout, *out) as the weight gradient's conv weight: (cout, bs, *out), its output positions as the taps."""
  nd, (bs, cout) = len(g.shape) - 2, g.shape[:2]
  gt = permute(reshape(g, (bs, groups, cout // groups, *g.shape[2:])), (1, 2, 0, *range(3, 3 + nd)))
  return reshape(gt, (cout, bs, *g.shape[2:]))

def weight_gradient(g: UOp, x: UOp, w: UOp, arg: ConvArg) -> UOp:
  """d(loss)/dw of conv(x, w) given g (bs, cout, *out): dw[oc, c, k] = sum over n and o of
  g[n, oc, o] * x[n, c, o*stride + k*dilation - before], a conv too: of x with batch and channels swapped (the input
  channels as its batch, the batch as its channels, per group) by g as the weight (its output positions as the taps), at
  stride `dilation` and dilation `stride`; its output holds at least the kernel's taps. A strided, undilated conv's runs
  per phase of the taps (weight_gradient_by_phase)."""
  nd, groups = len(arg.stride), arg.groups
  if any(s > 1 for s in arg.stride) and all(d == 1 for d in arg.dilation): return cast(weight_gradient_by_phase(g, x, w, arg), w.dtype)
  dw = conv(_swap_batch_channels(cast(x, g.dtype), groups), _gradient_as_weight(g, groups),
            arg._replace(stride=arg.dilation, dilation=arg.stride, dtype=g.dtype))
  dw = shrink(dw, [(0, d) for d in dw.shape[:2]] + [(0, k) for k in w.shape[2:]])              # (cin/groups, cout, *k)
  return cast(permute(dw, (1, 0, *range(2, 2 + nd))), w.dtype)

def weight_gradient_by_phase(g: UOp, x: UOp, w: UOp, arg: ConvArg) -> UOp:
  """The weight gradient of a strided, undilated conv by phase of the taps. With k = j*stride + q (per dim),
  x[o*stride + k - before] is x_q[o + j] where x_q[m] = padded x[m*stride + q]: the taps of phase q are the weight
  gradient of a stride-1 conv of x_q, so each phase is a GEMM over dense, unit-stride windows (the one strided conv read
  every stride-th pixel and computed taps up to a multiple of the stride: 16 for 9 at 3x3/2). The phases' taps interleave
  into dw (cout, cin/groups, *k) in g's dtype."""
  nd, strides, kernel, outs, groups = len(arg.stride), arg.stride, w.shape[2:], g.shape[2:], arg.groups
  gt, xg = _gradient_as_weight(g, groups), cast(x, g.dtype)
  bs, cin = x.shape[:2]
  dw = None
  for phase in itertools.product(*[range(s) for s in strides]):
    taps = [-(-(k - q) // s) if q < k else 0 for k, q, s in zip(kernel, phase, strides)]
    if any(t == 0 for t in taps): continue                                                    # taps past the kernel
    # x_q: x padded so that it holds (out + taps - 1) blocks of `stride` pixels, then column q of each block
    rows = [o + t - 1 for o, t in zip(outs, taps)]
    xq = pad(xg, [(0, 0)] * 2 + [(b, m * s - i - b) for (b, _), m, s, i in zip(arg.pads, rows, strides, x.shape[2:])])
    xq = reshape(xq, (bs, cin, *[v for m, s in zip(rows, strides) for v in (m, s)]))
    xq = reshape(shrink(xq, [(0, bs), (0, cin)] + [r for m, q in zip(rows, phase) for r in ((0, m), (q, q + 1))]), (bs, cin, *rows))
    one = (1,) * nd
    part = conv(_swap_batch_channels(xq, groups), gt, arg._replace(stride=one, dilation=one, pads=((0, 0),) * nd, dtype=g.dtype))
    # (cin/groups, cout, *taps) -> tap j at k = j*s + q: spread out by the stride, placed at q, cut to the kernel
    part = _spread(permute(part, (1, 0, *range(2, 2 + nd))), strides)
    part = pad(part, [(0, 0)] * 2 + [(q, k - q - t * s) for q, k, t, s in zip(phase, kernel, taps, strides)])
    dw = part if dw is None else uop(Ops.ADD, g.dtype, (dw, part))
  return dw
