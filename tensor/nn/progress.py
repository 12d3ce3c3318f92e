"""A progress bar for training loops, with tqdm's names for what examples use: `for i in (t := trange(steps)):
t.set_description(f"loss {loss.item():.2f}")`. On a terminal it redraws one line; in a log (not a terminal) it prints a
plain line at each tenth of the way and at the end, so a CI log shows progress without carriage returns.
(runtime.helpers.progress is the engine's own, simpler bar.)
"""
from __future__ import annotations
import sys, time
from typing import Generic, Iterable, Iterator, TextIO, TypeVar

T = TypeVar("T")

class tqdm(Generic[T]):
  """Wraps an iterable (or counts update() calls) and shows n/total, a bar, the rate and a description that can change."""
  def __init__(self, iterable: Iterable[T] | None = None, desc: str = "", total: int | None = None, file: TextIO | None = None,
               disable: bool = False, width: int = 24, min_interval: float = 0.1):
    self.iterable, self.desc, self.disable, self.width, self.min_interval = iterable, desc, disable, width, min_interval
    self.total = total if total is not None else (len(iterable) if hasattr(iterable, "__len__") else None)  # type: ignore[arg-type]
    self.file = file if file is not None else sys.stderr
    self.n, self.start, self._drawn_at, self._tenth = 0, time.perf_counter(), 0.0, 0
    self._tty = hasattr(self.file, "isatty") and self.file.isatty()
    self._closed = False

  def __iter__(self) -> Iterator[T]:
    if self.iterable is None: raise TypeError("this tqdm wraps no iterable: call update() instead")
    try:
      for item in self.iterable:
        yield item
        self.update(1)
    finally: self.close()
  def __enter__(self) -> tqdm[T]: return self
  def __exit__(self, *exc) -> None: self.close()
  def __len__(self) -> int: return self.total or 0

  def set_description(self, desc: str, refresh: bool = True) -> None:
    self.desc = desc
    if refresh and self._tty: self._draw(time.perf_counter())

  def update(self, n: int = 1) -> None:
    self.n += n
    if self.disable: return
    now = time.perf_counter()
    if self._tty:
      if now - self._drawn_at >= self.min_interval or self.n == self.total: self._draw(now)
    elif self.total:
      # a log: one line per tenth of the way (the last tenth is the closing line)
      if (tenth := 10 * self.n // self.total) > self._tenth and self.n < self.total:
        self._tenth = tenth
        self._draw(now)

  def close(self) -> None:
    if self._closed: return
    self._closed = True
    if not self.disable:
      self._draw(time.perf_counter())
      self.file.write("\n" if self._tty else "")

  def line(self, now: float | None = None) -> str:
    """The text of the bar as it stands: `desc: 40%|#########.............| 40/100 [00:02, 19.8 it/s]`."""
    elapsed = (now if now is not None else time.perf_counter()) - self.start
    rate = f"{self.n / elapsed:.1f} it/s" if elapsed > 0 and self.n else "? it/s"
    head = f"{self.desc}: " if self.desc else ""
    if self.total:
      filled = min(self.width, self.width * self.n // self.total)
      body = f"{100 * self.n // self.total:3d}%|{'#' * filled}{'.' * (self.width - filled)}| {self.n}/{self.total}"
    else: body = f"{self.n}"
    return f"{head}{body} [{int(elapsed) // 60:02d}:{int(elapsed) % 60:02d}, {rate}]"

  def _draw(self, now: float) -> None:
    self._drawn_at = now
    # on a terminal: overwrite the line (\033[K clears what a longer description left); in a log: a line of its own
    self.file.write(f"\r{self.line(now)}\033[K" if self._tty else self.line(now) + "\n")
    self.file.flush()

def trange(*args: int, **kwargs) -> tqdm[int]:
  """tqdm(range(*args), **kwargs)."""
  return tqdm(range(*args), **kwargs)
