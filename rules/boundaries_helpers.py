"""Helpers for rules/boundaries.rules: where kernels read each node, and which loops each read uses (hand-written;
imports only runtime). tensor/engine/boundaries.py fills a `Reads` while it walks the tensor graph."""
from __future__ import annotations
from runtime.dtype import dtypes
from runtime.uop import UOp

class Reads:
  """The walk's state, and the context of rules/rangeify.rules while they run on the tensor graph.
  at[u]: the places kernels read u, (the kernel's output, AT(u, valid, i0, ...)), in the order met.
  used[a]: the loops read a's value depends on (the RANGEs reaching its loads; a reduction's own loops excluded).
  around[a]: every loop enclosing those (a kernel nests its output loops in order, a reduction's loops inside the loops
  around its read). Loop ids are unique across kernels."""
  index = dtypes.int64  # the walk compares indices, it renders none: the wide type never overflows
  def __init__(self):
    self.next_range = 0
    self.reduces: dict[UOp, UOp] = {}  # rules/rangeify_helpers.at_reduce's memo
    self.at: dict[UOp, dict[tuple[UOp, UOp], None]] = {}
    self.used: dict[UOp, frozenset] = {}
    self.around: dict[UOp, frozenset] = {}
  def new_range(self) -> int:
    self.next_range += 1
    return self.next_range - 1
  def read_at_several_indices(self, r: UOp) -> bool: return len(self.at.get(r, ())) > 1
  def inside_unused_loop(self, r: UOp) -> bool:
    """Some loop around r's one read is one its value does not use: the reduction would run again on each of its iterations."""
    if len(reads := self.at.get(r, ())) != 1: return False
    a = next(iter(reads))[1]
    return self.around[a] != self.used[a]

def has_loop(x: UOp, arg: tuple) -> bool:
  """A reduction of x over arg's axes loops: some reduced axis is longer than 1 (or symbolic)."""
  return any(not (x.shape[a].__class__ is int and x.shape[a] == 1) for a in arg[1])

__all__ = ["Reads", "has_loop"]
