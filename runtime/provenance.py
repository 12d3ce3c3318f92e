"""Rule provenance: with TRACK_RULES=1 (read once at import; `track_rules(True)` in code), each node a rule results in
records the rule (file:line) and the node it replaced, and `why(node)` gives the chain of rules that produced it.

Off (the default) nothing is recorded and graph_rewrite runs the matcher's own table: the cost is one flag test per
graph_rewrite call. On, each dispatch function is wrapped to record what fired (a debugging mode, slower).
"""
from __future__ import annotations
import weakref
from typing import TYPE_CHECKING, Any, Callable
from runtime.helpers import getenv
if TYPE_CHECKING:
  from runtime.rewrite import Rule
  from runtime.uop import UOp

TRACK_RULES: bool = bool(getenv("TRACK_RULES", 0))
# keep the node each rule replaced (why() walks the chain back); off, only the rule is kept, and no replaced node is kept
# alive by the record (SPEC's naming of a rule: tensor/codegen/spec.py)
KEEP_REPLACED: bool = True

# node a rule resulted in -> (the rule, the node it replaced); the first rule to produce a node is the one kept. A fact of
# hash-consed nodes (values), so one table for the process, as the nodes are
_made: weakref.WeakKeyDictionary[UOp, tuple[Rule, UOp]] = weakref.WeakKeyDictionary()

def track_rules(on: bool = True, keep_replaced: bool = True) -> None:
  """Turn recording on or off for the graph_rewrite calls that follow (TRACK_RULES=1 turns it on at import).
  keep_replaced=False records the rule alone: made_by() gives (rule, None) and why() names the last rule only."""
  global TRACK_RULES, KEEP_REPLACED
  TRACK_RULES, KEEP_REPLACED = on, keep_replaced

def tracking() -> bool: return TRACK_RULES

def record(made: UOp, rule: Rule, replaced: UOp) -> None:
  if made is not replaced and made not in _made: _made[made] = (rule, replaced if KEEP_REPLACED else None)

def tracked_table(table: list) -> list:
  """A copy of a matcher's dispatch table whose functions record each rule that fires."""
  return [None if fn is None else _recording(fn) for fn in table]

def _recording(fn: Callable) -> Callable:
  def run(u: UOp, ctx: Any):
    r = fn(u, ctx)
    if r is not None and r[1].__class__ is not tuple: record(r[1], r[0], u)
    return r
  return run

def forget() -> None:
  """Drop every record (a node made by a rule in one rewrite may be an input of the next: `x + 0 -> x` records x)."""
  _made.clear()

def made_by(u: UOp) -> tuple[Rule, UOp] | None:
  """The rule that resulted in u and the node it replaced, or None (u was not made by a rule while tracking)."""
  return _made.get(u)

def why(u: UOp, depth: int = 8) -> list[str]:
  """The rules that produced u, latest first: `file:line: rule text` and what it rewrote; then, indented, the same for
  each source (not a leaf) of a node in the chain that rules produced, up to `depth` levels. Empty when no rule made u.
  A node two rules produced keeps the first; `forget()` between unrelated rewrites."""
  out: list[str] = []
  seen: set[int] = set()
  def chain(n: UOp, indent: str, level: int) -> None:
    steps: list[UOp] = [n]
    while (m := _made.get(n)) is not None and id(n) not in seen:
      seen.add(id(n))
      rule, before = m
      if before is None:  # recorded without the node it replaced (track_rules(keep_replaced=False))
        out.extend([f"{indent}{rule.origin}: {rule.text}", f"{indent}    ->  {_short(n)}"])
        break
      out.extend([f"{indent}{rule.origin}: {rule.text}", f"{indent}    {_short(before)}  ->  {_short(n)}"])
      n = before
      steps.append(n)
    if level >= depth: return
    for s in steps:
      for i, src in enumerate(s.src):
        # a leaf (variable, constant) is shared by the whole graph: a rule that resulted in one says nothing of this use
        if src.src and src in _made and id(src) not in seen:
          out.append(f"{indent}  source {i} of {_short(s)}:")
          chain(src, indent + "    ", level + 1)
  chain(u, "", 0)
  return out

def _short(u: UOp, limit: int = 100) -> str:
  try: text = u.render()
  except Exception: text = f"{u.op.name} {u.dtype}"  # noqa: BLE001 -- a node render does not know: show its op
  return text if len(text) <= limit else text[:limit - 3] + "..."
