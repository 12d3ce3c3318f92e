"""Small shared helpers: environment flags (`getenv`, `ContextVar`, `Context`), global counters, an LRU dict, a progress bar.

Flags are read from the environment once, at import, and can be changed for a block with `Context(DEBUG=2)`.
"""
from __future__ import annotations
import collections, contextlib, functools, os, sys, time
from typing import Any, Iterable, Iterator, TypeVar

T = TypeVar("T")

@functools.cache
def getenv(key: str, default: Any = 0) -> Any:
  """The environment variable `key` converted to the type of `default` (cached: read once per process)."""
  v = os.environ.get(key)
  if v is None: return default
  return type(default)(v) if not isinstance(default, bool) else v not in ("", "0", "false", "False")

# how many times a flag's value was set (Context, or `FLAG.value = x`): what was checked against the flags holds while this is
# unchanged, so a hot path may check them once and then compare this number (the eager path's prepared launches,
# tensor/engine/realize.py run_chain)
FLAG_CHANGES = [0]

class ContextVar:
  """A named flag, initialised from the environment; compares like its value (`DEBUG >= 2`)."""
  _registry: dict[str, ContextVar] = {}
  def __init__(self, key: str, default: Any):
    if key in ContextVar._registry: raise ValueError(f"the context variable {key} exists already")
    self.key, self.value = key, getenv(key, default)
    ContextVar._registry[key] = self
  def __setattr__(self, name: str, value: Any) -> None:
    object.__setattr__(self, name, value)
    FLAG_CHANGES[0] += 1
  def __bool__(self) -> bool: return bool(self.value)
  def __int__(self) -> int: return int(self.value)
  def __index__(self) -> int: return int(self.value)
  def __ge__(self, x) -> bool: return self.value >= x
  def __gt__(self, x) -> bool: return self.value > x
  def __le__(self, x) -> bool: return self.value <= x
  def __lt__(self, x) -> bool: return self.value < x
  def __eq__(self, x) -> bool: return self.value == x
  def __hash__(self) -> int: return hash(self.key)
  def __repr__(self) -> str: return f"{self.key}={self.value!r}"

class Context(contextlib.ContextDecorator):
  """Set context variables for a block: `with Context(DEBUG=2, NOOPT=1): ...` (restored on exit)."""
  def __init__(self, **kwargs):
    unknown = [k for k in kwargs if k not in ContextVar._registry]
    if unknown: raise KeyError(f"unknown context variable(s) {unknown}; known: {sorted(ContextVar._registry)}")
    self.kwargs = kwargs
  def __enter__(self):
    self.saved = [(k, ContextVar._registry[k].value) for k in self.kwargs]
    for k, v in self.kwargs.items(): ContextVar._registry[k].value = v
    return self
  def __exit__(self, *exc):
    for k, v in self.saved: ContextVar._registry[k].value = v
    return False

DEBUG, NOOPT, BEAM, JIT = ContextVar("DEBUG", 0), ContextVar("NOOPT", 0), ContextVar("BEAM", 0), ContextVar("JIT", 1)
# RULESTATS=1: per-rule attempts, hits and time of every graph_rewrite, printed at exit
RULESTATS = ContextVar("RULESTATS", 0)
# how many rewrites of one node without reaching a fixed point count as a runaway rewrite
REWRITE_LIMIT = ContextVar("REWRITE_LIMIT", 10_000)
# the IR's spec (tensor/codegen/spec.py, rules/spec.rules): 1 checks each graph at the pipeline's stage boundaries, 2 also after
# every graph_rewrite
SPEC = ContextVar("SPEC", 0)

class _Counters:
  """Totals since the last reset: kernels run, estimated ops and memory traffic, time in kernels; and the memory of the live
  buffers (mem_used, which a reset leaves). One object, GlobalCounters, read and written as `GlobalCounters.kernel_count`:
  a slot of an instance, because storing a class attribute costs ~45 ns more (each kernel launch and buffer updates several)."""
  __slots__ = ("global_ops", "global_mem", "time_sum_s", "kernel_count", "mem_used")
  def __init__(self):
    self.global_ops, self.global_mem, self.time_sum_s, self.kernel_count, self.mem_used = 0, 0, 0.0, 0, 0
  def reset(self) -> None:
    self.global_ops, self.global_mem, self.time_sum_s, self.kernel_count = 0, 0, 0.0, 0

GlobalCounters = _Counters()

class LRU(collections.OrderedDict):
  """A dict that keeps its `size` most recently used entries (a lookup with get() or [] counts as a use). The one eviction
  policy of the project's bounded caches. A hot path may read one with dict.get(lru, key), which costs no Python frame and
  does not count as a use (then move_to_end(key) on a hit if recency matters there: ~75 ns): for a path that only reads
  that way, the oldest entry goes first."""
  def __init__(self, size: int):
    super().__init__()
    self.size = size
  def __getitem__(self, key):
    v = super().__getitem__(key)
    self.move_to_end(key)
    return v
  def get(self, key, default=None):
    return self[key] if key in self else default
  def __setitem__(self, key, value):
    super().__setitem__(key, value)
    self.move_to_end(key)
    while len(self) > self.size: self.popitem(last=False)

def colored(text: str, color: str | None) -> str:
  codes = {"red": 31, "green": 32, "yellow": 33, "blue": 34, "magenta": 35, "cyan": 36, "white": 37}
  return text if color is None or not sys.stdout.isatty() else f"\u001b[{codes[color]}m{text}\u001b[0m"

def prod(xs: Iterable[int]) -> int:
  out = 1
  for x in xs: out *= x
  return out

class progress:
  """A minimal progress bar for long loops: `for x in progress(items, desc="compile"): ...` (writes to stderr)."""
  def __init__(self, iterable: Iterable[T], total: int | None = None, desc: str = "", width: int = 30, disable: bool = False):
    self.iterable, self.desc, self.width, self.disable = iterable, desc, width, disable
    self.total = total if total is not None else (len(iterable) if hasattr(iterable, "__len__") else None)  # type: ignore[arg-type]
  def __iter__(self) -> Iterator[T]:
    start, last = time.perf_counter(), 0.0
    n = 0
    for n, item in enumerate(self.iterable, 1):
      yield item
      now = time.perf_counter()
      if not self.disable and (now - last > 0.1 or n == self.total):
        last = now
        self._draw(n, now - start)
    if not self.disable and n:
      self._draw(n, time.perf_counter() - start)  # the final count, even when the last item came quickly
      sys.stderr.write("\n")
  def _draw(self, n: int, elapsed: float) -> None:
    rate = n / elapsed if elapsed > 0 else 0.0
    if self.total:
      filled = self.width * n // self.total
      bar = f"[{'#' * filled}{'.' * (self.width - filled)}] {n}/{self.total}"
    else: bar = f"{n}"
    sys.stderr.write(f"\r{self.desc + ': ' if self.desc else ''}{bar} {rate:.1f} it/s")
    sys.stderr.flush()
