"""The engine's state in one object: the tensors' memory and everything the scheduler and the runner remember between
realizes. The process has one (ENGINE), which the frontend (tensor/tensor.py) runs on and kernelize and realize use unless
given another; a test that wants fresh caches makes an Engine of its own (Engine(storage=ENGINE.storage) to realize the
process's tensors with it).

  lock           scheduling, running and pointing live tensors at results happen one thread at a time
  storage        the Buffer behind each BUFFER node, unique ids, the live roots (tensor/engine/storage.py)
  targets        the device table: per device its codegen Target (renderer, vector caps, cost model, compiler, allocator)
  fresh_buffers  BUFFERs made for kernel outputs: the memory planner may place the ones nobody keeps in shared storage
  schedules      graph structure -> schedule (tensor/engine/schedule_cache.py)
  chains         op chains by (operand's chain, op): the schedule key of `x * 2 + 1` without a walk (schedule_cache.OpChain)
  programs       compiled runners by (device, AST, variant); templates: the first AST seen for each parametrized AST
  capturing      TinyJit's recorder while a call is captured (tensor/jit.py): it sees every kernel this engine runs
  last_plan      the numbers of the most recent memory plan (DEBUG and tests read it)
"""
from __future__ import annotations
import threading, weakref
from runtime.helpers import LRU, getenv
from runtime.uop import UOp
from tensor.codegen.target import Target, target_for
from tensor.engine.memory import MemoryPlan
from tensor.engine.schedule_cache import Chains, ScheduleCache
from tensor.engine.storage import Storage

class Engine:
  def __init__(self, schedules: int = 1024, programs: int = 4096, storage: Storage | None = None):
    self.lock = threading.RLock()
    self.storage = storage if storage is not None else Storage()
    self.targets: dict[str, Target] = {}
    self.fresh_buffers: weakref.WeakSet[UOp] = weakref.WeakSet()
    self.schedules = ScheduleCache(max(schedules, 1))
    self.chains = Chains(4096)
    self.programs: LRU = LRU(programs)
    self.templates: LRU = LRU(programs)
    self.capturing: list = []
    self.last_plan = MemoryPlan()

  def target(self, device: str) -> Target:
    """The Target codegen lowers this engine's kernels on `device` for (made on first use; a tuple of devices, a tensor
    over several: the first one's)."""
    if device.__class__ is tuple: device = device[0]
    if (t := self.targets.get(device)) is None: t = self.targets[device] = target_for(device)
    return t

# SCHEDULE_CACHE and PROGRAM_CACHE: how many schedules and compiled programs the process keeps (the disk keeps more programs:
# runtime/kernel_cache.py)
ENGINE = Engine(getenv("SCHEDULE_CACHE", 1024), getenv("PROGRAM_CACHE", 4096))

__all__ = ["Engine", "ENGINE"]
