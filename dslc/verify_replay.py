"""Counterexamples for `dslc verify`, replayed: the values z3 found are built into real UOps, the generated rule runs on
them and both sides are evaluated with exec_alu; a counterexample is reported only when the real rule gets it wrong too.
"""
from __future__ import annotations
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
import z3
from runtime.dtype import DType, dtypes
from runtime.ops import GroupOp, Ops, cast_value, exec_alu
from runtime.uop import UOp, uop
from dslc import smt
from dslc.smt import Unsupported
from dslc.verify_nodes import SNode
if TYPE_CHECKING: from dslc.verify_pattern import Instance, Shape

@dataclass
class Verdict:
  status: str                      # proved, counterexample, unsupported, timeout, vacuous
  detail: str = ""

# ---- counterexamples: replayed on real UOps through the generated rule ----

def describe(inst: Instance, model: z3.ModelRef) -> str:
  parts, seen = [], set()
  for name, v in inst.env.items():
    if isinstance(v, SNode) and name not in seen and v.op is not Ops.CONST:
      seen.add(name)
      val = smt.concrete(model.eval(v.value, model_completion=True), v.dtype)
      text = f"{name} = {val!r}:{smt.dname(v.dtype)}"
      if v.bounds is not None and not isinstance(v.bounds[0], (float, z3.FPRef)):
        lo, hi = (smt.concrete(model.eval(b.e, model_completion=True)) for b in v.bounds)
        text += f" in [{lo}, {hi}]"
      parts.append(text)
    elif isinstance(v, SNode):
      seen.add(name)
      parts.append(f"{name} = {smt.concrete(model.eval(v.value, model_completion=True), v.dtype)!r}:{smt.dname(v.dtype)}")
    elif isinstance(v, (smt.PInt, z3.ExprRef)) and name not in seen:
      e = v.e if isinstance(v, smt.PInt) else v
      parts.append(f"{name} = {smt.concrete(model.eval(e, model_completion=True))!r}")
  return ", ".join(parts)

class Replayer:
  """Builds an instance with a model's values as real UOps, runs the generated rule on it and evaluates both sides with
  exec_alu: a counterexample is reported only when the real rule gets it wrong too."""
  def __init__(self, rules_by_line: dict[int, Any]):
    self.rules_by_line = rules_by_line

  def __call__(self, inst: Instance, model: z3.ModelRef, raises: str | None) -> Verdict:
    values = describe(inst, model)
    try: root, env = self.concrete(inst, model)
    except Unsupported as e:
      if inst.sym.opaque: return Verdict("unsupported", f"depends on the value of {', '.join(sorted(inst.sym.opaque))} (no SMT meaning)")
      return Verdict("unsupported", f"a possible counterexample ({values}) that can't be replayed: {e}")
    fn = self.rules_by_line.get(inst.rule.span.line)
    if fn is None: return Verdict("unsupported", f"no generated rule to replay a possible counterexample ({values}) on")
    try: out = fn(root, None)
    except Exception as e:  # noqa: BLE001 -- whatever the rule raises on this node is the finding
      if raises is not None: return Verdict("counterexample", f"{raises}: {values}; the rule raises {type(e).__name__}: {e}")
      return Verdict("counterexample", f"the rule raises {type(e).__name__} ({e}) on {values}")
    if raises is not None: return Verdict("unsupported", f"the model says {raises} on {values}, the generated rule does not raise")
    if out is None: return self.disagree(inst, values, "the generated rule does not fire there")
    if not isinstance(out, UOp): return Verdict("unsupported", f"the rule results in a {type(out).__name__}")
    if out.dtype is not root.dtype: return Verdict("counterexample", f"the result is {out.dtype}, the node {root.dtype}: {values}")
    try: want, got = evaluate(root, env), evaluate(out, env)
    except Unsupported as e: return Verdict("unsupported", f"a possible counterexample ({values}): {e}")
    if same_bits(want, got, root.dtype): return self.disagree(inst, values, f"both sides are {want!r} there")
    return Verdict("counterexample", f"{values}: the node is {want!r}, the result {got!r}")

  def disagree(self, inst: Instance, values: str, why: str) -> Verdict:
    if inst.sym.opaque: return Verdict("unsupported", f"depends on the value of {', '.join(sorted(inst.sym.opaque))} (no SMT meaning)")
    return Verdict("unsupported", f"the SMT model finds {values} but {why} (a gap in dslc/smt.py's meanings)")

  def concrete(self, inst: Instance, model: z3.ModelRef) -> tuple[UOp, dict]:
    env: dict[Any, Any] = {}
    by_node: dict[int, UOp] = {}
    def val(e, d): return smt.concrete(model.eval(e, model_completion=True), d)
    def go(s: Shape) -> UOp:
      n = inst.nodes[id(s)]
      if id(n) in by_node: return by_node[id(n)]
      d = n.dtype
      if s.op is None:
        v = val(n.value, d)
        if n.op_is.get(Ops.CONST) is not None and z3.is_true(model.eval(n.op_is[Ops.CONST], model_completion=True)): u = UOp.const(d, v)
        else:
          if n.bounds is not None and not dtypes.is_float(d): lo, hi = (val(b.e, None) for b in n.bounds)
          elif n.bounds is not None: lo, hi = (val(b, None) if isinstance(b, z3.ExprRef) else b for b in n.bounds)
          else: lo = hi = v
          if d is dtypes.bool: lo, hi = bool(lo), bool(hi)
          name = f"{n.name or 'v'}{len(env)}"
          u = uop(Ops.DEFINE_VAR, d, (), (name, lo, hi))
          env[name] = v
      elif s.op is Ops.CONST: u = UOp.const(d, val(n.value, d))
      elif s.op in GroupOp.ALU or s.op in (Ops.CAST, Ops.BITCAST): u = uop(s.op, d, tuple(go(x) for x in s.src))
      elif s.op is Ops.RANGE:
        u = uop(Ops.RANGE, d, (go(s.src[0]),), len(env))
        env[u] = val(n.value, d)
      else: raise Unsupported(f"{s.op.name} can't be evaluated")
      by_node[id(n)] = u
      return u
    return go(inst.shape), env

def evaluate(u: UOp, env: dict) -> Any:
  """u's value with C semantics (exec_alu, cast_value, the PYTHON device's bitcast); variables and loop indices from env."""
  from runtime.ops_python import _bitcast
  vals: dict[UOp, Any] = {}
  for x in u.toposort():
    if x.op is Ops.CONST: v = x.arg
    elif x.op is Ops.DEFINE_VAR: v = env[x.arg[0]]
    elif x.op is Ops.RANGE: v = env[x]
    elif x.op is Ops.CAST: v = cast_value(vals[x.src[0]], x.dtype)
    elif x.op is Ops.BITCAST: v = _bitcast(vals[x.src[0]], x.src[0].dtype, x.dtype)
    elif x.op in GroupOp.ALU:
      try: v = exec_alu(x.op, x.dtype, [vals[s] for s in x.src])
      except ValueError as e: raise Unsupported(f"{x.op.name} on {x.dtype}: {e}") from e
    else: raise Unsupported(f"{x.op.name} can't be evaluated")
    vals[x] = v
  return vals[u]

def same_bits(a: Any, b: Any, d: DType) -> bool:
  if dtypes.is_float(d):
    import math, struct
    if math.isnan(a) or math.isnan(b): return math.isnan(a) and math.isnan(b)
    return struct.pack("<d", a) == struct.pack("<d", b)
  return a == b
