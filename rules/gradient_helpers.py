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

def channels_last(g: UOp) -> UOp:
  """g (bs, c, *spatial) stored channels-last and viewed back: both gradient convs read it (the transposed conv copies it
  with its padding, the weight's conv reads it as its weight), not each recomputing it."""
  nd = len(g.shape) - 2
  cl = uop(Ops.CONTIGUOUS, g.dtype, (_mv(Ops.PERMUTE, g, (0, *range(2, 2 + nd), 1)),))
  return _mv(Ops.PERMUTE, cl, (0, 1 + nd, *range(1, 1 + nd)))

def conv_input_gradient(g: UOp, u: UOp) -> UOp:
  """d(loss)/dx of u = CONV(value, x, w) given g (bs, cout, *out): the transposed convolution of g by w, built by the conv's
  own graph module through its arg (tensor/functional/conv_graph.input_gradient, as the value is built by arg.build)."""
  _, x, w = u.src
  return u.arg.input_grad(channels_last(g), x, w, u.arg)

def conv_weight_gradient(g: UOp, u: UOp) -> UOp:
  """d(loss)/dw of u = CONV(value, x, w) given g (bs, cout, *out): the convolution of x by g, built through the arg
  (tensor/functional/conv_graph.weight_gradient)."""
  _, x, w = u.src
  return u.arg.weight_grad(channels_last(g), x, w, u.arg)

__all__ = ["device_of", "full_like", "expanded_axes", "inverse_permutation", "unpad", "unshrink",
           "is_max", "prod_gradient", "gather_gradient", "conv_input_gradient", "conv_weight_gradient"]
