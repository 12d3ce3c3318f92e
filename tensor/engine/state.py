"""The engine's state in one object: what the scheduler and the runner remember between realizes. The process has one
(ENGINE), which kernelize and realize use unless given another; a test that wants fresh caches makes an Engine of its own.

  lock           scheduling, running and pointing live tensors at results happen one thread at a time
  fresh_buffers  BUFFERs made for kernel outputs: the memory planner may place the ones nobody keeps in shared storage
  schedules      graph structure -> schedule (tensor/engine/schedule_cache.py)
  programs       compiled runners by (device, AST, NOOPT); templates: the first AST seen for each parametrized AST
  capturing      TinyJit's recorder while a call is captured (tensor/engine/jit.py): it sees every kernel run
  last_plan      the numbers of the most recent memory plan (DEBUG and tests read it)
"""
from __future__ import annotations
import threading, weakref
from runtime.helpers import LRU, getenv
from runtime.uop import UOp
from tensor.engine.memory import MemoryPlan
from tensor.engine.schedule_cache import ScheduleCache

class Engine:
  def __init__(self, schedules: int = 1024, programs: int = 4096):
    self.lock = threading.RLock()
    self.fresh_buffers: weakref.WeakSet[UOp] = weakref.WeakSet()
    self.schedules = ScheduleCache(max(schedules, 1))
    self.programs: LRU = LRU(programs)
    self.templates: LRU = LRU(programs)
    self.capturing: list = []
    self.last_plan = MemoryPlan()

# SCHEDULE_CACHE and PROGRAM_CACHE: how many schedules and compiled programs the process keeps (the disk keeps more programs:
# runtime/kernel_cache.py)
ENGINE = Engine(getenv("SCHEDULE_CACHE", 1024), getenv("PROGRAM_CACHE", 4096))

__all__ = ["Engine", "ENGINE"]
