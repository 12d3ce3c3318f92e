"""The launch grid of a GPU-style target: which loops of a linear kernel program become the grid's dimensions (each
work-item runs one iteration of each), and the cost model that hands them to the renderer (tensor/renderer/opencl.py).
The CPU's cost model (tensor/codegen/cost.py) gives loops threads instead.
"""
from __future__ import annotations
from runtime.ops import Ops
from runtime.uop import UOp
from tensor.codegen.cost import CostModel

MAX_DIMS = 3

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

def grid_loops(uops: list[UOp]) -> dict[UOp, int]:
  """The loops on the grid, as RANGE -> dimension (the innermost chosen is dimension 0, where neighbouring work-items
  store neighbouring elements). From the outside in, a loop qualifies when it is the only loop at its level, nothing at
  its level outside it stores or updates an accumulator (every work-item would), its trip count is a constant, every
  store inside it writes at an index using it and no accumulator declared outside it is updated inside (a reduction
  stays a loop in each work-item). Everything else stays a loop: a kernel with none qualifying runs as one work-item."""
  chosen: list[UOp] = []
  lo, hi = 0, len(uops)
  while len(chosen) < MAX_DIMS:
    spans = _spans(uops, lo, hi)
    if len(spans) != 1: break
    s, e = spans[0]
    r = uops[s]
    outside = uops[lo:s] + uops[e + 1:hi]
    if any(u.op in (Ops.STORE, Ops.ASSIGN) for u in outside) or r.src[0].op is not Ops.CONST: break
    inner = uops[s + 1:e]
    declared_outside = set(uops[:s])
    if not all(r in x.src[0].toposort() for x in inner if x.op is Ops.STORE): break
    if any(x.src[0] in declared_outside for x in inner if x.op is Ops.ASSIGN): break
    chosen.append(r)
    lo, hi = s + 1, e
  return {r: len(chosen) - 1 - i for i, r in enumerate(chosen)}

class GridCostModel(CostModel):
  """The cost model of a device whose kernels run on a launch grid: its `parallel_loops` are the grid's (RANGE -> dim)."""
  def parallel_loops(self, uops: list[UOp], cap: int | None = None) -> dict[UOp, int]: return grid_loops(uops)

__all__ = ["grid_loops", "GridCostModel"]
