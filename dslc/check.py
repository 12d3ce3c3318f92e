"""Checks on the rule IR before emitting: arity, unbound names, duplicates, rules that can never fire, dtypes a result
can't infer. Every problem is a Diagnostic; all of them are reported together.
"""
from __future__ import annotations
import ast, dataclasses, difflib, functools, glob, importlib, math, os, re
from runtime.ops import ARITY, Ops
from runtime.uop import UOp
from dslc.diagnostics import Diagnostic, did_you_mean
from dslc import shadow
from dslc.shadow import ShadowIndex, subsumes
from dslc.typecheck import type_problems
from dslc.guards import problems as guard_problems
from dslc.infer import DtypeInference, plain_names
from dslc.ir import (CallResult, Cond, Construct, Lit, Pat, PyResult, Ref, Result, Rule, RuleFile, RuleSet, Seq, Span, Splice, TupleResult, Update,
                     fires_when_guards_hold, is_fold, is_unconditional)
from dslc.lang import BUILTINS, GENERATED_NAMES, PRELUDE_NAMES
from dslc.pyinfo import Member, class_members

def check_file(rf: RuleFile) -> list[Diagnostic]:
  c = Checker(rf)
  c.run()
  # a problem inside a named pattern is found in every rule that uses it: report it once, where it is
  return list(dict.fromkeys(c.diags))

def bound_at(r: Rule, name: str) -> Span:
  """Where to look for a capture's name: the line that binds it, in the rule or in the named pattern (`let`) it came from."""
  for x in r.pattern.walk():
    if name in (x.name, x.arg_name, x.splice) and x.span is not None and x.span.file == r.span.file: return Span(r.span.file, x.span.line, 1)
  return r.span

class Checker:
  def __init__(self, rf: RuleFile):
    self.rf = rf
    self.known: set[str] = set()
    self.diags: list[Diagnostic] = []
    self.lines = rf.source.split("\n")
    self.imported: set[str] = set()
    self.objects: dict[str, object] = {}   # imported name -> the object (a helper, a class)
    self.undeclared: set[str] = set()      # rule sets reported for reading a ctx they do not declare
    self.used: set[str] = set()
    self.splices: set[str] = set()   # of the rule being checked: `rest*` names, and node captures
    self.nodes: set[str] = set()
    self.seqs: set[str] = set()        # of the rule being checked: `where` names bound to sequences
    self.spliceable: set[str] = set()  # and those a result may splice (sequences, {python} and helper values)

  def error(self, message: str, span: Span | None, name: str | None = None) -> None:
    line, col = (span.line, span.col) if span is not None else (1, 1)
    if name is not None: line, col = self.find(name, line, col)
    # a UPat's span names the Python file it was written in; a .rules span names the file itself
    self.diags.append(Diagnostic(span.file if span is not None and span.file else self.rf.path, line, col, message))

  def find(self, name: str, line: int, col: int) -> tuple[int, int]:
    """The position of the identifier `name` at or after (line, col), for a caret under it."""
    pat = re.compile(rf"(?<![A-Za-z0-9_.]){re.escape(name)}(?![A-Za-z0-9_])")
    for i in range(line - 1, min(line + 20, len(self.lines))):
      text = self.lines[i].split("#")[0]
      m = pat.search(text, col - 1 if i == line - 1 else 0)
      if m: return i + 1, m.start() + 1
    return line, col

  def run(self) -> None:
    self.check_imports()
    self.check_contexts()
    self.used = {n for rs in self.rf.rulesets for r in rs.rules for n in _expr_names(r)}  # what guards and results read
    names = {rs.name: rs for rs in self.rf.rulesets}
    for rs in self.rf.rulesets:
      self.check_ruleset_name(rs)
      if rs.compose is not None:
        for part in rs.compose:
          if part not in names and part not in self.imported: self.error(f"unknown ruleset '{part}'", rs.span, part)
        kinds = {names[p].returns: p for p in rs.compose if p in names}
        if len(kinds) > 1:
          (k1, p1), (k2, p2) = sorted(kinds.items())[:2]
          self.error(f"can't compose '{p1}' (returns {_KINDS[k1]}) with '{p2}' (returns {_KINDS[k2]})", rs.span, p2)
        for p in rs.compose:
          # a part with parameters is instantiated with the composed set's parameters of the same names
          if p in names and (missing := [c for c in names[p].caps if c not in rs.caps]):
            self.error(f"'{p}' takes ({', '.join(names[p].caps)}): declare {'it' if len(missing) == 1 else 'them'} here too, as "
                       f"`ruleset {rs.name}({', '.join(names[p].caps)}) = ...`", rs.span, p)
        continue
      self.check_params(rs)
      seen: dict[str, Rule] = {}
      unconditional = ShadowIndex()
      guarded: dict[str, list[tuple[Rule, frozenset[str]]]] = {}   # pattern -> earlier rules that fire whenever their guards hold
      for r in rs.rules:
        self.check_rule(r, rs)
        self.check_ctx(r, rs)
        # the same text under other `for` ops is another rule: (op x 0) in `for op in ADD` and in `for op in OR`
        key = _normal(r.text) + "|" + ";".join(f"{v}={sorted(o.name for o in ops)}" for v, ops in sorted(r.opvars.items()))
        if key in seen:
          self.error(f"duplicate rule: the same as the rule at line {seen[key].span.line}", r.span)
          continue
        seen[key] = r
        # rules are tried by priority, then in file order: an earlier one here is tried first
        for u in unconditional.candidates(r.pattern):
          if shadow.covers(u.pattern, r.pattern):
            self.error(f"this rule never fires: the rule at line {u.span.line}{_first(u, r)} ({u.text}) matches everything it does, first", r.span)
            break
        else:
          # ISLE's overlap check, for guarded rules: the same pattern, and guards that hold whenever this rule's do
          key, guards = shadow.pattern_key(r.pattern), _guard_set(r)
          for u, ug in guarded.get(key, ()):
            if ug <= guards:
              self.error(f"this rule never fires: the rule at line {u.span.line}{_first(u, r)} ({u.text}) has its pattern, and guards that hold "
                         "whenever its guards do, and fires first", r.span)
              break
          if r.guards and fires_when_guards_hold(r): guarded.setdefault(key, []).append((r, guards))
        if is_unconditional(r): unconditional.add(r)

  def check_imports(self) -> None:
    from rules import stale_allowed  # a module built from a .rules file being rebuilt is read for its names, stale or not
    for module, names, span in self.rf.imports:
      try:
        with stale_allowed(): mod = importlib.import_module(module)
      except Exception as e:  # noqa: BLE001 - any failure to import is the user's to fix
        self.error(f"can't import '{module}': {type(e).__name__}: {e}", span, module)  # the caret under the module name
        self.imported |= set(names)  # reported once here, not again at every use
        continue
      for n in names:
        if not hasattr(mod, n): self.error(f"'{module}' has no '{n}'{did_you_mean(n, [x for x in vars(mod) if not x.startswith('_')])}", span, n)
        else: self.objects[n] = getattr(mod, n)
        self.imported.add(n)

  def check_ruleset_name(self, rs) -> None:
    # a ruleset is a global of the generated module: named like a name its code reads, it replaces that name for every rule
    if rs.name in PRELUDE_NAMES | GENERATED_NAMES or rs.name in self.imported:
      self.error(f"a ruleset can't be named '{rs.name}': the generated code uses that name", rs.span, rs.name)
    elif rs.name in BUILTINS and rs.name in self.used:
      self.error(f"a ruleset can't be named '{rs.name}' in this file: a guard or result uses the builtin {rs.name}()", rs.span, rs.name)

  def check_contexts(self) -> None:
    """The types a `ctx NAME: ...` declaration names (node, a builtin type, None, UOp, an imported class or a declared
    context), and the classes it says implement it (`ctx NAME(Class, ...): ...`, or NAME itself when it is an imported class):
    each must have every member declared, methods taking the arguments declared (`stats` counts them as helper code)."""
    known = CTX_TYPES | self.imported | set(self.rf.contexts)
    for decl in self.rf.contexts.values():
      for m in decl.members.values():
        if m.type not in known:
          self.error(f"unknown type '{m.type}' for {'indexing' if m.kind == 'index' else repr(m.name)} of context '{decl.name}': "
                     f"{', '.join(sorted(CTX_TYPES))}, an imported class or a declared context{did_you_mean(m.type, known)}", m.span, m.type)
      impls = decl.impls or ((decl.name,) if isinstance(self.objects.get(decl.name), type) else ())
      for c in decl.impls:
        if c not in self.imported: self.error(f"'{c}' is not imported: the classes implementing context '{decl.name}' come from a helper module "
                                              f"(`from rules.MODULE import {c}`)", decl.span, c)
        elif c in self.objects and not isinstance(self.objects[c], type): self.error(f"'{c}' is not a class", decl.span, c)
      for c in impls:
        if isinstance(cls := self.objects.get(c), type): self.check_implements(decl, c, class_members(cls))

  def check_implements(self, decl, cname: str, members: dict[str, Member]) -> None:
    for m in decl.members.values():
      has = members.get("__getitem__" if m.kind == "index" else m.name)
      what = "indexing" if m.kind == "index" else f"'{m.name}'"
      head = f"context '{decl.name}' declares {what}, but"
      if m.kind == "index":
        if not hasattr(self.objects[cname], "__getitem__"): self.error(f"{head} class {cname} has none", m.span)
      elif has is None: self.error(f"{head} class {cname} has no '{m.name}'{did_you_mean(m.name, members)}", m.span)
      elif m.kind == "method" and has.kind != "method": self.error(f"{head} {cname}.{m.name} is a field, not a method", m.span)
      elif m.kind == "method" and not (has.min_args <= len(m.params) and (has.max_args is None or len(m.params) <= has.max_args)):
        self.error(f"context '{decl.name}' declares {m.name}({', '.join(m.params)}), but {cname}.{m.name} takes {_args_text(has)}", m.span)

  def check_params(self, rs: RuleSet) -> None:
    ctx_type = rs.params.get("ctx")
    if ctx_type is not None and ctx_type not in ("UOp", "None") and ctx_type not in CTX_BUILTINS and ctx_type not in self.imported and \
       ctx_type not in self.rf.contexts:
      self.error(f"unknown type '{ctx_type}' for ctx: UOp, None (no ctx), a context declared with `ctx {ctx_type}: ...`, or a class imported "
                 f"with `from rules.MODULE import {ctx_type}`{did_you_mean(ctx_type, self.rf.contexts)}; or a builtin type "
                 f"({', '.join(CTX_BUILTINS)})",
                 rs.span, ctx_type)
    elif ctx_type in self.objects and ctx_type not in self.rf.contexts and not isinstance(self.objects[ctx_type], type):
      self.error(f"ctx's type '{ctx_type}' is not a class: a class imported from a helper module, or a context declared with "
                 f"`ctx {ctx_type}: ...`", rs.span, ctx_type)
    for p in rs.caps:
      t = rs.params[p]
      if t is not None and t != "UOp" and t not in self.imported and t not in BUILTINS:
        self.error(f"unknown type '{t}' for parameter '{p}': a builtin type, UOp, or a class imported with `from rules.MODULE import {t}`",
                   rs.span, t)
      elif p in PRELUDE_NAMES | GENERATED_NAMES | self.imported | BUILTINS & self.used:
        self.error(f"a parameter can't be named '{p}': the generated code or a guard uses that name", rs.span, p)

  def check_rule(self, r: Rule, rs: RuleSet | None = None) -> None:
    errors_before = len(self.diags)
    n_orders = count_variants(r.pattern)
    if n_orders > MAX_VARIANTS:
      # each commutative node doubles the source orders the generated code tries: 2**depth functions' worth of code
      self.error(f"this pattern has {n_orders} source orders (commutative ops match both ways), more than {MAX_VARIANTS}: "
                 "write some in the order they appear, with '!' as in (ADD! x y)", r.span)
      return
    node_names, arg_names = set(), set()
    self.check_pattern(r.pattern, node_names, arg_names, r, top=True)
    for n in node_names & arg_names: self.error(f"'{n}' is bound both to a node and to an arg", bound_at(r, n), n)
    counts = _splice_counts(r.pattern)
    splices = list(counts)
    for n in sorted(set(splices) & (node_names | arg_names) | {x for x, k in counts.items() if k > 1}):
      self.error(f"'{n}*' binds the other sources of a node: its name can't be bound again in the pattern", bound_at(r, n), n)
    self.splices, self.nodes = set(splices), node_names
    # `where` names that hold several nodes (a sequence) or may (a {python} value, a helper's): those a result can splice
    self.seqs = {b.name for b in r.bindings if isinstance(b.value, Seq)}
    self.spliceable = self.seqs | {b.name for b in r.bindings if isinstance(b.value, (PyResult, CallResult))}
    arg_names = arg_names | self.splices  # for the checks below, a tuple of sources is a plain value as an arg is
    # captures are locals of a function shared by every rule of that op: one named like a helper, a builtin or a name of
    # the generated module makes that name local to the whole function, and other rules fail with UnboundLocalError
    for n in sorted((node_names | arg_names) & (PRELUDE_NAMES | GENERATED_NAMES | self.imported | BUILTINS & self.used) - {"ctx"}):
      what = "an imported helper" if n in self.imported else "a builtin" if n in BUILTINS else "a name of the generated code"
      self.error(f"'{n}' can't be a capture name: it is {what}", bound_at(r, n), n)
    # the generated code's own locals and globals start with '_' (_u, _u_0, _r, _f0, _const, ...); the .rules parser
    # already refuses such names, a UPat(name=...) reaches here
    for n in sorted(x for x in node_names | arg_names if x.startswith("_")):
      self.error(f"capture names can't start with '_' ('{n}')", bound_at(r, n), n)
    # a for variable is bound only where the pattern matches an op with it, outside a repeated pattern (whose matching
    # runs in a function of its own); used anywhere else it is a NameError at rewrite time
    bound_ops = _matched_opvars(r.pattern)
    caps = set(rs.caps) if rs is not None else set()
    for n in sorted((node_names | arg_names) & caps):
      self.error(f"'{n}' is a parameter of the rule set, not a capture name", bound_at(r, n), n)
    known = node_names | arg_names | bound_ops | PRELUDE_NAMES | BUILTINS | self.imported | caps
    self.known = known | {b.name for b in r.bindings}   # what an unbound name may be a typo of
    for x in r.pattern.walk():
      if x.arg_expr is None: continue
      # compared when the node is tested, before any capture is bound: constants only
      if captured := sorted(x.arg_expr.names & (node_names | arg_names | bound_ops)):
        self.error("an arg pattern is a literal ([0], [(1, 2)], ...), a name to bind the arg to ([c]), or an expression of constants "
                   f"([Invalid], [1 << 32]): '{captured[0]}' is a capture (bind the arg, [c], and compare in a guard)", x.arg_expr.span, captured[0])
      for n in sorted(x.arg_expr.names - known):
        self.error(f"'{n}' in an arg pattern is a named constant, and it is not imported: add it to a `from rules.MODULE import` line "
                   "(a lower-case name binds the arg instead)", x.arg_expr.span, n)
    where_names = {b.name for b in r.bindings}
    bound_later = {g.binds for g in r.guards if g.binds}
    self.known |= bound_later
    for g in r.guards:
      for n in sorted(g.names - known):
        if n in where_names: self.error(f"'{n}' is bound by `where`, after the guards: a guard can't read it", g.span, n)
        elif n in bound_later: self.error(f"'{n}' is read before its `{n} := ...`: a guard reads the names bound in the guards before it", g.span, n)
        else: self.error(self.unbound(n, r, "a guard"), g.span, n)
      # `d := f(x)`: a name for the guards after it, the `where` values and the result
      if (b := g.binds) is not None:
        if b in node_names | arg_names | bound_ops: self.error(f"'{b}' is already bound by the pattern", g.span, b)
        elif b in known: self.error(f"'{b}' is bound twice by `:=`", g.span, b)
        elif b in where_names: self.error(f"'{b}' is bound both by `:=` and by `where`", g.span, b)
        elif b in caps: self.error(f"'{b}' is a parameter of the rule set, not a name to bind", g.span, b)
        elif b in PRELUDE_NAMES | GENERATED_NAMES | self.imported | BUILTINS & self.used:
          self.error(f"'{b}' can't be bound by `:=`: the generated code or a guard uses that name", g.span, b)
        known = known | {b}
    # `where` names: each usable by the ones after it and by the result
    for b in r.bindings:
      if isinstance(b.value, TupleResult): self.error("a tuple can only be a whole result, not a `where` value", b.value.span)
      else: self.check_result(b.value, r, known, set(r.opvars))
      if b.name in node_names | arg_names | bound_ops: self.error(f"'{b.name}' is already bound by the pattern", b.span, b.name)
      elif b.name in caps: self.error(f"'{b.name}' is a parameter of the rule set, not a `where` name", b.span, b.name)
      elif b.name in PRELUDE_NAMES | GENERATED_NAMES | self.imported | BUILTINS & self.used:
        self.error(f"'{b.name}' can't be a `where` name: the generated code or a guard uses that name", b.span, b.name)
      known = known | {b.name}
    self.check_result(r.result, r, known, set(r.opvars))
    used = _result_refs(r.result).union(*(_result_refs(b.value) for b in r.bindings))
    for b in r.bindings:
      if b.name not in used: self.error(f"'{b.name}' is bound by `where` but never used", b.span, b.name)
    if rs is not None and rs.params.get("ctx") not in ("UOp", "None"):  # None: check_ctx says ctx is not to be used at all
      for ref in [x for v in [r.result, *(b.value for b in r.bindings)] for x in _node_refs(v)]:
        if ref.name == "ctx":
          self.error(f"ctx is used as a node, but rule set '{rs.name}' does not declare it one: write `ruleset {rs.name}(ctx: UOp)`", ref.span, "ctx")
          break
    if isinstance(r.result, TupleResult): self.check_per_source(r.result, r)
    # the dtypes the result's nodes must infer
    inference = DtypeInference(r, plain_names(first_variant(r.pattern)))
    for b in r.bindings:
      if (problem := inference.first_problem(b.value)) is not None: self.error(problem, b.value.span)
    if (problem := inference.first_problem(r.result)) is not None: self.error(problem, r.result.span if hasattr(r.result, "span") else r.span)
    self.check_attributes(r, node_names)
    # names on dtypes, attributes of dtypes and args, helpers' arguments
    for message, span, name in guard_problems(r, _exprs(r), self.objects):
      if name.startswith("."): self.attribute_error(message, span, name[1:])
      else: self.error(message, span, name)
    # dtypes, once the rule is otherwise sound
    if len(self.diags) == errors_before:
      for message, span in type_problems(r): self.error(message, span or r.span)

  def check_ctx(self, r: Rule, rs: RuleSet) -> None:
    """What a rule reads of ctx against what its rule set declares: `ctx: None`, none of it; `ctx: UOp`, a node's attributes;
    `ctx: dict` (a builtin type) or an imported class, its public members; `ctx: NAME` of a `ctx NAME: ...` declaration,
    the members declared only. Methods are called with the number of arguments they take. A rule set that reads ctx
    must declare it."""
    ctx_type = rs.params.get("ctx")
    if ctx_type is None:
      as_node = any(ref.name == "ctx" for v in [r.result, *(b.value for b in r.bindings)] for ref in _node_refs(v))  # check_rule says it
      if "ctx" in _expr_names(r) and not as_node and rs.name not in self.undeclared:
        self.undeclared.add(rs.name)
        self.error(f"rule set '{rs.name}' reads ctx but does not say what it is: declare it, `ruleset {rs.name}(ctx: TYPE)`, TYPE one of "
                   "UOp, a builtin type (dict, str, ...), a class imported from a helper module, a context declared by `ctx NAME: ...`",
                   r.span, "ctx")
      return
    if ctx_type == "None":
      if "ctx" in _expr_names(r):
        self.error(f"'ctx' is used, but rule set '{rs.name}' declares `ctx: None` (it reads no ctx): declare what it is, as "
                   f"`ruleset {rs.name}(ctx: UOp)` or a context", r.span, "ctx")
      return
    decl = self.rf.contexts.get(ctx_type)
    if decl is not None:
      members = {m.name: Member(m.kind, len(m.params), len(m.params)) for m in decl.members.values() if m.kind != "index"}
      what, add = f"context '{ctx_type}' declares no", f" (add it to `ctx {ctx_type}: ...`)"
      indexable = "[]" in decl.members
    else:
      cls = UOp if ctx_type == "UOp" else CTX_BUILTINS.get(ctx_type) or self.objects.get(ctx_type)
      if not isinstance(cls, type): return  # an unknown type: check_params reported it
      kind = "a " + ctx_type if ctx_type in CTX_BUILTINS or ctx_type == "UOp" else ctx_type
      members, what, add = class_members(cls), f"ctx ({kind}) has no attribute", ""
      indexable = hasattr(cls, "__getitem__")
    for e in _exprs(r):
      try: tree = ast.parse(e.text, mode="eval")
      except SyntaxError: continue
      calls = {id(n.func): len(n.args) + len(n.keywords) for n in ast.walk(tree) if isinstance(n, ast.Call)}
      span = e.span or r.span
      for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "ctx":
          m = members.get(n.attr)
          if m is None:
            listed = f": it declares {', '.join(members) or 'no attribute'}" if decl is not None else ""
            self.attr_error(f"{what} '{n.attr}'{did_you_mean(n.attr, members)}{listed}{add}", span, n.attr)
          elif m.kind == "method" and id(n) in calls and not (m.min_args <= calls[id(n)] and (m.max_args is None or calls[id(n)] <= m.max_args)):
            names = f" ({', '.join(decl.members[n.attr].params)})" if decl is not None else ""
            self.attr_error(f"ctx.{n.attr} takes {_args_text(m)}{names}, this call gives it {calls[id(n)]}", span, n.attr)
          elif m.kind == "field" and id(n) in calls and decl is not None:
            kind = f"a field of context '{ctx_type}' ({n.attr}: {decl.members[n.attr].type})" if decl is not None else "a field"
            self.attr_error(f"ctx.{n.attr} is {kind}, not a method", span, n.attr)
        elif isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id == "ctx" and not indexable:
          if decl is not None: self.error(f"context '{ctx_type}' declares no indexing: add `[x] -> type` to `ctx {ctx_type}: ...`", span, "ctx")
          else: self.error(f"ctx ({ctx_type}) has no indexing", span, "ctx")

  def attr_error(self, message: str, span: Span, attr: str) -> None:
    """An error with its caret under `attr` of the first `ctx.attr` at or after span."""
    self._error_at(rf"(?<![A-Za-z0-9_])ctx\s*\.\s*({re.escape(attr)})(?![A-Za-z0-9_])", message, span)

  def attribute_error(self, message: str, span: Span, attr: str) -> None:
    """An error with its caret under the first `.attr` at or after span."""
    self._error_at(rf"\.\s*({re.escape(attr)})(?![A-Za-z0-9_])", message, span)

  def _error_at(self, pattern: str, message: str, span: Span) -> None:
    """An error with its caret at group 1 of the first match of `pattern` at or after span (within 20 lines), else at span."""
    pat = re.compile(pattern)
    for i in range(span.line - 1, min(span.line + 20, len(self.lines))):
      m = pat.search(self.lines[i].split("#")[0], span.col - 1 if i == span.line - 1 else 0)
      if m:
        self.diags.append(Diagnostic(span.file or self.rf.path, i + 1, m.start(1) + 1, message))
        return
    self.error(message, span)

  def check_attributes(self, r: Rule, nodes: set[str]) -> None:
    """`x.vmn` where x is a node: an AttributeError at rewrite time, so an error here (with the closest name)."""
    for e in _exprs(r):
      try: tree = ast.parse(e.text, mode="eval")
      except SyntaxError: continue
      for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in nodes and n.attr not in UOP_ATTRS:
          close = difflib.get_close_matches(n.attr, sorted(UOP_ATTRS), n=1)
          self.error(f"a node has no attribute '{n.attr}'" + (f" (did you mean '{close[0]}'?)" if close else ""), e.span or r.span, n.attr)

  def check_comp(self, c, r: Rule, known: set[str]) -> None:
    seen: frozenset[str] = frozenset()
    for clause in c.clauses():
      # a clause's iter reads the targets of the clauses before it; its condition, those and its own
      for n in sorted(clause.iter.names - known - seen): self.error(self.unbound(n, r, "the result"), clause.iter.span, n)
      seen = seen | comp_targets_of(clause)
      if clause.cond is not None:
        for n in sorted(clause.cond.names - known - seen): self.error(self.unbound(n, r, "the result"), clause.cond.span, n)

  def check_per_source(self, res: TupleResult, r: Rule) -> None:
    """A tuple has one entry per source of the node the pattern matches: that number must be known and equal."""
    if res.comp is not None: return  # known when the rule fires: checked then
    n, p = len(res.entries), r.pattern
    for q in p.alternatives or (p,):
      if q.rest is not None:
        self.error("a tuple result needs a fixed number of sources, but this pattern matches any number (with '...')", res.span)
        return
      if q.src is not None: want = {len(q.src)}
      elif q.ops is None: want = {-1}
      else: want = {ARITY.get(o, -1) for o in q.ops}
      if want == {n}: continue
      if -1 in want:
        what = "any op" if q.ops is None else sorted(o.name for o in q.ops if o not in ARITY)[0]
        self.error(f"a tuple result has one entry per source, and {what} has no fixed number of sources: write them in the pattern", res.span)
      elif len(want) > 1:
        counts = sorted(want)
        self.error(f"a tuple result has one entry per source, and the ops of this pattern take {', '.join(map(str, counts[:-1]))} or {counts[-1]} "
                   "sources: write them in the pattern, or split the rule", res.span)
      else:
        k = want.pop()
        self.error(f"this tuple has {n} entr{'y' if n == 1 else 'ies'}, but the node has {k} source{'s' if k != 1 else ''}: "
                   "one entry per source, '_' for none", res.span)
      return

  def check_pattern(self, p: Pat, nodes: set[str], args: set[str], r: Rule, top: bool) -> None:
    if p.name: nodes.add(p.name)
    if p.alternatives is not None:
      for a in p.alternatives: self.check_pattern(a, nodes, args, r, top)
      return
    if p.arg_name: args.add(p.arg_name)
    if p.ops is not None and p.src is not None:
      n = len(p.src)
      bad = sorted((o for o in p.ops if o in ARITY and (ARITY[o] != n if p.rest is None else ARITY[o] < n)), key=lambda o: o.value)
      if bad and len(bad) == len(p.ops):
        o = bad[0]
        self.error(f"{o.name} takes {ARITY[o]} source{'s' if ARITY[o] != 1 else ''}, this pattern gives it {n}{' or more' if p.rest else ''}", p.span)
    for s in p.src or (): self.check_pattern(s, nodes, args, r, False)
    if p.rest is not None:
      inner = p.rest.names()
      outer = r.pattern.names(skip=p.rest)
      for n in sorted(inner & outer): self.error(f"'{n}' inside a repeated pattern can't also be bound outside it", p.rest.span, n)
      self.check_pattern(p.rest, nodes, args, r, False)

  def unbound(self, n: str, r: Rule, where: str) -> str:
    if any(b.name == n for b in r.bindings) and where == "the result":
      return f"'{n}' is used before its `where`: a `where` value can use only the names bound before it"
    if n in r.opvars and n in _all_opvars(r.pattern):
      return (f"'{n}' is used in {where}, but the pattern matches an op with it only inside a repeated pattern (p...), "
              "which does not bind op variables")
    if n in r.opvars: return f"'{n}' is used in {where}, but the pattern matches no op with it: write ({n} ...) in the pattern"
    if (module := helper_module(n)) is not None:
      line = next((f"`from {m} import {', '.join(names)}`" for m, names, _ in self.rf.imports if m == module), None)
      add = f"add it to {line}" if line else f"add `from {module} import {n}` at the top of the file"
      return f"'{n}' is used in {where} but not imported: it is a helper of {module}; {add}"
    return f"'{n}' is used in {where} but never bound{did_you_mean(n, self.known - PRELUDE_NAMES - BUILTINS)}"

  def check_result(self, res: Result, r: Rule, known: set[str], opvars: set[str]) -> None:
    if isinstance(res, Ref):
      if res.name in opvars: self.error(f"'{res.name}' is an op, not a node: build one, as ({res.name} ...)", res.span, res.name)
      elif res.name in self.splices:
        self.error(f"'{res.name}' holds the other sources of a node: splice them into a node, as (OP x {res.name}*)", res.span, res.name)
      elif res.name in self.seqs and res.name in known:
        self.error(f"'{res.name}' is a sequence of nodes: splice it among a node's sources, as (OP x {res.name}*)", res.span, res.name)
      elif res.name not in known: self.error(self.unbound(res.name, r, "the result"), res.span, res.name)
    elif isinstance(res, Splice):
      if res.name in self.splices or res.name in self.spliceable and res.name in known: return
      if res.name in known: self.error(f"'{res.name}*' splices several nodes: sources a pattern bound with '{res.name}*', or a `where` sequence "
                                       f"([... for ...]); '{res.name}' is one value: write it without '*'", res.span, res.name)
      else: self.error(self.unbound(res.name, r, "the result"), res.span, res.name)
    elif isinstance(res, Seq):
      self.check_comp(res.comp, r, known)
      lits = [res.elem] if isinstance(res.elem, Lit) else [x for x in _branches(res.elem) if isinstance(x, Lit)]
      if lits: self.error("a literal in a sequence has no dtype to take: write it as a constant, (CONST:dtype [value])", lits[0].span or res.span)
      else: self.check_result(res.elem, r, known | res.comp.bound, opvars)
    elif isinstance(res, Cond):
      for n in sorted(res.test.names - known): self.error(self.unbound(n, r, "the result"), res.test.span, n)
      for x in (res.then, res.other):
        # a whole result's literal is a constant of the node it replaces; in a `where` or a sequence, of no known dtype
        if isinstance(x, Lit) and res is not r.result:
          self.error("a literal in a choice has no dtype to take: write it as a constant, (CONST:dtype [value])", x.span)
        elif not isinstance(x, Lit): self.check_result(x, r, known, opvars)
    elif isinstance(res, Update):
      if res.name in opvars or res.name not in known: self.error(self.unbound(res.name, r, "the result"), res.span, res.name)
      elif res.name != "ctx" and res.name not in self.nodes:
        self.error(f"'{res.name}' is not a node: only a node has fields to replace", res.span, res.name)
      for e in res.fields.values():
        for n in sorted(e.names - known): self.error(self.unbound(n, r, "the result"), e.span, n)
    elif isinstance(res, PyResult):
      for n in sorted(res.expr.names - known): self.error(self.unbound(n, r, "the result"), res.span, n)
    elif isinstance(res, Construct):
      if res.comp is not None:
        self.check_comp(res.comp, r, known)
        known = known | res.comp.bound
        # an associative op (ADD, MUL, AND, ...) folds any number of sources
        if res.op is not None and res.op in ARITY and not is_fold(res):
          self.error(f"{res.op.name} takes {ARITY[res.op]} source{'s' if ARITY[res.op] != 1 else ''}: a comprehension gives any number "
                     "(only an associative op, ADD, MUL, AND, OR, XOR or MAX, folds them)", res.span)
      if res.opvar is not None and res.opvar not in known: self.error(self.unbound(res.opvar, r, "the result"), res.span, res.opvar)
      fixed = sum(not isinstance(x, (Splice, Seq)) for x in res.src)
      if res.op is not None and res.op in ARITY and res.comp is None and not is_fold(res) and (ARITY[res.op] != fixed if fixed == len(res.src)
                                                                                              else ARITY[res.op] < fixed):
        more = "" if fixed == len(res.src) else " or more"
        self.error(f"{res.op.name} takes {ARITY[res.op]} source{'s' if ARITY[res.op] != 1 else ''}, this result gives it {fixed}{more}", res.span)
      for e in (res.dtype, res.arg):
        if e is not None:
          for n in sorted(e.names - known): self.error(self.unbound(n, r, "the result"), e.span, n)
      for s in res.src: self.check_result(s, r, known, opvars)
    elif isinstance(res, TupleResult):
      if res.comp is not None:
        self.check_comp(res.comp, r, known)
        known = known | res.comp.bound
      for e in res.entries:
        if e is not None: self.check_result(e, r, known, opvars)
    elif isinstance(res, CallResult):
      for n in res.params:
        if n not in known: self.error(f"the function's parameter '{n}' is not a capture of the pattern", res.span)

MAX_VARIANTS = 256
_KINDS = {"node": "nodes", "per-source": "per-source tuples"}

# the builtin types a rule set's ctx may be (`ruleset substitute(ctx: dict)`)
CTX_BUILTINS = {t.__name__: t for t in (dict, str, list, tuple, set, frozenset, int, float, bool)}

def _args_text(m: Member) -> str:
  n = "any number of" if m.max_args is None and m.min_args == 0 else f"{m.min_args} or more" if m.max_args is None else \
      str(m.min_args) if m.min_args == m.max_args else f"{m.min_args} to {m.max_args}"
  return f"{n} argument{'' if n == '1' else 's'}"

# the types a `ctx NAME: ...` declaration may give its members (besides imported classes and declared contexts)
CTX_TYPES = frozenset({"node", "UOp", "bool", "int", "float", "str", "dtype", "tuple", "list", "dict", "set", "any", "None"})

# what a guard or result may read of a node (UOp's public attributes, methods and properties)
UOP_ATTRS = frozenset(a for a in dir(UOp) if not a.startswith("_"))

def _exprs(r: Rule) -> list:
  """Every Python expression of a rule: guards, args, dtypes, {python} results, where values, update fields, comprehensions."""
  out = list(r.guards)
  stack: list = [r.result, *(b.value for b in r.bindings)]
  while stack:
    x = stack.pop()
    if isinstance(x, PyResult): out.append(x.expr)
    elif isinstance(x, Construct):
      out += [e for e in (x.dtype, x.arg) if e is not None]
      stack += x.src
    elif isinstance(x, TupleResult): stack += [e for e in x.entries if e is not None]
    elif isinstance(x, Update): out += list(x.fields.values())
    elif isinstance(x, Seq): stack.append(x.elem)
    elif isinstance(x, Cond):
      out.append(x.test)
      stack += [x.then, x.other]
    if isinstance(x, (Construct, TupleResult, Seq)) and x.comp is not None: out += x.comp.exprs()
  return out

def _result_refs(r: Result) -> set[str]:
  """The names a result (or a `where` value) reads."""
  out: set[str] = set()
  stack: list = [r]
  while stack:
    x = stack.pop()
    if isinstance(x, Ref): out.add(x.name)
    elif isinstance(x, PyResult): out |= x.expr.names
    elif isinstance(x, Construct):
      out |= {n for e in (x.dtype, x.arg) if e is not None for n in e.names}
      stack += x.src
    elif isinstance(x, TupleResult): stack += [e for e in x.entries if e is not None]
    elif isinstance(x, Splice): out.add(x.name)
    elif isinstance(x, Update): out |= {x.name}.union(*(e.names for e in x.fields.values()))
    elif isinstance(x, CallResult): out |= set(x.params)
    elif isinstance(x, Seq): stack.append(x.elem)
    elif isinstance(x, Cond):
      out |= x.test.names
      stack += [x.then, x.other]
    if isinstance(x, (Construct, TupleResult, Seq)) and x.comp is not None: out |= {n for e in x.comp.exprs() for n in e.names}
  return out

def _expr_names(r: Rule) -> set[str]:
  """Every name the guards, the `where` values and the result of a rule read."""
  return {n for g in r.guards for n in g.names}.union(_result_refs(r.result), *(_result_refs(b.value) for b in r.bindings))

def comp_targets_of(c) -> frozenset[str]:
  """The names one clause's targets bind (c.bound holds those of the clauses after it too)."""
  return c.bound - (c.inner.bound if c.inner is not None else frozenset())

def _branches(r: Result) -> list[Result]:
  """The results a choice may give (a chain of them, `A if c else B if d else C`, flattened); any other result is its own."""
  return _branches(r.then) + _branches(r.other) if isinstance(r, Cond) else [r]

def _node_refs(r: Result) -> list[Ref]:
  """The names a result uses as nodes: itself, a tuple's entries, a constructor's sources."""
  if isinstance(r, Ref): return [r]
  if isinstance(r, TupleResult): return [x for e in r.entries if e is not None for x in _node_refs(e)]
  if isinstance(r, Construct): return [x for e in r.src for x in _node_refs(e)]
  if isinstance(r, Update): return [Ref(r.name, r.span)]
  if isinstance(r, Cond): return _node_refs(r.then) + _node_refs(r.other)
  if isinstance(r, Seq): return _node_refs(r.elem)
  return []

def _guard_set(r: Rule) -> frozenset[str]:
  return frozenset(" ".join(g.text.split()) + (f" bound to {g.binds}" if g.binds else "") for g in r.guards)

def _first(u: Rule, r: Rule) -> str:
  # the shadowing rule comes later in the file: its priority puts it first
  return f" (priority {u.priority})" if u.priority != r.priority else ""

def _splice_counts(p: Pat) -> dict[str, int]:
  """How many times each `rest*` name is bound on one way of matching p: alternatives (an alternation, `CAST?`) are other
  ways, so a name in two of them is bound once."""
  if p.alternatives is not None:
    out: dict[str, int] = {}
    for a in p.alternatives:
      for n, k in _splice_counts(a).items(): out[n] = max(out.get(n, 0), k)
    return out
  out = {p.splice: 1} if p.splice else {}
  for s in (*(p.src or ()), *((p.rest,) if p.rest is not None else ())):
    for n, k in _splice_counts(s).items(): out[n] = out.get(n, 0) + k
  return out

def first_variant(p: Pat) -> Pat:
  """variants(p)[0] without building the others (their number is exponential in the commutative nodes)."""
  if p.alternatives is not None:
    v = first_variant(p.alternatives[0])
    return dataclasses.replace(v, name=v.name or p.name)
  src = tuple(first_variant(s) for s in p.src) if p.src is not None else None
  return dataclasses.replace(p, src=src, any_order=False, perm=tuple(range(len(src or ()))))

def count_variants(p: Pat) -> int:
  """An upper bound on len(emit.variants(p)), computed without building them (that is exponential in the depth)."""
  if p.alternatives is not None: return sum(count_variants(a) for a in p.alternatives)
  n = 1
  for s in p.src or (): n *= count_variants(s)
  if p.any_order and p.src is not None: n *= math.factorial(len(p.src))
  if p.rest is not None: n *= count_variants(p.rest)
  return n

def _matched_opvars(p: Pat) -> set[str]:
  """The for variables a pattern binds: those it matches an op with, outside repeated patterns."""
  return {x.opvar for x in p.walk(rest=False) if x.opvar}

def _all_opvars(p: Pat) -> set[str]: return {x.opvar for x in p.walk() if x.opvar}

@functools.cache
def _helper_names() -> dict[str, str]:
  """Top-level functions and tables of the hand-written modules under rules/: name -> module (`rules.symbolic_helpers`)."""
  out: dict[str, str] = {}
  rules_dir = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "rules")
  for path in sorted(glob.glob(os.path.join(rules_dir, "*.py"))):
    with open(path, encoding="utf-8") as f: text = f.read()
    if text.startswith("# Code generated"): continue
    module = "rules." + os.path.basename(path)[:-3]
    for m in re.finditer(r"^(?:def ([A-Za-z]\w*)\(|([A-Za-z]\w*)(?:\s*:[^=\n]*)?\s*=)", text, re.M): out.setdefault(m[1] or m[2], module)
  return out

def helper_module(name: str) -> str | None:
  """The module under rules/ that defines `name`, for "add `from rules.X import name`"."""
  return _helper_names().get(name)

def _normal(text: str) -> str: return " ".join(text.split())

__all__ = ["check_file", "subsumes", "ShadowIndex", "Ops"]
