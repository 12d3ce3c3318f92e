"""Files only this user can change (docs/security.md): the trust test for a folder or file (owned by this user or root,
writable by no one else), the per-user private folder in the temporary folder, and writes that replace a file whole
without following another user's symbolic link. Runtime layer: the kernel cache, PROFILE, VIZ and GRAPH use it.
"""
from __future__ import annotations
import errno, os, stat, tempfile, threading, warnings
from typing import IO, Callable

_lock = threading.Lock()
_private: dict[str, str] = {}  # <tmp>/rulegrad-<uid> -> the folder used in its place (itself when it is ours)

def _uid() -> int | None: return os.geteuid() if hasattr(os, "geteuid") else None

def problem(st: os.stat_result, kind: str = "folder") -> str | None:
  """Why what `st` describes can't be trusted to hold only what this user wrote (its owner is another user, or others may
  write it), or None when it can. Root's files are trusted: root can change ours anyway."""
  uid = _uid()
  if uid is None: return None  # no users to tell apart (Windows)
  if kind == "folder" and not stat.S_ISDIR(st.st_mode): return "is not a folder"
  if kind == "file" and not stat.S_ISREG(st.st_mode): return "is not a regular file"
  if st.st_uid not in (uid, 0): return f"belongs to another user (uid {st.st_uid}, not {uid})"
  if st.st_mode & 0o022: return f"can be written by {'others' if st.st_mode & 0o002 else 'its group'} (mode {stat.S_IMODE(st.st_mode):o})"
  return None

def folder_problem(path: str) -> str | None:
  """problem() for the folder at path, following a symbolic link only when the link itself is trusted (a link another user
  planted, as in /tmp, could be pointed elsewhere after the check)."""
  try:
    lst = os.lstat(path)
    if stat.S_ISLNK(lst.st_mode) and (uid := _uid()) is not None and lst.st_uid not in (uid, 0):
      return f"is a symbolic link made by another user (uid {lst.st_uid})"
    return problem(os.stat(path))
  except OSError as e: return f"can't be checked ({e.strerror})"

def private_dir() -> str:
  """This user's private folder: <temporary folder>/rulegrad-<uid>, made 0700. One that exists but is not ours alone (made
  by another user first, a link, writable by others) is not used: a new folder of our own is made instead (mkdtemp), with
  one warning. Ours but readable by others is closed (chmod 0700)."""
  base = os.path.join(tempfile.gettempdir(), f"rulegrad-{_uid() if _uid() is not None else 'user'}")
  with _lock:
    if (done := _private.get(base)) is not None and os.path.isdir(done): return done
    why: str | None
    try:
      try: os.mkdir(base, 0o700)
      except FileExistsError: pass
      st = os.lstat(base)
      why = "is a symbolic link" if stat.S_ISLNK(st.st_mode) else problem(st)
      if why is None and st.st_mode & 0o077: os.chmod(base, 0o700)
    except OSError as e: why = f"can't be used ({e.strerror})"
    if why is None: done = _private[base] = base
    else:
      done = _private[base] = tempfile.mkdtemp(prefix=f"rulegrad-{_uid()}-")
      warnings.warn(f"{base} {why}: it is not this user's private folder, so nothing is read from or written to it; "
                    f"using {done} instead (remove {base} to get it back)", stacklevel=2)
    return done

def open_trusted_fd(path: str) -> int:
  """A read-only descriptor of the file at path, after checking that only this user (or root) could have written it; a
  symbolic link is refused. Raises OSError (PermissionError saying why for an untrusted file)."""
  try: fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
  except OSError as e:
    if e.errno == errno.ELOOP: raise PermissionError(errno.EPERM, f"{path} is a symbolic link: not read") from None
    raise
  try:
    if (why := problem(os.fstat(fd), "file")) is not None: raise PermissionError(f"{path} {why}: not read")
  except BaseException:
    os.close(fd)
    raise
  return fd

def open_trusted(path: str) -> IO[bytes]:
  """open_trusted_fd as a binary file object."""
  return os.fdopen(open_trusted_fd(path), "rb")

def replace_file(path: str | os.PathLike, write: Callable[[IO[bytes]], None]) -> str:
  """Write the file at path whole: write(f) fills a new temporary file beside it (mkstemp: created exclusively, mode 0600,
  never through a link), which is then renamed over path. Returns path. Nothing is left behind on failure."""
  path = os.fspath(path)
  folder, name = os.path.split(os.path.abspath(path))
  fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
  try:
    with os.fdopen(fd, "wb") as f: write(f)
    os.replace(tmp, path)
  except BaseException:
    try: os.unlink(tmp)
    except OSError: pass
    raise
  return path

def write_text(path: str | os.PathLike, text: str) -> str:
  """replace_file with UTF-8 text."""
  return replace_file(path, lambda f: f.write(text.encode("utf-8")))

def private_path(name: str) -> str:
  """A path in private_dir() (for the default outputs of PROFILE, VIZ and GRAPH)."""
  return os.path.join(private_dir(), name)

__all__ = ["problem", "folder_problem", "private_dir", "private_path", "open_trusted_fd", "open_trusted", "replace_file", "write_text"]
