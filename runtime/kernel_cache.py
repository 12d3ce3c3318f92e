"""The on-disk cache of compiled kernels (used by runtime/ops_cpu.py): one shared object per key, verified before it is loaded;
and of lowered programs (tensor/codegen/program_cache.py): a kernel's rendered source and facts by its AST, so a new process
skips lowering and rendering too.

An entry is `k_<key>.so`: the compiler's ELF output followed by a trailer (magic, the key, the SHA-256 of the ELF bytes and
their length); or `p_<key>.bin`: any bytes (a lowered program), with the same trailer. Loading checks the trailer against
the file and the key it was looked up by, so a truncated, corrupt or swapped file is rebuilt instead of crashing the
process (SIGBUS) or running another kernel. Writers build beside the entry and rename, so readers see a whole entry or none.

CACHE_DIR picks the folder (default ~/.cache/rulegrad); a folder that is not writable or full falls back to a temporary one
with one warning; a folder deleted while kernels compile is made again. CACHE_MAX_MB (default 1024) caps its size: the
entries used least recently are evicted first.

An entry is code that runs as the user, so only what the user wrote is read (docs/security.md): the folder is made 0700; a
folder another user owns or others may write is not used (one warning: the private temporary folder serves instead, see
runtime/safe_files.py), and an entry another user owns, others may write or that is a link is rebuilt, never loaded.
"""
from __future__ import annotations
import errno, hashlib, os, struct, sys, tempfile, threading, time, warnings
from typing import Callable, TypeVar
from runtime import safe_files

T = TypeVar("T")
MAGIC = b"\0rulegrad-kernel\0"
_TRAILER = struct.Struct(f"<{len(MAGIC)}s32s32sQ")  # magic, key (32 hex digits), sha256 of the ELF bytes, their length
ELF = b"\x7fELF"

class CacheError(OSError):
  """A cache entry that is missing, incomplete or not the one looked up (the caller rebuilds it)."""

class BuildError(Exception):
  """The build function failed for a reason a retry elsewhere can't fix (the compiler rejected the source)."""

_lock = threading.Lock()
# what this process learnt of the cache folders, which every engine in it shares
_warned: set[tuple[str, str]] = set()  # (kind, folder): each problem with a folder is told once
_full: set[str] = set()  # folders that ran out of space in this process: new entries go to the fallback folder
_untrusted: set[str] = set()  # folders another user could have written: never read

def _warn_once(kind: str, d: str, message: str) -> None:
  with _lock:
    if (kind, d) in _warned: return
    _warned.add((kind, d))
  warnings.warn(message, stacklevel=4)

def fallback_dir() -> str:
  """This user's private temporary folder (runtime/safe_files.py: <tmp>/rulegrad-<uid>, 0700, verified)."""
  return safe_files.private_dir()

def configured_dir() -> str:
  """The folder CACHE_DIR names (default $XDG_CACHE_HOME/rulegrad or ~/.cache/rulegrad), whether or not it is usable."""
  return os.environ.get("CACHE_DIR") or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "rulegrad")

def cache_dir() -> str:
  """The folder new entries go to: CACHE_DIR (default ~/.cache/rulegrad), made 0700 if missing; the private temporary folder
  when it is not writable, has run out of space, or could hold another user's files (told once per folder)."""
  d = configured_dir()
  if d in _full or d in _untrusted: return fallback_dir()
  try: os.makedirs(d, mode=0o700, exist_ok=True)
  except OSError: pass
  if (why := safe_files.folder_problem(d)) is not None and _close_own_folder(d):
    why = safe_files.folder_problem(d)
  if why is not None and os.path.exists(d):
    with _lock: _untrusted.add(d)
    _warn_once("untrusted", d, f"the kernel cache folder {d} {why}: its entries could run code as you, so it is not used; compiling into "
                               f"{fallback_dir()} instead (make the folder yours alone, chmod go-w, or set CACHE_DIR)")
    return fallback_dir()
  if why is None and os.access(d, os.W_OK): return d
  _warn_once("readonly", d, f"the kernel cache folder {d} is not writable: compiling into a temporary folder (set CACHE_DIR to a writable one)")
  return fallback_dir()

def _close_own_folder(d: str) -> bool:
  """A cache folder of ours that its group or others may write (made under umask 002, say) is closed to 0700, told once:
  True when it was. Another user's folder is left alone (and not used)."""
  try:
    st = os.lstat(d)
    if not (os.path.isdir(d) and st.st_uid == os.geteuid() and st.st_mode & 0o022): return False
    os.chmod(d, 0o700)
  except (OSError, AttributeError): return False
  _warn_once("closed", d, f"the kernel cache folder {d} could be written by others (mode {st.st_mode & 0o777:o}): made it 0700, as its "
                          f"entries run as you")
  return True

def open_trusted(path: str) -> int:
  """A read-only descriptor of the entry at path, after checking that only this user (or root) could have written it (owner,
  mode; a link is refused). Raises CacheError for an entry that fails, FileNotFoundError when there is none."""
  try: return safe_files.open_trusted_fd(path)
  except FileNotFoundError: raise
  except PermissionError as e: raise CacheError(str(e)) from None
  except OSError as e: raise CacheError(f"{path} can't be opened ({e.strerror}): not read") from None

def max_bytes() -> int:
  try: return int(float(os.environ.get("CACHE_MAX_MB", "1024")) * 2**20)
  except ValueError: return 2**30

def entry_path(d: str, key: str) -> str: return os.path.join(d, f"k_{key}.so")

def data_path(d: str, key: str) -> str: return os.path.join(d, f"p_{key}.bin")

def _key_of(path: str) -> str:
  name = os.path.basename(path)
  if not (name.startswith("k_") and name.endswith(".so")): raise CacheError(f"{path} is not a kernel cache entry (k_<key>.so)")
  return name[2:-3]

def _is_entry(name: str) -> bool: return (name.startswith("k_") and name.endswith(".so")) or (name.startswith("p_") and name.endswith(".bin"))

# ---- reading ----

def open_verified(path: str, key: str | None = None) -> int:
  """A file descriptor of the entry at `path`, after checking its trailer: the ELF bytes hash to the stored digest and the
  stored key is `key` (by default the key in the file name). Raises CacheError (FileNotFoundError when there is none)."""
  key = _key_of(path) if key is None else key
  fd = open_trusted(path)
  try:
    _check(path, _read_all(fd), key, elf=True)
    return fd
  except BaseException:
    os.close(fd)
    raise

def _read_all(fd: int) -> bytes:
  chunks = []
  while chunk := os.read(fd, 1 << 20): chunks.append(chunk)
  return b"".join(chunks)

def _check(path: str, data: bytes, key: str, elf: bool) -> bytes:
  """The payload of entry data read from path, after checking its trailer (and that it is ELF, for a shared object)."""
  if len(data) < _TRAILER.size: raise CacheError(f"{path}: {len(data)} bytes, too short for a cache entry")
  magic, stored_key, digest, n = _TRAILER.unpack(data[-_TRAILER.size:])
  if magic != MAGIC: raise CacheError(f"{path}: no cache trailer (a truncated or foreign file)")
  if stored_key.rstrip(b"\0") != key.encode():
    raise CacheError(f"{path}: holds the {'kernel' if elf else 'entry'} {stored_key.decode(errors='replace')}, not {key}")
  if n != len(data) - _TRAILER.size or hashlib.sha256(data[:n]).digest() != digest or (elf and not data.startswith(ELF)):
    raise CacheError(f"{path}: the contents do not match their digest (truncated or corrupt)")
  return data[:n]

def load_data(key: str) -> bytes | None:
  """The bytes stored under `key` by store_data, or None when there is no entry (or only a damaged one, which is deleted)."""
  for d in dict.fromkeys((cache_dir(), fallback_dir())):
    path = data_path(d, key)
    try:
      fd = open_trusted(path)
      try: data = _check(path, _read_all(fd), key, elf=False)
      finally: os.close(fd)
    except FileNotFoundError: continue
    except OSError as e:
      print(f"warning: the cached program {path} is not usable ({e}); deleting it", file=sys.stderr)
      remove(path)
      continue
    _touch(path)
    return data
  return None

def find(key: str) -> str | None:
  """The path of a verified shared-object entry for `key` in the cache folder or the private fallback one, or None (a damaged
  entry is deleted)."""
  for d in dict.fromkeys((cache_dir(), fallback_dir())):
    path = entry_path(d, key)
    try: os.close(open_verified(path, key))
    except FileNotFoundError: continue
    except OSError as e:
      print(f"warning: the cached kernel {path} is not usable ({e}); deleting it", file=sys.stderr)
      remove(path)
      continue
    return path
  return None

def load_verified(path: str, loader: Callable[[str], T], key: str | None = None) -> T:
  """loader(path) once the entry at path passes open_verified. (The loader opens the path again: it is replaced only by
  renames of whole entries, so it reads what was checked or an equally good build. The dynamic loader knows libraries by
  path, so the file checked can't be handed over as /proc/self/fd/N: that name comes back for other files.)"""
  os.close(open_verified(path, key))
  out = loader(path)
  _touch(path)
  return out

def _touch(path: str) -> None:
  # least recently used first: a use sets the access time (kept apart from the modification time, which says when it was built)
  try:
    st = os.stat(path)
    os.utime(path, ns=(time.time_ns(), st.st_mtime_ns))
  except OSError: pass

def remove(path: str) -> None:
  try: os.unlink(path)
  except OSError: pass

# ---- writing ----

def _no_space(e: BaseException) -> bool:
  return isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT) or "No space left on device" in str(e)

def store(key: str, build: Callable[[str], None]) -> str:
  """The path of a verified entry for `key`, made by build(tmp_path) (which writes the ELF file) unless one exists.
  build raises BuildError when the compiler fails. A folder deleted meanwhile is made again and the build retried; a
  full one falls back to a temporary folder, with one warning."""
  last: BaseException | None = None
  for _ in range(4):
    d = cache_dir()
    out = entry_path(d, key)
    try:
      os.close(open_verified(out, key))
      _touch(out)
      return out
    except FileNotFoundError: pass
    except OSError as e: print(f"warning: the cached kernel {out} is not usable ({e}); rebuilding it", file=sys.stderr)
    try:
      _build_into(d, key, out, build)
    except (OSError, BuildError) as e:
      last = e
      if not os.path.isdir(d): continue  # deleted while we compiled: make it again and retry
      if _no_space(e) and d != fallback_dir():
        with _lock: _full.add(d)
        _warn_once("full", d, f"the kernel cache folder {d} is full (no space left on device): compiling into a temporary folder "
                              f"{fallback_dir()} (free some space, or set CACHE_DIR or CACHE_MAX_MB)")
        continue
      raise
    _added(d, out)
    return out
  raise BuildError(f"could not write the kernel cache entry {key}: {last}")

def _build_into(d: str, key: str, out: str, build: Callable[[str], None]) -> None:
  fd, tmp = tempfile.mkstemp(prefix=f"k_{key}.", suffix=".tmp.so", dir=d)
  os.close(fd)
  try:
    build(tmp)
    with open(tmp, "rb") as f: elf = f.read()
    if not elf.startswith(ELF):
      raise BuildError(f"the compiler wrote no shared object ({len(elf)} bytes{', not ELF' if elf else ''})")
    os.chmod(tmp, 0o700)  # the compiler made it with the umask (group-writable under umask 002): the entry check wants it ours alone
    with open(tmp, "ab") as f:
      f.write(_TRAILER.pack(MAGIC, key.encode(), hashlib.sha256(elf).digest(), len(elf)))
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, out)
  finally: remove(tmp)

def store_data(key: str, data: bytes) -> None:
  """Keep `data` under `key` (written beside the entry and renamed, with the trailer). Failing to write is not an error:
  the entry is only a shortcut (told once per folder)."""
  d = cache_dir()
  fd, tmp = -1, ""
  try:
    fd, tmp = tempfile.mkstemp(prefix=f"p_{key}.", suffix=".tmp.bin", dir=d)
    os.write(fd, data + _TRAILER.pack(MAGIC, key.encode(), hashlib.sha256(data).digest(), len(data)))
    os.close(fd)
    fd = -1
    os.replace(tmp, out := data_path(d, key))
  except OSError as e:
    _warn_once("data", d, f"could not write a lowered program into the kernel cache folder {d}: {e}")
    return
  finally:
    if fd >= 0: os.close(fd)
    if tmp: remove(tmp)
  _added(d, out)

# ---- size cap ----

SIZE_FILE = "size"  # the folder's total bytes as last counted plus what writers added since (approximate: writers race)

def _read_size(d: str) -> int | None:
  try:
    with open(os.path.join(d, SIZE_FILE)) as f: return int(f.read().strip())
  except (OSError, ValueError): return None

def _write_size(d: str, n: int) -> None:
  tmp = os.path.join(d, f".{SIZE_FILE}.{os.getpid()}.{threading.get_ident()}")
  try:
    with open(tmp, "w") as f: f.write(str(n))
    os.replace(tmp, os.path.join(d, SIZE_FILE))
  except OSError: remove(tmp)

def _added(d: str, path: str) -> None:
  """Account for a new entry; past CACHE_MAX_MB, evict. The folder is counted in full only when it has no size file yet and
  when it is over the cap (counting 20,000 entries takes a second: not something to do in every process)."""
  with _lock:
    size = _read_size(d)
    if size is None: size = folder_size(d)
    else:
      try: size += os.path.getsize(path)
      except OSError: pass
    if size > max_bytes(): size = folder_size(d)  # the estimate may have drifted: recount before deleting anything
    if size > max_bytes(): size -= evict(d, counted=size)
    _write_size(d, size)

def folder_size(d: str) -> int:
  total = 0
  for e in _entries(d): total += e[2]
  return total

def _entries(d: str) -> list[tuple[int, str, int]]:
  """(last use in ns, path, bytes) of each entry; in-progress files of dead writers (over an hour old) are deleted."""
  out = []
  try: names = os.listdir(d)
  except OSError: return out
  now = time.time()
  for n in names:
    p = os.path.join(d, n)
    try: st = os.stat(p)
    except OSError: continue
    if n.endswith((".tmp.so", ".tmp.bin")):
      if now - st.st_mtime > 3600: remove(p)
    elif _is_entry(n): out.append((max(st.st_atime_ns, st.st_mtime_ns), p, st.st_size))
  return out

def evict(d: str, target: float = 0.8, counted: int | None = None) -> int:
  """Delete the entries used least recently until the folder holds at most target * CACHE_MAX_MB. Returns bytes freed."""
  entries = sorted(_entries(d))
  size, limit, freed = sum(e[2] for e in entries) if counted is None else counted, target * max_bytes(), 0
  for _, p, n in entries:
    if size - freed <= limit: break
    remove(p)
    freed += n
  return freed
