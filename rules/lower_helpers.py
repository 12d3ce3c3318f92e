"""Helpers for rules/lower.rules (hand-written; imports only runtime)."""
from __future__ import annotations
import math
from runtime.dtype import dtypes
from runtime.ops import Ops, cast_value, exec_alu
from runtime.uop import UOp, uop

def identity(op: Ops, dtype) -> object:
  """The value a reduction starts from."""
  if op is Ops.ADD: return 0.0 if dtypes.is_float(dtype) else False if dtype is dtypes.bool else 0
  if op is Ops.MUL: return 1.0 if dtypes.is_float(dtype) else True if dtype is dtypes.bool else 1
  if op is Ops.MAX: return dtypes.min(dtype)
  raise ValueError(f"no identity for a {op} reduction")

def scope(u: UOp, memo: dict) -> frozenset:
  """The RANGEs a node lies inside: the ones it depends on, minus those a REDUCE or END below it closes."""
  stack = [u]
  while stack:
    x = stack[-1]
    if x in memo: stack.pop(); continue  # noqa: E702
    todo = [s for s in x.src if s not in memo]
    if todo: stack.extend(todo); continue  # noqa: E702
    stack.pop()
    s = frozenset().union(*(memo[c] for c in x.src)) if x.src else frozenset()
    if x.op is Ops.RANGE: s = s | {x}
    elif x.op in (Ops.REDUCE, Ops.END): s = memo[x.src[0]] - set(x.src[1:])
    memo[x] = s
  return memo[u]

def _trips(rng: UOp) -> int | None: return rng.src[0].arg if rng.src[0].op is Ops.CONST else None

def unused_loops(ctx, r: UOp) -> list[UOp]:
  """The loops of an ADD or MAX reduction that its value does not depend on (those with a known trip count)."""
  if r.arg not in (Ops.ADD, Ops.MAX): return []
  inside = scope(r.src[0], ctx.scopes)
  out = [g for g in r.src[1:] if g not in inside and _trips(g) is not None]
  if r.arg is Ops.ADD and r.dtype is not dtypes.bool and out:
    n = 1
    for g in out: n *= _trips(g)  # type: ignore[operator]
    if n > 0 and dtypes.is_float(r.dtype) and not math.isfinite(cast_value(n, r.dtype)): return []  # n is inf in half: keep the loop
  return out

def without_unused_loops(ctx, r: UOp) -> UOp:
  unused = unused_loops(ctx, r)
  used = tuple(g for g in r.src[1:] if g not in unused)
  if used:
    # the loops it keeps get fresh ids: another reduction (an upcast lane) may run them inside a dropped loop, and a RANGE is
    # one loop in one place, so sharing them would run this reduction's updates once per iteration of the dropped loop
    fresh = {g: uop(Ops.RANGE, g.dtype, g.src, ctx.new_range()) for g in used}
    x = uop(Ops.REDUCE, r.dtype, (r.src[0].substitute(fresh), *fresh.values()), r.arg)
  else: x = r.src[0]
  if r.arg is Ops.MAX or r.dtype is dtypes.bool: return x
  n = 1
  for g in unused: n *= _trips(g)  # type: ignore[operator]
  if n == 0: return UOp.const(r.dtype, identity(r.arg, r.dtype))
  if n == 1: return x
  times = UOp.const(r.dtype, cast_value(n, r.dtype))
  if x.op is Ops.CONST: return UOp.const(r.dtype, exec_alu(Ops.MUL, r.dtype, [x.arg, cast_value(n, r.dtype)]))
  return uop(Ops.MUL, r.dtype, (x, times))

def lower_reduce(ctx, r: UOp) -> UOp:
  x, ranges, op = r.src[0], r.src[1:], r.arg
  # upcast lanes share their reduce loops: an accumulator lives in every loop around any reduction sharing its loops
  outer = sorted(scope(r, ctx.scopes).union(*(ctx.shared_outer.get(g, ()) for g in ranges)), key=lambda g: g.arg)
  # the accumulator is declared (and reset) inside the loops around the reduction, so each output starts fresh
  acc = uop(Ops.DEFINE_REG, r.dtype, (UOp.const(r.dtype, identity(op, r.dtype)), *outer), ctx.new_reg())
  upd = uop(Ops.ASSIGN, r.dtype, (acc, uop(op, r.dtype, (acc, x))))
  end = uop(Ops.END, dtypes.void, (upd, *ranges))
  return uop(Ops.AFTER, r.dtype, (acc, end))
