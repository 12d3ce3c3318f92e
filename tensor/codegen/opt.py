"""Kernel optimizations chosen before lowering. Default heuristic: unroll ("upcast") a small innermost output loop,
so a kernel over 4 elements is straight-line code (the seeds' E_4n2); NOOPT=1 keeps every loop."""
from __future__ import annotations
from runtime.ops import Ops
from runtime.uop import UOp, uop

UPCAST_MAX = 4

def output_ranges(sink: UOp) -> list[UOp]:
  """The RANGEs of the stores' indices (the output loops), outermost first."""
  rngs = {r for st in sink.src if st.op is Ops.STORE for r in st.src[0].toposort() if r.op is Ops.RANGE}
  return sorted(rngs, key=lambda r: r.arg)

def upcast(sink: UOp) -> tuple[UOp, list[tuple]]:
  """Unroll the innermost output loop when it is short: one store per lane instead of a loop.
  Returns the new sink and the optimizations applied, as ("UPCAST", axis, amount)."""
  rngs = output_ranges(sink)
  if not rngs: return sink, []
  r = rngs[-1]
  n = r.src[0].arg if r.src[0].op is Ops.CONST else None
  if n is None or n > UPCAST_MAX: return sink, []
  stores = []
  for st in sink.src:
    if r in st.toposort(): stores += [st.substitute({r: uop(Ops.CONST, r.dtype, (), k)}) for k in range(n)]
    else: stores.append(st)
  return uop(Ops.SINK, sink.dtype, tuple(stores)), [("UPCAST", len(rngs) - 1, n)]
