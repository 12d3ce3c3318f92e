"""Which reductions end a kernel, decided in one walk over the tensor graph (no kernel is built to ask).

The walk goes from the kernels' outputs towards their sources, users before sources. A kernel's output is read at its
own loops, one RANGE per dimension; rules/rangeify.rules, run one node at a time on the tensor graph, says where each
source of a node is read given where the node is read (AT(x, valid, i0, ...)): the same reads codegen's rangeify makes,
so a reduction read twice here is two reductions there; the loops a read uses are found in its simplified indices. When
the walk reaches a reduction, every place a kernel reads it is known: rules/boundaries.rules
decides whether fusing would recompute it, and a reduction that would be becomes a kernel's output, read at its own
loops from then on. Only nodes with a reduction below them (inside the same kernel) are walked, and the subgraph of a
reduction read once, to find the loops its value uses: elsewhere nothing depends on where a node is read.
"""
from __future__ import annotations
from typing import Callable
from runtime.dtype import dtypes
from runtime.ops import Ops
from runtime.rewrite import graph_rewrite
from runtime.uop import UOp, uop
from rules.boundaries import recompute
from rules.rangeify import rangeify
from rules.rangeify_helpers import CodegenContext, output_loops
from rules.symbolic import symbolic

def recomputed_reductions(topo: list[UOp], points: set[UOp], is_input: Callable[[UOp], bool], value: Callable[[UOp], UOp]) -> set[UOp]:
  """The reductions in topo (sources first) that fusing would recompute, given the kernel outputs `points` (not changed);
  is_input(u): u is in memory already (or a reshape of a point), value(x): what point x's kernel computes."""
  below: dict[UOp, bool] = {}  # a reduction is below u, inside u's kernel
  for u in topo:
    below[u] = any(s.op is Ops.REDUCE_AXIS or below.get(s, False) for s in u.src if not (s in points or is_input(s)))
  walk, out = _Walk(lambda x: x in points or x in out or is_input(x)), set()
  reads = walk.reads
  for u in reversed(topo):
    if u in points:
      v = value(u)
      if u.op is Ops.COPY or (v is not u and (v in points or is_input(v))): continue
      walk.read(v, u, walk.output_loops(v))
      if v is not u: continue
    elif is_input(u): continue
    elif u.op is Ops.REDUCE_AXIS:
      if len(ats := reads.at.get(u, ())) == 1: walk.loops_used(next(iter(ats))[1])
      if recompute.rewrite(u, reads) is not None:
        out.add(u)
        reads.at[u] = {}
        walk.read(u, u, walk.output_loops(u))
    if below[u]:
      for k, a in reads.at.get(u, ()):
        for c in walk.step(a)[1]: walk.read(c.src[0], k, c)
  return out

class Reads(CodegenContext):
  """The walk's state: the context of rules/boundaries.rules, and of rules/rangeify.rules while they run on the tensor graph
  (each file declares what its rules read of it; a CodegenContext is what rangeify's rules read).
  at[u]: the places kernels read u, (the kernel's output, AT(u, valid, i0, ...)), in the order met.
  used[a]: the loops read a's value depends on (the RANGEs reaching its loads; a reduction's own loops excluded).
  around[a]: every loop enclosing those (a kernel nests its output loops in order, a reduction's loops inside the loops
  around its read). Loop ids are unique across kernels."""
  def __init__(self):
    super().__init__(index=dtypes.int64)  # the walk compares indices, it renders none: the wide type never overflows
    self.at: dict[UOp, dict[tuple[UOp, UOp], None]] = {}
    self.used: dict[UOp, frozenset] = {}
    self.around: dict[UOp, frozenset] = {}

class _Walk:
  def __init__(self, loaded: Callable[[UOp], bool]):
    self.reads, self.loaded = Reads(), loaded
    self.steps: dict[UOp, tuple[UOp | None, dict[UOp, UOp]]] = {}
    self.nest: dict[UOp, frozenset] = {}  # loop -> the loops around it, itself included
    self.reduce_of: dict[UOp, tuple[UOp, tuple[UOp, ...]]] = {}  # a reduction's loop -> (its read, its loops up to this one)
    self.simplified: dict[tuple, tuple] = {}

  def read(self, x: UOp, kernel: UOp, a: UOp) -> None: self.reads.at.setdefault(x, {})[(kernel, a)] = None

  def output_loops(self, x: UOp) -> UOp:
    """x read at a kernel's output loops, nested in order."""
    idx, outer = output_loops(self.reads, x.shape), frozenset()
    for r in idx:
      if r.op is Ops.RANGE: outer = self.nest[r] = outer | {r}
    return uop(Ops.AT, x.dtype, (x, uop(Ops.CONST, dtypes.bool, (), True), *idx))

  def step(self, a: UOp) -> tuple[UOp | None, list[UOp]]:
    """One step of rangeify from read a: its result, and the reads of a's sources in it."""
    if (done := self.steps.get(a)) is not None: return done
    res, kids = rangeify.rewrite(a, self.reads), []
    if res is not None:
      if res.op is Ops.REDUCE:
        for k, r in enumerate(res.src[1:]): self.reduce_of[r] = (a, res.src[1:k + 2])
      srcs, stack, seen = a.src[0].src, [res], set()
      while stack:
        n = stack.pop()
        if n in seen: continue
        seen.add(n)
        if n.op is Ops.AT:
          if n.src[0] in srcs: kids.append(n)
          stack.extend(n.src[1:])  # a gather's index holds a read of its index tensor
        else: stack.extend(n.src)
    self.steps[a] = done = (res, kids)
    return done

  def loops_used(self, a: UOp) -> frozenset:
    """The loops read a's value depends on, and (in reads.around) every loop around them: as codegen's scope, the RANGEs
    reaching its loads and conditions, a reduction's own loops excluded. Below a node not yet decided, it is taken as fused."""
    used = self.reads.used
    stack = [a]
    while stack:
      b = stack[-1]
      if b in used: stack.pop(); continue  # noqa: E702
      res, kids = self.step(b) if not self.loaded(b.src[0]) else (None, [])
      if res is None: used[b] = _ranges(self.simplify(b.src[1:]))
      else:
        todo = [k for k in kids if k not in used]
        if todo: stack.extend(todo); continue  # noqa: E702
        used[b] = self.free(res)
      stack.pop()
    self.reads.around[a] = frozenset().union(*(self.loops_around(r) for r in used[a]))
    return used[a]

  def free(self, res: UOp) -> frozenset:
    """The loops a step's result uses: its reads' loops, loops in its conditions, minus the loops a REDUCE closes."""
    if res.op is Ops.AT: return self.reads.used[res] if res in self.reads.used else _ranges(self.simplify(res.src[1:]))
    if res.op is Ops.RANGE: return frozenset((res,))
    if res.op is Ops.REDUCE: return self.free(res.src[0]) - set(res.src[1:])
    if not _holds_read(res): return _ranges(self.simplify((res,)))  # a condition, as codegen simplifies it
    return frozenset().union(*(self.free(s) for s in res.src))

  def loops_around(self, r: UOp) -> frozenset:
    if r not in self.nest:
      a, mine = self.reduce_of[r]
      if a not in self.reads.used: self.loops_used(a)
      self.nest[r] = frozenset().union(*(self.loops_around(o) for o in self.reads.used[a])) | set(mine)
    return self.nest[r]

  def simplify(self, idx: tuple[UOp, ...]) -> tuple[UOp, ...]:
    """A read's validity and indices simplified (the symbolic rules, as codegen runs them; once per distinct index). An
    index holding a read (a gather's) is left as it is: the rules would walk into the tensor graph below that read."""
    if all(i.op in _PLAIN for i in idx): return idx
    if (done := self.simplified.get(idx)) is None:
      if any(_holds_read(i) for i in idx): done = idx
      else: done = graph_rewrite(uop(Ops.SINK, dtypes.void, idx), symbolic, name="symbolic").src
      self.simplified[idx] = done
    return done

_PLAIN = {Ops.RANGE, Ops.CONST}

def _holds_read(u: UOp) -> bool: return any(n.op is Ops.AT for n in u.toposort(gate=lambda n: n.op is not Ops.AT))

def _ranges(idx: tuple[UOp, ...]) -> frozenset:
  """The loops (RANGEs) index expressions use, those of a read inside them included (a gather's index is a read of its index
  tensor at the output's loops: the value read depends on them), never walking into the tensor graph below a read."""
  out, seen, stack = set(), set(), list(idx)
  while stack:
    u = stack.pop()
    if u in seen: continue
    seen.add(u)
    if u.op is Ops.RANGE: out.add(u)
    stack.extend(u.src[1:] if u.op is Ops.AT else u.src)
  return frozenset(out)
