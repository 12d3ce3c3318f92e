"""PROFILE=1: spans of the pipeline (tensor graph, schedule, each codegen rewrite, compile, each kernel run) recorded as
Chrome trace events and written at exit as JSON that Perfetto and chrome://tracing open. Runtime layer: the engine and
graph_rewrite call `scope`, `add_span` and `kernel_run`; each checks PROFILE once and returns at once when it is off.

PROFILE_PATH names the file (default: rulegrad_profile_<pid>.json in the temporary folder); the path is printed at exit.
"""
from __future__ import annotations
import atexit, json, os, sys, tempfile, threading, time
from typing import Any
from runtime.helpers import ContextVar

PROFILE = ContextVar("PROFILE", 0)

_T0 = time.perf_counter()  # trace timestamps are microseconds since this module was imported
events: list[dict] = []  # the process's PROFILE trace (one file per process, whatever engines ran)
_tids: dict[int, int] = {}
_exit_hooked = False
# the end of the engine's last span: the Python from there to the next realize built the tensor graph
_last_engine_end: float | None = None
ENGINE_CATS = frozenset({"schedule", "codegen", "compile", "kernel", "copy"})

def _us(t: float) -> float: return round((t - _T0) * 1e6, 3)

def _tid() -> int:
  return _tids.setdefault(threading.get_ident(), len(_tids) + 1)

def add_span(name: str, cat: str, start: float, dur: float, args: dict[str, Any] | None = None) -> None:
  """One complete event ("ph": "X"): start and dur in seconds of time.perf_counter()."""
  global _exit_hooked, _last_engine_end
  if cat in ENGINE_CATS and (_last_engine_end is None or start + dur > _last_engine_end): _last_engine_end = start + dur
  ev = {"name": name, "cat": cat, "ph": "X", "ts": _us(start), "dur": round(dur * 1e6, 3), "pid": os.getpid(), "tid": _tid()}
  if args: ev["args"] = args
  events.append(ev)
  if not _exit_hooked:
    _exit_hooked = True
    if os.environ.get("PROFILE", "") not in ("", "0"): atexit.register(_write_at_exit)

class scope:
  """`with scope("schedule", "schedule"):` records a span when PROFILE is on. gap=NAME also records, first, a span NAME
  over the time since the engine's last span ended (or since import): the user's Python that built the tensor graph."""
  __slots__ = ("name", "cat", "args", "gap", "t0")
  def __init__(self, name: str, cat: str, args: dict[str, Any] | None = None, gap: str | None = None):
    self.name, self.cat, self.args, self.gap, self.t0 = name, cat, args, gap, None
  def __enter__(self) -> scope:
    if PROFILE.value:
      self.t0 = t = time.perf_counter()
      if self.gap is not None:
        start = _last_engine_end if _last_engine_end is not None else _T0
        add_span(self.gap, "python", start, t - start, {"what": "Python time before this realize: building the lazy tensor graph"})
    return self
  def __exit__(self, *exc) -> None:
    if self.t0 is not None: add_span(self.name, self.cat, self.t0, time.perf_counter() - self.t0, self.args)

def kernel_run(name: str, device: str, start: float, dur: float, flops: int, nbytes: int, global_size: tuple, copy: bool = False) -> None:
  """A kernel run as timed by the engine: the duration DEBUG=2 prints and GlobalCounters adds. A copy is category "copy"
  (GlobalCounters counts it as a kernel but adds none of its bytes); a compiled kernel "kernel"."""
  if not PROFILE.value: return
  add_span(name, "copy" if copy else "kernel", start, dur, {"device": device, "flops": flops, "bytes": nbytes, "global_size": list(global_size),
                                        "GFLOPS": round(flops / max(dur, 1e-9) / 1e9, 3), "GB/s": round(nbytes / max(dur, 1e-9) / 1e9, 3)})

def trace_json() -> dict:
  """The events so far, with the process and thread names, in the Chrome trace-event format."""
  pid = os.getpid()
  meta = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": f"rulegrad {os.path.basename(sys.argv[0] or 'python')}"}}]
  meta += [{"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": "main" if tid == 1 else f"thread {tid}"}}
           for tid in sorted(_tids.values())]
  return {"traceEvents": meta + events, "displayTimeUnit": "ms", "otherData": {"producer": "rulegrad PROFILE=1"}}

def default_path() -> str:
  return os.environ.get("PROFILE_PATH") or os.path.join(tempfile.gettempdir(), f"rulegrad_profile_{os.getpid()}.json")

def save(path: str | None = None) -> str:
  """Write the trace (via a temporary file and a rename); returns the path."""
  path = path or default_path()
  tmp = f"{path}.tmp{os.getpid()}"
  try:
    with open(tmp, "w") as f: json.dump(trace_json(), f)
    os.replace(tmp, path)
  finally:
    if os.path.exists(tmp): os.unlink(tmp)
  return path

def reset() -> None:
  global _last_engine_end
  events.clear()
  _last_engine_end = None

def _write_at_exit() -> None:
  if not events: return
  path = save()
  print(f"PROFILE: {len(events)} events written to {path} (open it in Perfetto or chrome://tracing)", file=sys.stderr)
