"""The schedule cache: from the structure of a tensor graph to what kernelize made of it, so running the same shaped
computation again (`(a + 1).realize()` in a loop, a training step) skips cleanup, fusion and building kernel ASTs.

The key is the graph with its identities abstracted: every BUFFER, every kernel output not run yet (ASSIGN(BUFFER, KERNEL))
and every UNIQUE becomes a numbered slot (numbered in walk order, so `a + a` and `a + b` differ), everything else is kept
as it is (ops, dtypes, shapes, constants, bound variable values). Two graphs with one key are the same graph up to which
buffers they name, and the scheduler's decisions depend on nothing else, so one result serves both: it is stored with its
inputs and the buffers it made for kernel outputs as placeholders, and replayed by putting the new graph's inputs and new
output buffers in their place. A graph whose schedule depends on other live tensors (an assign some pending tensor reads
the old value of) is never cached.
"""
from __future__ import annotations
from dataclasses import dataclass
from typing import Callable
from runtime.dtype import DType, dtypes
from runtime.helpers import LRU
from runtime.ops import Ops
from runtime.uop import UOp, uop

@dataclass(frozen=True)
class GraphShape:
  """A graph's cache key, its nodes in walk order (the keys of a result are positions in it), its slot nodes, and whether it
  assigns (an assign not kernelized yet: pending readers of its target may join the schedule)."""
  key: tuple
  topo: list[UOp]
  slots: list[UOp]
  assigns: bool

def graph_shape(sink: UOp, extra_key: tuple = ()) -> GraphShape:
  """The key of `sink`'s graph, walked as the scheduler walks it (not into stored data). `extra_key` adds settings the
  scheduler's decisions depend on."""
  topo: list[UOp] = []
  index: dict[UOp, int] = {}
  slot_of: dict[UOp, int] = {}
  slots: list[UOp] = []
  def slot(u: UOp) -> int:
    if (s := slot_of.get(u)) is None:
      s = slot_of[u] = len(slots)
      slots.append(u)
    return s
  key: list = [extra_key]
  assigns = False
  BUFFER, ASSIGN, KERNEL, UNIQUE = Ops.BUFFER, Ops.ASSIGN, Ops.KERNEL, Ops.UNIQUE
  for u in sink.toposort(gate=lambda u: u.op is not BUFFER and not (u.op is ASSIGN and u.src[1].op is KERNEL)):
    index[u] = len(topo)
    topo.append(u)
    op = u.op
    if op is BUFFER: key.append((BUFFER, u.dtype, u.arg, u.src[1].arg, slot(u)))
    elif op is ASSIGN and u.src[1].op is KERNEL:  # a kernel output not run yet: its buffer and the value it will hold
      b = u.src[0]
      key.append((KERNEL, u.dtype, b.dtype, b.arg, b.src[1].arg, slot(b), slot(u)))
    elif op is UNIQUE: key.append((UNIQUE, slot(u)))
    else:
      if op is ASSIGN: assigns = True
      key.append((op, u.dtype, u._key[3], u.tag, tuple([index[s] for s in u.src])))
  return GraphShape(tuple(key), topo, slots, assigns)

@dataclass(frozen=True)
class Recipe:
  """A cached result as a small program: values start as the graph's slots, then the outputs' new buffers, then the nodes
  that don't depend on either (kept as they are); each step builds one node from earlier values. positions[i] (a place
  in the graph's walk) becomes values[results[i]]."""
  outputs: tuple[tuple[DType, int, str], ...]  # (dtype, size, device) of each output buffer to make
  fixed: tuple[UOp, ...]
  steps: tuple[tuple, ...]  # (op, dtype, source value numbers, arg, tag)
  positions: tuple[int, ...]
  results: tuple[int, ...]

def record(shape: GraphShape, becomes: dict[UOp, UOp], made: list[UOp]) -> Recipe | None:
  """The recipe of `becomes` (a kernelize result of shape's graph, whose kernels write the new buffers `made`), or None
  when it names a node the slots don't cover (then it can't be replayed for another graph)."""
  at = {u: i for i, u in enumerate(shape.topo)}
  positions = tuple(at[k] for k in becomes if k in at)
  if not positions: return None
  number = {u: i for i, u in enumerate(shape.slots)}
  number.update((b, len(shape.slots) + j) for j, b in enumerate(made))
  if len(number) != len(shape.slots) + len(made): return None  # an output buffer that is also an input: not this scheduler's
  roots = uop(Ops.SINK, dtypes.void, tuple(becomes[shape.topo[i]] for i in positions))
  depends: set[UOp] = set(number)
  order = list(roots.toposort(gate=lambda u: u not in number))
  for u in order:
    if u not in number and any(s in depends for s in u.src): depends.add(u)
  fixed: list[UOp] = []
  steps: list[tuple] = []
  later: list[UOp] = []
  for u in order:
    if u in number or u is roots: continue
    if u not in depends:
      # an identity of the original graph left in would be shared by every replay
      if u.op in (Ops.BUFFER, Ops.UNIQUE) or (u.op is Ops.ASSIGN and u.src[1].op is Ops.KERNEL): return None
      fixed.append(u)
    else: later.append(u)
  used = {s for u in later for s in u.src} | set(roots.src)
  fixed = [u for u in fixed if u in used]
  base = len(number)
  for j, u in enumerate(fixed): number[u] = base + j
  for u in later:
    steps.append((u.op, u.dtype, tuple(number[s] for s in u.src), u.arg, u.tag))
    number[u] = len(number)
  outputs = tuple((b.dtype, b.arg, b.src[1].arg) for b in made)
  return Recipe(outputs, tuple(fixed), tuple(steps), positions, tuple(number[r] for r in roots.src))

def replay(recipe: Recipe, shape: GraphShape, new_buffer: Callable[[DType, int, str], UOp]) -> dict[UOp, UOp]:
  """The kernelize result for shape's graph from a recipe recorded for a graph with the same key; new_buffer makes each
  output buffer."""
  values = [*shape.slots, *(new_buffer(*spec) for spec in recipe.outputs), *recipe.fixed]
  for op, dtype, srcs, arg, tag in recipe.steps: values.append(uop(op, dtype, tuple([values[i] for i in srcs]), arg, tag))
  topo = shape.topo
  return {topo[p]: values[r] for p, r in zip(recipe.positions, recipe.results)}

class ScheduleCache:
  """Recipes by graph key, the `size` used last kept; hits and misses counted (tests and DEBUG read them)."""
  def __init__(self, size: int):
    self.recipes: LRU = LRU(size)
    self.hits = self.misses = 0
  def get(self, shape: GraphShape) -> Recipe | None:
    r = self.recipes.get(shape.key)
    if r is None: self.misses += 1
    else: self.hits += 1
    return r
  def put(self, shape: GraphShape, recipe: Recipe | None) -> None:
    if recipe is not None: self.recipes[shape.key] = recipe
  def clear(self) -> None:
    self.recipes.clear()
    self.hits = self.misses = 0

__all__ = ["ScheduleCache", "GraphShape", "Recipe", "graph_shape", "record", "replay"]
