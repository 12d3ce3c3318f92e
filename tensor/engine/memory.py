"""Memory planning: the intermediate buffers of one realize (kernel outputs no live tensor keeps) share storage by
lifetime, so a chain of kernels reuses a few blocks instead of allocating one per kernel. Runs between scheduling and
running (tensor/engine/realize.py); the JIT can plan a captured call the same way.

A buffer lives from the kernel that writes it to the last kernel that reads it. Walking the schedule in order, each
planned output takes the smallest free block that fits (a block is free once every buffer placed in it is dead), or a
new block. Blocks are raw bytes; a planned buffer is a typed view (Buffer(base=block)) of the front of one.
"""
from __future__ import annotations
from dataclasses import dataclass, field
from runtime.device import Buffer
from runtime.dtype import dtypes
from runtime.helpers import ContextVar
from runtime.uop import UOp

# NO_MEMORY_PLANNER=1: every intermediate gets its own buffer (to compare, or to rule the planner out when debugging)
NO_MEMORY_PLANNER = ContextVar("NO_MEMORY_PLANNER", 0)

@dataclass
class MemoryPlan:
  """What planning did: which BUFFER went into which block, and the bytes that separate buffers would have taken."""
  placement: dict[UOp, int] = field(default_factory=dict)
  blocks: list[int] = field(default_factory=list)  # nbytes of each block
  unplanned_bytes: int = 0
  n_buffers: int = 0
  def summary(self) -> MemoryPlan:
    """The numbers without the placement (which holds the BUFFER nodes, and so their memory, alive)."""
    return MemoryPlan({}, list(self.blocks), self.unplanned_bytes, len(self.placement))
  @property
  def planned_bytes(self) -> int: return sum(self.blocks)
  def __repr__(self) -> str:
    n = self.n_buffers or len(self.placement)
    return f"<MemoryPlan {n} buffers in {len(self.blocks)} blocks: {self.planned_bytes} bytes for {self.unplanned_bytes}>"

def plan_memory(steps: list[list[UOp]], plannable: set[UOp], device_of, nbytes_of) -> MemoryPlan:
  """steps: each kernel's BUFFER nodes in schedule order, output first. plannable: the outputs that may share storage.
  Returns which block each plannable buffer gets (blocks are per device)."""
  first: dict[UOp, int] = {}
  last: dict[UOp, int] = {}
  for i, bufs in enumerate(steps):
    for b in bufs:
      first.setdefault(b, i)
      last[b] = i
  plan = MemoryPlan()
  busy_until: list[int] = []  # per block: the last step at which a buffer placed in it is used
  block_device: list[str] = []
  for i, bufs in enumerate(steps):
    b = bufs[0]
    if b not in plannable or first[b] != i or b in plan.placement: continue
    need, dev = nbytes_of(b), device_of(b)
    plan.unplanned_bytes += need
    # a block is free when its buffers died before this step (a kernel never writes a block it reads)
    free = [k for k in range(len(plan.blocks)) if busy_until[k] < i and block_device[k] == dev and plan.blocks[k] >= need]
    if free: k = min(free, key=lambda k: plan.blocks[k])
    else:
      # grow the largest free block rather than adding one, when one is free
      grow = [k for k in range(len(plan.blocks)) if busy_until[k] < i and block_device[k] == dev]
      if grow: k = max(grow, key=lambda k: plan.blocks[k])
      else:
        k = len(plan.blocks)
        plan.blocks.append(0)
        busy_until.append(-1)
        block_device.append(dev)
      plan.blocks[k] = need
    plan.placement[b] = k
    busy_until[k] = last[b]
  return plan

def apply_plan(plan: MemoryPlan, buffers: dict, device_of) -> None:
  """Give each planned BUFFER node a view of its block (the blocks are allocated when the first kernel runs)."""
  blocks = [Buffer(dev, n, dtypes.uint8) for dev, n in zip(_block_devices(plan, device_of), plan.blocks)]
  for b, k in plan.placement.items():
    old = buffers[b]
    buffers[b] = Buffer(old.device, old.size, old.dtype, base=blocks[k])

def _block_devices(plan: MemoryPlan, device_of) -> list[str]:
  devs = [""] * len(plan.blocks)
  for b, k in plan.placement.items(): devs[k] = device_of(b)
  return devs

__all__ = ["plan_memory", "apply_plan", "MemoryPlan"]
