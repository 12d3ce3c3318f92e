"""The results of .rules rules: Lark trees -> Result (ir.py): constructors, tuples, splices, updates, comprehensions, calls
and {python}. A mixin of the parser (parse.py): it reads the parser's state (the current rule set, the for scopes).
"""
from __future__ import annotations
from lark import Token, Tree
from runtime.dtype import DTYPE_NAMES
from runtime.ops import Ops
from dslc.expr import ExprBuilder, SourceError, comp_targets, literal_node_value, pos
from dslc.ir import Binding, Comprehension, Cond, Construct, Expr, Lit, PyResult, Ref, Result, Seq, Splice, TupleResult, Update
from dslc.diagnostics import did_you_mean
from dslc.lang import GROUPS
from dslc.parse_patterns import resolve_ops

UPDATE_FIELDS = ("op", "dtype", "arg", "src", "tag")

class ResultReader:
  """Reads results; FileParser supplies current, scopes, hoisted and span()."""
  def exprs(self) -> ExprBuilder:
    """An ExprBuilder for an expression of the result: a node built in it is hoisted into a `where` of its own."""
    return ExprBuilder(node=self.hoist_node)

  def hoist_node(self, t: Tree) -> str:
    """`f((NEG x))`, `u{src: ((ADD a 1), b)}`: the node is a hidden `where` binding, made before the part that reads it."""
    uname, rest = t.children
    kids = list(rest.children)
    cdt = kids.pop(0) if kids and isinstance(kids[0], Tree) and kids[0].data == "cdtype" else None
    if cdt is not None: carg = kids.pop(0)
    else: carg = kids.pop(0) if kids and isinstance(kids[0], Tree) and kids[0].data == "carg" else None
    node = self.construct(Tree("constructor", [uname, cdt, carg, *kids, None], meta=t.meta))
    name = f"_n{len(self.hoisted)}"
    self.hoisted.append(Binding(name, node, self.span(t), hidden=True))
    return name

  def check_hoisted(self, since: int, comp: Comprehension | None) -> None:
    """A node hoisted out of an expression is built before the result: it can't read a comprehension's names."""
    if comp is None: return
    for b in self.hoisted[since:]:
      if (bad := sorted(_reads(b.value) & comp.bound)):
        line, col = (b.span.line, b.span.col) if b.span is not None else (1, 1)
        raise SourceError(f"a node built inside an expression is made once, before the result: it can't read '{bad[0]}' of the comprehension "
                          "around it; make it a source (OP ... (NODE ...) for ...) or a sequence [(NODE ...) for ...]", line, col)
  def top_result(self, t) -> Result:
    """A rule's whole result: in a rule set that returns per-source, a tuple (or a helper's call giving one)."""
    per_source = self.current is not None and self.current.returns == "per-source"
    if isinstance(t, Tree) and t.data == "constructor" and per_source and self.tuple_head(t): return self.tuple_result(t)
    if isinstance(t, Tree) and t.data == "tresult":
      if not per_source:
        raise SourceError("a tuple result needs a rule set that returns one entry per source: declare it as `ruleset NAME returns per-source`",
                          *pos(t))
      return self.tuple_result(t)
    if isinstance(t, Tree) and t.data == "cond_term":
      if per_source: raise SourceError("a choice of tuples is two rules: write each with its guard", *pos(t))
      return self.value(t)
    r = self.result(t)
    if per_source and not isinstance(r, PyResult):
      raise SourceError(f"rule set '{self.current.name}' returns one entry per source: write the result as a tuple, "  # type: ignore[union-attr]
                        "as (x) or ((NEG ctx) _)", *pos(t))
    return r

  def tuple_head(self, t: Tree) -> bool:
    """A `(name ...)` or `(_ ...)` result is a tuple when `name` is not an op variable (and nothing follows the head but sources)."""
    opref, cdt, carg = t.children[:3]
    if cdt is not None or carg is not None: return False
    return opref.type == "ANYOP" or opref.type == "NAME" and not any(s[0] == str(opref) for s in self.scopes)

  def tuple_result(self, t: Tree) -> TupleResult:
    entries: list[Result | None] = []
    *items, comp = t.children
    if t.data == "constructor":
      head, items = t.children[0], list(t.children[3:-1])
      entries.append(None if head.type == "ANYOP" else Ref(str(head), self.span(head)))
    for x in items:
      if isinstance(x, Tree) and x.data in ("nothing", "none"): entries.append(None)
      elif isinstance(x, Tree) and (x.data == "tresult" or x.data == "constructor" and self.tuple_head(x)):
        hint = f" ('{x.children[0]}' is not an op variable)" if x.data == "constructor" and x.children[0].type == "NAME" else ""
        raise SourceError(f"a tuple's entry is a node or '_' (no value), not a tuple{hint}", *pos(x))
      else: entries.append(self.result(x))
    return TupleResult(entries, self.span(t), self.comp(comp))

  def value(self, t) -> Result:
    """A `where` value or a sequence's element: a result, a choice `A if C else B`, or (a `where` value) a sequence."""
    if isinstance(t, Tree) and t.data == "seq": return self.seq(t)
    if isinstance(t, Tree) and t.data == "cond_term":
      then, test, other = t.children
      e = self.exprs().build(test)
      e.span = self.span(test)
      return Cond(e, self.value(then), self.value(other), self.span(t))
    return self.result(t)

  def seq(self, t: Tree) -> Seq:
    """`[TERM for TARGETS in ITER if COND]`."""
    elem, comp = t.children
    since = len(self.hoisted)
    out = Seq(self.value(elem), self.comp(comp), self.span(t))  # type: ignore[arg-type]
    self.check_hoisted(since, out.comp)
    return out

  def result(self, t) -> Result:
    if isinstance(t, Token): raise SourceError(f"unexpected result {t!r}", *pos(t))
    k = t.data
    if k == "nothing": raise SourceError("'_' (no value) can only be an entry of a tuple result", *pos(t))
    if k == "splice":
      name = t.children[0]
      raise SourceError(f"'{name}*' (sources a pattern bound) can only be spliced among a node's sources, as (OP x {name}*)", *pos(t))
    if k == "update": return self.update(t)
    if k == "tresult": raise SourceError("a tuple can only be a whole result, not a source of a node", *pos(t))
    if k == "ref": return Ref(str(t.children[0]), self.span(t))
    if k in ("literal", "true", "false", "none"):
      v = literal_node_value(t)
      if v is None: raise SourceError("a rule can't result in None: leave the rule out, or return None from a helper", *pos(t))
      return Lit(v, self.span(t))
    if k == "constructor": return self.construct(t)
    if k in ("call", "term_attr", "pyexpr"):
      b = self.exprs()
      if k == "call": text = f"{t.children[0]}{b.args(t.children[1])})"; b.names.add(str(t.children[0])[:-1])  # noqa: E702
      elif k == "pyexpr": text = b.emit(t)[0]
      else: text = self.term_attr(t, b)
      return PyResult(Expr(text, frozenset(b.names), 10, self.span(t)), self.span(t))
    raise SourceError(f"unexpected result '{k}'", *pos(t))

  def term_attr(self, t: Tree, b: ExprBuilder) -> str:
    c = t.children
    b.names.add(str(c[0]))
    parts = [str(c[0])]
    i = 1
    while i < len(c):
      x = c[i]
      if x is None: i += 1; continue  # noqa: E702
      if isinstance(x, Token) and x.type == "CALL":
        args = c[i + 1] if i + 1 < len(c) else None
        parts.append(f".{x}{b.args(args)})")
        i += 2
      else:
        parts.append(f".{x}")
        i += 1
    return "".join(parts)

  def comp(self, t: Tree | None) -> Comprehension | None:
    if t is None: return None
    targets, bound = comp_targets(t.children[0])
    for n in sorted(bound - {"_"}): self.check_capture_name(n, t)
    it = self.exprs().build(t.children[1])
    it.span = self.span(t.children[1])
    cond = None
    if t.children[2] is not None:
      cond = self.exprs().build(t.children[2])
      cond.span = self.span(t.children[2])
    inner = self.comp(t.children[3])
    return Comprehension(targets, bound | (inner.bound if inner is not None else frozenset()), it, cond, self.span(t), inner)

  def construct(self, t: Tree) -> Construct:
    opref, cdt, carg, *srcs, comp = t.children
    op, opvar = None, None
    if opref.type == "NAME":
      if not any(s[0] == str(opref) for s in self.scopes): raise SourceError(f"unknown op variable '{opref}'", *pos(opref))
      opvar = str(opref)
    elif opref.type == "ANYOP": raise SourceError("a result needs a real op, not '_'", *pos(opref))
    else:
      if str(opref) not in Ops.__members__:
        hint = " (a group can't build a node)" if str(opref) in GROUPS else did_you_mean(str(opref), Ops.__members__)
        raise SourceError(f"unknown op '{opref}'{hint}", *pos(opref))
      op = Ops[str(opref)]
    dtype = None
    if cdt is not None:
      names = [str(x) for x in cdt.children if isinstance(x, Token) and x.type == "NAME"]
      call = next((x for x in cdt.children if isinstance(x, Token) and x.type == "CALL"), None)
      if call is not None:
        # `:dtypes.float32.vec(x.dtype.count)`: a dtype computed by a method call at the end
        b = self.exprs()
        args = b.args(cdt.children[-1])
        dtype = Expr(".".join(names) + f".{call}{args})", frozenset({names[0]}) | frozenset(b.names), 10, self.span(cdt))
      elif len(names) == 1 and names[0] in DTYPE_NAMES: dtype = Expr(f"dtypes.{names[0]}", frozenset({"dtypes"}), 1, self.span(cdt))
      elif len(names) == 1 and names[0] in self.where_names: dtype = Expr(names[0], frozenset(names), 1, self.span(cdt))  # a `where` dtype
      elif len(names) == 1: raise SourceError(f"unknown dtype '{names[0]}'{did_you_mean(names[0], DTYPE_NAMES)}", *pos(cdt))
      else: dtype = Expr(".".join(names), frozenset({names[0]}), 1, self.span(cdt))
    arg = None
    since = len(self.hoisted)
    if carg is not None:
      arg = self.exprs().build(carg.children[0])
      arg.span = self.span(carg)
    src = [Splice(str(s.children[0]), self.span(s)) if isinstance(s, Tree) and s.data == "splice" else
           self.seq(s.children[0]) if isinstance(s, Tree) and s.data == "seq_splice" else self.result(s) for s in srcs]
    if comp is not None and not srcs: raise SourceError("a comprehension repeats the sources written before its 'for': write them", *pos(comp))
    out = Construct(op, opvar, dtype, arg, src, self.span(t), self.comp(comp))
    self.check_hoisted(since, out.comp)
    return out

  def update(self, t: Tree) -> Update:
    """`x{field: value, ...}`: a bare dtype name is that dtype (as in (CAST:float32 ...)), a bare op name that op."""
    name = str(t.children[0])[:-1]
    fields: dict[str, Expr] = {}
    for f in t.children[1:]:
      if f is None: continue
      key, value = str(f.children[0]), f.children[1]
      if key not in UPDATE_FIELDS:
        raise SourceError(f"a node has no field '{key}' to replace: {', '.join(UPDATE_FIELDS)}{did_you_mean(key, UPDATE_FIELDS)}", *pos(f))
      if key in fields: raise SourceError(f"field '{key}' is given twice", *pos(f))
      bare = str(value.children[0]) if isinstance(value, Tree) and value.data == "name" else None
      if key == "dtype" and bare in DTYPE_NAMES: e = Expr(f"dtypes.{bare}", frozenset({"dtypes"}), 1)
      elif key == "op" and bare is not None and bare[:1].isupper():
        resolve_ops(bare, *pos(value))
        if bare not in Ops.__members__: raise SourceError(f"'{bare}' is a group of ops: a node gets one op", *pos(value))
        e = Expr(f"Ops.{bare}", frozenset({"Ops"}), 1)
      else: e = self.exprs().build(value)
      # sources are a tuple: anything else (a list, `(x,) + rest`) is made one
      if key == "src" and not (isinstance(value, Tree) and value.data == "tuple"): e.text = f"tuple({e.text})"
      e.span = self.span(value)
      fields[key] = e
    return Update(name, fields, self.span(t))

def _reads(r: Result) -> set[str]:
  """The names a result reads (to tell whether a hoisted node reads a comprehension's names)."""
  if isinstance(r, (Ref, Splice)): return {r.name}
  if isinstance(r, PyResult): return set(r.expr.names)
  if isinstance(r, Construct):
    return set().union(*(e.names for e in (r.dtype, r.arg) if e is not None), *(_reads(s) for s in r.src),
                       *([{n for e in r.comp.exprs() for n in e.names}] if r.comp is not None else []))
  if isinstance(r, Seq): return _reads(r.elem) | {n for e in r.comp.exprs() for n in e.names}
  if isinstance(r, Cond): return set(r.test.names) | _reads(r.then) | _reads(r.other)
  if isinstance(r, Update): return {r.name}.union(*(e.names for e in r.fields.values()))
  return set()
