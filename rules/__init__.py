"""rules: the rewrite rules as data. Each X.rules is compiled by `python build.py` into the X.py beside it
(generated, committed, never edited by hand); a few small hand-written helper modules hold longer actions.

Importing this package installs UOp.simplify()'s rule set (runtime names no higher layer: runtime/uop.py).
"""
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
