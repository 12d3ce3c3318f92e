"""Multi-device tensors in the engine: before a realize or a kernelize, the MULTI nodes of the roots' graphs (a tensor over
several devices, tensor/multi.py) are lowered by rules/multi.rules to graphs on one device each; those are scheduled as
usual, and each root over several devices becomes a MULTI of its shards' results.
"""
from __future__ import annotations
from typing import Callable
from runtime.dtype import dtypes
from runtime.ops import Ops
from runtime.rewrite import graph_rewrite
from runtime.uop import UOp, uop
from rules.multi import multi
from tensor.engine.state import Engine
from tensor.engine.storage import base_buffer, realized_buffer

# set once the process makes its first tensor over several devices: until then no realize looks for MULTI nodes
USED = [False]

def _several(u: UOp) -> bool: return u.op is Ops.MULTI or (u.op is Ops.DEVICE and u.arg.__class__ is tuple)
def _computed(u: UOp) -> bool: return u.op is not Ops.BUFFER and not (u.op is Ops.ASSIGN and u.src[1].op is Ops.KERNEL)

def is_multi(u: UOp) -> bool:
  """Whether u's graph (still to compute) has a tensor over several devices."""
  return USED[0] and any(_several(x) for x in u.toposort(gate=_computed))

def _reads(u: UOp) -> set[UOp]:
  """The buffers a pending graph reads (not the ones it only assigns into)."""
  out: set[UOp] = set()
  for n in u.toposort(gate=_computed):
    for k, s in enumerate(n.src):
      if n.op is Ops.ASSIGN and k == 0: continue
      while s.op is Ops.RESHAPE: s = s.src[0]
      if s.op is Ops.BUFFER: out.add(s)
  return out

def lower(roots: list[UOp], engine: Engine) -> tuple[list[UOp], Callable[[dict], dict]] | None:
  """None when no root's graph has a multi-device tensor; else (the roots on one device each, a function from what those
  became to what the given roots become). The live multi-device tensors that read the old value of a buffer these roots
  assign into are lowered with them (the scheduler's pending readers, tensor/engine/schedule.py, are single-device ones)."""
  if not USED[0] or not any(_several(u) for u in uop(Ops.SINK, dtypes.void, tuple(roots)).toposort(gate=_computed)): return None
  targets = {base_buffer(t) for r in roots for n in r.toposort(gate=_computed) if n.op is Ops.ASSIGN
             for t in (n.src[0].src if n.src[0].op is Ops.MULTI else n.src[:1])} - {None}
  if targets:
    mine = set(roots)
    roots = roots + [u for u in engine.storage.live_roots() if u not in mine and realized_buffer(u) is None and is_multi(u) and _reads(u) & targets]
  low = graph_rewrite(uop(Ops.SINK, dtypes.void, tuple(roots)), multi, name="multi")
  flat: list[UOp] = []
  slots: list[tuple[UOp, UOp, int]] = []
  for r, x in zip(roots, low.src):
    slots.append((r, x, len(flat)))
    flat.extend(x.src if x.op is Ops.MULTI else (x,))
  def rebuild(becomes: dict[UOp, UOp]) -> dict[UOp, UOp]:
    out = dict(becomes)
    for r, x, i in slots:
      if x.op is Ops.MULTI: out[r] = uop(Ops.MULTI, r.dtype, tuple(becomes.get(s, s) for s in flat[i:i + len(x.src)]), x.arg)
      else: out[r] = becomes.get(x, x)
    return {k: v for k, v in out.items() if k is not v}
  return flat, rebuild
