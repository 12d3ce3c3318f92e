"""Helpers for rules/opt.rules: the context one kernel optimization (an Opt) is applied with (hand-written; runtime only).

tensor/codegen/opt.py checks an Opt and builds its OptContext: the loop it changes, and what takes that loop's place.
Lanes are UNROLL((CONST 0), ..., (CONST n-1)) with arg ((uid, n),): "this index is each of 0..n-1", one lane each,
which rules/expand.rules later turns into one scalar copy of every node above it per lane. STASH, SPLIT and PREFETCH
have contexts of their own (Stash, Split, Prefetch), declared in rules/opt.rules as what its rules read.
"""
from __future__ import annotations
from typing import Callable, NamedTuple
from runtime.ops import Ops
from runtime.uop import UOp, uop

def lanes(dtype, uid: int, n: int) -> UOp:
  """The lane index of a new lane axis `uid` of n lanes."""
  return uop(Ops.UNROLL, dtype, tuple(uop(Ops.CONST, dtype, (), k) for k in range(n)), ((uid, n),))

class OptContext:
  """One Opt being applied: `rng` is the loop it changes and `index` the expression taking its place (rules/opt.rules).
  `outer` and `inner` are the loops of that expression (None where it has none; `loops`: those it has, outer first),
  `uid` the id of its lanes."""
  def __init__(self, rng: UOp | None, index: UOp | None, outer: UOp | None = None, inner: UOp | None = None, uid: int = -1, amount: int = 1,
               ids: dict[UOp, int] | None = None):
    self.rng, self.index, self.outer, self.inner, self.uid, self.amount = rng, index, outer, inner, uid, amount
    self.loops = tuple(r for r in (outer, inner) if r is not None)
    self.ids = ids or {}  # SWAP: loop -> its new id (loops nest by id, tensor/codegen/linearize.py)
    # UPCAST: its lanes, and each GROUP array of partials that gets a partial per lane -> its longer replacement
    self.lane: UOp | None = None
    self.widen: dict[UOp, UOp] = {}

  def wide(self, buf: UOp) -> UOp: return self.widen[buf]

class Stash(NamedTuple):
  """A STASH being applied: the kernel's value at the output loop's index (`value`), what replaces it (`load`: the output
  read back after the reduction), and the store of the reduction's values inside its loop (`store`)."""
  value: UOp
  load: UOp
  store: UOp

class Prefetch(NamedTuple):
  """A PREFETCH being applied: the prefetches the kernel's SINK takes in."""
  nodes: tuple[UOp, ...]

class Window(NamedTuple):
  """A WINDOW being applied: the store's value `inside ? new : old` (which becomes new), and each loop of the window -> its
  first index plus a loop over the window's length."""
  value: UOp
  shift: dict[UOp, UOp]

class LocalTile(NamedTuple):
  """A LOCAL being applied: the matmul's reduction, and its form over the tiles in the group's shared memory."""
  reduce: UOp
  tiled: UOp

class Split(NamedTuple):
  """A SPLIT being applied: loop `rng` of n iterations becomes `index` = part * (n / amount) + inner; `new_id` numbers the
  arrays of partials and the loops combining them. A GROUP is one too (index = inner * amount + part), its partials in
  an array of address space "shared" (a work-group's memory, where the target places the loop on its work-items)."""
  rng: UOp
  index: UOp
  part: UOp
  inner: UOp
  amount: int
  new_id: Callable[[], int]
  space: str = "local"
  @property
  def loops(self) -> tuple[UOp, ...]: return (self.inner,)  # the loops of `index` a partial reduction runs over

def with_loops(ctx: OptContext | Split, ranges: tuple[UOp, ...]) -> tuple[UOp, ...]:
  """A reduction's loops with the replaced one (now ctx.index) swapped for the loops of ctx.index."""
  return tuple(x for r in ranges for x in (ctx.loops if r is ctx.index else (r,)))

def combined(op: Ops, parts: UOp) -> UOp:
  """The lanes of a vector of partial reductions combined by op, as a balanced tree (short dependency chains). A max or
  a sum of an even count of lanes first combines its halves lane by lane, each level a vector (rules/vectorize.rules makes
  it vector ops: a softmax's 64 partial maxes in 4 registers take 3 vector maxes, then 16 lanes halved). A sum's halves
  were its adjacent pairs until Gemma 3 270M's decode step, a 16-lane sum per row of its quantized matvecs: 16 lane
  extracts and 15 scalar adds per row -> a vector add and 7 (the step on one Zen 4 core: 19.4 -> 17.9 ms of CPU time,
  medians of three alternating runs)."""
  while op in (Ops.MAX, Ops.ADD) and (n := parts.dtype.count) > 2 and n % 2 == 0:
    h = n // 2
    parts = uop(Ops.VECTORIZE, parts.dtype.scalar.vec(h), tuple(uop(op, parts.dtype.scalar, (uop(Ops.GEP, parts.dtype.scalar, (parts,), (k,)),
                                                                                              uop(Ops.GEP, parts.dtype.scalar, (parts,), (k + h,))))
                                                                 for k in range(h)))
  xs = [uop(Ops.GEP, parts.dtype.scalar, (parts,), (k,)) for k in range(parts.dtype.count)]
  while len(xs) > 1: xs = [uop(op, xs[i].dtype, (xs[i], xs[i + 1])) if i + 1 < len(xs) else xs[i] for i in range(0, len(xs), 2)]
  return xs[0]
