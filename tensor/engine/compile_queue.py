"""The compiler threads of a realize with new kernels (tensor/engine/realize.py `_parallel_compiles`): while the engine
lowers one kernel after another, a thread per core compiles the rendered ones. A thread that comes free takes every kernel
waiting (its share, when other threads are free too) and hands them to the device in one call: the CPU device builds them
with one compiler run (runtime/ops_cpu.py `programs`), so the compiler's start, about 40 ms here, is paid per batch and not
per kernel. A device without `programs` compiles them one by one.
"""
from __future__ import annotations
import os, threading
from concurrent.futures import Future
from typing import Any
from runtime.device import Device

MAX_BATCH = 16  # kernels one thread takes at once: more would leave the other threads idle at the end of a step
MIN_BATCH = 4  # kernels that must wait before a thread takes them, until the last is submitted: fewer compiler runs

class CompileQueue:
  """Kernels to compile, (device, source, name) -> a Future of the device's program (or of its CompileError). close() waits
  for every kernel submitted (the threads are not daemons: a process exiting meanwhile lets each finish its entries)."""
  def __init__(self, threads: int | None = None):
    self.waiting: list[tuple[str, Any, str, Future]] = []
    self.idle, self.closed, self.batches = 0, False, 0
    self.cv = threading.Condition()
    self.threads = [threading.Thread(target=self._work, name=f"rulegrad-compile-{i}")
                    for i in range(threads or max(2, os.cpu_count() or 1))]
    for t in self.threads: t.start()

  def submit(self, device: str, src: Any, name: str) -> Future:
    future: Future = Future()
    with self.cv:
      self.waiting.append((device, src, name, future))
      self.cv.notify()
    return future

  def close(self) -> None:
    with self.cv:
      self.closed = True
      self.cv.notify_all()
    for t in self.threads: t.join()

  def _work(self) -> None:
    while True:
      with self.cv:
        while len(self.waiting) < MIN_BATCH and not self.closed:
          self.idle += 1
          self.cv.wait()
          self.idle -= 1
        if not self.waiting: return
        # this thread's share of what waits, the threads free now taking the rest: the last kernels don't queue behind one run
        n = min(MAX_BATCH, -(-len(self.waiting) // (self.idle + 1)))
        batch, self.waiting = self.waiting[:n], self.waiting[n:]
        self.batches += 1
        if self.waiting: self.cv.notify()
      self._compile(batch)

  def _compile(self, batch: list[tuple[str, Any, str, Future]]) -> None:
    for device in dict.fromkeys(d for d, *_ in batch):
      part = [b for b in batch if b[0] == device]
      try:
        dev = Device[device]
        if (many := getattr(dev, "programs", None)) is not None: results = many([(src, name) for _, src, name, _ in part])
        else: results = [_one(dev.program, src, name) for _, src, name, _ in part]
      except BaseException as e: results = [e] * len(part)  # noqa: BLE001  (the caller of each kernel sees it)
      for (*_, future), r in zip(part, results):
        if isinstance(r, BaseException): future.set_exception(r)
        else: future.set_result(r)

def _one(program, src: Any, name: str) -> Any:
  try: return program(src, name)
  except Exception as e: return e  # noqa: BLE001

__all__ = ["CompileQueue", "MAX_BATCH"]
