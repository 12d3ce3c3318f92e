"""Shadowing, a part of dslc's checks: does an earlier rule match every node a later one does (so the later never fires)?

Conservative (False when unsure), and indexed (ShadowIndex) so that `check` compares each rule with a few candidates only.
"""
from __future__ import annotations
import itertools
from collections import defaultdict
from dslc.ir import Pat, Rule


class ShadowIndex:
  """The unconditional rules seen so far, indexed so that a new rule meets only those that could match everything it does:
  the same root op, the same number of sources, and at each of the first two sources a wildcard or an op the new rule has
  there (commutative rules in both orders). Each new rule looks up a few buckets, so `check` stays near linear in rules."""
  WIDE = 8  # a position with more ops than this is filed as a wildcard (more candidates, never fewer)

  def __init__(self):
    self.buckets: dict[tuple, list[tuple[int, Rule]]] = defaultdict(list)
    self.everywhere: list[tuple[int, Rule]] = []  # rules the index can't file (a root alternative): always candidates
    self.n = 0

  def add(self, u: Rule) -> None:
    p = u.pattern
    if not _repeat_free(p): return  # subsumes() is False for these: they never shadow
    self.n += 1
    roots = ("*",) if p.ops is None or len(p.ops) > 4 * self.WIDE else tuple(p.ops)
    for root in roots:
      for shape in self.shapes(p): self.buckets[(root, shape)].append((self.n, u))

  def shapes(self, p: Pat) -> set[tuple]:
    if p.src is None and p.rest is None: return {("any",)}
    if p.rest is not None: return {("rest", len(p.src or ()))}
    def keys(q: Pat) -> list:
      return ["*"] if q.ops is None or q.alternatives is not None or len(q.ops) > self.WIDE else list(q.ops)
    first = [keys(q) for q in p.src[:2]]
    out = {(len(p.src), *k) for k in itertools.product(*first)}
    if p.any_order and len(p.src) == 2: out |= {(2, b, a) for a, b in itertools.product(*first)}
    return out

  def candidates(self, p: Pat) -> list[Rule]:
    """Every indexed rule that could subsume p (a superset), in the order they were added."""
    if p.alternatives is not None:  # a root alternative: every rule, each checked
      found = [x for b in self.buckets.values() for x in b]
    else:
      roots = ["*"] + ([min(p.ops)] if p.ops is not None else [])
      shapes: list[tuple] = [("any",)]
      if p.rest is not None: shapes.append(("rest", len(p.src or ())))
      elif p.src is not None:
        def reps(q: Pat) -> list:
          # an alternation is covered only by a rule whose ops there include every alternative's: one op of the first finds it
          if q.alternatives is not None: q = q.alternatives[0]
          return ["*"] + ([min(q.ops)] if q.ops is not None and q.alternatives is None else [])
        first = [reps(q) for q in p.src[:2]]
        shapes += [(len(p.src), *k) for k in itertools.product(*first)]
        if p.any_order and len(p.src) == 2: shapes += [(2, b, a) for a, b in itertools.product(*first)]
      found = [x for root in roots for shape in shapes for x in self.buckets.get((root, shape), ())]
    return [u for _, u in sorted(set(found), key=lambda x: x[0])]

def subsumes(p1: Pat, p2: Pat) -> bool:
  return _repeat_free(p1) and covers(p1, p2)

def _repeat_free(p: Pat) -> bool:
  # a name or op variable used twice constrains p1 in ways this check does not model
  names: list[str] = []
  stack = [p]
  while stack:
    x = stack.pop()
    if x.alternatives is not None: return False
    names += [n for n in (x.name, x.arg_name, x.opvar, x.splice) if n]
    stack += list(x.src or ()) + ([x.rest] if x.rest else [])
  return len(names) == len(set(names))

def covers(p1: Pat, p2: Pat) -> bool:
  """Every node p2 matches, p1 matches too (p1 without repeated names: subsumes() checks that)."""
  if p2.alternatives is not None: return all(covers(p1, a) for a in p2.alternatives)
  if p1.ops is not None and (p2.ops is None or not p2.ops <= p1.ops): return False
  if p1.dtypes is not None or p1.dtype_classes is not None:
    if p1.dtypes != p2.dtypes or p1.dtype_classes != p2.dtype_classes: return False
  if p1.has_arg_eq and not (p2.has_arg_eq and p2.arg_eq == p1.arg_eq and type(p2.arg_eq) is type(p1.arg_eq)): return False
  if p1.arg_expr is not None and not (p2.arg_expr is not None and p2.arg_expr.text == p1.arg_expr.text): return False
  if p1.src is None and p1.rest is None: return True
  if p2.src is None and p2.rest is None: return False
  if p1.rest is not None or p2.rest is not None:
    if not (p1.rest is not None and p2.rest is not None and len(p1.src or ()) == len(p2.src or ()) and covers(p1.rest, p2.rest)): return False
    return all(covers(a, b) for a, b in zip(p1.src or (), p2.src or ()))
  s1, s2 = p1.src or (), p2.src or ()
  if len(s1) != len(s2): return False
  if p2.any_order and not p1.any_order: return all(covers(a, b) for a, b in zip(s1, s2)) and all(covers(a, b) for a, b in zip(s1, reversed(s2)))
  if p1.any_order: return all(covers(a, b) for a, b in zip(s1, s2)) or all(covers(a, b) for a, b in zip(s1, reversed(s2)))
  return all(covers(a, b) for a, b in zip(s1, s2))


def pattern_key(p: Pat, names: bool = True) -> str:
  """The structural identity of a pattern (two with the same key match the same nodes; with names, bind them alike)."""
  parts = [str(sorted(o.name for o in p.ops)) if p.ops else "*", str(p.opvar), str(sorted(map(repr, p.dtypes))) if p.dtypes else "",
           str(sorted(p.dtype_classes)) if p.dtype_classes else "", repr(p.arg_eq) if p.has_arg_eq else "", p.arg_expr.text if p.arg_expr else ""]
  if names: parts += [str(p.arg_name), str(p.name), str(p.splice)]
  sub = ",".join(pattern_key(s, names) for s in p.src) if p.src is not None else "-"
  alts = "{" + ";".join(pattern_key(a, names) for a in p.alternatives) + "}" if p.alternatives is not None else ""
  return "(" + "|".join(parts) + ("~" if p.any_order else "") + "[" + sub + "]" + (pattern_key(p.rest, names) if p.rest else "") + alts + ")"

__all__ = ["ShadowIndex", "subsumes", "covers", "pattern_key"]
