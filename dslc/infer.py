"""The dtypes of the nodes a rule's result builds, where the rule does not write them: from the sources, the op (a
comparison is bool, a store void) or the node the result replaces. A part of dslc's checks (a constructor whose dtype can't
be inferred is an error) and of the emitter (the Python text of each inferred dtype).
"""
from __future__ import annotations
from runtime.ops import GroupOp, Ops
from dslc.ir import CallResult, Cond, Construct, Lit, Pat, PyResult, Ref, Result, Rule, Seq, Splice, TupleResult, Update, is_fold

def plain_names(p: Pat) -> set[str]:
  """The names a pattern binds to plain values, not nodes: op variables, args, spliced sources (outside repeated patterns)."""
  return {n for x in p.walk(rest=False) for n in (x.opvar, x.arg_name, x.splice) if n}

class DtypeInference:
  """Inferred dtypes as Python text (`x.dtype`, `dtypes.bool`), None where nothing says; `plain` are the names bound to values
  that are not nodes (their dtype is unknown)."""
  def __init__(self, rule: Rule, plain: set[str]):
    self.rule, self.plain = rule, set(plain)
    # `where` names: a literal is a plain value (as an arg capture), a {python} or call a value that may be a node or a number
    self.python: set[str] = set()
    for b in rule.bindings:
      if isinstance(b.value, Lit): self.plain.add(b.name)
      elif isinstance(b.value, (PyResult, CallResult)): self.python.add(b.name)
    # a guard's `d := f(x)`: a value of Python, a node or not, as a {python} one
    self.python |= {g.binds for g in rule.guards if g.binds}

  def dtype_of(self, r: Result) -> str | None:
    if isinstance(r, Ref): return None if r.name in self.plain or r.name in self.python else f"{r.name}.dtype"
    if isinstance(r, Cond): return self.dtype_of(r.then) or self.dtype_of(r.other)
    if isinstance(r, Construct): return self.construct_dtype(r, None)
    if isinstance(r, Update): return r.fields["dtype"].text if "dtype" in r.fields else f"{r.name}.dtype"
    return None

  def construct_dtype(self, r: Construct, ctx_dt: str | None) -> str | None:
    if r.dtype is not None: return r.dtype.text
    ops = [r.op] if r.op is not None else sorted(self.rule.opvars.get(r.opvar, frozenset()))  # type: ignore[arg-type]
    first = next((d for s in r.src if (d := self.dtype_of(s)) is not None), None)
    if first is None and (spliced := next((x for x in r.src if isinstance(x, Splice)), None)) is not None:
      # a fold's dtype is its first source's (_fold): a splice may be empty, and the fold says so
      first = "None" if is_fold(r) else f"{spliced.name}[0].dtype"
    def one(op: Ops) -> str | None:
      if op is Ops.CONST: return ctx_dt
      if op in GroupOp.Comparison: return "dtypes.bool"
      if op is Ops.WHERE: return next((d for s in r.src[1:] if (d := self.dtype_of(s)) is not None), ctx_dt)
      if op in GroupOp.ALU:
        # a fold whose first source is a sequence: the dtype of its first element (_fold)
        if first is None and any(isinstance(x, Seq) for x in r.src) and is_fold(r): return "None"
        return first or ctx_dt
      if op in (Ops.SINK, Ops.STORE, Ops.NOOP, Ops.BARRIER, Ops.END, Ops.ENDIF, Ops.IF, Ops.GROUP): return "dtypes.void"
      if op is Ops.LOAD: return f"{first}.base" if first else None
      if op is Ops.VECTORIZE:
        lanes = [str(n)] if (n := sum(not isinstance(x, Splice) for x in r.src)) else []
        lanes += [f"len({x.name})" for x in r.src if isinstance(x, Splice)]
        return f"{first}.vec({' + '.join(lanes)})" if first else None
      if op in (Ops.CAST, Ops.BITCAST, Ops.GEP, Ops.VCONST, Ops.DEFINE_VAR, Ops.SPECIAL, Ops.RANGE): return None
      return first  # movement, INDEX, ASSIGN, CONTIGUOUS, ...: the dtype of their first source
    kinds = {one(o) for o in ops}
    if len(kinds) == 1: return kinds.pop()
    if None in kinds: return None
    if kinds == {"dtypes.bool", first or ctx_dt}: return f"(dtypes.bool if {r.opvar} in GroupOp.Comparison else {first or ctx_dt})"
    return None

  def first_problem(self, r: Result) -> str | None:
    """The first constructor (in the order the emitter builds them) whose dtype can't be inferred, or a CONST without its
    value, as a message; None when every node of r can be built."""
    if isinstance(r, (Cond, Seq, TupleResult)):
      parts = [r.then, r.other] if isinstance(r, Cond) else [r.elem] if isinstance(r, Seq) else [e for e in r.entries if e is not None]
      return next((m for x in parts if (m := self.first_problem(x)) is not None), None)
    if not isinstance(r, Construct): return None
    if self.construct_dtype(r, "_u.dtype") is None:
      what = r.op.name if r.op is not None else r.opvar
      return f"can't infer the dtype of ({what} ...): write it, as ({what}:dtype ...) or ({what}:x.dtype ...)"
    if r.op is Ops.CONST and r.arg is None: return "(CONST ...) needs its value: (CONST [value])"
    return next((m for s in r.src if not isinstance(s, Splice) and (m := self.first_problem(s)) is not None), None)
