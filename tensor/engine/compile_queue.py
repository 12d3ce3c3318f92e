"""The compiler threads of a realize with new kernels (tensor/engine/realize.py `_parallel_compiles`): while the engine
lowers one kernel after another, a thread per core compiles the rendered ones. A thread that comes free takes every kernel
waiting (its share, when other threads are free too) and hands them to the device in one call: the CPU device builds them
with one compiler run (runtime/ops_cpu.py `programs`), so the compiler's start, about 40 ms here, is paid per batch and not
per kernel. A device without `programs` compiles them one by one.

Quick builds (QUICK_COMPILE=1, the default): a device with `quick_programs` (the CPU's -O1, about half the compiler's time
of -O3) builds the kernels its cache lacks quickly, and each runs as a Provisional program. A Provisional called a second
time, or captured by TinyJit, asks UPGRADES for its final build: a background thread at low priority makes it and swaps it
in. The two builds compute the same bits (no flag reassociates floating point), so the swap may fall between any two calls;
holders of the program's entry point (TinyJit's native replay, prepared launches) take the final one when UPGRADES.version
changes. wait_upgrades() waits for the builds asked so far (a benchmark's steady state).
"""
from __future__ import annotations
import atexit, os, threading, time
from concurrent.futures import Future
from typing import Any, Callable
from runtime.device import Device
from runtime.helpers import ContextVar

MAX_BATCH = 16  # kernels one thread takes at once: more would leave the other threads idle at the end of a step
MIN_BATCH = 6  # kernels that must wait before a thread takes them, until the last is submitted: fewer compiler runs
QUICK_COMPILE = ContextVar("QUICK_COMPILE", 1)  # 0: every kernel's final build at once (no Provisional programs)
LINGER_S = 0.05  # a background thread woken by a kernel waits this long for the others a step asks for (fewer compiler runs)
_FOREGROUND = threading.Lock()

class CompileQueue:
  """Kernels to compile, (device, source, name) -> a Future of the device's program (or of its CompileError). close() waits
  for every kernel submitted, close(wait=False) lets the threads end when they have built them (they are not daemons: a
  process exiting meanwhile lets each finish its entries).
  quick: the device's quick builds where it has them (a Provisional program). background: daemon threads at low priority
  that take kernels as they come (after LINGER_S) while no foreground queue has threads, their compiler runs stopped when the
  process exits (UPGRADES)."""
  foreground = 0  # threads of foreground queues alive (class-wide): a background thread waits while there are any
  def __init__(self, threads: int | None = None, quick: bool = False, background: bool = False):
    self.waiting: list[tuple[str, Any, str, Future, Callable | None]] = []
    self.idle, self.closed, self.batches, self.quick, self.background = 0, False, 0, quick, background
    self.min_batch = 1 if background else MIN_BATCH
    self.cv = threading.Condition()
    self.threads = [threading.Thread(target=self._work, name=f"rulegrad-{'upgrade' if background else 'compile'}-{i}", daemon=background)
                    for i in range(threads or max(2, os.cpu_count() or 1))]
    for t in self.threads: t.start()

  def submit(self, device: str, src: Any, name: str, after: Callable[[], Any] | None = None) -> Future:
    """A Future of the kernel's program; `after` is called on the compile thread once it is built, before the Future is
    done (codegen's disk-cache write: off the thread that lowers)."""
    future: Future = Future()
    with self.cv:
      self.waiting.append((device, src, name, future, after))
      self.cv.notify()
    return future

  def close(self, wait: bool = True) -> None:
    """No more kernels come: the threads build what waits and end. wait: until they have (else each Future says when its
    kernel is built: a realize runs its first kernels while the last compile)."""
    with self.cv:
      self.closed = True
      self.cv.notify_all()
    if wait:
      for t in self.threads: t.join()

  def _work(self) -> None:
    if self.background:
      from runtime import ops_cpu  # the compiler runs this thread starts: low priority, stopped at exit
      ops_cpu.background_thread()
    else:
      with _FOREGROUND: CompileQueue.foreground += 1
    try: self._take_and_build()
    finally:
      if not self.background:
        with _FOREGROUND: CompileQueue.foreground -= 1

  def _take_and_build(self) -> None:
    while True:
      with self.cv:
        while len(self.waiting) < self.min_batch and not self.closed:
          self.idle += 1
          self.cv.wait()
          self.idle -= 1
        if self.background:  # the rest of the step's kernels come within milliseconds: one compiler run for them all
          deadline = time.perf_counter() + LINGER_S
          while not self.closed and (left := deadline - time.perf_counter()) > 0: self.cv.wait(left)
        # a cold step's compiles come first: final builds wait while a foreground queue has threads
        yielding = self.background and CompileQueue.foreground > 0 and not self.closed
        if not yielding:
          if not self.waiting:
            if self.closed: return
            continue
          # while kernels come, all that waits (fewer compiler runs: another thread takes the next ones); once the last is
          # in, this thread's share, the threads free now taking the rest: the last kernels don't queue behind one run
          n = min(MAX_BATCH, len(self.waiting) if not self.closed else -(-len(self.waiting) // (self.idle + 1)))
          batch, self.waiting = self.waiting[:n], self.waiting[n:]
          self.batches += 1
          if self.waiting: self.cv.notify()
      if yielding: time.sleep(LINGER_S)
      else: self._compile(batch)

  def _compile(self, batch: list[tuple[str, Any, str, Future, Callable | None]]) -> None:
    for device in dict.fromkeys(d for d, *_ in batch):
      part = [b for b in batch if b[0] == device]
      try:
        dev = Device[device]
        many = getattr(dev, "quick_programs", None) if self.quick else None
        if many is None: many = getattr(dev, "programs", None)
        if many is not None: results = many([(src, name) for _, src, name, _, _ in part])
        else: results = [_one(dev.program, src, name) for _, src, name, _, _ in part]
      except BaseException as e: results = [e] * len(part)  # noqa: BLE001  (the caller of each kernel sees it)
      for (_, src, name, future, after), r in zip(part, results):
        # before the result: a realize that ran its kernels has written their entries
        if after is not None:
          try: after()
          except Exception: pass  # noqa: BLE001  (a cache write that fails costs a later process a lowering, nothing else)
        if isinstance(r, BaseException): future.set_exception(r)
        else: future.set_result(Provisional(r, device, src, name) if getattr(r, "provisional", False) else r)

def _one(program, src: Any, name: str) -> Any:
  try: return program(src, name)
  except Exception as e: return e  # noqa: BLE001

class Provisional:
  """A kernel's quick build, run in place of its final build until that is made; then `current` is the final program (and
  `final` too). Its second call, or want(), asks for the final build (a kernel run once, as a weight's initialisation, is
  never built twice). It has no `cfunc`: a prepared launch calls it (and counts its calls) until UPGRADES says it changed."""
  __slots__ = ("current", "final", "device", "src", "name", "calls", "asked")
  def __init__(self, quick: Callable, device: str, src: Any, name: str):
    self.current, self.final, self.device, self.src, self.name = quick, None, device, src, name
    self.calls, self.asked = 0, False
  def __call__(self, bufs: list, vals: tuple = ()) -> Any:
    self.calls += 1
    if self.calls == 2: self.want()
    return self.current(bufs, vals)
  @property
  def lib(self) -> Any: return self.current.lib  # the loaded object (TinyJit's native replay calls its entry point)
  def want(self) -> None:
    if not self.asked:
      self.asked = True
      UPGRADES.ask(self)

def final_program(fn: Any) -> Any:
  """The program to hold for `fn`: its final build when `fn` is a Provisional whose final build is made, else `fn`."""
  return fn.final if fn.__class__ is Provisional and fn.final is not None else fn

class Upgrades:
  """The final builds of Provisional programs, made by background threads. `version` grows with each one made: a holder of
  entry points compares it with the one it saw."""
  def __init__(self):
    self.version, self.pending, self.queue = 0, 0, None
    self.cv = threading.Condition()
  def ask(self, p: Provisional) -> None:
    with self.cv:
      if self.queue is None:
        self.queue = CompileQueue(background=True)
        atexit.register(self.stop)
      self.pending += 1
    self.queue.submit(p.device, p.src, p.name).add_done_callback(lambda f: self._made(p, f))
  def _made(self, p: Provisional, f: Future) -> None:
    # an error (or the process exiting) keeps the quick build, which works: only its speed is lost
    if f.exception() is None and not getattr(r := f.result(), "provisional", False): p.final = p.current = r
    with self.cv:
      self.version += 1
      self.pending -= 1
      self.cv.notify_all()
  def wait(self, timeout: float | None = None) -> bool:
    """Wait until every final build asked for is made (at most `timeout` seconds); whether none is pending."""
    with self.cv: return self.cv.wait_for(lambda: self.pending == 0, timeout)
  def stop(self) -> None:
    """At exit: kill the compiler runs under way (no half-built entry is left) and let the threads finish."""
    if self.queue is None: return
    from runtime import ops_cpu
    ops_cpu.stop_background()
    self.queue.close()

UPGRADES = Upgrades()

def wait_upgrades(timeout: float | None = None) -> bool:
  """Wait until the final builds asked so far are made (a benchmark's steady state); whether none is pending."""
  return UPGRADES.wait(timeout)

__all__ = ["CompileQueue", "MAX_BATCH", "Provisional", "UPGRADES", "QUICK_COMPILE", "final_program", "wait_upgrades"]
