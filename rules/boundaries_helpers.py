"""Helpers for rules/boundaries.rules (hand-written; imports only runtime): how often a read's loops run, and how many
results a reduction has, the two costs the rule that bounds fusion by work compares.
"""
from __future__ import annotations
import math
from runtime.uop import UOp, dim_max

def _count(u) -> int:
  """The number of values an index node (a loop, a Variable standing for one) or a size takes; 1 when it can't say."""
  if u.__class__ is int: return u
  try: return int(u.vmax) - int(u.vmin) + 1
  except (TypeError, ValueError): return 1

def trips(loops) -> int:
  """How many times the body of these nested loops runs: the product of their lengths."""
  return math.prod(_count(r) for r in loops)

def results(r: UOp) -> int:
  """How many values the reduction r makes: the product of its output shape (a symbolic size at its largest)."""
  return math.prod(int(dim_max(d)) for d in r.shape)

# a short reduction (a pooling window's) fused into loops that run it at most this many times per result stays fused: max-pool's
# backward counts each window's maxima at every pixel of it (a 2x2 window 4 times), cheaper than a kernel and a buffer
# between (the seeds' CNN step: 3 kernels more)
SHORT_REDUCTION, FEW_RECOMPUTES = 64, 16

def recomputed(r: UOp, loops) -> bool:
  """Whether fusing the reduction r into these loops would compute its results over again at a cost: the loops run more
  often than r has results, and either r is longer than SHORT_REDUCTION or each result would run over FEW_RECOMPUTES times."""
  n, k = trips(loops), results(r)
  if n <= k: return False
  length = math.prod(int(dim_max(r.src[0].shape[a])) for a in r.arg[1])
  return length > SHORT_REDUCTION or n > FEW_RECOMPUTES * k
