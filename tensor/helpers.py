"""Helpers for user scripts, with the names tinygrad's `tinygrad.helpers` gives them: timing a block (`Timing`), downloading a
file once into a cache (`fetch`), walking a dotted path into a model (`get_child`), a temporary file's path (`temp`), a
memoryview's address (`mv_address`), a progress bar (`tqdm`, `trange`), and the environment flags (`getenv`, `DEBUG`,
`Context`, `TRAINING`: `Context(TRAINING=1)` is `Tensor.train()`; `DEFAULT_FLOAT`, `DEFAULT_INT`:
`Context(DEFAULT_FLOAT=dtypes.half)` sets `dtypes.default_float`) and `colored`.
Frontend layer: needs no Tensor.
"""
from __future__ import annotations
import contextlib, ctypes, getpass, gzip, hashlib, os, pathlib, sys, tempfile, time, urllib.error, urllib.request
from typing import Any, Callable, Generic, Iterable, Iterator, TextIO, TypeVar
from runtime.helpers import DEBUG, Context, ContextVar, GlobalCounters, colored, getenv, prod
from runtime.dtype import DType, dtypes
from tensor.autograd import TRAINING
from tensor.errors import ArgumentValueError, to_dtype

T = TypeVar("T")

class _DefaultDType(ContextVar):
  """`Context(DEFAULT_FLOAT=dtypes.half)` (tinygrad's): the dtype that Python floats (or ints) and float results take,
  `dtypes.default_float` itself, so the two can't disagree. A DType or its name."""
  def __init__(self, key: str, attr: str, kind: str):
    self.attr, self.kind = attr, kind
    super().__init__(key, getattr(dtypes, attr).name)
  @property  # type: ignore[override]
  def value(self) -> DType: return getattr(dtypes, self.attr)
  @value.setter
  def value(self, v) -> None:
    dt = to_dtype(v.lower() if isinstance(v, str) else v)
    if not (dtypes.is_float(dt) if self.kind == "float" else dtypes.is_int(dt)):
      raise ArgumentValueError(f"{self.key} must be a {self.kind} dtype, got {dt}")
    setattr(dtypes, self.attr, dt)

DEFAULT_FLOAT, DEFAULT_INT = _DefaultDType("DEFAULT_FLOAT", "default_float", "float"), _DefaultDType("DEFAULT_INT", "default_int", "int")

class Timing(contextlib.ContextDecorator):
  """Prints how long a block took: `with Timing("load "): ...` prints `load  12.34 ms` (`on_exit(ns)` adds a suffix)."""
  def __init__(self, prefix: str = "", on_exit: Callable[[int], str] | None = None, enabled: bool = True):
    self.prefix, self.on_exit, self.enabled = prefix, on_exit, enabled
  def __enter__(self) -> Timing:
    self.st = time.perf_counter_ns()
    return self
  def __exit__(self, *exc) -> None:
    self.et = time.perf_counter_ns() - self.st
    if self.enabled: print(f"{self.prefix}{self.et * 1e-6:6.2f} ms" + (self.on_exit(self.et) if self.on_exit else ""))

class FetchError(OSError):
  """A download failed (no network, a bad address, an HTTP error): says which URL and why."""

def downloads_dir() -> pathlib.Path:
  """Where fetch() keeps what it downloaded: CACHE_DIR/downloads (default ~/.cache/rulegrad/downloads)."""
  base = os.environ.get("CACHE_DIR") or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "rulegrad")
  return pathlib.Path(base) / "downloads"

def fetch(url: str, name: str | os.PathLike | None = None, subdir: str | None = None, gunzip: bool = False,
          allow_caching: bool = True, timeout: float = 30.0) -> pathlib.Path:
  """The path of a local copy of `url`, downloaded once (later calls find it in downloads_dir()). A local path is returned as
  is. `name` names the file (a path with a folder: exactly there); `gunzip` stores it decompressed. The file appears whole or
  not at all (written beside, then renamed). Without a network it raises FetchError naming the URL."""
  if url.startswith(("/", ".")): return pathlib.Path(url)
  if name is not None and (isinstance(name, pathlib.Path) or "/" in str(name)): fp = pathlib.Path(name)
  else: fp = downloads_dir() / (subdir or "") / ((str(name) if name else hashlib.md5(url.encode()).hexdigest()) + (".gunzip" if gunzip else ""))
  if fp.is_file() and allow_caching: return fp
  fp.parent.mkdir(parents=True, exist_ok=True)
  try:
    with urllib.request.urlopen(urllib.request.Request(url, headers={"User-Agent": "rulegrad"}), timeout=timeout) as r:
      if (status := getattr(r, "status", 200)) != 200: raise FetchError(f"fetch {url}: HTTP status {status}")
      data = r.read()
  except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
    reason = getattr(e, "reason", e)
    raise FetchError(f"fetch {url}: could not download it ({reason}); with no network, put the file at {fp} "
                     "or pass a local path") from e
  if gunzip: data = gzip.decompress(data)
  with tempfile.NamedTemporaryFile(dir=fp.parent, delete=False) as f: f.write(data)
  os.replace(f.name, fp)
  return fp

def temp(name: str, append_user: bool = False) -> str:
  """The path of `name` in the system's temporary folder (tinygrad's `temp`), with `.USER` appended when asked (so users of
  one machine don't share the file)."""
  return (pathlib.Path(tempfile.gettempdir()) / (f"{name}.{getpass.getuser()}" if append_user else name)).as_posix()

def mv_address(mv: memoryview) -> int:
  """The address of a writable memoryview's memory (tinygrad's), for `Tensor.from_blob`."""
  return ctypes.addressof(ctypes.c_char.from_buffer(mv))

def get_child(obj: Any, key: str) -> Any:
  """obj.a.b[0].c for key "a.b.0.c": attributes, dict keys and list indices, as a state dict names them."""
  for k in key.split("."):
    if k.isnumeric(): obj = obj[int(k)]
    elif isinstance(obj, dict): obj = obj[k]
    else: obj = getattr(obj, k)
  return obj

# ---- a progress bar for training loops (tqdm's names), also tensor.nn.progress ----
class tqdm(Generic[T]):
  """A progress bar: on a terminal it redraws one line; in a log (not a terminal) it prints a plain line at each tenth of the
  way and at the end, so a CI log shows progress without carriage returns. Wraps an iterable (or counts update() calls) and
  shows n/total, a bar, the rate and a description that can change."""
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

__all__ = ["Timing", "FetchError", "downloads_dir", "fetch", "get_child", "tqdm", "trange", "getenv", "DEBUG", "Context", "ContextVar",
           "GlobalCounters", "colored", "prod", "TRAINING", "DEFAULT_FLOAT", "DEFAULT_INT"]
