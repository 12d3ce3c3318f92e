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

def reduced(r: UOp) -> int:
  """How many values go into each result of the reduction r: the product of its reduced axes (at their largest)."""
  return math.prod(int(dim_max(r.src[0].shape[a])) for a in r.arg[1])
