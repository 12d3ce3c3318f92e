"""Helpers of the security tests (docs/security.md): act as another user, as an attacker on a shared machine would.

`as_other_user(fn)` runs fn in a forked child that has become uid 65534 (nobody); it needs root (the tests run as root in CI)
and skips cleanly otherwise. `shared_folder()` is a folder like /tmp: sticky and writable by everyone.
"""
from __future__ import annotations
import contextlib, os, shutil, tempfile, traceback
from typing import Callable, Iterator
import pytest

NOBODY = 65534

def needs_root() -> None:
  if not hasattr(os, "geteuid") or os.geteuid() != 0: pytest.skip("acting as another user needs root (the CI runs the tests as root)")

def as_other_user(fn: Callable[[], None], uid: int = NOBODY) -> None:
  """fn() run by another user, in a forked child; an exception in it fails the test."""
  needs_root()
  pid = os.fork()
  if pid == 0:  # the child: become the other user, do fn, leave without running the parent's cleanup
    code = 1
    try:
      os.setgroups([])
      os.setgid(uid)
      os.setuid(uid)
      fn()
      code = 0
    except BaseException:
      traceback.print_exc()
    finally:
      os._exit(code)
  _, status = os.waitpid(pid, 0)
  assert os.waitstatus_to_exitcode(status) == 0, "the other user's part failed (its traceback is above)"

@contextlib.contextmanager
def shared_folder() -> Iterator[str]:
  """A new folder in the system's temporary folder, sticky and writable by everyone, as /tmp is; removed afterwards."""
  d = tempfile.mkdtemp(prefix="rulegrad-test-shared-", dir="/tmp" if os.path.isdir("/tmp") else None)
  os.chmod(d, 0o1777)
  try: yield d
  finally: shutil.rmtree(d, ignore_errors=True)
