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

class CodegenContext:
  """The ctx of rules/rangeify.rules and rules/lower.rules, made by tensor/codegen for each kernel: counters for fresh RANGE and
  accumulator ids, the kernel's index type, and the memos the rules keep."""
  def __init__(self, first_range: int = 0, index: DType = dtypes.int32):
    self.next_range, self.next_reg, self.index = first_range, 0, index
    self.scopes: dict = {}
    self.reduces: dict[UOp, UOp] = {}  # AT(REDUCE_AXIS, ...) -> its REDUCE (the memo of rules/rangeify.rules)
    self.shared_outer: dict[UOp, frozenset] = {}  # reduce RANGE -> loops around all the REDUCEs over it (rules/lower_helpers)
  def new_range(self) -> int:
    self.next_range += 1
    return self.next_range - 1
  def new_reg(self) -> int:
    self.next_reg += 1
    return self.next_reg - 1

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

def below(i: UOp, d) -> bool:
  """Whether index i is surely below size d (an int, or a Variable's expression: then i must be a loop over d itself, or
  stay below the least value d takes)."""
  if d.__class__ is int: return bound(i) < d
  if i.op is Ops.RANGE and (i.src[0] is d or (i.src[0].op is Ops.CAST and i.src[0].src[0] is d)): return True
  try: return bound(i) < int(d.vmin)
  except (TypeError, ValueError): return False

def flat_index(terms, dt: DType) -> UOp:
  """The sum of index * stride over (index, stride) pairs (a stride is an int or an index node), nested as i0*s0 + (i1*s1 +
  (... + 0)): the form whose terms the symbolic rules combine best (a sum nested the other way can keep a div/mod apart)."""
  out = ix(0, dt)
  for i, s in reversed(terms): out = uop(Ops.ADD, dt, (i if s.__class__ is int and s == 1 else uop(Ops.MUL, dt, (i, ix(s, dt))), out))
  return out

@functools.cache  # a pure function of two shapes, and kernels reshape between few distinct pairs
def reshape_plan(out_shape: tuple[int, ...], in_shape: tuple[int, ...]) -> tuple[tuple, ...]:
  """How a reshape's input dims read its output's indices: the two shapes matched group by group (dims whose sizes multiply
  to the same number; trailing size-1 dims join a group, so every dim is placed). Per group: (keep, terms, dims), keep the
  output dim whose index the group's one input dim is when it has one dim on each side (else None), terms the (output dim,
  stride) of the group's flat index, dims the (divisor, size) of each of its input dims, the divisor the product of the sizes
  after it in the group."""
  plan: list[tuple] = []
  no, ni, i, j = len(out_shape), len(in_shape), 0, 0
  while i < no or j < ni:
    gi, gj, po, pi = [i], [j], out_shape[i] if i < no else 1, in_shape[j] if j < ni else 1
    i, j = i + 1, j + 1
    while po != pi:
      if po < pi: gi.append(i); po *= out_shape[i]; i += 1  # noqa: E702
      else: gj.append(j); pi *= in_shape[j]; j += 1  # noqa: E702
    while i < no and out_shape[i] == 1 and (j >= ni or in_shape[j] != 1): gi.append(i); i += 1  # noqa: E702
    while j < ni and in_shape[j] == 1 and (i >= no or out_shape[i] != 1): gj.append(j); j += 1  # noqa: E702
    # only a group's first dim can be past the end (the other shape has trailing dims left)
    if gi[0] >= no: gi = []
    if gj[0] >= ni: gj = []
    terms, st = [], 1
    for k in reversed(gi):
      if out_shape[k] != 1: terms.append((k, st))
      st *= out_shape[k]
    dims, div = [], 1
    for k in reversed(gj): dims.append((div, in_shape[k])); div *= in_shape[k]  # noqa: E702
    plan.append((gi[0] if len(gi) == 1 and len(gj) == 1 else None, tuple(reversed(terms)), tuple(reversed(dims))))
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
