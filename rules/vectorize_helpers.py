"""Helpers for rules/vectorize.rules: which lanes can be one vector op on a target (hand-written; runtime only).

A target's VectorCaps say which ops it computes on vectors and which vector sizes it has; no caps (None) means scalars
only (the PYTHON device), so every vector the expansion made is taken apart again.
"""
from __future__ import annotations
from dataclasses import dataclass
from runtime.dtype import DType, dtypes
from runtime.ops import Ops
from runtime.uop import UOp, uop
from rules.expand_helpers import consecutive

@dataclass(frozen=True)
class VectorCaps:
  """Vector ops of a target: `ops` on vectors of `scalars`, from min_bytes to max_bytes wide (powers of two lanes).
  register_bytes and registers describe its vector registers (the heuristic sizes vectors and register tiles by them)."""
  ops: frozenset
  scalars: frozenset
  min_bytes: int = 32
  max_bytes: int = 256
  register_bytes: int = 32
  registers: int = 16
  def fits(self, d: DType) -> bool:
    n = d.count
    return d.scalar in self.scalars and n & (n - 1) == 0 and self.min_bytes <= d.itemsize <= self.max_bytes

def fits(caps: VectorCaps | None, d: DType) -> bool: return caps is not None and caps.fits(d)

def isomorphic(caps: VectorCaps | None, v: UOp) -> bool:
  """The lanes of v are one op (the same arg and dtype, at least two different lanes) the target has on vectors of v's size
  and of its sources' (a BITCAST's source type differs); a shift's amount is one constant in range in every lane (C has
  no vector form of exec_alu's shift by a variable amount)."""
  first = v.src[0]
  if not fits(caps, v.dtype) or first.op not in caps.ops or all(s is first for s in v.src): return False  # type: ignore[union-attr]
  if not all(fits(caps, s.dtype.vec(v.dtype.count)) for s in first.src): return False
  if first.op in (Ops.SHL, Ops.SHR) and not all(s.src[1].op is Ops.CONST and s.src[1].arg == first.src[1].arg for s in v.src): return False
  if first.op in (Ops.SHL, Ops.SHR) and not (first.src[1].op is Ops.CONST and 0 <= first.src[1].arg < 8 * first.dtype.itemsize): return False
  return all(s.op is first.op and s.arg == first.arg and s.dtype is first.dtype and len(s.src) == len(first.src) for s in v.src)

def _vec(xs: list[UOp]) -> UOp: return uop(Ops.VECTORIZE, xs[0].dtype.vec(len(xs)), tuple(xs))

def lanewise(v: UOp) -> UOp:
  """One op of vectors: source i is the vector of the lanes' sources i."""
  first = v.src[0]
  return uop(first.op, v.dtype, tuple(_vec([s.src[i] for s in v.src]) for i in range(len(first.src))), first.arg)

def vector_load(caps: VectorCaps | None, v: UOp) -> UOp | None:
  """Loads of consecutive elements of one buffer, under one guard (or none): one vector load."""
  if not fits(caps, v.dtype) or not all(s.op is Ops.LOAD for s in v.src): return None
  idx = [s.src[0] for s in v.src]
  if not all(i.op is Ops.INDEX and i.src[0] is idx[0].src[0] and i.src[2:] == idx[0].src[2:] for i in idx): return None
  return uop(Ops.LOAD, v.dtype, (idx[0],)) if consecutive([i.src[1] for i in idx]) else None

def vector_reduce(caps: VectorCaps | None, v: UOp) -> UOp | None:
  """Reductions of scalars over the same loops: one reduction of a vector (an accumulator per lane, as before)."""
  first = v.src[0]
  if not fits(caps, v.dtype) or first.arg not in caps.ops: return None  # type: ignore[union-attr]
  if not all(s.op is Ops.REDUCE and s.arg is first.arg and s.src[1:] == first.src[1:] and s.dtype.count == 1 for s in v.src): return None
  return uop(Ops.REDUCE, v.dtype, (_vec([s.src[0] for s in v.src]), *first.src[1:]), first.arg)

def chunk(caps: VectorCaps | None, d: DType) -> int:
  """The lanes of the widest vector the target has that a vector of d splits into evenly (1: none, scalars)."""
  n = d.count
  while n > 1 and (d.count % n or not fits(caps, d.scalar.vec(n))): n //= 2
  return n

def _lanes(v: UOp, lo: int, n: int) -> UOp:
  """Lanes lo..lo+n of vector v (a vector of n lanes, or a scalar when n is 1)."""
  xs = [v.src[k] if v.op is Ops.VECTORIZE else uop(Ops.GEP, v.dtype.scalar, (v,), (k,)) for k in range(lo, lo + n)]
  return xs[0] if n == 1 else _vec(xs)

def split_stores(caps: VectorCaps | None, srcs: tuple[UOp, ...]) -> UOp | None:
  """The kernel's stores with every vector store the target can't do as stores of the widest vectors it has (wider than
  a register: gcc keeps such vectors in memory), or one store per lane."""
  if not any(_split(caps, s) for s in srcs): return None
  out: list[UOp] = []
  for s in srcs:
    if not _split(caps, s): out.append(s); continue  # noqa: E702
    (g, i), v = s.src[0].src, s.src[1]
    n = chunk(caps, v.dtype)
    for k in range(0, v.dtype.count, n):
      at = uop(Ops.INDEX, s.src[0].dtype, (g, uop(Ops.ADD, i.dtype, (i, uop(Ops.CONST, i.dtype, (), k))) if k else i))
      out.append(uop(Ops.STORE, dtypes.void, (at, _lanes(v, k, n))))
  return uop(Ops.SINK, dtypes.void, tuple(out))

def split_reduce(caps: VectorCaps | None, q: UOp) -> UOp | None:
  """A reduction of a vector wider than the target has, as reductions of the widest vectors it has (one accumulator
  each); the lanes gathered back into a vector for the GEPs reading them."""
  n = chunk(caps, q.dtype)
  if n == 1: return None
  x, parts = q.src[0], []
  for k in range(0, q.dtype.count, n):
    part = uop(Ops.REDUCE, q.dtype.scalar.vec(n), (_lanes(x, k, n), *q.src[1:]), q.arg)
    parts += [uop(Ops.GEP, q.dtype.scalar, (part,), (j,)) for j in range(n)]
  return _vec(parts)

def _split(caps: VectorCaps | None, s: UOp) -> bool: return s.op is Ops.STORE and s.src[1].dtype.count > 1 and not fits(caps, s.src[1].dtype)
