"""Codegen's cost model: the work of a linear kernel program and the threads its loops get. A Target carries one
(tensor/codegen/target.py); the renderer is handed its decisions (which loops run on several threads), DEBUG=2 and the
profile print its estimates (GFLOPS, GB/s). The machine's side (how long a region of threads takes, the bandwidth one and
all cores reach) is runtime/threads.py's.
"""
from __future__ import annotations
from runtime.ops import GroupOp, Ops
from runtime.threads import max_threads, threads_for
from runtime.uop import UOp

def estimate(uops: list[UOp]) -> tuple[int, int]:
  """(operations, bytes moved) of a linear program, counting loop trip counts. ALU ops count lane by lane (a vector op is
  one per lane, a fused multiply-add two), so the work of a kernel does not depend on the vector width it was built for."""
  ops = mem = 0
  mult = [1]
  for u in uops:
    if u.op is Ops.RANGE: mult.append(mult[-1] * (u.src[0].arg if u.src[0].op is Ops.CONST else 1))
    elif u.op is Ops.END and len(mult) > 1: mult.pop()
    elif u.op in (Ops.LOAD, Ops.STORE):
      dt = u.dtype if u.op is Ops.LOAD else u.src[1].dtype
      mem += mult[-1] * dt.itemsize
    elif u.op in GroupOp.ALU: ops += mult[-1] * u.dtype.count * (2 if u.op is Ops.MULACC else 1)
  return ops, mem

def parallel_loops(uops: list[UOp], cap: int | None = None) -> dict[UOp, int]:
  """The outermost loops that may run on several threads, and how many each gets (runtime/threads.py's model on the
  kernel's estimated work, at most `cap`: a THREADS Opt). A loop qualifies when every store inside it writes at an index
  using it (iterations write apart) and no accumulator declared outside it is updated inside (it is not a reduction): each
  output is then computed by one thread in the serial order, so results are bit for bit those of one thread."""
  if max_threads() <= 1 or (cap is not None and cap <= 1): return {}
  ops, mem = estimate(uops)
  out: dict[UOp, int] = {}
  depth, start, seen = 0, 0, set()
  for i, u in enumerate(uops):
    if u.op is Ops.RANGE:
      if depth == 0: start = i
      depth += 1
    elif u.op is Ops.END:
      depth -= 1
      if depth: continue
      r, inner = uops[start], uops[start + 1:i]
      writes_apart = all(r in x.src[0].toposort() for x in inner if x.op is Ops.STORE)
      own_accs = all(x.src[0] not in seen for x in inner if x.op is Ops.ASSIGN)
      if writes_apart and own_accs:
        trips = r.src[0].arg if r.src[0].op is Ops.CONST else None
        n = threads_for(ops, mem, trips if cap is None else min(cap, trips) if trips is not None else cap)
        if n > 1: out[r] = n
    if depth == 0: seen.add(u)
  return out

class CostModel:
  """A device's cost model, as the decisions of codegen ask it: the CPU's (threads by runtime/threads.py's model). A device
  whose loops map to hardware threads differently (the devices issue's GPUs) brings its own."""
  def estimate(self, uops: list[UOp]) -> tuple[int, int]: return estimate(uops)
  def parallel_loops(self, uops: list[UOp], cap: int | None = None) -> dict[UOp, int]: return parallel_loops(uops, cap)

__all__ = ["CostModel", "estimate", "parallel_loops"]
