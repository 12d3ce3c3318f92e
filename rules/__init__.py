"""rules: the rewrite rules as data. Each X.rules is compiled by `python build.py` into the X.py beside it
(generated, committed, never edited by hand); a few small hand-written helper modules hold longer actions.

Importing this package installs UOp.simplify()'s rule set (runtime names no higher layer: runtime/uop.py). A generated
module checks, when imported, that its .rules file is still what it was built from (built_from): a build that failed leaves
the old module, and using it would silently run the old rules.
"""
import contextlib, os, zlib
from runtime.rewrite import graph_rewrite as _graph_rewrite
from runtime.uop import UOp as _UOp, install_simplifier as _install_simplifier

_symbolic = None

def simplify(u: _UOp) -> _UOp:
  """u simplified by rules/symbolic.rules (what UOp.simplify() runs)."""
  global _symbolic
  if _symbolic is None:
    from rules.symbolic import symbolic  # on first use: importing the package stays cheap
    _symbolic = symbolic
  return _graph_rewrite(u, _symbolic, name="simplify")

_install_simplifier(simplify)

class StaleModuleError(ImportError):
  """A generated module whose .rules source changed since it was built."""

_stale_ok = 0

def built_from(path: str | None, crc: str) -> None:
  """Called by a generated module at import: raise StaleModuleError when the .rules file beside it (`path`, the module's
  __file__) no longer has the CRC-32 it was built from (dslc.stamp.import_digest). Nothing to check without a file (code run
  from a string) or without the .rules file (an install that left the sources out). Costs a read and a CRC of one small
  file with zlib: no dslc, no lark, nothing runtime has not loaded already."""
  if path is None or _stale_ok: return
  source = os.path.splitext(path)[0] + ".rules"
  try:
    with open(source, "rb") as f: data = f.read()
  except OSError: return
  if f"{zlib.crc32(data):08x}" != crc:
    rel = os.path.relpath(source)
    raise StaleModuleError(f"{rel} changed since {os.path.relpath(path)} was built from it: run `python build.py` (a build that failed "
                           "leaves the module it had; `python -m dslc check " + rel + "` shows why)")

@contextlib.contextmanager
def stale_allowed():
  """Import generated modules whatever their sources say (dslc, which imports them to check the names a file uses, while it
  builds the new ones)."""
  global _stale_ok
  _stale_ok += 1
  try: yield
  finally: _stale_ok -= 1
