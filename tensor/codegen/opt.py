"""Kernel optimizations as an Opt list: each Opt names one loop of a rangeified kernel (its axis) and how to change it;
the rule set of its kind in rules/opt.rules does the change. tensor/codegen/heuristic.py picks the list (a search could);
NOOPT=1 is the empty list.

  UPCAST axis n   an output loop as n lanes per iteration (n=0: all of it): one store per lane, vectors of consecutive ones
  UNROLL axis n   a reduction loop as n interleaved partial accumulators (a vector accumulator), combined after it
  TILE   axis n   a loop as an outer loop and an inner loop of n iterations (cache blocking)
  SWAP   axis m   output loops axis and m change places (loops nest in order of their ids)

Axes count the loops as they are when the Opt applies (`loops`): the output loops, outermost first, then the reduction
loops. After the list: rules/expand.rules makes one copy per lane, rules/vectorize.rules vector ops of the lanes.
"""
from __future__ import annotations
from typing import Callable, NamedTuple
from runtime.ops import Ops
from runtime.rewrite import graph_rewrite
from runtime.uop import UOp, uop
from rules.opt_helpers import OptContext, lanes

class Opt(NamedTuple):
  op: str
  axis: int
  amount: int
  def __repr__(self) -> str: return f"Opt({self.op}, {self.axis}, {self.amount})"

class OptError(ValueError):
  """An Opt that does not apply to the kernel: no such loop, a loop of the wrong kind, or an amount that does not divide it."""

KINDS = ("UPCAST", "UNROLL", "TILE", "SWAP")
MAX_LANES = 1024  # lanes of all UPCASTs and UNROLLs together: each lane is a copy of the kernel body until vectorized

def reduce_loops(sink: UOp) -> list[UOp]:
  return sorted({r for u in sink.toposort() if u.op is Ops.REDUCE for r in u.src[1:]}, key=lambda r: r.arg)

def output_loops(sink: UOp) -> list[UOp]:
  """The loops over the output, outermost first."""
  red = set(reduce_loops(sink))
  return sorted((u for u in sink.toposort() if u.op is Ops.RANGE and u not in red), key=lambda r: r.arg)

def loops(sink: UOp) -> list[UOp]:
  """The loops an Opt's axis counts: output loops outermost first, then reduction loops."""
  return output_loops(sink) + reduce_loops(sink)

def lanes_of(sink: UOp) -> int:
  """How many lanes the UPCASTs and UNROLLs applied so far make (the product of their amounts)."""
  n = 1
  for u in sink.toposort():
    if u.op is Ops.UNROLL and not u.src[0].src: n *= u.arg[0][1]
  return n

def trip_count(r: UOp) -> int | None: return r.src[0].arg if r.src[0].op is Ops.CONST else None

def apply_opt(sink: UOp, opt: Opt, new_id: Callable[[], int]) -> tuple[UOp, Opt]:
  """The kernel with one Opt applied, and the Opt with its amount resolved (0: the whole loop). Raises OptError when it
  does not apply."""
  from rules import opt as rules
  kind, axis, amount = opt
  if kind not in KINDS: raise OptError(f"unknown Opt kind {kind!r}: one of {', '.join(KINDS)}")
  outs, reds = output_loops(sink), reduce_loops(sink)
  every = outs + reds
  if not 0 <= axis < len(every): raise OptError(f"{opt}: the kernel has {len(every)} loops (axes 0 to {len(every) - 1})")
  r = every[axis]
  if kind == "SWAP":
    if r not in outs or not 0 <= amount < len(outs) or amount == axis:
      raise OptError(f"{opt}: SWAP takes two different output loops (axes 0 to {len(outs) - 1})")
    order = list(outs)
    order[axis], order[amount] = order[amount], order[axis]
    return graph_rewrite(sink, rules.swap, OptContext(None, None, ids={o: new_id() for o in order}), name="SWAP"), opt
  if kind == "UPCAST" and r not in outs: raise OptError(f"{opt}: UPCAST takes an output loop (axes 0 to {len(outs) - 1})")
  if kind == "UNROLL" and r in outs: raise OptError(f"{opt}: UNROLL takes a reduction loop (axes {len(outs)} to {len(every) - 1})")
  n = trip_count(r)
  if n is None: raise OptError(f"{opt}: the loop's length is not a constant")
  if amount == 0 and kind != "TILE": amount = n
  if amount < 2 or n % amount or (kind == "TILE" and amount == n):
    raise OptError(f"{opt}: the amount must divide the loop's {n} iterations{' and be shorter' if kind == 'TILE' else ''} (and be at least 2)")
  if kind == "UNROLL":
    bad = [q for q in sink.toposort() if q.op is Ops.REDUCE and r in q.src[1:] and (q.arg not in (Ops.ADD, Ops.MAX) or q.dtype.count != 1)]
    if bad: raise OptError(f"{opt}: only a sum or a max of scalars is split into partial accumulators, not a {bad[0].arg} of {bad[0].dtype}")
  if kind in ("UPCAST", "UNROLL") and lanes_of(sink) * amount > MAX_LANES:
    raise OptError(f"{opt}: more than {MAX_LANES} lanes in all")
  outer = uop(Ops.RANGE, r.dtype, (uop(Ops.CONST, r.dtype, (), n // amount),), r.arg) if amount < n else None
  if kind == "TILE":
    inner = uop(Ops.RANGE, r.dtype, (uop(Ops.CONST, r.dtype, (), amount),), new_id())
    ctx = OptContext(r, _scaled(outer, amount, inner), outer, inner)  # type: ignore[arg-type]
    return graph_rewrite(sink, rules.tile, ctx, name="TILE"), Opt(kind, axis, amount)
  uid = new_id()
  lane = lanes(r.dtype, uid, amount)
  ctx = OptContext(r, lane if outer is None else _scaled(outer, amount, lane), outer, None, uid, amount)
  return graph_rewrite(sink, rules.upcast if kind == "UPCAST" else rules.unroll, ctx, name=kind), Opt(kind, axis, amount)

def _scaled(outer: UOp, amount: int, inner: UOp) -> UOp:
  return uop(Ops.ADD, outer.dtype, (uop(Ops.MUL, outer.dtype, (outer, uop(Ops.CONST, outer.dtype, (), amount))), inner))

def apply_opts(sink: UOp, opts: list, new_id: Callable[[], int]) -> tuple[UOp, list[Opt]]:
  """The kernel with each Opt applied in order (each one's axis counts the loops as the ones before left them), and the
  Opts as applied (amounts resolved)."""
  done = []
  for o in opts:
    sink, o = apply_opt(sink, Opt(*o), new_id)
    done.append(o)
  return sink, done
