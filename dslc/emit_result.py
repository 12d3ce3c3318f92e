"""The emitter's half for results: the Python expression that builds a rule's result (constructors with their dtypes
inferred, tuples, splices, updates, comprehensions, `where` lines) and the small helpers generated modules may need.
"""
from __future__ import annotations
import re
from typing import Any, Protocol
from runtime.ops import GroupOp, Ops
from dslc.infer import DtypeInference
from dslc.ir import CallResult, Cond, Construct, Lit, PyResult, Ref, Result, Rule, Seq, Splice, TupleResult, Update, is_fold

ROOT = "_u"

class EmitError(Exception):
  def __init__(self, message: str, rule: Rule | None = None):
    super().__init__(message)
    self.rule = rule

class Consts(Protocol):
  """What results need of the emitter's module-level names (emit.Consts): constants, op aliases, helper functions."""
  helpers: set[str]
  def const(self, dt: str, value: str) -> str: ...
  def op(self, o: Ops) -> str: ...
  def fn_name(self, f: Any) -> str: ...

class ResultBuilder(DtypeInference):
  """Python source that builds a rule's result; dtypes are inferred from the sources when not written (infer.py).
  perm: the written source -> the node's source map of the pattern variant (a tuple's entries follow the node's sources)."""
  def __init__(self, consts: Consts, rule: Rule, plain: set[str], maybe_none: set[str] = frozenset(),  # type: ignore[assignment]
               perm: tuple[int, ...] | None = None):
    super().__init__(rule, plain)
    self.c, self.maybe_none, self.perm = consts, maybe_none, perm
    self.local: set[str] = set()   # the names of the comprehensions being emitted: a number among them is a constant as a source

  def top(self) -> tuple[str, bool]:
    """(expression, may it be None or a number)"""
    r = self.rule.result
    if isinstance(r, TupleResult): return self.tuple(r), False
    return self.expr(r, f"{ROOT}.dtype"), self.may_decline(r)

  def may_decline(self, r: Result) -> bool:
    """Whether a result may be None (the rule declines) or a number (made a constant of the root's dtype)."""
    if isinstance(r, Cond): return self.may_decline(r.then) or self.may_decline(r.other)
    return isinstance(r, (PyResult, CallResult)) or isinstance(r, Ref) and (r.name in self.maybe_none or r.name in self.python)

  def bindings(self) -> list[str]:
    """The lines that bind the `where` names, in order; a {python} value that is None declines (the lines after it nest)."""
    out, indent = [], ""
    for b in self.rule.bindings:
      value = b.value
      text = repr(value.value) if isinstance(value, Lit) else self.expr(value, f"{ROOT}.dtype")
      out.append(f"{indent}{b.name} = {text}")
      if b.name in self.python:
        out.append(f"{indent}if {b.name} is not None:")
        indent += "  "
    return out

  def tuple(self, r: TupleResult) -> str:
    """A tuple result: entry i is for the written source i, which is the node's source perm[i]; a literal is a constant of its dtype."""
    if r.comp is not None:
      # entries repeated per element: how many is known when it runs, so _per_source checks the count and makes numbers constants
      c = r.comp
      items = ["None" if e is None else repr(e.value) if isinstance(e, Lit) else e.name if isinstance(e, Ref) else
               self.expr(e, "None") for e in r.entries]
      head = c.head()
      gen = f"{items[0]} for {head}" if len(items) == 1 else f"_s for {head} for _s in ({', '.join(items)},)"
      self.c.helpers |= {"_per_source", "_entry"}
      return f"_per_source(tuple({gen}), {ROOT}, {self.rule.id})"
    perm = self.perm if self.perm is not None and len(self.perm) == len(r.entries) else tuple(range(len(r.entries)))
    texts = [""] * len(r.entries)
    for i, e in enumerate(r.entries):
      dt = f"{ROOT}.src[{perm[i]}].dtype"
      if e is None: texts[perm[i]] = "None"
      elif isinstance(e, PyResult): texts[perm[i]] = f"_entry({e.expr.text}, {dt})"
      else: texts[perm[i]] = self.expr(e, dt)
    if any(isinstance(e, PyResult) for e in r.entries): self.c.helpers.add("_entry")
    return "(" + ", ".join(texts) + ("," if len(texts) == 1 else "") + ")"

  def expr(self, r: Result, ctx_dt: str) -> str:
    if isinstance(r, Ref):
      if r.name in self.plain: return f"_const({ctx_dt}, {r.name})"
      if r.name in self.python and ctx_dt != f"{ROOT}.dtype": return f"_as_src({r.name}, {ctx_dt})"
      return r.name
    if isinstance(r, Lit): return self.c.const(ctx_dt, repr(r.value))
    if isinstance(r, PyResult): return r.expr.text
    if isinstance(r, Cond): return f"({self.expr(r.then, ctx_dt)} if {r.test.text} else {self.expr(r.other, ctx_dt)})"
    if isinstance(r, Seq): return f"[{self.seq(r, 'None')}]"  # a list comprehension: faster than a generator, and a sequence
    if isinstance(r, Update):
      f, n = r.fields, r.name
      src = f["src"].text if "src" in f else f"{n}.src"
      return (f"_uop({f['op'].text if 'op' in f else n + '.op'}, {f['dtype'].text if 'dtype' in f else n + '.dtype'}, {src}, "
              f"{f['arg'].text if 'arg' in f else n + '.arg'}, {f['tag'].text if 'tag' in f else n + '.tag'})")
    if isinstance(r, CallResult):
      args = ", ".join(f"{p}={p}" if getattr(r, "by_keyword", False) else p for p in r.params)
      return f"{self.c.fn_name(r.fn)}({args})"
    assert isinstance(r, Construct)
    dt = self.construct_dtype(r, ctx_dt)
    if dt is None:
      what = r.op.name if r.op is not None else r.opvar
      raise EmitError(f"can't infer the dtype of ({what} ...): write it, as ({what}:dtype ...) or ({what}:x.dtype ...)", self.rule)
    op = self.c.op(r.op) if r.op is not None else r.opvar
    if r.op is Ops.CONST:
      if r.arg is None: raise EmitError("(CONST ...) needs its value: (CONST [value])", self.rule)
      if re.fullmatch(r"-?\d+", r.arg.text) and not dt.startswith("dtypes."):
        # an int written for a dtype known when it runs (`(CONST:ctx.index [0])`): UOp.const's node, cheaper (_iconst)
        self.c.helpers.add("_iconst")
        return f"_iconst({dt}, {r.arg.text})"
      return self.c.const(dt, r.arg.text)
    # a literal source takes the dtype of the other operands: a comparison's, or the result's
    operand_dt = dt
    if r.op in GroupOp.Comparison or (r.op is None and any(o in GroupOp.Comparison for o in self.rule.opvars.get(r.opvar, ()))):  # type: ignore[arg-type]
      operand_dt = next((d for s in r.src if (d := self.dtype_of(s)) is not None), ctx_dt)
    srcs = []
    outer = self.local
    if r.comp is not None: self.local = self.local | set(r.comp.bound)
    for i, s in enumerate(r.src):
      if isinstance(s, Splice):
        srcs.append(f"*{s.name}")
        continue
      if isinstance(s, Seq):
        # its elements in place; among an ALU op's sources a number is a constant of the operands' dtype
        srcs.append(f"*[{self.seq(s, operand_dt if r.op in GroupOp.ALU else 'None')}]")
        continue
      sdt = "dtypes.bool" if r.op is Ops.WHERE and i == 0 else "dtypes.index" if r.op is Ops.INDEX and i > 0 else operand_dt
      text = self.expr(s, sdt)
      # a {python} source, or a comprehension's name among an ALU op's sources (`(IDIV f s) for s in strides`), may be a
      # number: a constant of the source's dtype
      if isinstance(s, PyResult): text = f"_as_src({text}, {sdt})"
      elif isinstance(s, Ref) and s.name in self.local and r.op in GroupOp.ALU and sdt != f"{s.name}.dtype":
        self.c.helpers |= {"_iconst", "_local_src"}
        text = f"_local_src({text}, {sdt})"
      srcs.append(text)
    self.local = outer
    arg = r.arg.text if r.arg is not None else "None"
    if r.comp is not None: return self.comprehension(r, op, dt, srcs, arg)
    src = "(" + ", ".join(srcs) + ("," if len(srcs) == 1 else "") + ")"
    if is_fold(r):
      self.c.helpers.add("_fold")
      return f"_fold({op}, {dt}, {src})"
    if r.op is Ops.VECTORIZE and any(isinstance(x, Seq) for x in r.src):
      # a lane per source, however many the sequence gives: _comp counts them
      self.c.helpers.add("_comp")
      scalar = next((d for x in r.src if (d := self.dtype_of(x)) is not None), None) if r.dtype is None else f"{r.dtype.text}.scalar"
      return f"_comp({op}, {scalar}, {src}, {arg})"
    return f"_uop({op}, {dt}, {src}, {arg})"

  def seq(self, r: Seq, dt: str) -> str:
    """The generator of a sequence's elements (a number is a constant of dtype dt, when dt is known)."""
    c = r.comp
    head = c.head()
    outer, self.local = self.local, self.local | set(c.bound)
    try:
      elem = self.expr(r.elem, dt)
      if dt != "None" and isinstance(r.elem, PyResult): elem = f"_as_src({elem}, {dt})"
    finally: self.local = outer
    return f"{elem} for {head}"

  def comprehension(self, r: Construct, op: str, dt: str, srcs: list[str], arg: str) -> str:
    """`(OP srcs... for t in it)`: the sources once per element, as a tuple. An inferred dtype that reads the comprehension's
    names is taken from the first source when it runs (_comp), and a VECTORIZE gets one lane per source."""
    c = r.comp
    assert c is not None
    head = c.head()
    # a list comprehension made a tuple: faster than tuple() of a generator
    one = len(srcs) == 1 and not srcs[0].startswith("*")
    src = f"tuple([{srcs[0]} for {head}])" if one else f"tuple([_s for {head} for _s in ({', '.join(srcs)},)])"
    local = re.compile(r"\b(" + "|".join(map(re.escape, sorted(c.bound))) + r")\b")
    if is_fold(r):
      # an associative op over a comprehension: its elements folded, ((e0 op e1) op e2) ...; a dtype that reads the
      # comprehension's names is the first element's
      self.c.helpers.add("_fold")
      return f"_fold({op}, {dt if r.dtype is not None or not local.search(dt) else 'None'}, {src})"
    if r.dtype is not None: return f"_uop({op}, {dt}, {src}, {arg})"
    if r.op is Ops.VECTORIZE or r.op is None and Ops.VECTORIZE in self.rule.opvars.get(r.opvar, ()):  # type: ignore[arg-type]
      dt = next((d for s in r.src if (d := self.dtype_of(s)) is not None), "None")
    if local.search(dt): dt = "None"
    self.c.helpers.add("_comp")
    return f"_comp({op}, {dt}, {src}, {arg})"

def _result_names(r: Result) -> set[str]:
  """The names a result reads from the rule (a comprehension's own names are not among them)."""
  if isinstance(r, Ref): return {r.name}
  if isinstance(r, TupleResult): return _comp_names(r.comp, set().union(*(_result_names(e) for e in r.entries if e is not None)))
  if isinstance(r, Splice): return {r.name}
  if isinstance(r, Update): return {r.name}.union(*(e.names for e in r.fields.values()))
  if isinstance(r, PyResult): return set(r.expr.names)
  if isinstance(r, Cond): return set(r.test.names) | _result_names(r.then) | _result_names(r.other)
  if isinstance(r, Seq): return _comp_names(r.comp, _result_names(r.elem))
  if isinstance(r, Construct):
    out = set().union(*(_result_names(s) for s in r.src)) if r.src else set()
    for e in (r.dtype, r.arg):
      if e is not None: out |= set(e.names)
    return _comp_names(r.comp, out)
  return set()

def _comp_names(c, inner: set[str]) -> set[str]:
  if c is None: return inner
  return (inner | {n for e in c.exprs() for n in e.names}) - c.bound

# module-level helpers, emitted only in modules that use them (RAISING: those that raise RewriteError)
RAISING = {"_per_source", "_comp"}
HELPERS = {
  "_local_src": """
def _local_src(value, dtype):
  # a comprehension's name among an ALU op's sources: a node as it is, a number a constant of the operands' dtype
  return value if value.__class__ is UOp else _iconst(dtype, value) if value.__class__ is int else _as_src(value, dtype)
""",
  "_iconst": """
_INT_RANGE = {d: (dtypes.min(d), dtypes.max(d)) for d in dtypes.all() if dtypes.is_int(d)}
def _iconst(dtype, value: int):
  # the node UOp.const(dtype, value) makes: an int that fits an int dtype is that int, with no conversion to do
  if (r := _INT_RANGE.get(dtype)) is not None and r[0] <= value <= r[1]: return _uop(Ops.CONST, dtype, (), value)
  return _const(dtype, value)
""",
  "_fold": """
def _fold(op: Ops, dtype, srcs: tuple):
  # an associative op over any number of sources, nested from the left: ((s0 op s1) op s2) ...; one source is itself
  if not srcs: raise ValueError(f"{op} over no sources: a fold needs at least one")
  out = srcs[0]
  for s in srcs[1:]: out = _uop(op, dtype or out.dtype, (out, s), None)
  return out
""",
  "_entry": """
def _entry(value, dtype):
  # a {python} entry of a tuple result: a number is a constant of its source's dtype; a node or None is as it is
  return _const(dtype, value) if value.__class__ in _NUMBERS else value
""",
  "_comp": """
def _comp(op: Ops, dtype, srcs: tuple, arg):
  # a constructor whose sources come from a comprehension: an unknown dtype is its first source's; a VECTORIZE has a lane per source
  if dtype is None:
    if not srcs: raise RewriteError(f"a comprehension gave {op} no sources, so its dtype can't be inferred: write it")
    dtype = srcs[0].dtype
  return _uop(op, dtype.vec(len(srcs)) if op is Ops.VECTORIZE else dtype, srcs, arg)
""",
  "_per_source": """
def _per_source(result, u: UOp, rule: Rule):
  # a helper's result in a rule set that returns per-source: a tuple with a node (or None) for each source of u
  if result.__class__ is list: result = tuple(result)
  if result.__class__ is not tuple or len(result) != len(u.src):
    raise RewriteError(f'{rule.origin}: {rule.text}: the result must be a tuple of {len(u.src)} entries, one per source, '
                       f'not {type(result).__name__} {result!r:.200}')
  if any(x is not None and x.__class__ is not UOp for x in result):
    result = tuple(_entry(x, s.dtype) for x, s in zip(result, u.src))
    if any(x is not None and x.__class__ is not UOp for x in result):
      raise RewriteError(f'{rule.origin}: {rule.text}: each entry must be a node, a number or None, not {result!r:.200}')
  return result
""",
}
