"""Recording what graph_rewrite does, for the people reading it (runtime layer, beside the rewrite engine).

VIZ=1: every graph_rewrite call is recorded (name, the kernel it ran for, input graph, each rule that fired with the node
before and after, output graph); at exit the recording is saved and `python -m tensor.viz` serves it. PROFILE=1: each call
is a span (runtime/profile.py). RULECOVERAGE=FILE: how often each rule fired, added into FILE at exit (dslc/coverage.py
reads it). graph_rewrite calls `active()` once per call; when it is false nothing here runs.

Graphs are stored flat: every distinct node once, as (head, source ids), where a head is (op, dtype, arg) as text. Nodes
are hash-consed by content like UOps, so the graph after each step can be rebuilt from the steps alone (tensor/viz).
"""
from __future__ import annotations
import atexit, json, os, pickle, subprocess, sys, time
from typing import Any, Callable
from runtime import kernel_cache, safe_files
from runtime.helpers import ContextVar, getenv
from runtime.profile import PROFILE, add_span
from runtime.uop import UOp, _cache_key

VIZ = ContextVar("VIZ", 0)
# RULECOVERAGE=FILE: per-rule hit counts, summed into FILE at exit by every process that ran rules
COVERAGE_FILE: str = getenv("RULECOVERAGE", "")
MAX_ARG_TEXT = 120

def active() -> bool:
  """Whether graph_rewrite should go through traced_rewrite (checked once per call)."""
  return bool(VIZ.value or PROFILE.value or COVERAGE_FILE)

# ---- the graph_rewrite hook ----

_steps: list[list] = []  # one list per graph_rewrite in progress (a rule's helper may run a nested graph_rewrite)
_wrapped: dict[int, tuple[list, list]] = {}  # id(table) -> (table, its recording copy); the table is kept so the id stays its

def _record_fires(fn: Callable) -> Callable:
  def traced(u: UOp, ctx: Any):
    r = fn(u, ctx)
    if r is not None: _steps[-1].append((r[0], u, r[1]))
    return r
  return traced

def _recording_table(table: list) -> list:
  hit = _wrapped.get(id(table))
  if hit is None or hit[0] is not table:
    hit = _wrapped[id(table)] = (table, [None if fn is None else _record_fires(fn) for fn in table])
  return hit[1]

def traced_rewrite(run: Callable, sink: UOp, table: list, ctx: Any, label: str, bottom_up: bool) -> UOp:
  """graph_rewrite's engine `run`, with every rule that fires recorded."""
  steps: list = []
  _steps.append(steps)
  t0 = time.perf_counter()
  out, error = None, None
  try:
    out = run(sink, _recording_table(table), ctx, label)
    return out
  except Exception as e:
    error = f"{type(e).__name__}: {e}"
    raise
  finally:
    _steps.pop()
    dt = time.perf_counter() - t0
    if PROFILE.value: add_span(label, "rewrite", t0, dt, {"rules fired": len(steps), "bottom_up": bottom_up})
    if COVERAGE_FILE:
      for rule, _, _ in steps: _coverage[rule] = _coverage.get(rule, 0) + 1
    if VIZ.value: recording().add(label, sink, out, steps, bottom_up, dt, error, depth=len(_steps))

# ---- VIZ: groups (which kernel a rewrite ran for) and the recording ----

_groups: list[str] = []

class group:
  """`with group("E_4"):` the graph_rewrite calls inside belong to kernel E_4 in the VIZ explorer."""
  __slots__ = ("name", "on")
  def __init__(self, name: str): self.name, self.on = name, False
  def __enter__(self) -> group:
    if VIZ.value:
      self.on = True
      _groups.append(self.name)
    return self
  def __exit__(self, *exc) -> None:
    if self.on: _groups.pop()

class Recording:
  """Every recorded graph_rewrite; picklable (live UOps are dropped, the flat tables kept)."""
  def __init__(self):
    self.heads: list[tuple[str, str, str]] = []       # (op, dtype, arg) as text
    self.nodes: list[tuple[int, tuple[int, ...]]] = []  # (head id, source node ids)
    self.rules: list[tuple[str, int, str, str]] = []  # (file, line, text, rule id)
    self.rewrites: list[dict] = []  # name, group, bottom_up, depth, input, output, steps [(rule, before, after)], ms, error
    self.sources: dict[str, str] = {}                 # rule file -> its text, filled by save()
    self._head_ids: dict[tuple, int] = {}
    self._node_index: dict[tuple[int, tuple[int, ...]], int] = {}
    self._ids: dict[UOp, int] = {}
    self._rule_ids: dict[int, int] = {}

  def __getstate__(self) -> dict:
    return {k: v for k, v in self.__dict__.items() if k not in ("_ids", "_rule_ids", "_head_ids")}
  def __setstate__(self, state: dict) -> None:
    self.__dict__.update(state)
    self._ids, self._rule_ids, self._head_ids = {}, {}, {}

  def intern_node(self, head: int, src: tuple[int, ...]) -> int:
    """The id of the node (head, src), made if new: the flat graphs are hash-consed as UOps are."""
    key = (head, src)
    nid = self._node_index.get(key)
    if nid is None:
      nid = self._node_index[key] = len(self.nodes)
      self.nodes.append(key)
    return nid

  def node(self, u: UOp) -> int:
    """The id of a UOp, interning it and every source not seen before (iterative: graphs may be deep)."""
    ids = self._ids
    if (nid := ids.get(u)) is not None: return nid
    # the IR's sources-first walk (UOp.toposort), not into nodes interned before
    for x in u.toposort(gate=lambda x: x not in ids):
      if x not in ids: ids[x] = self.intern_node(self._head(x), tuple(ids[s] for s in x.src))
    return ids[u]

  def _head(self, u: UOp) -> int:
    key = _cache_key(u.op, u.dtype, (), u.arg, u.tag)
    hid = self._head_ids.get(key)
    if hid is None:
      arg = "" if u.arg is None else repr(u.arg)
      if len(arg) > MAX_ARG_TEXT: arg = arg[:MAX_ARG_TEXT - 3] + "..."
      if u.tag is not None: arg += f" tag={u.tag!r}"
      hid = self._head_ids[key] = len(self.heads)
      self.heads.append((u.op.name, str(u.dtype), arg))
    return hid

  def rule(self, r: Any) -> int:
    rid = self._rule_ids.get(id(r))
    if rid is None:
      rid = self._rule_ids[id(r)] = len(self.rules)
      self.rules.append((str(r.file), int(r.line), str(r.text), str(r.id)))
    return rid

  def add(self, label: str, sink: UOp, out: UOp | None, steps: list, bottom_up: bool, seconds: float, error: str | None, depth: int = 0) -> None:
    # depth: how many graph_rewrite calls this one ran inside (a rule's helper may rewrite a subgraph); it is recorded first
    self.rewrites.append({"name": label, "group": _groups[-1] if _groups else "(no kernel)", "bottom_up": bottom_up, "depth": depth,
                          "input": self.node(sink), "output": self.node(out) if out is not None else None,
                          "steps": [(self.rule(r), self.node(b), self.node(a)) for r, b, a in steps], "ms": seconds * 1e3, "error": error})

  def save(self, path: str) -> str:
    """Pickle the recording, with the text of every rule file it names (so it can be served anywhere)."""
    for f, _, _, _ in self.rules:
      if f not in self.sources and (p := find_source(f)) is not None:
        with open(p, encoding="utf-8", errors="replace") as fh: self.sources[f] = fh.read()
    return safe_files.replace_file(path, lambda fh: pickle.dump(self, fh, protocol=pickle.HIGHEST_PROTOCOL))

def find_source(file: str) -> str | None:
  """A rule's file as its Rule names it (rules/symbolic.rules): from the working folder, else from the project root."""
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  for p in (file, os.path.join(root, file)):
    if os.path.isfile(p): return p
  return None

_recording: Recording | None = None

def recording() -> Recording:
  """The recording of this process (made on first use; at exit it is saved and served when VIZ is set)."""
  global _recording
  if _recording is None:
    _recording = Recording()
    if os.environ.get("VIZ", "") not in ("", "0"): atexit.register(_viz_at_exit)
  return _recording

def reset() -> None:
  global _recording
  _recording = None

def load(path: str) -> Recording:
  """A recording save() wrote. It is a pickle: open only recordings you made (unpickling can run code)."""
  with open(path, "rb") as f:
    try: rec = pickle.load(f)
    except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, IndexError, TypeError) as e:
      raise ValueError(f"{path} is not a VIZ recording ({type(e).__name__}: {e})") from None
  if not isinstance(rec, Recording): raise ValueError(f"{path} is not a VIZ recording (it holds a {type(rec).__name__})")
  return rec

def _viz_at_exit() -> None:
  if _recording is None or not _recording.rewrites: return
  path = os.environ.get("VIZ_PATH") or safe_files.private_path(f"rulegrad_viz_{os.getpid()}.pkl")
  _recording.save(path)
  print(f"VIZ: {len(_recording.rewrites)} graph rewrites recorded in {path}", file=sys.stderr)
  if os.environ.get("VIZ_SERVE", "1") in ("", "0"):
    print(f"VIZ: serve it with `python -m tensor.viz {path}`", file=sys.stderr)
    return
  # the explorer lives in the tensor package (runtime imports no other package): run it as its own process. It reads a pipe
  # from this one and stops when the pipe closes, so it never outlives this process (SIGTERM or SIGKILL included)
  proc = subprocess.Popen([sys.executable, "-m", "tensor.viz", path, "--until-stdin-closes"], stdin=subprocess.PIPE)
  try: proc.wait()
  except KeyboardInterrupt:  # Ctrl-C reached the server too (one process group): let it finish
    try: proc.wait(timeout=10)
    except (KeyboardInterrupt, subprocess.TimeoutExpired): proc.kill()

# ---- rule coverage and statistics files ----

_coverage: dict[Any, int] = {}

def fired(rule: Any) -> None:
  """Count one firing of `rule` for RULECOVERAGE (Matcher.rewrite: rules applied to one node, outside graph_rewrite)."""
  _coverage[rule] = _coverage.get(rule, 0) + 1

def _add_into(path: str, entries: dict[str, dict]) -> None:
  """Add per-rule counts into the JSON file at `path`, under a lock: several processes (pytest workers) share it."""
  import fcntl  # here: the rest of the module works where fcntl does not exist
  with open(path + ".lock", "a") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
      with open(path) as f: data = json.load(f)
    except (OSError, ValueError): data = {}
    for key, e in entries.items():
      old = data.get(key)
      if old is None: data[key] = e
      else:
        for k in ("attempts", "hits", "time_ns"):
          if k in e: old[k] = old.get(k, 0) + e[k]
    safe_files.write_text(path, json.dumps(data))

def _rule_key(r: Any) -> str: return f"{r.file}:{r.id}"
def _entry(r: Any, **counts) -> dict: return {"file": str(r.file), "line": int(r.line), "text": str(r.text), "id": str(r.id), **counts}

def save_coverage() -> None:
  if COVERAGE_FILE and _coverage:
    try: _add_into(COVERAGE_FILE, {_rule_key(r): _entry(r, hits=n) for r, n in _coverage.items()})
    except OSError as e: print(f"RULECOVERAGE: could not write {COVERAGE_FILE}: {e}", file=sys.stderr)
    _coverage.clear()
if COVERAGE_FILE: atexit.register(save_coverage)

def _default_cache() -> str: return os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "rulegrad")

def rulestats_path() -> str:
  """Where RULESTATS=1 leaves its table for the language server's hover: RULESTATS_FILE, else the kernel cache folder."""
  if (p := os.environ.get("RULESTATS_FILE")): return p
  return os.path.join(kernel_cache.configured_dir(), "rulestats.json")

def rulestats_pointer() -> str:
  """A file in the default cache folder naming where the last RULESTATS run wrote its table when that was elsewhere
  (CACHE_DIR or RULESTATS_FILE pointed away): a language server started without those finds it."""
  return os.path.join(_default_cache(), "rulestats-where.json")

def rulestats_files() -> list[str]:
  """Every place a RULESTATS table may be, newest first: RULESTATS_FILE, this process's cache folder, the default one and
  the place the last run named in rulestats_pointer()."""
  out = [rulestats_path(), os.path.join(_default_cache(), "rulestats.json")]
  try:
    with open(rulestats_pointer()) as f: out.append(str(json.load(f)["path"]))
  except (OSError, ValueError, KeyError, TypeError): pass
  found = [p for p in dict.fromkeys(out) if os.path.isfile(p)]
  return sorted(found, key=lambda p: -os.path.getmtime(p))

def save_rule_stats(path: str | None = None) -> None:
  """Write the RULESTATS counters of every rule that ran (replacing the last run's file)."""
  from runtime.rewrite import rule_stats
  rules = [r for r in rule_stats() if r.attempts]
  if not rules: return
  path = path or rulestats_path()
  try:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    safe_files.write_text(path, json.dumps({"argv": sys.argv, "rules": {_rule_key(r): _entry(r, attempts=r.attempts, hits=r.hits, time_ns=r.time_ns)
                                                                     for r in rules}}))
    if os.path.abspath(path) != os.path.abspath(os.path.join(_default_cache(), "rulestats.json")):
      pointer = rulestats_pointer()
      os.makedirs(os.path.dirname(pointer), exist_ok=True)
      safe_files.write_text(pointer, json.dumps({"path": os.path.abspath(path)}))
  except OSError as e: print(f"RULESTATS: could not write {path}: {e}", file=sys.stderr)
