"""The CPU device: C source from the C renderer, compiled with the system C compiler into a shared object, loaded
with ctypes. Shared objects are cached on disk, keyed by a hash of the source, the flags and the compiler's version.

CC picks the compiler (default `cc`), CACHE_DIR the cache folder (default ~/.cache/rulegrad). Flags: -O3 -march=native
(gcc 12 at -O2 leaves loops with a runtime trip count scalar); never -ffast-math, which would change results.
SANITIZE=1 builds kernels with -fsanitize=address,undefined (the process must preload the compiler's libasan).
"""
from __future__ import annotations
import ctypes, functools, hashlib, os, shutil, subprocess, sys, tempfile, warnings
from typing import Callable
from runtime.device import Buffer, Compiled, CompileError
from runtime.profile import scope

CFLAGS = ["-O3", "-march=native", "-fPIC", "-shared", "-fwrapv", "-fno-math-errno", "-ffp-contract=off", "-w"]
# -O0 under the sanitizers: every load the source writes happens (-O3 may drop an out-of-bounds load whose value is unused)
SANITIZE_FLAGS = ["-O0", "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]
# _Float16 arithmetic rounds after every operation, as exec_alu does: gcc computes it in float unless told (clang's
# spelling second); the first flag the compiler takes is used
HALF_FLAGS = ["-fexcess-precision=16", "-ffloat16-excess-precision=none"]
# gcc 12 at -O3 -mavx2 miscompiles guarded loads `c ? *(p + i) : 0.0f` of a padded tensor into masked loads whose results
# land in lanes where c is false (tests/tensor/test_devices.py has the kernel); loops with such loads stay scalar.
# Used when the compiler takes it (clang does not have it)
WORKAROUND_FLAGS = ["-fno-tree-loop-if-convert"]

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

@functools.cache
def compiler_version() -> str:
  cc = find_compiler()
  try: out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30, env=_compiler_env()).stdout  # type: ignore[list-item]
  except (OSError, subprocess.TimeoutExpired): out = ""
  return out.splitlines()[0] if out else cc or ""

@functools.cache
def _takes_flag(cc: str, flag: str) -> bool:
  try:
    r = subprocess.run([cc, flag, "-Werror", "-fsyntax-only", "-x", "c", "-"], input="int x;", capture_output=True, text=True, timeout=60,
                       env=_compiler_env())
  except (OSError, subprocess.TimeoutExpired): return False
  return r.returncode == 0

def cflags() -> list[str]:
  """The flags kernels are compiled with (they are part of the cache key)."""
  cc = find_compiler()
  half = next((f for f in HALF_FLAGS if _takes_flag(cc, f)), None)  # type: ignore[arg-type]
  workarounds = [f for f in WORKAROUND_FLAGS if _takes_flag(cc, f)]  # type: ignore[arg-type]
  sanitize = os.environ.get("SANITIZE", "") not in ("", "0")
  return CFLAGS + ([half] if half else []) + workarounds + (SANITIZE_FLAGS if sanitize else [])

_warned_readonly = False

def cache_dir() -> str:
  global _warned_readonly
  d = os.environ.get("CACHE_DIR") or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "rulegrad")
  try:
    os.makedirs(d, exist_ok=True)
    if os.access(d, os.W_OK): return d
  except OSError: pass
  if not _warned_readonly:
    warnings.warn(f"the kernel cache folder {d} is not writable: compiling into a temporary folder (set CACHE_DIR to a writable one)", stacklevel=2)
    _warned_readonly = True
  fallback = os.path.join(tempfile.gettempdir(), f"rulegrad-{os.getuid() if hasattr(os, 'getuid') else 'user'}")
  os.makedirs(fallback, exist_ok=True)
  return fallback

def compile_c(src: str, extra_flags: tuple[str, ...] = ()) -> str:
  """The path of a shared object built from `src` (from the cache when it is there). Raises CompileError."""
  cc = find_compiler()
  flags = cflags() + list(extra_flags)
  key = hashlib.sha256("\0".join([src, " ".join(flags), compiler_version()]).encode()).hexdigest()[:32]
  d = cache_dir()
  out = os.path.join(d, f"k_{key}.so")
  if os.path.exists(out): return out
  # compile next to the final name and rename: a concurrent reader sees the whole file or none
  fd, tmp = tempfile.mkstemp(prefix=f"k_{key}.", suffix=".tmp.so", dir=d)
  os.close(fd)
  try:
    r = subprocess.run([cc, *flags, "-x", "c", "-", "-o", tmp, "-lm"], input=src, capture_output=True, text=True,  # type: ignore[list-item]
                       env=_compiler_env())
    if r.returncode != 0:
      raise CompileError(f"{cc} failed on a generated kernel:\n{r.stderr.strip()}\n--- source ---\n{src}")
    os.replace(tmp, out)
  finally:
    if os.path.exists(tmp): os.unlink(tmp)
  return out

def load(name: str, lib_path: str) -> Callable:
  """The kernel `name` of a shared object as prog(buffers, var_vals)."""
  lib = ctypes.CDLL(lib_path)
  fn = getattr(lib, name)
  fn.restype = None
  def prog(bufs: list[Buffer], vals: tuple[int, ...] = ()) -> None:
    fn(*[ctypes.c_void_p(b.ptr) for b in bufs], *[ctypes.c_int(v) for v in vals])
  prog.lib = lib  # type: ignore[attr-defined]  # keep the library loaded while the program lives
  return prog

def program(src: str, name: str) -> Callable:
  """Compile (or take from the cache) and load; a corrupt cache entry is deleted and rebuilt once."""
  with scope(f"compile {name}", "compile"): path = compile_c(src)
  try: return load(name, path)
  except OSError as e:
    print(f"warning: the cached kernel {path} does not load ({e}); rebuilding it", file=sys.stderr)
    try: os.unlink(path)
    except OSError: pass
    return load(name, compile_c(src))

def device() -> Compiled: return Compiled("CPU", program)
