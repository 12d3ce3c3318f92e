"""The IR's spec, checked (in the codegen layer: the engine and codegen call it): with SPEC=1 every graph at the pipeline's
stage boundaries (the tensor graph kernelize takes, each kernel's AST, each lowered kernel), with SPEC=2 also each
graph_rewrite's result, against the rule sets of rules/spec.rules. A node no rule of its stage allows raises SpecError
naming the node, the stage, and the rule that made it (SPEC turns on runtime/provenance.py's record of which rule made each
node).
"""
from __future__ import annotations
import weakref
from runtime import provenance
from runtime import rewrite as _rewrite
from runtime.helpers import SPEC
from runtime.uop import UOp, pretty

class SpecError(RuntimeError):
  """A graph holds a node the IR's spec does not allow at this stage."""
  def __init__(self, message: str, node: UOp, stage: str):
    super().__init__(message)
    self.node, self.stage = node, stage

STAGES = ("tensor", "kernel", "program", "any")
# per stage, the nodes found allowed already (hash-consed nodes are shared by graph after graph)
_allowed: dict[str, weakref.WeakSet] = {s: weakref.WeakSet() for s in STAGES}

def forget() -> None:
  """Forget the nodes found allowed: each is checked again (a test that counts which rules of the spec fire)."""
  for seen in _allowed.values(): seen.clear()

def _matcher(stage: str):
  from rules import spec
  return {"tensor": spec.spec_tensor, "kernel": spec.spec_kernel, "program": spec.spec_program, "any": spec.spec_any}[stage]

def check(sink: UOp, stage: str, where: str = "") -> None:
  """Every node of sink's graph allowed by `stage`'s rules (one of STAGES), or a SpecError for the first that is not."""
  matcher, seen = _matcher(stage), _allowed[stage]
  for u in sink.toposort():
    if u in seen: continue
    if matcher.rewrite(u) is None: raise SpecError(describe(u, stage, sink, where), u, stage)
    seen.add(u)

def describe(u: UOp, stage: str, sink: UOp, where: str) -> str:
  src = ", ".join(f"{s.op.name}:{s.dtype!r}" for s in u.src) or "none"
  lines = [f"SPEC: no rule of spec_{stage} (rules/spec.rules) allows this node{f' in {where}' if where else ''}:",
           f"  {u.op.name} dtype={u.dtype!r} arg={u.arg!r:.120} sources: {src}"]
  made = provenance.made_by(u)
  if made is not None:
    rule, before = made
    lines.append(f"  made by {rule.origin}: {rule.text}")
    if before is not None: lines += [f"  {line}" for line in provenance.why(u)[1:6]]
  elif provenance.tracking(): lines.append("  made by no rule (by the Python that built the graph)")
  text = pretty(sink)
  lines.append("  in the graph:\n    " + "\n    ".join(text.splitlines()[:40]) + ("\n    ..." if text.count("\n") >= 40 else ""))
  return "\n".join(lines)

def _after_rewrite(out: UOp, label: str) -> None:
  check(out, "any", f"the result of graph_rewrite({label})")

def enabled() -> bool: return bool(SPEC)

# SPEC=2 checks after every graph_rewrite; any SPEC records which rule made each node, so a violation names it
_rewrite.after_rewrite = _after_rewrite
# (the rule alone, unless TRACK_RULES=1 asked for the whole record: SPEC keeps no replaced node alive)
if SPEC and not provenance.tracking(): provenance.track_rules(True, keep_replaced=False)
