"""Which rule an exception raised during a rewrite came from (runtime layer, beside the rewrite engine).

graph_rewrite and Matcher.rewrite catch what a rule's guard, helper or result raises around the whole rewrite (no cost
while nothing raises) and call `blame`, which finds the rule afterwards:
- the node being matched is the `_u` of the outermost generated matcher function on the traceback (every function
  dslc emits, and every standalone rule function, is `f(_u, ctx)`);
- the rule is the first of that node's rules whose standalone function raises again when run alone on that node (the
  rules run in order and the first that fires wins, so an earlier rule can't have raised); a rule whose helper has side
  effects on ctx runs a second time, which is fine on the way to an error;
- a result that is not a node fails in the engine itself, which names the rule that just fired.
"""
from __future__ import annotations
from types import FrameType
from typing import Any
from runtime.uop import UOp

MAX_NODE_TEXT = 300

def _frames(e: BaseException) -> list[FrameType]:
  out, tb = [], e.__traceback__
  while tb is not None:
    out.append(tb.tb_frame)
    tb = tb.tb_next
  return out

def _is_matcher_fn(f: FrameType) -> bool:
  code = f.f_code
  return code.co_argcount == 2 and code.co_varnames[:2] == ("_u", "ctx") and isinstance(f.f_locals.get("_u"), UOp)

def node_text(u: Any) -> str:
  """One line for a node: op, dtype, arg and its sources' ops (a whole graph would drown the message)."""
  if not isinstance(u, UOp): return repr(u)[:MAX_NODE_TEXT]
  src = ", ".join(f"{s.op.name}:{s.dtype}" for s in u.src)
  text = f"{u.op.name} {u.dtype} arg={u.arg!r} src=({src})"
  return text if len(text) <= MAX_NODE_TEXT else text[:MAX_NODE_TEXT - 4] + " ..."

_classes: dict[type, type] = {}  # the error class made for each cause's class: an interning table of pure values

def rule_error(rule, node: UOp | None, cause: Exception, problem: str | None = None) -> Exception:
  """A RuleError that is also an instance of the cause's class: `except ValueError` around a rewrite still catches a
  ValueError a helper raised on purpose (a user's error), now with the rule named."""
  from runtime.rewrite import RuleError
  cls = _classes.get(type(cause))
  if cls is None:
    try: cls = type("RuleError", (RuleError, type(cause)), {"__module__": RuleError.__module__, "__qualname__": "RuleError"})
    except TypeError: cls = RuleError   # a class that can't be a base (bool-like, a layout of its own)
    _classes[type(cause)] = cls
  try: return cls(rule, node, cause, problem)
  except Exception: return RuleError(rule, node, cause, problem)  # noqa: BLE001 - a cause class whose __init__ wants other arguments

def blame(e: Exception, rules: list, ctx: Any, node: UOp | None = None) -> Exception:
  """The RuleError to raise for `e` (raised while `rules` were matching), or `e` itself when no rule can be named."""
  frames = _frames(e)
  matched = [f for f in frames if _is_matcher_fn(f)]
  if matched:
    node = matched[0].f_locals["_u"]
    # RULESTATS runs each rule's standalone function from a loop whose `rule` is the one running
    for f in frames:
      if f.f_code.co_name == "run" and f.f_locals.get("rule") in rules: return rule_error(f.f_locals["rule"], node, e)
    return rule_error(_culprit(rules, node, ctx), node, e)
  # the engine failed on a rule's result: the rule that just fired is a local of the engine's loop
  for f in reversed(frames):
    if f.f_code.co_name in ("_rewrite", "_rewrite_bottom_up") and f.f_locals.get("rule") is not None:
      got = f.f_locals.get("n")
      if not isinstance(got, UOp):
        return rule_error(f.f_locals["rule"], f.f_locals.get("u"), e, f"its result is not a node: {got!r:.200}")
  if node is not None: return rule_error(_culprit(rules, node, ctx), node, e)
  return e

def _culprit(rules: list, node: UOp, ctx: Any):
  """The first rule for node's op that raises when run alone on it; None when none does (the message says so)."""
  for r in rules:
    if r.fn is None or (r.ops is not None and node.op not in r.ops): continue
    try:
      if r.fn(node, ctx) is not None: return None
    except Exception: return r
  return None
