"""Kernel optimizations as an Opt list: each Opt names one loop of a rangeified kernel (its axis) and how to change it;
the rule set of its kind in rules/opt.rules does the change. tensor/codegen/heuristic.py picks the list (a search could);
NOOPT=1 is the empty list.

  UPCAST axis n   an output loop as n lanes per iteration (n=0: all of it): one store per lane, vectors of consecutive ones
  UNROLL axis n   a reduction loop as n interleaved partial accumulators (a vector accumulator), combined after it
  TILE   axis n   a loop as an outer loop and an inner loop of n iterations (cache blocking)
  SWAP   axis m   output loops axis and m change places (loops nest in order of their ids)
  SPLIT  axis n   a reduction loop as n partial reductions over consecutive blocks, one per iteration of a new loop that
                  threads share out (the same split on any number of threads), stored into a small array and combined in
                  order after it; the new loop is no Opt's axis
  GROUP  axis n   a reduction loop as n partial reductions, one per work-item of a group (each over every n-th element),
                  stored into the group's shared memory and, after a barrier, combined in order by each work-item; only
                  on a target with group memory (GPU-style: tensor/codegen/grid.py puts the loop on the work-items)
  PREFETCH axis d the loads in reduction loop axis ask for what they will read d iterations later of the output loop
                  they move with (the next row, while this one computes; a hint, no value changes)
  STASH  axis 0   the values a reduction loop reduces also stored into the output at the last output loop's index, and
                  read back there instead of computed again (softmax: each exponential computed once)
  LOCAL  axis n   a matmul's reduction loop in steps of n: a group of n x n work-items computes an n x n tile of the output,
                  each step its work-items load an n x n tile of each operand into the group's shared memory (one element
                  each), wait at a barrier, accumulate from the tiles, and wait again; only on a target with group memory,
                  and the last Opt of a list

Axes count the loops as they are when the Opt applies (`loops`): the output loops, outermost first, then the reduction
loops. After the list: rules/expand.rules makes one copy per lane, rules/vectorize.rules vector ops of the lanes.
"""
from __future__ import annotations
from typing import Callable, NamedTuple
from runtime.dtype import dtypes
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

KINDS = ("UPCAST", "UNROLL", "TILE", "SWAP", "SPLIT", "STASH", "PREFETCH", "GROUP", "LOCAL")
LOCAL_MAX = 16  # a LOCAL tile's side at most (its group is the square: 256 work-items)
MAX_LANES = 1024  # lanes of all UPCASTs and UNROLLs together: each lane is a copy of the kernel body until vectorized

def reduce_loops(sink: UOp) -> list[UOp]:
  return sorted({r for u in sink.toposort() if u.op is Ops.REDUCE for r in u.src[1:]}, key=lambda r: r.arg)

def output_loops(sink: UOp) -> list[UOp]:
  """The loops over the output, outermost first (not a SPLIT's loop of partials: an END closes it)."""
  topo = sink.toposort()
  red = set(reduce_loops(sink)) | {r for u in topo if u.op is Ops.END for r in u.src[1:]}
  return sorted((u for u in topo if u.op is Ops.RANGE and u not in red), key=lambda r: r.arg)

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
  if any(u.op is Ops.BARRIER for u in sink.toposort()):
    raise OptError(f"{opt}: the kernel has a LOCAL tile (its loops are the group's work-items): LOCAL is the last Opt")
  if kind == "LOCAL": return _local(sink, opt, r, outs, new_id), opt
  if kind == "SWAP":
    if r not in outs or not 0 <= amount < len(outs) or amount == axis:
      raise OptError(f"{opt}: SWAP takes two different output loops (axes 0 to {len(outs) - 1})")
    order = list(outs)
    order[axis], order[amount] = order[amount], order[axis]
    return graph_rewrite(sink, rules.swap, OptContext(None, None, ids={o: new_id() for o in order}), name="SWAP"), opt
  if kind == "STASH": return _stash(sink, opt, r, outs), opt
  if kind == "PREFETCH": return _prefetch(sink, opt, r, outs), opt
  if kind == "UPCAST" and r not in outs: raise OptError(f"{opt}: UPCAST takes an output loop (axes 0 to {len(outs) - 1})")
  if kind in ("UNROLL", "SPLIT", "GROUP") and r in outs:
    raise OptError(f"{opt}: {kind} takes a reduction loop (axes {len(outs)} to {len(every) - 1})")
  n = trip_count(r)
  if n is None: raise OptError(f"{opt}: the loop's length is not a constant")
  if amount == 0 and kind != "TILE": amount = n
  if amount < 2 or n % amount or (kind == "TILE" and amount == n):
    raise OptError(f"{opt}: the amount must divide the loop's {n} iterations{' and be shorter' if kind == 'TILE' else ''} (and be at least 2)")
  if kind == "UNROLL":
    bad = [q for q in sink.toposort() if q.op is Ops.REDUCE and r in q.src[1:] and (q.arg not in (Ops.ADD, Ops.MAX) or q.dtype.count != 1)]
    if bad: raise OptError(f"{opt}: only a sum or a max of scalars is split into partial accumulators, not a {bad[0].arg} of {bad[0].dtype}")
  if kind == "SPLIT": return _split(sink, Opt(kind, axis, amount), r, n, new_id), Opt(kind, axis, amount)
  if kind == "GROUP": return _group(sink, Opt(kind, axis, amount), r, n, new_id), Opt(kind, axis, amount)
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
  if kind == "UPCAST": ctx.lane, ctx.widen = lane, _widened_partials(sink, r, amount)
  return graph_rewrite(sink, rules.upcast if kind == "UPCAST" else rules.unroll, ctx, name=kind), Opt(kind, axis, amount)

def _widened_partials(sink: UOp, r: UOp, amount: int) -> dict[UOp, UOp]:
  """A GROUP's array of partials in group memory whose partials depend on output loop r, which an UPCAST makes `amount`
  lanes: the array, and one `amount` times as long (a partial per lane, rules/opt.rules' upcast indexes it)."""
  out = {}
  for u in sink.toposort():
    if u.op is Ops.STORE and u.src[0].op is Ops.INDEX and (buf := u.src[0].src[0]).op is Ops.DEFINE_LOCAL and buf.dtype.addrspace == "shared" \
        and r in u.src[1].toposort():
      out[buf] = buf.replace(dtype=buf.dtype.base.ptr(buf.dtype.size * amount, "shared"))
  return out

def _split(sink: UOp, opt: Opt, r: UOp, n: int, new_id: Callable[[], int]) -> UOp:
  """SPLIT of reduction loop r (n iterations) into opt.amount partials: every reduction over r must be of scalars and inside
  no loop, so the partials' array and loop sit outside every loop (a thread's iterations of an outer loop would share
  them) and no later UPCAST gives them lanes."""
  from rules import opt as rules
  from rules.lower_helpers import scope
  from rules.opt_helpers import Split
  if opt.amount == n: raise OptError(f"{opt}: the amount must be shorter than the loop's {n} iterations")
  memo: dict = {}
  if any(q.dtype.count != 1 or scope(q, memo) for q in sink.toposort() if q.op is Ops.REDUCE and r in q.src[1:]):
    raise OptError(f"{opt}: SPLIT takes a reduction of scalars inside no loop (not one of lanes, nor one in an output loop)")
  part = uop(Ops.RANGE, r.dtype, (uop(Ops.CONST, r.dtype, (), opt.amount),), new_id())
  inner = uop(Ops.RANGE, r.dtype, (uop(Ops.CONST, r.dtype, (), n // opt.amount),), r.arg)
  return graph_rewrite(sink, rules.split, Split(r, _scaled(part, n // opt.amount, inner), part, inner, opt.amount, new_id), name="SPLIT")

def _group(sink: UOp, opt: Opt, r: UOp, n: int, new_id: Callable[[], int]) -> UOp:
  """GROUP of reduction loop r (n iterations) into opt.amount partials, partial p over elements p, p + amount, ... (the
  work-items of a group read neighbouring elements together), kept in an array of the group's shared memory. Every
  reduction over r must be of scalars of 32 bits or more (a group's array holds them as they are)."""
  from rules import opt as rules
  from rules.opt_helpers import Split
  if opt.amount == n: raise OptError(f"{opt}: the amount must be shorter than the loop's {n} iterations")
  if any(q.dtype.count != 1 or q.dtype.itemsize < 4 for q in sink.toposort() if q.op is Ops.REDUCE and r in q.src[1:]):
    raise OptError(f"{opt}: GROUP takes reductions of scalars of 32 bits or more")
  if any(u.op is Ops.UNROLL for q in sink.toposort() if q.op is Ops.REDUCE and r in q.src[1:] for u in q.toposort()):
    # the shared array would need a partial per lane: an UPCAST after the GROUP gives it that (rules/opt.rules' upcast)
    raise OptError(f"{opt}: GROUP of a reduction that already has lanes (an UPCAST or UNROLL before it): put the GROUP first")
  part = uop(Ops.RANGE, r.dtype, (uop(Ops.CONST, r.dtype, (), opt.amount),), new_id())
  inner = uop(Ops.RANGE, r.dtype, (uop(Ops.CONST, r.dtype, (), n // opt.amount),), r.arg)
  ctx = Split(r, _scaled(inner, opt.amount, part), part, inner, opt.amount, new_id, "shared")
  return graph_rewrite(sink, rules.split, ctx, name="GROUP")

def _local(sink: UOp, opt: Opt, r: UOp, outs: list[UOp], new_id: Callable[[], int]) -> UOp:
  """LOCAL of reduction loop r of a matmul by tiles of T = opt.amount: its one reduction is a sum over r alone of a * b,
  both unguarded loads of 32-bit scalars, a moving with an output loop i that b does not move with, b with an output
  loop j that a does not (the innermost such that T divides). Then i = gi*T + l//T, j = gj*T + l%T and r = kt*T + kk,
  with l a new innermost output loop of T*T iterations (the group's work-items: tensor/codegen/grid.py gives it grid
  dimension 0, one group wide). In each iteration of kt, work-item l stores a at (i, kt*T + l%T) into As[l] and b at
  (kt*T + l//T, j) into Bs[l], a BARRIER waits for every store, then the work-item sums As[(l//T)*T + kk] *
  Bs[kk*T + l%T] over kk (the renderer ends kt's body with a second barrier, before the next stores)."""
  from rules import opt as rules
  from rules.opt_helpers import LocalTile
  def no(why: str) -> OptError: return OptError(f"{opt}: LOCAL takes {why}")
  T = opt.amount
  if r in outs: raise no(f"a reduction loop (axes {len(outs)} to {len(outs) + len(reduce_loops(sink)) - 1})")
  if not 2 <= T <= LOCAL_MAX: raise no(f"a tile of 2 to {LOCAL_MAX}")
  topo = sink.toposort()
  if lanes_of(sink) > 1 or any(u.op is Ops.DEFINE_LOCAL for u in topo): raise no("a kernel with no lanes and no arrays yet (apply it first)")
  qs = [u for u in topo if u.op is Ops.REDUCE and r in u.src[1:]]
  if len(sink.src) != 1 or sink.src[0].op is not Ops.STORE: raise no("a kernel of one store")
  # (a product of ints summed in a wider int: the CAST of the product)
  prod = qs[0].src[0].src[0] if len(qs) == 1 and qs[0].src[0].op is Ops.CAST else qs[0].src[0] if qs else None
  if len(qs) != 1 or qs[0].arg is not Ops.ADD or qs[0].src[1:] != (r,) or prod is None or prod.op is not Ops.MUL:
    raise no("a sum of products over the loop alone")
  q = qs[0]
  lds = prod.src
  def unguarded(idx: UOp) -> bool: return len(idx.src) == 2 or (idx.src[2].op is Ops.CONST and idx.src[2].arg is True)
  if any(ld.op is not Ops.LOAD or not unguarded(ld.src[0]) or ld.dtype.count != 1 or ld.dtype.itemsize != 4 for ld in lds):
    raise no("products of two unguarded loads of 32-bit scalars")
  moves = [{o for o in outs if o in ld.src[0].src[1].toposort()} for ld in lds]
  # each load's own output loop: the innermost that only it moves with and whose length the tile divides (a packed
  # operand's rows are two loops, 256 x 4: the outer one)
  mine = [sorted((o for o in moves[k] - moves[1 - k] if (trip_count(o) or 1) % T == 0), key=lambda o: o.arg) or
          sorted(moves[k] - moves[1 - k], key=lambda o: o.arg) for k in (0, 1)]
  if not all(mine) or any(r not in ld.src[0].src[1].toposort() for ld in lds):
    raise no("two loads that move with the reduction loop and each with an output loop the other does not")
  (i, j), n = (mine[0][-1], mine[1][-1]), [trip_count(mine[0][-1]), trip_count(mine[1][-1]), trip_count(r)]
  if any(m is None or m % T for m in n): raise no(f"loops whose lengths {n} the tile {T} divides")
  def const(v: int) -> UOp: return uop(Ops.CONST, r.dtype, (), v)
  def alu(op: Ops, a: UOp, b: UOp) -> UOp: return uop(op, r.dtype, (a, b))
  def rng(m: int, rid: int) -> UOp: return uop(Ops.RANGE, r.dtype, (const(m),), rid)
  l = rng(T * T, new_id())
  li, lj = alu(Ops.IDIV, l, const(T)), alu(Ops.MOD, l, const(T))
  kt, kk = rng(n[2] // T, r.arg), rng(T, new_id())
  def at(x: UOp, k: UOp) -> UOp: return graph_rewrite(x, rules.upcast, OptContext(r, _scaled(kt, T, k)), name="LOCAL index")
  bufs = [uop(Ops.DEFINE_LOCAL, ld.dtype.ptr(T * T, "shared"), (), new_id()) for ld in lds]
  stores = tuple(uop(Ops.STORE, dtypes.void, (uop(Ops.INDEX, b.dtype, (b, l)), at(ld, other)))
                 for b, ld, other in zip(bufs, lds, (lj, li)))
  bar = uop(Ops.BARRIER, dtypes.void, stores)
  def read(b: UOp, idx: UOp, ld: UOp) -> UOp:
    return uop(Ops.LOAD, ld.dtype, (uop(Ops.INDEX, b.dtype, (uop(Ops.AFTER, b.dtype, (b, bar)), idx)),))
  reads = (read(bufs[0], _scaled(li, T, kk), lds[0]), read(bufs[1], _scaled(kk, T, lj), lds[1]))
  x = prod.replace(src=reads)
  tiled = q.replace(src=(x if q.src[0] is prod else q.src[0].replace(src=(x,)), kt, kk))
  sink = graph_rewrite(sink, rules.local_tile, LocalTile(q, tiled), name="LOCAL")
  for o, k in ((i, li), (j, lj)): sink = graph_rewrite(sink, rules.upcast, OptContext(o, _scaled(rng(trip_count(o) // T, o.arg), T, k)), name="LOCAL")
  return sink

def _stash(sink: UOp, opt: Opt, r: UOp, outs: list[UOp]) -> UOp:
  """STASH of reduction loop r: its one reduction q (over r alone) reduces values x(r); the kernel's one store writes
  f(x(o), q) at index i(o) of the last output loop o, of r's bound, that q does not use. Then x(r) is also stored at
  i(r) inside r's loop, and f reads x(o) back from i(o), after q: the same value (stored in its own dtype), so the same
  results. The output is not read otherwise, so the stores in r's loop clobber nothing the kernel still needs."""
  from rules import opt as rules
  from rules.opt_helpers import Stash
  def no(why: str) -> OptError: return OptError(f"{opt}: STASH takes {why}")
  qs = [q for q in sink.toposort() if q.op is Ops.REDUCE and r in q.src[1:]]
  if opt.amount != 0: raise no("the amount 0")
  if len(qs) != 1 or qs[0].src[1:] != (r,) or qs[0].dtype.count != 1: raise no("a loop of one reduction of scalars over it alone")
  q = qs[0]
  if len(sink.src) != 1 or sink.src[0].op is not Ops.STORE or len(sink.src[0].src[0].src) != 2: raise no("a kernel of one unguarded store")
  (g, i), v = sink.src[0].src[0].src, sink.src[0].src[1]
  o = outs[-1] if outs else None
  if o is None or o.src[0] is not r.src[0] or o in q.toposort() or o not in i.toposort():
    raise no("a last output loop of the same length, that the store's index uses and the reduction does not")
  if q.src[0].dtype is not g.dtype.base or any(u.op is Ops.INDEX and u.src[0] is g for u in v.toposort()):
    raise no("reduced values of the output's dtype, and an output the kernel does not read")
  value = graph_rewrite(q.src[0], rules.upcast, OptContext(r, o), name="STASH index")  # x(o): the values at the output loop
  if value not in v.toposort() or q not in v.toposort(): raise no("a stored value using the reduction and its values at the output loop")
  at = graph_rewrite(i, rules.upcast, OptContext(o, r), name="STASH index")  # i(r)
  # a store inside r's loop can only see the loops q is inside: an index that uses another output loop (q is hoisted out
  # of it, as in v * softmax(a) broadcast over v's rows) would be stored from outside that loop, for one row only
  inside = set(q.toposort())
  if any(u.op is Ops.RANGE and u is not r and u not in inside for u in at.toposort()):
    raise no("a store index that uses only the loops the reduction is inside")
  load = uop(Ops.LOAD, value.dtype, (uop(Ops.INDEX, g.dtype, (uop(Ops.AFTER, g.dtype, (g, q)), i)),))
  store = uop(Ops.STORE, dtypes.void, (uop(Ops.INDEX, g.dtype, (g, at)), q.src[0]))
  return graph_rewrite(sink, rules.stash, Stash(value, load, store), name="STASH")

def _prefetch(sink: UOp, opt: Opt, r: UOp, outs: list[UOp]) -> UOp:
  """PREFETCH in reduction loop r: each unguarded load there whose index moves with r and with an output loop a (the
  innermost one) also prefetches its element at a + amount (modulo a's length, so the address stays inside the buffer;
  a guarded load's index may point outside it: not prefetched)."""
  from rules import opt as rules
  from rules.opt_helpers import Prefetch
  if r in outs or opt.amount < 1: raise OptError(f"{opt}: PREFETCH takes a reduction loop and a distance of 1 or more")
  nodes: dict[UOp, None] = {}
  for ld in (u for u in sink.toposort() if u.op is Ops.LOAD and r in u.src[0].src[1].toposort()):
    idx = ld.src[0]
    guarded = len(idx.src) > 2 and not (idx.src[2].op is Ops.CONST and idx.src[2].arg is True)
    if guarded or not (moving := [a for a in outs if a in idx.toposort() and trip_count(a)]): continue
    a = moving[-1]
    ahead = uop(Ops.MOD, a.dtype, (uop(Ops.ADD, a.dtype, (a, uop(Ops.CONST, a.dtype, (), opt.amount))), a.src[0]))
    # a -> a placeholder loop -> (a + amount) % n: the result holds a, so not in one rewrite
    stand_in = uop(Ops.RANGE, a.dtype, a.src, -1 - a.arg)
    at = graph_rewrite(graph_rewrite(idx.src[1], rules.upcast, OptContext(a, stand_in)), rules.upcast, OptContext(stand_in, ahead),
                       name="PREFETCH index")
    nodes[uop(Ops.CUSTOM, dtypes.void, (uop(Ops.INDEX, idx.dtype, (idx.src[0], at)),), "prefetch")] = None
  if not nodes: raise OptError(f"{opt}: no load in that loop moves with an output loop")
  return graph_rewrite(sink, rules.prefetch, Prefetch(tuple(nodes)), name="PREFETCH")

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
