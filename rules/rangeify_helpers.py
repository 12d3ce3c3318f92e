"""Helpers for rules/rangeify.rules: the index arithmetic of each movement op (hand-written; imports only runtime).

Every function takes a = AT(x, valid, i0, ...) where x is the op being indexed, and returns the equivalent node one
level down. Index expressions are built with plain ADD/MUL/IDIV/MOD/CMPLT nodes; the symbolic rules clean them up.
"""
from __future__ import annotations
import math
from runtime.dtype import dtypes
from runtime.ops import Ops
from runtime.uop import UOp, uop

# index arithmetic is in the kernel's index type, ctx.index: int32, or int64 when a size reaches 2**31 (tensor/codegen)
def _c(ctx, v) -> UOp:
  # a size may be a Variable (a symbolic shape): its value, in the index type
  if v.__class__ is int: return uop(Ops.CONST, ctx.index, (), v)
  return v if v.dtype is ctx.index else uop(Ops.CAST, ctx.index, (v,))
def output_loops(ctx, shape: tuple) -> list[UOp]:
  """The indices of a kernel's output: a loop (a RANGE numbered by ctx) per dimension, 0 for a dimension of size 1."""
  return [_c(ctx, 0) if d.__class__ is int and d == 1 else uop(Ops.RANGE, ctx.index, (_c(ctx, d),), ctx.new_range()) for d in shape]
def _add(a: UOp, b: UOp) -> UOp: return uop(Ops.ADD, a.dtype, (a, b))
def _mul(a: UOp, b: UOp) -> UOp: return uop(Ops.MUL, a.dtype, (a, b))
# the value's dtype: a parameter's AT is an element, not the pointer
def _at(x: UOp, valid: UOp, idx) -> UOp: return uop(Ops.AT, x.dtype.base, (x, valid, *idx))
def _and(a: UOp, b: UOp) -> UOp:
  if a.op is Ops.CONST: return b if a.arg else a
  return uop(Ops.AND, dtypes.bool, (a, b))
def _lt(a: UOp, b: UOp) -> UOp: return uop(Ops.CMPLT, dtypes.bool, (a, b))
def _not(a: UOp) -> UOp: return uop(Ops.CMPNE, dtypes.bool, (a, uop(Ops.CONST, dtypes.bool, (), True)))

def at_const(a: UOp) -> UOp:
  """A tensor constant (it has a DEVICE source) as a kernel constant."""
  c = a.src[0]
  return uop(Ops.CONST, c.dtype, (), c.arg)

def at_elementwise(a: UOp) -> UOp:
  x, rest = a.src[0], a.src[1:]
  return uop(x.op, x.dtype, tuple(uop(Ops.AT, s.dtype, (s, *rest)) for s in x.src), x.arg)

def _unflatten(ctx, linear: UOp, shape: tuple[int, ...]) -> list[UOp]:
  out, stride = [], 1
  for d in reversed(shape):
    if d == 1: out.append(_c(ctx, 0))
    else:
      q = linear if stride == 1 else uop(Ops.IDIV, ctx.index, (linear, _c(ctx, stride)))
      out.append(q if stride * d >= _bound(linear) + 1 else uop(Ops.MOD, ctx.index, (q, _c(ctx, d))))
    stride *= d
  return out[::-1]

def _bound(u: UOp) -> int:
  try: return int(u.vmax)
  except (TypeError, ValueError): return dtypes.max(u.dtype)

def at_reshape(ctx, a: UOp) -> UOp:
  """Reshape: match the two shapes group by group (dims whose sizes multiply to the same number), so only a group that
  really merges or splits dims pays for a division."""
  x, valid, idx = a.src[0].src[0], a.src[1], a.src[2:]
  out_shape, in_shape = a.src[0].shape, x.shape
  # an empty tensor has no element to read: any index, never valid
  if 0 in in_shape or 0 in out_shape: return _at(x, uop(Ops.CONST, dtypes.bool, (), False), [_c(ctx, 0)] * len(in_shape))
  if any(d.__class__ is UOp for d in out_shape + in_shape): return _at(x, valid, _symbolic_reshape(ctx, idx, out_shape, in_shape))
  new: list[UOp] = []
  i = j = 0
  while i < len(out_shape) or j < len(in_shape):
    gi, gj = [i], [j]
    po = out_shape[i] if i < len(out_shape) else 1
    pi = in_shape[j] if j < len(in_shape) else 1
    i, j = i + 1, j + 1
    while po != pi:
      if po < pi: gi.append(i); po *= out_shape[i]; i += 1  # noqa: E702
      else: gj.append(j); pi *= in_shape[j]; j += 1  # noqa: E702
    # trailing size-1 dims join the group, so every dim is placed
    while i < len(out_shape) and out_shape[i] == 1 and (j >= len(in_shape) or in_shape[j] != 1): gi.append(i); i += 1  # noqa: E702
    while j < len(in_shape) and in_shape[j] == 1 and (i >= len(out_shape) or out_shape[i] != 1): gj.append(j); j += 1  # noqa: E702
    gi = [k for k in gi if k < len(out_shape)]
    gj = [k for k in gj if k < len(in_shape)]
    if len(gi) == 1 and len(gj) == 1:
      new.append(idx[gi[0]])
      continue
    linear, stride = _c(ctx, 0), 1
    for k in reversed(gi):
      if out_shape[k] != 1: linear = _add(_mul(idx[k], _c(ctx, stride)), linear) if stride != 1 else _add(idx[k], linear)
      stride *= out_shape[k]
    new.extend(_unflatten(ctx, linear, tuple(in_shape[k] for k in gj)))
  return _at(x, valid, new)

def _symbolic_reshape(ctx, idx, out_shape: tuple, in_shape: tuple) -> list[UOp]:
  """A reshape where a size is a Variable: sizes can't be grouped by value, so the flat index over all the output's dims is
  split over all the input's (the outermost input index needs no modulo: the flat index stays below the element count)."""
  linear, stride = _c(ctx, 0), _c(ctx, 1)
  for k in reversed(range(len(out_shape))):
    if not (out_shape[k].__class__ is int and out_shape[k] == 1): linear = _add(_mul(idx[k], stride), linear)
    stride = _mul(stride, _c(ctx, out_shape[k]))
  new, stride = [], _c(ctx, 1)
  for k in reversed(range(len(in_shape))):
    d = in_shape[k]
    if d.__class__ is int and d == 1: new.append(_c(ctx, 0))
    else:
      q = uop(Ops.IDIV, ctx.index, (linear, stride))
      new.append(q if k == 0 else uop(Ops.MOD, ctx.index, (q, _c(ctx, d))))
    stride = _mul(stride, _c(ctx, d))
  return new[::-1]

def at_permute(a: UOp) -> UOp:
  p = a.src[0]
  x, order, idx = p.src[0], p.arg, a.src[2:]
  new = [None] * len(order)
  for k, o in enumerate(order): new[o] = idx[k]
  return _at(x, a.src[1], new)

def at_expand(ctx, a: UOp) -> UOp:
  x = a.src[0].src[0]
  return _at(x, a.src[1], [_c(ctx, 0) if d == 1 and o != 1 else i for i, d, o in zip(a.src[2:], x.shape, a.src[0].shape)])

def at_shrink(ctx, a: UOp) -> UOp:
  s = a.src[0]
  return _at(s.src[0], a.src[1], [i if b == 0 else _add(i, _c(ctx, b)) for i, (b, _) in zip(a.src[2:], s.arg)])

def at_flip(ctx, a: UOp) -> UOp:
  f = a.src[0]
  x = f.src[0]
  return _at(x, a.src[1], [_add(_mul(i, _c(ctx, -1)), _c(ctx, d - 1)) if fl else i for i, d, fl in zip(a.src[2:], x.shape, f.arg)])

def at_pad(ctx, a: UOp) -> UOp:
  """Inside the data: the source at the shifted index; in the padding: zero. Loads below are guarded by `inside`."""
  p = a.src[0]
  x, valid, idx = p.src[0], a.src[1], a.src[2:]
  inside = uop(Ops.CONST, dtypes.bool, (), True)
  new = []
  for i, d, (b, _) in zip(idx, x.shape, p.arg):
    if b == 0 and _bound(i) < d:
      new.append(i)
      continue
    shifted = i if b == 0 else _add(i, _c(ctx, -b))
    cond = _lt(shifted, _c(ctx, d))
    if b: cond = _and(_not(_lt(shifted, _c(ctx, 0))), cond)
    inside = _and(inside, cond)
    new.append(shifted)
  value = _at(x, _and(valid, inside), new)
  if inside.op is Ops.CONST: return value
  return uop(Ops.WHERE, value.dtype, (inside, value, uop(Ops.CONST, value.dtype, (), _zero(value.dtype))))

def at_gather(ctx, a: UOp) -> UOp:
  """GATHER(x, idx) at (s..., r...) is x at (idx[s...], r...) where 0 <= idx[s...] < len(x) (tested in idx's own type, so a
  wide index can't wrap into range), else zero, as padding is."""
  g = a.src[0]
  x, idx, valid, pos = g.src[0], g.src[1], a.src[1], a.src[2:]
  k, dt = len(idx.shape), idx.dtype.base  # a parameter's dtype is its pointer's
  j = uop(Ops.AT, dt, (idx, valid, *pos[:k]))
  def c(v): return uop(Ops.CONST, dt, (), v)
  inside = _and(_not(_lt(j, c(0))), _lt(j, c(x.shape[0])))
  value = _at(x, _and(valid, inside), [uop(Ops.CAST, ctx.index, (j,)), *pos[k:]])
  return uop(Ops.WHERE, value.dtype, (inside, value, uop(Ops.CONST, value.dtype, (), _zero(value.dtype))))

def is_plus_zero(v) -> bool:
  """v is the zero a guarded load reads (0, False or +0.0; not -0.0, whose sign a select would keep)."""
  return v == 0 and not (isinstance(v, float) and math.copysign(1.0, v) < 0)

def implied_by(v: UOp, w: UOp) -> bool:
  """v is one of the clauses of the AND chain w (so w implies v)."""
  stack = [w]
  while stack:
    u = stack.pop()
    if u is v: return True
    if u.op is Ops.AND: stack.extend(u.src)
  return False

def _zero(d):
  return False if d is dtypes.bool else 0.0 if dtypes.is_float(d) else 0

def at_reduce(ctx, a: UOp) -> UOp:
  """A reduction at an index: a REDUCE over fresh RANGEs for the reduced axes (size-1 axes need no loop).
  Memoized in ctx: the same reduction at the same index is one REDUCE, however often the rewrite meets it (graph_rewrite
  memoizes a node's final form, not the steps on the way, and fresh RANGEs make this rule's result differ each call)."""
  if a in ctx.reduces: return ctx.reduces[a]
  ctx.reduces[a] = out = _reduce(ctx, a)
  return out

def _reduce(ctx, a: UOp) -> UOp:
  r = a.src[0]
  x, (op, axes) = r.src[0], r.arg
  new, ranges = list(a.src[2:]), []
  for ax in axes:
    if x.shape[ax] == 1: new[ax] = _c(ctx, 0)
    else:
      rng = uop(Ops.RANGE, ctx.index, (_c(ctx, x.shape[ax]),), ctx.new_range())
      ranges.append(rng)
      new[ax] = rng
  inner = _at(x, a.src[1], new)
  if not ranges: return inner
  return uop(Ops.REDUCE, r.dtype, (inner, *ranges), op)
