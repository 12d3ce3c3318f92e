"""Helpers for rules/lower.rules: which loops a node lies inside, and the loops of a reduction its value does not use
(hand-written; imports only runtime)."""
from __future__ import annotations
import math
from runtime.dtype import dtypes
from runtime.ops import Ops, cast_value
from runtime.uop import UOp

def scope(u: UOp, memo: dict) -> frozenset:
  """The RANGEs a node lies inside: the ones it depends on, minus those a REDUCE or END below it closes."""
  for x in u.toposort(gate=lambda x: x not in memo):
    if x in memo: continue
    s = memo[x.src[0]] - set(x.src[1:]) if x.op in (Ops.REDUCE, Ops.END) else frozenset().union(*(memo[c] for c in x.src))
    memo[x] = s | {x} if x.op is Ops.RANGE else s
  return memo[u]

def repeats(loops) -> int: return math.prod(g.src[0].arg for g in loops)

def unused_loops(ctx, r: UOp) -> tuple:
  """The loops of an ADD or MAX reduction, with a known trip count, that its value does not use (none when a float sum's
  count of equal terms is inf in its type: the loop stays)."""
  inside = scope(r.src[0], ctx.scopes)
  out = tuple(g for g in r.src[1:] if g not in inside and g.src[0].op is Ops.CONST) if r.arg in (Ops.ADD, Ops.MAX) else ()
  return () if r.arg is Ops.ADD and dtypes.is_float(r.dtype) and not math.isfinite(cast_value(repeats(out), r.dtype)) else out

def without_unused_loops(ctx, r: UOp) -> UOp:
  """r over the loops its value uses, or its value when it uses none. The loops it keeps get fresh ids: another reduction
  (an upcast lane) may run them inside a dropped loop, and a RANGE is one loop in one place."""
  unused = unused_loops(ctx, r)
  fresh = {g: g.replace(arg=ctx.new_range()) for g in r.src[1:] if g not in unused}
  return r.replace(src=(r.src[0].substitute(fresh), *fresh.values())) if fresh else r.src[0]

def loops_around(ctx, r: UOp) -> tuple[UOp, ...]:
  """The loops an accumulator of r is declared (and reset) in, outermost first: those around r, and around every reduction
  sharing its loops (upcast lanes share their reduce loops, and a lane not using an outer loop still sits in it)."""
  return tuple(sorted(scope(r, ctx.scopes).union(*(ctx.shared_outer.get(g, ()) for g in r.src[1:])), key=lambda g: g.arg))
