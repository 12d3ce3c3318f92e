"""Kernel optimizations chosen before lowering (NOOPT=1 keeps every loop as rangeify made it). Default heuristic:
  UNROLL  a reduction over >= 64 consecutive elements runs as 16 interleaved partial reductions (one loop, 16 accumulators)
  UPCAST  a short innermost output loop (<= 4) is unrolled: a kernel over 4 elements is straight-line code (the seeds' E_4n2)
Both are graph substitutions on the rangeified kernel; symbolic cleans the index math after."""
from __future__ import annotations
from runtime.ops import Ops
from runtime.uop import UOp, uop

UPCAST_MAX = 4

def output_ranges(sink: UOp) -> list[UOp]:
  """The RANGEs of the stores' indices (the output loops), outermost first."""
  rngs = {r for st in sink.src if st.op is Ops.STORE for r in st.src[0].toposort() if r.op is Ops.RANGE}
  return sorted(rngs, key=lambda r: r.arg)

def _c(r: UOp, v: int) -> UOp: return uop(Ops.CONST, r.dtype, (), v)

def split_upcast(sink: UOp, r: UOp, amount: int) -> UOp:
  """Loop r (of n iterations) as n/amount iterations of `amount` lanes: r -> r'*amount + k, one store per lane k."""
  n = r.src[0].arg
  if amount == n: lanes = [_c(r, k) for k in range(n)]
  else:
    outer = uop(Ops.RANGE, r.dtype, (_c(r, n // amount),), r.arg)
    base = uop(Ops.MUL, r.dtype, (outer, _c(r, amount)))
    lanes = [uop(Ops.ADD, r.dtype, (base, _c(r, k))) if k else base for k in range(amount)]
  stores = []
  for st in sink.src:
    if r in st.toposort(): stores += [st.substitute({r: lane}) for lane in lanes]
    else: stores.append(st)
  return uop(Ops.SINK, sink.dtype, tuple(stores))

SPLIT_BYTES = 64  # lanes of a split reduction: one 64-byte vector (16 floats)
SPLIT_MIN = 64    # shorter reductions stay one loop

def _terms(x: UOp) -> list[UOp]:
  out, stack = [], [x]
  while stack:
    u = stack.pop()
    if u.op is Ops.ADD: stack.extend(u.src)
    else: out.append(u)
  return out

def _contiguous_in(q: UOp, r: UOp) -> bool:
  """Every load in reduction q that moves with r reads consecutive elements as r counts (r is a term of its index)."""
  loads = [u for u in q.src[0].toposort() if u.op is Ops.INDEX]
  moving = [u for u in loads if r in u.src[1].toposort()]
  return bool(moving) and all(sum(1 for t in _terms(u.src[1]) if r in t.toposort()) == 1 and r in _terms(u.src[1]) for u in moving)

def split_reduces(sink: UOp) -> tuple[UOp, list[tuple]]:
  """A long reduction over consecutive elements as interleaved partial reductions over one loop, combined at the end:
  independent accumulators instead of one serial chain of adds, which gcc turns into vector adds. Changes the order of a
  float sum (as tinygrad's unroll does). Reductions with strided loads (matmul's k) stay: gcc vectorizes those better."""
  topo = list(sink.toposort())
  next_arg = 1 + max((u.arg for u in topo if u.op is Ops.RANGE), default=-1)
  subs: dict[UOp, UOp] = {}
  opts = []
  for q in topo:
    if q.op is not Ops.REDUCE or q.arg not in (Ops.ADD, Ops.MAX): continue
    r = q.src[-1]
    n = r.src[0].arg if r.src[0].op is Ops.CONST else 0
    amount = max(4, min(16, SPLIT_BYTES // q.dtype.itemsize))
    if n < SPLIT_MIN or n % amount or not _contiguous_in(q, r): continue
    inner = uop(Ops.RANGE, r.dtype, (_c(r, n // amount),), next_arg)
    next_arg += 1
    base = uop(Ops.MUL, r.dtype, (inner, _c(r, amount)))
    # reductions inside this one were split already (sources come first in topo order): use the split ones
    body = q.src[0].substitute(subs) if subs else q.src[0]
    parts = [uop(Ops.REDUCE, q.dtype, (body.substitute({r: uop(Ops.ADD, r.dtype, (base, _c(r, k))) if k else base}), *q.src[1:-1], inner), q.arg)
             for k in range(amount)]
    while len(parts) > 1:  # a balanced tree: short dependency chains (and short C expressions)
      parts = [uop(q.arg, q.dtype, (parts[i], parts[i + 1])) if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
    subs[q] = parts[0]
    opts.append(("UNROLL", r.arg, amount))
  return (sink.substitute(subs) if subs else sink), opts

def upcast(sink: UOp) -> tuple[UOp, list[tuple]]:
  """Unroll the innermost output loop when it is short: one store per lane instead of a loop.
  Returns the new sink and the optimizations applied, as ("UPCAST", axis, amount)."""
  sink, opts0 = split_reduces(sink)
  rngs = output_ranges(sink)
  if not rngs: return sink, opts0
  r = rngs[-1]
  n = r.src[0].arg if r.src[0].op is Ops.CONST else None
  if n is None or n > UPCAST_MAX: return sink, opts0
  # measured on matmul: splitting a longer loop into lanes (4, 8 or 16, one or two axes) made gcc's code 1-6x slower,
  # since gcc vectorizes the plain loop itself; lanes pay off once they are rendered as vector types
  return split_upcast(sink, r, n), opts0 + [("UPCAST", len(rngs) - 1, n)]
