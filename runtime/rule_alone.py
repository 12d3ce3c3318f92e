"""One rule of a rule set, alone: a generated dispatch function cut down to its opening and that rule's block (runtime layer,
beside the rewrite engine). RULESTATS=1 times rules one by one with these, and Rule.fn serves tests and blame.

A dispatch function that dslc generates (dslc/emit.py) opens with what every rule of it may use, then gives each rule one
block under a header line `# rule ID, FILE:LINE`; a block reads only the opening's names and its own. So the opening and one
block, compiled on their own with the function's globals (and its closure's values, for a rule set with parameters), are
that rule alone. Made on first use from the function's source (linecache: the generated module's file, or the text a
PatternMatcher registered).
"""
from __future__ import annotations
import linecache, re
from typing import Any, Callable

_HEADER = re.compile(r"# rule (\S+), (.+):(\d+)$")

def _indent(line: str) -> int: return len(line) - len(line.lstrip())

def _body(fn: Callable) -> list[str] | None:
  """The lines of fn's body, as in its source (None when the source is not available)."""
  code = fn.__code__
  lines = linecache.getlines(code.co_filename, fn.__globals__)
  start = code.co_firstlineno - 1
  if not lines or start >= len(lines) or not lines[start].lstrip().startswith("def "): return None
  base, out = _indent(lines[start]), []
  for line in lines[start + 1:]:
    if line.strip() and _indent(line) <= base: break
    out.append(line.rstrip("\n"))
  while out and not out[-1].strip(): out.pop()
  return out

class NoSource(LookupError):
  """A dispatch function whose source Python can't find (generated code exec'd from a string with no file behind it)."""

def rule_alone(fn: Callable, rule_id: str) -> Callable[[Any, Any], Any] | None:
  """The function `fn` tries for rule `rule_id` alone, `f(uop, ctx) -> (Rule, result) | None` as fn; None when fn has no
  block for that rule (it never fires on fn's op). Raises NoSource when fn's source is not available."""
  body = _body(fn)
  if body is None:
    raise NoSource(f"the source of {fn.__qualname__} ({fn.__code__.co_filename}) is not available: a rule alone is cut from it "
                   "(exec generated code from a file, or register its text in linecache)")
  if not body: return None
  step = _indent(next(x for x in body if x.strip()))
  heads = [i for i, x in enumerate(body) if _indent(x) == step and _HEADER.fullmatch(x.strip())]
  mine = [i for i in heads if _HEADER.fullmatch(body[i].strip())[1] == rule_id]  # type: ignore[index]
  if not mine: return None
  end = next((i for i in heads if i > mine[0]), len(body))
  lines = body[:heads[0]] + body[mine[0]:end]
  src = "def _alone(_u, ctx):\n" + "\n".join("  " + x[step:] if x.strip() else "" for x in lines) + "\n  return None\n"
  ns = dict(fn.__globals__)
  # a rule set with parameters: its functions read the instance's values (`caps`, guards computed once) from their closure
  ns.update({name: cell.cell_contents for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ())})
  exec(compile(src, f"<rule {rule_id} alone, from {fn.__code__.co_filename}>", "exec"), ns)  # noqa: S102 - the generated code, cut
  return ns["_alone"]
