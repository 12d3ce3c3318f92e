"""The linearizer: a lowered kernel graph -> one list of UOps in execution order, with loops as RANGE ... END.

Each node goes in the innermost loop it needs (the RANGEs it depends on, minus those a REDUCE/END below it closes),
so loop-invariant work stays outside loops. Inside one loop body, nodes and nested loops are ordered by their
dependencies, then by the graph's depth-first order (each value made next to its first use), stores last.
Not a rewrite: an instruction schedule, the one place no rule applies.
"""
from __future__ import annotations
from runtime.dtype import dtypes
from runtime.kahn import dependency_order
from runtime.ops import Ops
from runtime.uop import UOp, uop
from rules.lower_helpers import scope

# lower runs first; loads and accumulator updates keep the depth-first order: a value is made right before its first use,
# so gcc (which does not reorder for register pressure on x86) keeps few values live. A matmul tile's broadcast row value
# dies before the next one is loaded: 12 accumulators fit AVX2's 16 registers (hoisting the loads first spilled 3 of them
# and ran 1.6x slower)
# a group's shared arrays are declared first (OpenCL takes __local arrays at the kernel's outermost scope only)
_PRIORITY = {Ops.DEFINE_GLOBAL: -20, Ops.DEFINE_VAR: -19, Ops.DEFINE_LOCAL: -15, Ops.CONST: -10, Ops.DEFINE_REG: -5, Ops.STORE: 10}

class _Loop:
  """A loop in the schedule: its RANGE and the items (nodes and loops) of its body."""
  def __init__(self, rng: UOp | None): self.rng, self.items = rng, []

def range_nests(topo: list[UOp], closing: Ops, memo: dict):
  """nest(r): every loop around RANGE r, r included. A reduction's ranges sit inside the loops around the node that closes
  them (`closing`: REDUCE before lowering, END after); the output loops nest in order."""
  closer: dict[UOp, tuple[UOp, int]] = {}
  for u in topo:
    if u.op is closing:
      for k, r in enumerate(u.src[1:]): closer.setdefault(r, (u, k))
  outputs = [u for u in topo if u.op is Ops.RANGE and u not in closer]
  nests: dict[UOp, frozenset] = {}
  def nest(r: UOp) -> frozenset:
    if r not in nests:
      if r in closer:
        q, k = closer[r]
        nests[r] = frozenset().union(*(nest(o) for o in scope(q, memo))) | set(q.src[1:k + 2])
      else: nests[r] = frozenset(o for o in outputs if o.arg <= r.arg)
    return nests[r]
  return nest

def linearize(sink: UOp) -> list[UOp]:
  topo = list(sink.toposort())
  memo: dict = {}
  order = {u: i for i, u in enumerate(topo)}
  nest = range_nests(topo, Ops.END, memo)
  # a loop's depth is how many loops enclose it (itself included), not its RANGE id: an optimization may open a new loop
  # around reductions whose RANGEs were numbered before it (a split reduction holding another reduction)
  def outermost_first(loops: frozenset) -> tuple[UOp, ...]: return tuple(sorted(loops, key=lambda r: (len(nest(r)), r.arg)))
  path: dict[UOp, tuple[UOp, ...]] = {}
  for u in topo:
    if u.op in (Ops.SINK, Ops.RANGE): continue
    path[u] = outermost_first(frozenset().union(*(nest(r) for r in scope(u, memo))))
  # an accumulator update runs once per iteration of the loops its END closes, even when its value does not use them
  # (the sum of a broadcast value: acc = acc + x, with x computed once outside)
  for u in topo:
    if u.op is not Ops.END: continue
    upd = u.src[0]
    loops = frozenset().union(*(nest(r) for r in u.src[1:]))
    # the update and everything in it that reads the accumulator (acc + x) run in those loops
    reads: dict[UOp, bool] = {}
    for n in upd.toposort():
      reads[n] = (n is upd.src[0]) or any(reads.get(x, False) for x in n.src)
      if reads[n] and n is not upd.src[0]: path[n] = outermost_first(frozenset(path[n]) | loops)
  # the loop tree: one _Loop per distinct path prefix
  loops: dict[tuple, _Loop] = {(): _Loop(None)}
  def loop_of(p: tuple) -> _Loop:
    if p not in loops:
      loops[p] = lp = _Loop(p[-1])
      loop_of(p[:-1]).items.append(lp)
    return loops[p]
  for u in topo:
    if u in path and u.op is not Ops.END and not _effects(u): loop_of(path[u]).items.append(u)
  # what each loop (with everything inside it) needs from outside, and what is inside it
  inside: dict[int, set[UOp]] = {}
  def contents(lp: _Loop) -> set[UOp]:
    s: set[UOp] = set()
    for it in lp.items: s |= contents(it) if isinstance(it, _Loop) else {it}
    inside[id(lp)] = s
    return s
  contents(loops[()])
  out: list[UOp] = []
  def emit(lp: _Loop) -> None:
    if lp.rng is not None: out.append(lp.rng)
    items = lp.items
    key: dict[int, tuple] = {}
    owner: dict[UOp, int] = {}
    for k, it in enumerate(items):
      if isinstance(it, _Loop):
        for n in inside[id(it)]: owner[n] = k
        first = min((order[n] for n in inside[id(it)]), default=0)
        key[k] = (0, first)
      else:
        owner[it] = k
        key[k] = (_PRIORITY.get(it.op, 0), order[it])
    deps: dict[int, set[int]] = {k: set() for k in range(len(items))}
    for k, it in enumerate(items):
      nodes = inside[id(it)] if isinstance(it, _Loop) else {it}
      srcs = {s for n in nodes for s in _deps(n)}
      if isinstance(it, _Loop): srcs |= set(it.rng.src)
      for s in srcs:
        j = owner.get(s)
        if j is not None and j != k: deps[k].add(j)
    sequence = dependency_order(deps, key.__getitem__)
    # an internal invariant: a cycle between the items of one loop would silently drop code
    if len(sequence) != len(items): raise RuntimeError(f"linearize: the items of loop {lp.rng} depend on each other in a cycle")
    for k in sequence:
      it = items[k]
      if isinstance(it, _Loop): emit(it)
      else: out.append(it)
    if lp.rng is not None: out.append(uop(Ops.END, dtypes.void, (lp.rng,)))
  emit(loops[()])
  return out

def _effects(u: UOp) -> bool:
  """A bundle of stores (UNROLL:void: a store of lanes split per lane or per vector, rules/expand.rules and vectorize.rules)
  that an END closes: no code of its own, its stores are the items."""
  return u.op is Ops.UNROLL and u.dtype is dtypes.void

def _deps(u: UOp):
  # an END stands for the loops it closes: depending on it is depending on the update inside them (each of its stores)
  out = []
  for s in u.src:
    t = s.src[0] if s.op is Ops.END else s
    out.extend(t.src if _effects(t) else (t,))
  return out
