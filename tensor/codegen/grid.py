"""The launch grid of a GPU-style target: which loops of a linear kernel program become the grid's dimensions (each
work-item runs one iteration of each), which GROUP loops run on the work-items of a group, and the cost model that hands
them to the renderer (tensor/renderer/gpu.py). The CPU's cost model (tensor/codegen/cost.py) gives loops threads instead.
"""
from __future__ import annotations
from runtime.ops import Ops
from runtime.uop import UOp
from tensor.codegen.cost import CostModel
from tensor.renderer.gpu import GROUP_DIM, SHARED_DIM

MAX_DIMS = 3
# a GROUP loop maps to GROUP_DIM: the work-item's index in a group that spans grid dimension 0 (the global loops then take
# dimensions 1 and 2)

def _shared_store(u: UOp) -> bool:
  """A store into a work-group's shared array (a GROUP's partials)."""
  if u.op is not Ops.STORE: return False
  b = u.src[0].src[0]
  if b.op is Ops.AFTER: b = b.src[0]
  return b.op is Ops.DEFINE_LOCAL and b.dtype.addrspace == "shared"

def _partial_of(u: UOp, r: UOp) -> bool:
  """A store of loop r's partial into a shared array: at index r, or r * lanes (+ lane) where an UPCAST gave the partials
  lanes (rules/opt.rules' upcast)."""
  if not _shared_store(u): return False
  i = u.src[0].src[1]
  return i is r or (i.op is Ops.MUL and i.src[0] is r and i.src[1].op is Ops.CONST)

def _spans(uops: list[UOp], lo: int, hi: int) -> list[tuple[int, int]]:
  """The (RANGE, its END) positions of the loops directly inside uops[lo:hi]."""
  out, depth, start = [], 0, 0
  for i in range(lo, hi):
    op = uops[i].op
    if op is Ops.RANGE:
      if depth == 0: start = i
      depth += 1
    elif op is Ops.END:
      depth -= 1
      if depth == 0: out.append((start, i))
  return out

def tile_loop(uops: list[UOp]) -> UOp | None:
  """The loop of a LOCAL tile's work-items (tensor/codegen/opt.py): the index of the shared stores its BARRIER waits for."""
  return next((u.src[0].src[0].src[1] for u in uops if u.op is Ops.BARRIER), None)

def grid_loops(uops: list[UOp]) -> dict[UOp, int]:
  """The loops on the grid, as RANGE -> dimension (the innermost chosen is dimension 0, where neighbouring work-items
  store neighbouring elements). From the outside in, a loop qualifies when it is the only loop at its level, nothing at
  its level outside it stores or updates an accumulator (every work-item would), its trip count is a constant, every
  store inside it writes at an index using it and no accumulator declared outside it is updated inside (a reduction
  stays a loop in each work-item). Everything else stays a loop: a kernel with none qualifying runs as one work-item.
  Then the GROUP loops (group_loops) directly in the innermost chosen loop's body run on a group's work-items.
  A LOCAL tile's loop (tile_loop) is always dimension 0, one group wide: its work-items share the tiles (a loop there
  would read elements not yet stored); the loops outside it take at most two dimensions, the rest stay loops."""
  chosen: list[UOp] = []
  lo, hi = 0, len(uops)
  tile = tile_loop(uops)
  while len(chosen) < MAX_DIMS - (tile is not None):
    spans = _spans(uops, lo, hi)
    if len(spans) != 1: break
    s, e = spans[0]
    r = uops[s]
    if r is tile: break
    outside = uops[lo:s] + uops[e + 1:hi]
    if any(u.op in (Ops.STORE, Ops.ASSIGN) for u in outside) or r.src[0].op is not Ops.CONST: break
    inner = uops[s + 1:e]
    declared_outside = set(uops[:s])
    if any(_partial_of(x, r) for x in inner): break  # a GROUP loop: group_loops' to place
    if not all(r in x.src[0].toposort() for x in inner if x.op is Ops.STORE and not _shared_store(x)): break
    if any(x.src[0] in declared_outside for x in inner if x.op is Ops.ASSIGN): break
    chosen.append(r)
    lo, hi = s + 1, e
  if tile is not None: return {**{r: len(chosen) - i for i, r in enumerate(chosen)}, tile: 0}
  group = group_loops(uops, lo, hi) if len(chosen) < MAX_DIMS else []
  first = 1 if group else 0
  return {**{r: first + len(chosen) - 1 - i for i, r in enumerate(chosen)}, **{r: GROUP_DIM for r in group},
          **{r: SHARED_DIM for r in (shared_loops(uops, lo, hi, group) if group else [])}}

def shared_loops(uops: list[UOp], lo: int, hi: int, group: list[UOp]) -> list[UOp]:
  """The other loops beside a GROUP's (softmax's loop storing a row after its max and sum are grouped) whose iterations the
  group's work-items share (each every group-size-th one): every store inside writes at an index using the loop, and no
  accumulator declared outside it is updated inside. Any other store at that level is made by one work-item."""
  out = []
  for s, e in _spans(uops, lo, hi):
    r, inner = uops[s], uops[s + 1:e]
    if r in group or not (stores := [x for x in inner if x.op is Ops.STORE]): continue
    if not all(r in x.src[0].toposort() and not _shared_store(x) for x in stores): continue
    if any(x.src[0] in set(uops[:s]) for x in inner if x.op is Ops.ASSIGN): continue
    out.append(r)
  return out

def group_loops(uops: list[UOp], lo: int, hi: int) -> list[UOp]:
  """The GROUP loops directly inside uops[lo:hi] (the innermost grid loop's body, or the kernel's) that run on a group's
  work-items: each a loop of a constant trip count storing its partial into a shared array at its own index, all of one
  trip count (the group's size); none when a global store sits inside one (every work-item would make it) or the kernel
  reads back a global buffer it writes (another work-item's store is not seen without a global barrier). Any GROUP loop
  elsewhere stays a loop (its array then private to the work-item: the same result)."""
  spans = _spans(uops, lo, hi)
  group = [uops[s] for s, e in spans if any(_partial_of(x, uops[s]) for x in uops[s + 1:e])]
  if not group or len({r.src[0].arg if r.src[0].op is Ops.CONST else None for r in group} - {None}) != 1: return []
  if any(r.src[0].op is not Ops.CONST for r in group): return []
  inside = [x for s, e in spans if uops[s] in group for x in uops[s + 1:e]]
  if any(x.op is Ops.STORE and not _shared_store(x) for x in inside): return []
  if any(u.op is Ops.AFTER and u.src[0].op is Ops.DEFINE_GLOBAL for u in uops): return []
  return group

class GridCostModel(CostModel):
  """The cost model of a device whose kernels run on a launch grid: its `parallel_loops` are the grid's (RANGE -> dim)."""
  def parallel_loops(self, uops: list[UOp], cap: int | None = None) -> dict[UOp, int]: return grid_loops(uops)

__all__ = ["grid_loops", "tile_loop", "GridCostModel"]
