"""Helpers for rules/vectorize.rules: which vectors a target has (hand-written; runtime only).

A target's VectorCaps say which ops it computes on vectors and which vector sizes it has; no caps (None) means scalars
only (the PYTHON device), so every vector the expansion made is taken apart again.
"""
from __future__ import annotations
from dataclasses import dataclass
from runtime.dtype import DType
from runtime.ops import Ops
from runtime.uop import UOp, uop

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

def chunk(caps: VectorCaps | None, d: DType) -> int:
  """The lanes of the widest vector the target has that a vector of d splits into evenly (1: none, scalars)."""
  n = d.count
  while n > 1 and (d.count % n or not fits(caps, d.scalar.vec(n))): n //= 2
  return n

def lanes_lift(caps: VectorCaps | None, lanes, n: int) -> bool:
  """Whether `lanes` (a VECTORIZE's sources), one op with the same arg and dtype and not all one value, make that op on
  vectors of n lanes: the target has it on vectors of their sources' size too, and a shift only by one constant amount
  in range (C shifts a vector so)."""
  f = lanes[0]
  return caps is not None and f.op in caps.ops and any(s is not f for s in lanes) \
    and all(s.op is f.op and s.arg == f.arg and s.dtype is f.dtype for s in lanes) \
    and all(fits(caps, x.dtype.vec(n)) for x in f.src) \
    and (f.op not in (Ops.SHL, Ops.SHR) or f.src[1].op is Ops.CONST and 0 <= f.src[1].arg < 8 * f.dtype.itemsize
         and all(s.src[1].op is Ops.CONST and s.src[1].arg == f.src[1].arg for s in lanes))

def mask_lanes(caps: VectorCaps | None, v: UOp) -> bool:
  """Whether the lanes of v (a VECTORIZE of WHEREs) make one vector select: 32-bit values the target has vectors of. Their
  conditions become a mask of 32-bit lanes (-1 where true): a comparison of 32-bit vectors gives one, AND and OR of masks
  are masks, and any other bools are gathered into one (render_c.rules' VECTORIZE of bools)."""
  # lanes all one value are a broadcast of it: selected once, as a scalar
  return fits(caps, v.dtype) and v.dtype.scalar.itemsize == 4 and all(s.op is Ops.WHERE for s in v.src) and any(s is not v.src[0] for s in v.src)

def vec(xs: list[UOp] | tuple[UOp, ...]) -> UOp:
  """The vector of these lanes."""
  return uop(Ops.VECTORIZE, xs[0].dtype.vec(len(xs)), tuple(xs))
