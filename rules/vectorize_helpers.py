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

def mask_lanes(caps: VectorCaps | None, v: UOp) -> bool:
  """Whether the lanes of v (a VECTORIZE of WHEREs) make one vector select: 32-bit values the target has vectors of, each
  picked by a comparison of 32-bit values (so the condition is a vector comparison's mask of the same lane width)."""
  if not fits(caps, v.dtype) or v.dtype.scalar.itemsize != 4: return False
  return all(s.op is Ops.WHERE and s.src[0].op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ) and s.src[0].src[0].dtype.itemsize == 4 for s in v.src)

def vec(xs: list[UOp] | tuple[UOp, ...]) -> UOp:
  """The vector of these lanes."""
  return uop(Ops.VECTORIZE, xs[0].dtype.vec(len(xs)), tuple(xs))
