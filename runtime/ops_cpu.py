"""The CPU device: C source from the C renderer, compiled with the system C compiler into a shared object, loaded
with ctypes. Shared objects are cached on disk (runtime/kernel_cache.py: verified before loading, size-capped), keyed by a
hash of the source, the flags, the compiler's version and what -march=native means on this machine (native_target).

CC picks the compiler (default `cc`), CC_TIMEOUT how long any run of it may take (a compile or a probe of its version, flags or
macros; default 300 s: past it the compiler's whole process group is killed, and later runs in this process fail at once),
CACHE_DIR the cache folder
(default ~/.cache/rulegrad; it also keeps the compiler's answers to the probes, compiler-probes.json), CACHE_MAX_MB its
size cap (default 1024). Flags: -O3 -march=native
(gcc 12 at -O2 leaves loops with a runtime trip count scalar); -fno-trapping-math (it lets gcc
assume no one reads the floating-point exception flags, so a loop with float selects `c ? x : y`, or MAX, vectorizes; its
one value change, (T)(int)x of a float x of type T folded into trunc(x) keeping -0.0, the C renderer writes around:
rules/render_c.rules);
never -ffast-math, which would change results.
SANITIZE=1 builds kernels with -fsanitize=address,undefined (the process must preload the compiler's libasan).
Batches: programs() builds many kernels with one compiler run (runtime/c_batch.py makes them one translation unit), kept
as one entry that each kernel's key points at; the engine hands it a cold step's kernels (tensor/engine/compile_queue.py).
Quick builds: programs(quick=True) builds the kernels the cache lacks at QUICK_OPT (-O1: half of -O3's compiler time) and
marks them `provisional`; the engine runs them while the -O3 build of the same source is made in the background (a
thread at low priority: background_thread) and swaps it in. A kernel whose -O3 object is cached is never built quick.
Threads: a source holding `#pragma omp` is built with -fopenmp where the compiler builds and links OpenMP code (checked
once, by a probe through the cache); elsewhere the pragma is ignored and the kernel runs on one thread with the same
results. runtime/threads.py says how many threads a kernel should use (THREADS=n caps them).
"""
from __future__ import annotations
import _ctypes, ctypes, functools, hashlib, json, os, re, shutil, signal, subprocess, sys, threading
from typing import Callable
from runtime import c_batch, kernel_cache, safe_files
from runtime.device import Buffer, Compiled, CompileError
from runtime.kernel_cache import cache_dir  # noqa: F401  (the folder kernels compile into)
from runtime.profile import scope

CFLAGS = ["-O3", "-march=native", "-fPIC", "-shared", "-fwrapv", "-fno-math-errno", "-fno-trapping-math", "-ffp-contract=off", "-w"]
# -O0 under the sanitizers: every load the source writes happens (-O3 may drop an out-of-bounds load whose value is unused)
SANITIZE_FLAGS = ["-O0", "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]
# _Float16 arithmetic rounds after every operation, as exec_alu does: gcc computes it in float unless told (clang's
# spelling second); the first flag the compiler takes is used
HALF_FLAGS = ["-fexcess-precision=16", "-ffloat16-excess-precision=none"]
# gcc 12 at -O3 -mavx2 miscompiles guarded loads `c ? *(p + i) : 0.0f` of a padded tensor into masked loads whose results
# land in lanes where c is false (tests/tensor/test_ops.py has the kernel); loops with such loads stay scalar. Used when the
# compiler takes it (clang does not have it), and only for sources with a select that reads memory (_GUARDED_LOAD): the
# flag stops gcc from turning any `c ? x : y` into a vector select, so it would keep every kernel with a WHERE or MAX scalar
WORKAROUND_FLAGS = ["-fno-tree-loop-if-convert"]
# `? ... *(` before the `:`: a branch of a select that dereferences a pointer (the renderer's guarded loads, bfloat16 ones
# too). A false positive only keeps the workaround where it is not needed
_GUARDED_LOAD = re.compile(r"\?[^:;]*\*\(")
# gcc 12.2 at -O3 miscompiles a float sum whose loads run backwards (a flipped tensor summed whole: x.flip(1).sum() of a
# 4x6 gave 286 for 276; its loop vectorizer's in-order reduction of reversed loads): sources where a loop counter runs an
# index backwards (`ridx1*(-1)`) are built without loop vectorization (tests/runtime/test_compiler_workarounds.py has the
# kernels); a negated value (`alu4*(-1)` in exp2's decomposition) is not a reversed read and keeps it
REVERSED_FLAGS = ["-fno-tree-loop-vectorize"]
_REVERSED_READ = re.compile(r"ridx\d+\*\(-\d+\)")
OPENMP_FLAGS = ["-fopenmp"]
# a quick build's flags in place of -O3: gcc 12 takes 1.16 s for a cold CNN step's kernels at -O1, 2.98 s at -O3 (one unit);
# -O1 -ftree-vectorize 1.32 s, and its vectorizer needs the workarounds below (more compiler runs): its faster first runs did
# not pay for them (cold step CPU 3.2 s with -O1, 3.6 s with it). The results are the same bits (nothing reassociates)
QUICK_OPT = ["-O1"]
# a kernel using OpenMP, and a call of the runtime, so the probe fails where libgomp (or libomp) can't be linked or loaded;
# run with n = 4 its region has one thread (the if clause), so it starts no thread pool (see _after_fork_in_child)
_OPENMP_PROBE = """#include <omp.h>
int rulegrad_openmp_probe(int n) { int s = 0;
#pragma omp parallel for reduction(+:s) if(n > 1000)
  for (int i = 0; i < n; i++) s += i;
  return s + omp_get_max_threads() * 0; }
"""

@functools.cache
def find_compiler(required: bool = True) -> str | None:
  cc = os.environ.get("CC", "cc")
  path = shutil.which(cc)
  if path is None and required:
    raise CompileError(f"no C compiler: '{cc}' is not on PATH. Install gcc or clang, or set the CC environment variable to a C compiler "
                       f"(or run on the interpreter with DEV=PYTHON)")
  return path

def _compiler_env() -> dict[str, str]:
  # the compiler runs without a preloaded sanitizer runtime (SANITIZE=1 tests preload libasan into this process)
  return {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}

_hung: dict[str, str] = {}  # compiler -> the probe that timed out: a compiler that hangs on `--version` is not waited for again

def run_compiler(cmd: list[str], stdin: str = "", what: str = "", probe: bool = False) -> tuple[int, str, str]:
  """(exit code, stdout, stderr) of the compiler command `cmd` fed `stdin`; its output is decoded leniently (a compiler may
  print bytes that are not UTF-8). Past CC_TIMEOUT its process group (the driver, cc1, as, ld, whatever they started) is
  killed and CompileError raised, naming `what` it was doing; OSError when it can't be started. A probe (version, flags,
  macros) that times out is remembered: later runs of that compiler in this process fail at once (a kernel that takes too
  long says nothing about the next one)."""
  cc, timeout = cmd[0], compile_timeout()
  if cc in _hung: raise CompileError(_hung[cc])
  background = getattr(_background, "on", False)
  if background and _background.stopped: raise CompileError("the process is exiting: background compiles stopped")
  p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_compiler_env(), start_new_session=True)
  if background: _background.running.add(p)
  try: out, err = p.communicate(stdin.encode(), timeout=timeout)
  except BaseException as e:
    try: os.killpg(p.pid, signal.SIGKILL)
    except OSError: pass
    p.kill()
    for f in (p.stdin, p.stdout, p.stderr):  # not read: a process that left the group may still hold the pipes
      if f is not None: f.close()
    p.wait()
    if not isinstance(e, subprocess.TimeoutExpired): raise
    message = (f"{cc} did not finish {what or 'running'} in {timeout:g} s and was stopped; set CC_TIMEOUT to allow more time or CC to "
               f"another compiler")
    if probe: _hung[cc] = message
    raise CompileError(message) from None
  finally: _background.running.discard(p)
  if background and _background.stopped: raise CompileError("the process is exiting: background compiles stopped")
  return p.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")

class _Background(threading.local):
  """Compiler runs of background threads (background_thread): at low priority, and stopped when the process exits."""
  running: set = set()  # shared by every thread (a class attribute): the background compilers running now
  stopped = False  # shared too: set at exit
  on = False  # per thread

_background = _Background()

def background_thread(niceness: int = 10) -> None:
  """Make the calling thread a background compiler: its compiler runs start at `niceness` (Linux: a thread's own
  priority, which the processes it starts inherit) and are killed when the process exits, their outputs deleted (no
  half-built entry is left)."""
  _background.on = True
  if hasattr(os, "setpriority") and hasattr(threading, "get_native_id"):
    try: os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), niceness)
    except OSError: pass

def stop_background() -> None:
  """Kill the background compiler runs (at exit: tensor/engine/compile_queue.py waits for their threads to return)."""
  _Background.stopped = True
  for p in list(_background.running):
    try: os.killpg(p.pid, signal.SIGKILL)
    except OSError: pass

# ---- the compiler's answers to the probes (its version, its macros for a -march, whether it takes a flag), kept in the
# cache folder: a new process whose kernels are cached then runs no compiler (5 runs, ~0.1 s, at every start). The file
# is JSON of strings and booleans under a key naming the compiler (its resolved path, size, mtime and inode: an upgrade
# is another key) and this machine's CPU (/proc/cpuinfo's model and flags: what -march=native means), checked entry by
# entry when read: anything else (another key, a wrong type, not JSON) is ignored and the probe runs.
PROBES_FILE = "compiler-probes.json"
_probes_lock = threading.Lock()
_probes_seen: dict[str, dict] = {}   # the file's entries by its path, read once per process (a start asks ~5 probes)

@functools.cache
def _probe_key(cc: str) -> str | None:
  try:
    path = os.path.realpath(shutil.which(cc) or cc)
    st = os.stat(path)
    with open("/proc/cpuinfo", "rb") as f: cpu = b"\n".join(sorted({ln for ln in f.read().splitlines() if ln.startswith((b"model name", b"flags"))}))
  except OSError: return None   # no /proc/cpuinfo (not Linux): probe every time
  return hashlib.sha256(repr((path, st.st_size, st.st_mtime_ns, st.st_ino, PROBES_FORMAT)).encode() + cpu).hexdigest()[:32]
PROBES_FORMAT = "1"

class _Unkept(Exception):
  """A probe's answer not to keep (the compiler could not be run: that may pass)."""
  def __init__(self, answer: str | bool): self.answer = answer

def _probes_read() -> dict:
  path = os.path.join(cache_dir(), PROBES_FILE)
  if (seen := _probes_seen.get(path)) is not None: return seen
  try:
    with safe_files.open_trusted(path) as f: data = json.loads(f.read(1 << 20))
  except (OSError, ValueError): data = {}
  _probes_seen[path] = data = data if isinstance(data, dict) else {}
  return data

def _probed(cc: str, what: str, kind: type, run: Callable[[], str | bool]) -> str | bool:
  """The answer to the probe `what` of compiler cc: from the probes file when it holds one of type `kind` under this
  compiler's and machine's key, else run() (then kept there)."""
  key = _probe_key(cc)
  if key is not None:
    with _probes_lock:
      entry = _probes_read().get(key)
      if isinstance(entry, dict) and isinstance(got := entry.get(what), kind): return got
  try: answer = run()
  except _Unkept as e: return e.answer
  if key is None: return answer
  with _probes_lock:
    data = _probes_read()
    entry = data.get(key) if isinstance(data.get(key), dict) else {}
    data = {key: {**entry, what: answer}}   # entries of other compilers or machines are dropped: one key per folder in use
    path = os.path.join(cache_dir(), PROBES_FILE)
    _probes_seen[path] = data
    try: safe_files.write_text(path, json.dumps(data))
    except OSError: pass   # a read-only folder: probe again next time
  return answer

@functools.cache
def compiler_version() -> str:
  cc = find_compiler()
  def run() -> str:
    try: out = run_compiler([cc, "--version"], what="printing its version (--version)", probe=True)[1]  # type: ignore[list-item]
    except OSError: raise _Unkept(cc or "") from None
    return out.splitlines()[0] if out else cc or ""
  return _probed(cc, "version", str, run)  # type: ignore[arg-type,return-value]

@functools.cache
def _takes_flag(cc: str, flag: str) -> bool:
  cmd = [cc, flag, "-Werror", "-fsyntax-only", "-x", "c", "-"]
  def run() -> bool:
    try: return run_compiler(cmd, "int x;", f"checking that it takes {flag} (-fsyntax-only)", probe=True)[0] == 0
    except OSError: raise _Unkept(False) from None
  return _probed(cc, f"flag {flag}", bool, run)  # type: ignore[return-value]

def cflags(src: str | None = None, quick: bool = False) -> list[str]:
  """The flags the kernel `src` is compiled with (they are part of the cache key); without a source, those of a kernel
  with guarded loads. quick: its quick build's (QUICK_OPT for -O3)."""
  cc = find_compiler()
  half = next((f for f in HALF_FLAGS if _takes_flag(cc, f)), None)  # type: ignore[arg-type]
  guarded = src is None or _GUARDED_LOAD.search(src) is not None
  workarounds = [f for f in WORKAROUND_FLAGS if guarded and _takes_flag(cc, f)]  # type: ignore[arg-type]
  if src is not None and _REVERSED_READ.search(src): workarounds += [f for f in REVERSED_FLAGS if _takes_flag(cc, f)]  # type: ignore[arg-type]
  # the workarounds turn off parts of gcc's vectorizer: a quick build that does not run it needs none (one set of flags)
  if quick and "-ftree-vectorize" not in QUICK_OPT: workarounds = []
  sanitize = os.environ.get("SANITIZE", "") not in ("", "0")
  base = [g for f in CFLAGS for g in (QUICK_OPT if f == "-O3" else [f])] if quick else CFLAGS
  return base + ([half] if half else []) + workarounds + (SANITIZE_FLAGS if sanitize else [])

def compile_timeout() -> float:
  """Seconds a compile may take before it is stopped (CC_TIMEOUT, default 300): a hung compiler must not hang realize."""
  try: return float(os.environ.get("CC_TIMEOUT", "300"))
  except ValueError: return 300.0

def _run_compiler(cc: str, flags: list[str], src: str, out: str, what: str = "a generated kernel") -> None:
  """cc builds `src` (`what`: "the generated kernel NAME") into the shared object `out`; raises BuildError with the compiler's
  message, or CompileError on timeout."""
  try: code, _, err = run_compiler([cc, *flags, "-x", "c", "-", "-o", out, "-lm"], src, f"compiling {what}")
  except CompileError as e: raise CompileError(f"{e}\n--- source (first 2000 characters) ---\n{src[:2000]}") from None
  except OSError as e: raise CompileError(f"could not run the C compiler {cc}: {e}") from None
  if code != 0: raise kernel_cache.BuildError(f"{cc} failed on {what}:\n{err.strip()}\n--- source ---\n{src}")

@functools.cache
def _predefined_macros(cc: str, march: str) -> str:
  def run() -> str:
    try: out = run_compiler([cc, f"-march={march}", "-dM", "-E", "-x", "c", "-"], "", f"listing its macros (-dM -E -march={march})", True)[1]
    except OSError: raise _Unkept("") from None
    return "\n".join(sorted(out.splitlines()))
  return _probed(cc, f"macros {march}", str, run)  # type: ignore[return-value]

def target_macros(march: str = "native") -> str:
  """What -march=`march` means to the compiler: its predefined macros, one per line, sorted (the instruction sets, as
  __AVX512F__ and __AVX2__, and the CPU it is for); "" when the compiler does not say. For native, what it means on this
  machine. One compiler run per process, compiler and march: the cold path only (cache keys, the renderer's registers)."""
  return _predefined_macros(find_compiler(), march)  # type: ignore[arg-type]

def native_macros() -> str: return target_macros("native")

@functools.cache
def _native_digest(macros: str) -> str: return hashlib.sha256(macros.encode()).hexdigest()[:16]

def native_target() -> str:
  """A digest of native_macros(): part of every cache key, so a cache folder shared by machines of different kinds (a home
  directory on AVX-512 and AVX2 machines) never hands one an object built for the other's instructions (SIGILL)."""
  return _native_digest(native_macros())

# part of every key: entries of an older layout (without the trailer) are other files, never read as corrupt ones
CACHE_FORMAT = "2"

def cache_key(src: str, flags: list[str]) -> str:
  return hashlib.sha256("\0".join([src, " ".join(flags), compiler_version(), native_target(), CACHE_FORMAT]).encode()).hexdigest()[:32]

def uses_openmp(src: str) -> bool: return "#pragma omp" in src

@functools.cache
def openmp_flags() -> tuple[str, ...]:
  """The flags that turn `#pragma omp` on (-fopenmp), or () when this compiler can't build, link or load OpenMP code."""
  try:
    path = compile_c(_OPENMP_PROBE, OPENMP_FLAGS, openmp=False)
    lib = kernel_cache.load_verified(path, ctypes.CDLL)
    return tuple(OPENMP_FLAGS) if lib.rulegrad_openmp_probe(4) == 6 else ()
  except (CompileError, OSError): return ()

def kernel_flags(src: str, extra_flags: tuple[str, ...] | list[str] = (), openmp: bool = True, quick: bool = False) -> list[str]:
  """Every flag `src` is compiled with: cflags, extra_flags, and openmp_flags() for a source with `#pragma omp` unless
  openmp=False (then it is built serial: the pragmas are ignored)."""
  return cflags(src, quick) + list(extra_flags) + (list(openmp_flags()) if openmp and uses_openmp(src) else [])

def compile_c(src: str, extra_flags: tuple[str, ...] | list[str] = (), openmp: bool = True, name: str | None = None,
              quick: bool = False) -> str:
  """The path of a verified shared object holding the kernel built from `src` (from the cache when it is there: its own entry
  or the batch it was built in, see programs); quick: its quick build. Raises CompileError, naming the kernel `name` when given."""
  cc = find_compiler()
  flags = kernel_flags(src, extra_flags, openmp, quick)
  key = cache_key(src, flags)
  if (path := _batch_entry(key)) is not None: return path
  what = f"the generated kernel {name}" if name else "a generated kernel"
  try: return kernel_cache.store(key, lambda tmp: _run_compiler(cc, flags, src, tmp, what))  # type: ignore[arg-type]
  except kernel_cache.BuildError as e: raise CompileError(str(e)) from None
  except OSError as e:
    raise CompileError(f"could not write the compiled kernel to the cache folder: {e} (set CACHE_DIR to a writable folder)") from None

# ---- batches: many kernels, one compiler run ----

MAX_BATCH = 64  # kernels in one compiler run at most (the engine hands out 16 at a time: tensor/engine/compile_queue.py)

def _batch_key(key: str) -> str:
  """The key of the entry saying which batch holds the kernel of cache key `key` (a data entry: trusted as any)."""
  return hashlib.sha256(f"batch\0{key}".encode()).hexdigest()[:32]

def _batch_entry(key: str) -> str | None:
  """The verified shared object of the batch the kernel of cache key `key` was built in, or None."""
  data = kernel_cache.load_data(_batch_key(key))
  if data is None or re.fullmatch(rb"[0-9a-f]{32}", data) is None: return None
  return kernel_cache.find(data.decode())

def _build_batch(flags: list[str], group: list[tuple[str, str, str]]) -> None:
  """Compile the kernels (source, name, key) of `group`, which share `flags`, as one translation unit (runtime/c_batch.py),
  kept under its own key, and point each kernel's key at it. A failure leaves them unbuilt: each then compiles alone, so
  an error names its kernel."""
  unit = c_batch.merge([src for src, _, _ in group])
  if unit is None: return
  cc = find_compiler()
  what = f"a batch of {len(group)} generated kernels ({', '.join(name for _, name, _ in group[:4])}{', ...' if len(group) > 4 else ''})"
  bkey = cache_key(unit, flags)
  try:
    with scope(f"compile {len(group)} kernels", "compile"): kernel_cache.store(bkey, lambda tmp: _run_compiler(cc, flags, unit, tmp, what))  # type: ignore[arg-type]
  except (CompileError, kernel_cache.BuildError, OSError): return
  for _, _, k in group: kernel_cache.store_data(_batch_key(k), bkey.encode())

def programs(items: list[tuple[str, str]], quick: bool = False) -> list[Callable | CompileError]:
  """The kernels (source, name) as program() makes them, those the cache lacks compiled by one compiler run per set of flags
  (up to MAX_BATCH kernels each). Each result is the kernel's program, or the CompileError of its own source: a batch the
  compiler rejects is built kernel by kernel. Under SANITIZE=1, and in a process forked after OpenMP ran, kernels compile
  one by one. quick: those whose final (-O3) object the cache lacks are built quick (program(quick=True))."""
  sanitize = os.environ.get("SANITIZE", "") not in ("", "0")
  quick = quick and not (_forked_after_omp or sanitize)
  if not (_forked_after_omp or sanitize) and len(items) > 1:
    # kernels with and without OpenMP share a unit built with it (-fopenmp changes no code without a pragma); the other flags
    # change code, so each set of them is a unit of its own
    groups: dict[tuple[str, ...], list[tuple[str, str, str]]] = {}
    names: set[tuple[tuple[str, ...], str]] = set()
    for src, name in items:
      try:
        flags = kernel_flags(src)
        if quick and _cached(cache_key(src, flags)): continue  # its final object is there: no quick build
        if quick: flags = kernel_flags(src, quick=True)
      except CompileError: continue  # no compiler: program() says so for each kernel
      group = tuple(f for f in flags if f not in OPENMP_FLAGS)
      # one definition per name in a unit: a second kernel of the same name (the same source or another) compiles alone
      if (group, name) in names or _cached(key := cache_key(src, flags)): continue
      names.add((group, name))
      groups.setdefault(group, []).append((src, name, key))
    for flags, group in groups.items():
      omp = list(openmp_flags()) if any(uses_openmp(src) for src, _, _ in group) else []
      for i in range(0, len(group), MAX_BATCH):
        if len(chunk := group[i:i + MAX_BATCH]) > 1: _build_batch([*flags, *omp], chunk)
  out: list[Callable | CompileError] = []
  for src, name in items:
    try: out.append(program(src, name, quick))
    except CompileError as e: out.append(e)
  return out

def _cached(key: str) -> bool:
  """Whether the cache holds the object of cache key `key` (its own entry, or the batch it was built in)."""
  return kernel_cache.find(key) is not None or _batch_entry(key) is not None

def load(name: str, lib_path: str) -> Callable:
  """The kernel `name` of a cache entry as prog(buffers, var_vals), after checking the entry (kernel_cache.open_verified).
  Rendered kernels export `name_call(void* const* bufs, const long long* ivals, const double* fvals)` (tensor/renderer/cstyle.py):
  the buffer pointers, then the int and the float values of var_vals, each in order; one call whatever the number of buffers.
  A library without it (hand-written C) is called as `name(T* data0, T* data1, ...)`."""
  def dlopen(p: str):
    lib = ctypes.CDLL(p)
    for sym in (f"{name}_call", name):
      if hasattr(lib, sym): return lib, getattr(lib, sym), sym != name
    # unload it: the dynamic loader hands a library it holds to any later dlopen of the same path (the rebuilt entry)
    if hasattr(_ctypes, "dlclose"): _ctypes.dlclose(lib._handle)
    raise kernel_cache.CacheError(f"{lib_path} has no kernel named {name}")
  lib, fn, arrays = kernel_cache.load_verified(lib_path, dlopen)
  fn.restype = None
  if arrays:
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    def prog(bufs: list[Buffer], vals: tuple = ()) -> None:
      ptrs = (ctypes.c_void_p * len(bufs))(*[b._ptr or b.ptr for b in bufs])
      if not vals: return fn(ptrs, None, None)  # no values: the kernel reads neither array (the common eager call)
      fn(ptrs, *value_arrays(vals))
    # the entry point itself, for a caller that keeps its argument arrays from call to call (tensor/engine/prepared.py):
    # cfunc(pointer array, ivals, fvals), the arrays as value_arrays makes them
    prog.cfunc = fn  # type: ignore[attr-defined]
    prog.value_arrays = value_arrays  # type: ignore[attr-defined]
  else:
    def prog(bufs: list[Buffer], vals: tuple = ()) -> None: fn(*[ctypes.c_void_p(b.ptr) for b in bufs], *[ctypes.c_longlong(v) for v in vals])
  prog.lib = lib  # type: ignore[attr-defined]  # keep the library loaded while the program lives
  return prog

def value_arrays(vals: tuple) -> tuple:
  """The int and the float values of var_vals, each kind in order, as the two arrays a kernel's entry point reads (None for
  a kind there is none of); uint64 values pass as their bits."""
  ints = [v if v < 2**63 else v - 2**64 for v in vals if not isinstance(v, float)]
  floats = [v for v in vals if isinstance(v, float)]
  return (ctypes.c_longlong * len(ints))(*ints) if ints else None, (ctypes.c_double * len(floats))(*floats) if floats else None

def _build_and_load(src: str, name: str, openmp: bool = True, quick: bool = False) -> Callable:
  """Compile (or take from the cache) and load. An entry that fails its check, does not load or lacks the kernel is
  deleted and rebuilt once; a fresh build that still fails is a CompileError."""
  with scope(f"compile {name}", "compile"): path = compile_c(src, openmp=openmp, name=name, quick=quick)
  try: return load(name, path)
  except OSError as e:
    print(f"warning: the cached kernel {path} is not usable ({e}); rebuilding it", file=sys.stderr)
    kernel_cache.remove(path)
  path = compile_c(src, openmp=openmp, name=name, quick=quick)
  try: return load(name, path)
  except OSError as e: raise CompileError(f"the kernel {name} compiled from this source does not load: {e}\n--- source ---\n{src}") from None

# libgomp keeps its thread pool across fork() without the threads: a child whose parent ran a parallel region hangs in its
# first one. So a process forked after OpenMP ran builds its kernels serial (same results; the pragmas are ignored)
_omp_started = False
_forked_after_omp = False

def _after_fork_in_child() -> None:
  global _forked_after_omp
  if _omp_started: _forked_after_omp = True

if hasattr(os, "register_at_fork"): os.register_at_fork(after_in_child=_after_fork_in_child)

def program(src: str, name: str, quick: bool = False) -> Callable:
  """The kernel `name` of `src`, compiled and loaded. One with `#pragma omp` runs its parallel loops on threads, except in
  a process forked after OpenMP ran (there a serial build of the same source runs, made on its first call). quick: when the
  cache lacks its final (-O3) object, a build at QUICK_OPT, marked `provisional` (the engine has the final one built later)."""
  if _forked_after_omp: return _build_and_load(src, name, openmp=False)
  quick = quick and os.environ.get("SANITIZE", "") in ("", "0") and not _cached(cache_key(src, kernel_flags(src)))
  prog = _build_and_load(src, name, quick=quick)
  if quick: prog.provisional = True  # type: ignore[attr-defined]
  if not (uses_openmp(src) and openmp_flags()): return prog
  serial: list[Callable] = []
  def run(bufs: list[Buffer], vals: tuple = ()) -> None:
    global _omp_started
    if _forked_after_omp:
      if not serial: serial.append(_build_and_load(src, name, openmp=False))
      return serial[0](bufs, vals)
    _omp_started = True
    prog(bufs, vals)
  run.lib = prog.lib  # type: ignore[attr-defined]
  run.provisional = quick  # type: ignore[attr-defined]
  return run

def device(name: str = "CPU") -> Compiled:
  d = Compiled(name, program)
  d.programs = programs  # type: ignore[attr-defined]  # many kernels at once (the engine's cold compiles: tensor/engine/realize.py)
  d.quick_programs = functools.partial(programs, quick=True)  # type: ignore[attr-defined]  # quick builds of them (compile_queue.py)
  return d
def available(default: bool = False) -> bool: return find_compiler(required=False) is not None
