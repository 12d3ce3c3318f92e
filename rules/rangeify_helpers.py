"""Helpers for rules/rangeify.rules (hand-written; imports only runtime): how a reshape's dims match, a size as an index,
a flat index, bounds. The rules build every index expression; these are the small computations they call.

Index arithmetic is in the kernel's index type (int32, or int64 when a size reaches 2**31: tensor/codegen), which the rules
pass in as `dt`; a size may be a Variable (a symbolic shape).
"""
from __future__ import annotations
import functools, math
from runtime.dtype import DType, dtypes
from runtime.ops import Ops
from runtime.uop import UOp, uop

def ix(v, dt: DType) -> UOp:
  """A size or an offset (an int, or a Variable's expression) as an index of type dt."""
  if v.__class__ is int: return uop(Ops.CONST, dt, (), v)
  return v if v.dtype is dt else uop(Ops.CAST, dt, (v,))

def output_loops(ctx, shape: tuple) -> list[UOp]:
  """The indices of a kernel's output: a loop (a RANGE numbered by ctx) per dimension, 0 for a dimension of size 1."""
  return [ix(0, ctx.index) if d.__class__ is int and d == 1 else uop(Ops.RANGE, ctx.index, (ix(d, ctx.index),), ctx.new_range()) for d in shape]

def bound(u: UOp) -> int:
  """The largest value an index can take (range analysis; the type's largest when it can't say)."""
  try: return int(u.vmax)
  except (TypeError, ValueError): return dtypes.max(u.dtype)

def flat_index(terms, dt: DType) -> UOp:
  """The sum of index * stride over (index, stride) pairs (a stride is an int or an index node), nested as i0*s0 + (i1*s1 +
  (... + 0)): the form whose terms the symbolic rules combine best (a sum nested the other way can keep a div/mod apart)."""
  out = ix(0, dt)
  for i, s in reversed(terms): out = uop(Ops.ADD, dt, (i if s.__class__ is int and s == 1 else uop(Ops.MUL, dt, (i, ix(s, dt))), out))
  return out

@functools.cache  # a pure function of two shapes, and kernels reshape between few distinct pairs
def reshape_plan(out_shape: tuple[int, ...], in_shape: tuple[int, ...]) -> tuple[tuple, ...]:
  """How a reshape's input dims read its output's indices: the two shapes matched group by group (dims whose sizes multiply
  to the same number; trailing size-1 dims join a group, so every dim is placed). Per input dim: (keep, terms, div, size),
  keep the output dim whose index it is when its group is one dim on each side (else None), terms the (output dim, stride)
  of the group's flat index, div the product of the sizes after it in its group."""
  plan: list[tuple] = []
  i = j = 0
  while i < len(out_shape) or j < len(in_shape):
    gi, gj, po, pi = [i], [j], out_shape[i] if i < len(out_shape) else 1, in_shape[j] if j < len(in_shape) else 1
    i, j = i + 1, j + 1
    while po != pi:
      if po < pi: gi, po, i = gi + [i], po * out_shape[i], i + 1
      else: gj, pi, j = gj + [j], pi * in_shape[j], j + 1
    while i < len(out_shape) and out_shape[i] == 1 and (j >= len(in_shape) or in_shape[j] != 1): gi, i = gi + [i], i + 1
    while j < len(in_shape) and in_shape[j] == 1 and (i >= len(out_shape) or out_shape[i] != 1): gj, j = gj + [j], j + 1
    gi, gj = [k for k in gi if k < len(out_shape)], [k for k in gj if k < len(in_shape)]
    keep = gi[0] if len(gi) == 1 and len(gj) == 1 else None
    terms = tuple((k, math.prod(out_shape[m] for m in gi if m > k)) for k in gi if out_shape[k] != 1)
    plan += [(keep, terms, math.prod(in_shape[m] for m in gj if m > k), in_shape[k]) for k in gj]
  return tuple(plan)

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
