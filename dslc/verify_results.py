"""The result of a rule instance for `dslc verify`: its `where` names and its result built as SNodes, with dtypes inferred
as the generated code infers them (dslc/emit_result.py), so the value compared is the one the rule makes.
"""
from __future__ import annotations
from typing import Any
import z3
from runtime.dtype import DType, DTYPE_NAMES, dtypes
from runtime.ops import ARITY, GroupOp, Ops
from dslc.ir import Cond, Construct, Lit, PyResult, Ref, Result, Rule, Seq, Splice, Update
from dslc.smt import PInt, Unsupported
from dslc.verify_eval import Evaluator, choose
from dslc.verify_nodes import Maybe, SNode, Sym, py_bool

class Results:
  """Builds a rule's result (and its `where` names) as SNodes, as the generated code builds UOps (dslc/emit_result.py)."""
  def __init__(self, sym: Sym, rule: Rule, ev: Evaluator, root: SNode):
    self.sym, self.rule, self.ev, self.root = sym, rule, ev, root
    self.plain: set[str] = set()   # names bound to plain values (an arg, a literal `where`): a constant where a node goes

  def bind_wheres(self) -> None:
    for b in self.rule.bindings:
      if isinstance(b.value, Lit):
        self.ev.env[b.name] = b.value.value
        self.plain.add(b.name)
      elif isinstance(b.value, PyResult):
        self.ev.env[b.name] = self.ev.run(b.value.expr.text)
        if not isinstance(self.ev.env[b.name], (SNode, Maybe)): self.plain.add(b.name)
      else: self.ev.env[b.name] = self.build(b.value, self.root.dtype)

  def top(self) -> Any:
    return self.build(self.rule.result, self.root.dtype, top=True)

  def static_dtype(self, r: Result) -> DType | None:
    """The dtype the emitter infers for a source before building it (ResultBuilder.dtype_of)."""
    if isinstance(r, Ref):
      v = self.ev.env.get(r.name)
      return v.dtype if isinstance(v, SNode) and r.name not in self.plain else v.node.dtype if isinstance(v, Maybe) else None
    if isinstance(r, Cond): return self.static_dtype(r.then) or self.static_dtype(r.other)
    if isinstance(r, Construct): return self.construct_dtype(r, None)
    if isinstance(r, Update):
      if "dtype" in r.fields: return self.dtype_expr(r.fields["dtype"].text)
      v = self.ev.env.get(r.name)
      return v.dtype if isinstance(v, SNode) else None
    return None

  def dtype_expr(self, text: str) -> DType:
    d = DTYPE_NAMES.get(text.strip()) or self.ev.run(text)
    if not isinstance(d, DType): raise Unsupported(f"the dtype {text!r}")
    return d

  def construct_dtype(self, r: Construct, ctx_dt: DType | None) -> DType | None:
    if r.dtype is not None: return self.dtype_expr(r.dtype.text)
    op = self.op_of(r)
    first = next((d for s in r.src if (d := self.static_dtype(s)) is not None), None)
    if first is None and (spliced := next((x for x in r.src if isinstance(x, Splice)), None)) is not None:
      items = self.ev.env.get(spliced.name) or ()
      first = items[0].dtype if items and isinstance(items[0], SNode) else None
    if op is Ops.CONST: return ctx_dt
    if op in GroupOp.Comparison: return dtypes.bool
    if op is Ops.WHERE: return next((d for s in r.src[1:] if (d := self.static_dtype(s)) is not None), ctx_dt)
    if op in GroupOp.ALU: return first or ctx_dt
    if op in (Ops.SINK, Ops.STORE, Ops.NOOP, Ops.BARRIER, Ops.END, Ops.ENDIF, Ops.IF, Ops.GROUP): return dtypes.void
    if op in (Ops.CAST, Ops.BITCAST, Ops.GEP, Ops.VCONST, Ops.DEFINE_VAR, Ops.SPECIAL, Ops.RANGE, Ops.VECTORIZE, Ops.LOAD): return None
    return first

  def op_of(self, r: Construct) -> Ops:
    if r.op is not None: return r.op
    op = self.ev.env.get(r.opvar) if r.opvar else None
    if not isinstance(op, Ops): raise Unsupported(f"the op variable {r.opvar}")
    return op

  def as_node(self, v: Any, d: DType | None) -> SNode | Maybe:
    if isinstance(v, (SNode, Maybe)): return v
    if v is None: raise Unsupported("a result that is None where a node is needed")
    if d is None: raise Unsupported("a number whose dtype can't be known")
    if isinstance(v, (bool, int, float, PInt, z3.BoolRef, z3.FPRef)): return self.sym.const(d, v)
    raise Unsupported(f"a result that is a {type(v).__name__}")

  def build(self, r: Result, ctx_dt: DType | None, top: bool = False) -> Any:
    sym, ev = self.sym, self.ev
    if isinstance(r, Ref):
      v = ev.env.get(r.name)
      if r.name in self.plain or not isinstance(v, (SNode, Maybe)): return self.as_node(v, ctx_dt)
      return v
    if isinstance(r, Lit): return self.as_node(r.value, ctx_dt)
    if isinstance(r, PyResult):
      v = ev.run(r.expr.text)
      return None if v is None and top else self.as_node(v, ctx_dt)
    if isinstance(r, Cond):
      c = py_bool(ev.run(r.test.text))
      if c is True: return self.build(r.then, ctx_dt, top)
      if c is False: return self.build(r.other, ctx_dt, top)
      a, b = self.build(r.then, ctx_dt, top), self.build(r.other, ctx_dt, top)
      if isinstance(a, Maybe) or isinstance(b, Maybe): raise Unsupported("a choice between results that may decline")
      return choose(sym, c, a, b)
    if isinstance(r, Update):
      base = ev.env.get(r.name)
      if not isinstance(base, SNode) or base.op is None: raise Unsupported(f"an update of {r.name}, whose op the pattern does not fix")
      f = r.fields
      op = ev.run(f["op"].text) if "op" in f else base.op
      d = self.dtype_expr(f["dtype"].text) if "dtype" in f else base.dtype
      src = tuple(ev.run(f["src"].text)) if "src" in f else base.src
      arg = ev.run(f["arg"].text) if "arg" in f else base.arg
      if not isinstance(op, Ops) or not all(isinstance(s, SNode) for s in src): raise Unsupported("an update with symbolic fields")
      return sym.make(op, d, src, arg)
    if isinstance(r, Construct): return self.construct(r, ctx_dt)
    if isinstance(r, Seq): raise Unsupported("a sequence result")
    raise Unsupported(f"a {type(r).__name__} result")

  def construct(self, r: Construct, ctx_dt: DType | None) -> SNode:
    if r.comp is not None: raise Unsupported("a comprehension among a node's sources")
    op = self.op_of(r)
    d = self.construct_dtype(r, ctx_dt)
    if d is None: raise Unsupported(f"the dtype of ({op.name} ...)")
    arg = self.ev.run(r.arg.text) if r.arg is not None else None
    if op is Ops.CONST: return self.sym.const(d, arg)
    operand = d
    if op in GroupOp.Comparison: operand = next((x for s in r.src if (x := self.static_dtype(s)) is not None), ctx_dt)  # type: ignore[assignment]
    srcs: list[SNode] = []
    for i, s in enumerate(r.src):
      if isinstance(s, Splice):
        items = self.ev.env.get(s.name)
        if not isinstance(items, tuple) or not all(isinstance(x, SNode) for x in items): raise Unsupported(f"the splice {s.name}*")
        srcs.extend(items)
        continue
      sdt = dtypes.bool if op is Ops.WHERE and i == 0 else dtypes.index if op is Ops.INDEX and i > 0 else operand
      v = self.build(s, sdt)
      if isinstance(v, Maybe): raise Unsupported("a source that may decline")
      if not isinstance(v, SNode): raise Unsupported(f"a source that is a {type(v).__name__}")
      srcs.append(v)
    if op in GroupOp.Associative and len(srcs) > 2:
      out = srcs[0]
      for s in srcs[1:]: out = self.sym.make(op, d, (out, s), arg)
      return out
    if op in ARITY and ARITY[op] != len(srcs): raise Unsupported(f"({op.name} ...) with {len(srcs)} sources")
    return self.sym.make(op, d, tuple(srcs), arg)
