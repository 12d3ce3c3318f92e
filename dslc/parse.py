"""The .rules front end: text -> items (split.py) -> Lark trees (grammar.lark) -> rule IR (ir.py), with names resolved.

Every problem becomes a Diagnostic with file:line:col; parsing goes on after an error, so one run reports them all.
"""
from __future__ import annotations
import hashlib, keyword, os, re
from functools import cache
from typing import Any
import lark
from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from runtime import kernel_cache, safe_files
from runtime.ops import Ops
from dslc.diagnostics import Diagnostic
from dslc.expr import ExprBuilder, SourceError, conjuncts, literal_value, pos
from dslc.ir import Binding, CtxDecl, CtxMember, Expr, Pat, Rule, RuleFile, RuleSet, Span
from dslc.lang import GENERATED_NAMES, PRELUDE_NAMES
from dslc.parse_patterns import NamedPattern, PatternReader, pattern_depth, resolve_ops
from dslc.parse_results import ResultReader
from dslc.split import MAX_DEPTH, split_items

@cache
def grammar() -> Lark:
  """The LALR parser. Building its tables takes ~0.2 s, so they are kept in the kernel cache folder (CACHE_DIR, default
  ~/.cache/rulegrad) keyed by the grammar's and Lark's versions; a missing or unreadable entry is rebuilt. Lark saves them
  as a pickle, which runs code when loaded: only a file this user wrote, in a folder only they can write, is loaded
  (runtime/kernel_cache.py checks both, docs/security.md)."""
  with open(os.path.join(os.path.dirname(__file__), "grammar.lark")) as f: text = f.read()
  options = {"start": "item", "parser": "lalr", "propagate_positions": True, "maybe_placeholders": True}
  key = hashlib.sha256(f"{text}|{lark.__version__}|{sorted(options.items())}".encode()).hexdigest()[:20]
  path = os.path.join(kernel_cache.cache_dir(), f"dslc-grammar-{key}.lark")
  try:
    with safe_files.open_trusted(path) as f: return Lark.load(f)
  except Exception:  # noqa: BLE001 - missing, another user's, truncated or from another Lark: build it again
    pass
  parser = Lark(text, **options)  # type: ignore[arg-type]
  try: safe_files.replace_file(path, parser.save)  # readers see the whole table or none
  except OSError: pass  # a read-only or full disk: parse without the cache
  return parser

# ---- the file ----

class FileParser(PatternReader, ResultReader):
  def __init__(self, path: str, source: str, display_path: str | None = None):
    self.path, self.source = display_path or path, source
    self.diags: list[Diagnostic] = []
    self.rulesets: list[RuleSet] = []
    self.imports: list[tuple[str, list[str], Span]] = []
    self.named: dict[str, NamedPattern] = {}
    self.let_guards: list[tuple[Any, dict[str, str]]] = []  # guards of the named patterns the pattern being read uses
    self.defining: str | None = None  # the named pattern being defined
    self.scopes: list[tuple[str, frozenset[Ops], Span]] = []
    self.current: RuleSet | None = None
    self.optionals: set[int] = set()  # ids of the alternation Pats `(OP? x)` made (a name can't bind them)
    self.contexts: dict[str, CtxDecl] = {}
    self.where_names: set[str] = set()  # of the rule being read
    self.hoisted: list[Binding] = []    # of the rule being read: the nodes built inside its result's expressions
    self.priority: tuple[int, Span] | None = None  # a `priority N` line waiting for its rule

  def error(self, message: str, line: int, col: int) -> None: self.diags.append(Diagnostic(self.path, line, col, message))
  def span(self, t) -> Span:
    line, col = pos(t)
    return Span(self.path, line, col)

  def parse(self) -> RuleFile:
    for item in split_items(self.source):
      if item.stray is not None:
        line, col, ch = item.stray
        if item.stray_opener is None: self.error(f"unbalanced '{ch}': nothing to close", line, col)
        else:
          oline, ocol, och = item.stray_opener
          self.error(f"unbalanced '{ch}': it does not match the '{och}' opened at {oline}:{ocol}", line, col)
        continue
      if item.too_deep is not None:
        self.error(f"brackets nested more than {MAX_DEPTH} deep: split the rule (a 'let' pattern, a helper function)", *item.too_deep)
        continue
      try: tree = grammar().parse(item.text)
      except UnexpectedInput as e:
        self.syntax_error(e, item)
        continue
      if self.priority is not None and tree.data not in ("rule", "priority_decl"):
        _, span = self.priority
        self.priority = None
        self.error("a `priority` line goes right before the rule it is for", span.line, span.col)
      try: self.item(tree, item.text)
      except SourceError as e: self.error(str(e), e.line, e.col)
    if self.priority is not None: self.error("a `priority` line goes right before the rule it is for", self.priority[1].line, self.priority[1].col)
    for var, _, span in self.scopes: self.error(f"'for {var}' block is never closed with '}}'", span.line, span.col)
    # the order rules are tried in: by priority, highest first, then as written
    for rs in self.rulesets: rs.rules.sort(key=lambda r: -r.priority)
    return RuleFile(self.path, self.source, self.rulesets, self.imports, header=_header_comment(self.source), contexts=self.contexts)

  def syntax_error(self, e: UnexpectedInput, item) -> None:
    if item.unclosed is not None:
      # a bracket never closed is the cause of whatever error follows it (`(ADD x (MUL y 2) -> x` fails at '->'):
      # report the bracket, where the fix goes
      line, col, ch = item.unclosed
      self.error(f"unbalanced '{ch}': it is never closed", line, col)
      return
    line, col = getattr(e, "line", 1) or 1, getattr(e, "column", 1) or 1
    if isinstance(e, UnexpectedCharacters):
      ch = item.text[e.pos_in_stream] if e.pos_in_stream < len(item.text) else "?"
      self.error(f"unexpected character {ch!r}", line, col)
    elif isinstance(e, UnexpectedToken):
      tok = e.token
      if (hint := _choice_without_else(item.text)) is not None: self.error(*hint)
      elif tok.type == "$END":
        # the caret goes right after the last code of the item, not after a trailing comment or blank line
        code = [_strip_comment(x).rstrip() for x in item.text.split("\n")]
        n = max((i for i, x in enumerate(code) if x), default=0)
        has_arrow = any("->" in x for x in code)
        self.error("unexpected end of the rule" if has_arrow else "unexpected end of the rule: it needs '-> result'", n + 1, len(code[n]) + 1)
      elif (hint := _misplaced_guard(item.text, tok)) is not None: self.error(*hint)
      elif (hint := _sequence_without_for(item.text, tok)) is not None: self.error(*hint)
      else: self.error(f"unexpected {tok.value!r}{_expected_hint(e.expected)}", tok.line or line, tok.column or col)
    else: self.error("unexpected end of input", line, col)

  # ---- items ----
  def item(self, t: Tree, text: str) -> None:
    k = t.data
    if k == "ruleset_decl":
      name, params, returns, doc_tok = t.children
      name = str(name)
      problem = self.new_ruleset_problem(name, t)
      try: doc = literal_value(str(doc_tok), *pos(doc_tok)) if doc_tok is not None else ""
      except SourceError as e: doc, problem = "", problem or e
      declared, problem = self.params(params, problem)
      # the set opens even when it has a problem, so the rules after it are not reported against another set
      self.current = RuleSet(name, str(doc).strip(), [], self.span(t), params=declared,
                             returns=str(returns.children[0]) if returns is not None else "node")
      self.rulesets.append(self.current)
      if problem is not None: raise problem
    elif k == "compose_decl":
      name = str(t.children[0])
      problem = self.new_ruleset_problem(name, t)
      declared, problem = self.params(t.children[1], problem)
      self.rulesets.append(RuleSet(name, "", [], self.span(t), compose=[str(c) for c in t.children[2:]], params=declared))
      self.current = None
      if problem is not None: raise problem
    elif k == "use_decl":
      module = ".".join(str(x) for x in t.children[0].children)
      if not (module.startswith("rules.") or module.startswith("runtime.") or module in ("math",)):
        raise SourceError(f"helpers come from modules under rules/ or runtime/, not '{module}'", *pos(t.children[0]))
      self.imports.append((module, [str(x) for x in t.children[1:]], self.span(t)))
    elif k == "let_decl":
      head, *rest = t.children
      name = str(head).rstrip("(")
      if name in self.named: raise SourceError(f"pattern '{name}' is defined twice", *pos(t))
      params = tuple(str(x) for x in rest if isinstance(x, Token)) if head.type == "UCALL" else None
      body, guard = [x for x in rest if isinstance(x, Tree)][0], rest[-1] if isinstance(rest[-1], Tree) and rest[-1].data == "guard" else None
      # a stand-in while the definition is checked: a problem in it is reported here once, and the rules using it stay quiet
      self.named[name] = NamedPattern(Pat(span=self.span(t)), params, [])
      self.let_guards, self.defining = [], name
      try: p = self.pattern(body)
      finally: self.defining = None
      if pattern_depth(p) > MAX_DEPTH + 1: raise SourceError(f"pattern '{name}' nests more than {MAX_DEPTH} deep", *pos(t))
      if params is not None:
        for x in params:
          if params.count(x) > 1: raise SourceError(f"parameter '{x}' is listed twice", *pos(t))
          if x not in p.names(): raise SourceError(f"parameter '{x}' is not bound by the pattern", *pos(t))
        if extra := sorted(p.names() - set(params)):
          raise SourceError(f"a named pattern with parameters binds only its parameters: '{extra[0]}' is not one (write '_', or add it to them)",
                            *pos(t))
      guards = self.let_guards + ([(c, {}) for c in conjuncts(guard.children[0])] if guard is not None else [])
      self.named[name] = NamedPattern(p, params, guards)
    elif k == "ctx_decl": self.ctx_decl(t)
    elif k == "for_open":
      var = str(t.children[0])
      problem: SourceError | None = None
      try: self.check_for_variable(var, t)
      except SourceError as e: problem = e
      ops: set[Ops] = set()
      for o in t.children[1:]:
        try:
          head = o.children[0] if isinstance(o, Tree) else o
          if head.type != "UNAME": raise SourceError(f"'{head}' is not an op or op group", *pos(head))
          ops |= self.minus(o)
        except SourceError as e: problem = problem or e
      # the block opens even with a problem, so its '}' is not reported too as closing nothing
      self.scopes.append((var, frozenset(ops), self.span(t)))
      if problem is not None: raise problem
    elif k == "for_close":
      if not self.scopes: raise SourceError("'}' closes no 'for' block", *pos(t))
      self.scopes.pop()
    elif k == "rule":
      prio, self.priority = self.priority, None
      self.rule(t, text)
      if prio is not None and self.current is not None and self.current.rules: self.current.rules[-1].priority = prio[0]
    elif k == "priority_decl":
      if self.priority is not None: raise SourceError(f"two `priority` lines for one rule (the first at line {self.priority[1].line})", *pos(t))
      value = literal_value(str(t.children[0]), *pos(t.children[0]))
      if not isinstance(value, int) or isinstance(value, bool): raise SourceError(f"a priority is an integer, not {value!r}", *pos(t.children[0]))
      self.priority = (value, self.span(t))
    else: raise SourceError(f"unexpected item '{k}'", *pos(t))

  def ctx_decl(self, t: Tree) -> None:
    """`ctx NAME: f(x) -> type, field: type, [x] -> type`."""
    head = t.children[0]
    name = str(head).rstrip("(")
    impls = [c for c in t.children[1:] if isinstance(c, Token)]
    if name in self.contexts: raise SourceError(f"context '{name}' is already declared at line {self.contexts[name].span.line}", *pos(head))
    decl = CtxDecl(name, {}, self.span(t), tuple(str(c) for c in impls))
    self.contexts[name] = decl
    for m in t.children[1 + len(impls):]:
      names = [x for x in m.children if isinstance(x, Token)]
      typ = m.children[-1].children
      kind = m.data.removeprefix("ctx_")
      member = "[]" if kind == "index" else str(names[0]).rstrip("(")
      params = tuple(str(x) for x in names[1:]) if kind == "method" else (str(names[0]),) if kind == "index" else ()
      if member in decl.members:
        what = "indexing" if member == "[]" else f"'{member}'"
        raise SourceError(f"{what} is declared twice in context '{name}'", *pos(names[0] if names else m))
      decl.members[member] = CtxMember(member, kind, params, str(typ[0]) if typ else "None", self.span(names[0] if names else m))

  def params(self, params: Tree | None, problem: SourceError | None) -> tuple[dict[str, str | None], SourceError | None]:
    """`(ctx: UOp, caps)`: ctx is the rewrite context; any other name is a parameter the rule set is instantiated with."""
    declared: dict[str, str | None] = {}
    for prm in params.children if params is not None else ():
      pname, ptype = str(prm.children[0]), prm.children[1]
      if pname in declared: problem = problem or SourceError(f"parameter '{pname}' is declared twice", *pos(prm))
      elif pname != "ctx":
        try: self.check_capture_name(pname, prm.children[0])
        except SourceError as e: problem = problem or e
      declared[pname] = str(ptype) if ptype is not None else None
    return declared, problem

  def new_ruleset_problem(self, name: str, t: Tree) -> SourceError | None:
    if self.scopes: return SourceError("a ruleset can't start inside a 'for' block", *pos(t))
    # the generated module's own globals start with '_' (_const, _uop, _rest_0, ...)
    if name.startswith("_"): return SourceError(f"ruleset names can't start with '_' ('{name}')", *pos(t.children[0]))
    # a rule set is a name of the generated module
    if keyword.iskeyword(name): return SourceError(f"'{name}' is a Python keyword: it can't name a ruleset", *pos(t.children[0]))
    for rs in self.rulesets:
      if rs.name == name: return SourceError(f"ruleset '{name}' is already defined at line {rs.span.line}", *pos(t))
    return None

  def check_for_variable(self, var: str, t: Tree) -> None:
    if any(v == var for v, _, _ in self.scopes): raise SourceError(f"'{var}' is already a for variable here", *pos(t))
    # the variable is a local of generated functions (`op = _u.op`), as captures are: it must not hide a name they use
    self.check_capture_name(var, t.children[0])
    if var in PRELUDE_NAMES | GENERATED_NAMES or any(var in names for _, names, _ in self.imports):
      raise SourceError(f"'{var}' can't be a for variable: the generated code uses that name", *pos(t.children[0]))

  def rule(self, t: Tree, text: str) -> None:
    if self.current is None:
      if any(rs.compose is not None for rs in self.rulesets):
        # reported once; the rules that follow go to a stand-in set (never emitted: the file has an error), so their own
        # problems are still checked and reported
        self.current = RuleSet("_orphans", "", [], self.span(t))
        self.rulesets.append(self.current)
        raise SourceError("a rule after a composed ruleset needs its own 'ruleset' line", *pos(t))
      self.current = RuleSet(os.path.splitext(os.path.basename(self.path))[0], "", [], Span(self.path, 1, 1))
      self.rulesets.append(self.current)
    self.opvar_seen: dict[str, Pat] = {}
    self.let_guards = []
    pattern = self.pattern(t.children[0])
    if pattern_depth(pattern) > MAX_DEPTH + 1: raise SourceError(f"this pattern nests more than {MAX_DEPTH} deep", *pos(t))
    # the guards of the named patterns it uses, then its own
    guards = [self.guard_expr(g, rename) for g, rename in self.let_guards]
    guards += self.guards(t.children[1]) if t.children[1] is not None else []
    # `where` names, known before any value is read: a constructor may take its dtype from one, (CAST:wide x)
    self.where_names = {str(b.children[0]) for w in t.children[3:] for b in w.children}
    # each value after the nodes built inside its expressions (hoisted into hidden bindings: parse_results.hoist_node)
    self.hoisted = []
    bindings: list[Binding] = []
    for w in t.children[3:]:
      for b in w.children:
        value = self.value(b.children[1])
        bindings += self.hoisted
        self.hoisted = []
        bindings.append(Binding(str(b.children[0]), value, self.span(b)))
    result = self.top_result(t.children[2])
    bindings += self.hoisted
    one_line = _one_line(text)
    opvars = {v: ops for v, ops, _ in self.scopes}
    seen: set[str] = set()
    for b in bindings:
      if b.hidden: continue
      span = b.span
      self.check_capture_name(b.name, Token("NAME", b.name, line=span.line, column=span.col))
      if b.name in seen: raise SourceError(f"'{b.name}' is bound twice by `where`", span.line, span.col)
      seen.add(b.name)
    r = Rule(pattern, guards, result, one_line, self.span(t), opvars, returns=self.current.returns, bindings=bindings)
    domain = ";".join(f"{v}={sorted(o.name for o in ops)}" for v, ops in opvars.items())
    r.id = "r" + hashlib.sha1(f"{self.current.name}|{domain}|{one_line}".encode()).hexdigest()[:6]
    self.current.rules.append(r)

  def guards(self, t: Tree) -> list[Expr]:
    out = []
    for c in conjuncts(t.children[0]):
      if isinstance(c, Tree) and c.data == "walrus":
        # `d := f(x)`: a computed binding for the guards after it and the result (ISLE's if-let, match.pd's with)
        name, _, value = c.children
        self.check_capture_name(str(name), name)
        e = self.guard_expr(value, {})
        e.binds, e.span = str(name), self.span(c)
        out.append(e)
      else: out.append(self.guard_expr(c, {}))
    return out

  def guard_expr(self, t, rename: dict[str, str]) -> Expr:
    x = ExprBuilder(rename).build(t)
    x.span = self.span(t)
    return x

def _misplaced_guard(text: str, tok) -> tuple[str, int, int] | None:
  """The two guard mistakes a parser error hides: `if ->` (no condition: the '-' of '->' reads as a minus, then '>' is
  unexpected) and a guard written after the result. (message, line, col), the caret under the `if`."""
  before = text[:tok.start_pos] if tok.start_pos is not None else ""
  code = "\n".join(_strip_comment(x) for x in before.split("\n"))
  if (m := re.search(r"\bif\s*-?\s*$", code)) is not None and tok.value in (">", "->"):
    return ("an empty guard: write a condition after 'if' (`if x.vmin >= 0 ->`), or leave the 'if' out",) + _position(code, m.start())
  return None

def _sequence_without_for(text: str, tok) -> tuple[str, int, int] | None:
  """`(AT x v [(ADD i 1)])`: a '[' among a constructor's sources (after the first) starts a sequence, which needs its `for`.
  (message, line, col), the caret under the '['."""
  if tok.value != "]" or tok.start_pos is None or "->" not in text[:tok.start_pos]: return None
  depth = 0
  for i in range(tok.start_pos - 1, text.index("->"), -1):
    ch = text[i]
    if ch in ")]}": depth += 1
    elif ch in "([{":
      if depth: depth -= 1
      elif ch != "[": return None
      else:
        return ("a '[' among a node's sources starts a sequence, `[TERM for NAME in ITER]*`; a node's arg goes right after its op and dtype, "
                "(OP:dtype [arg] sources...)",) + _position(text, i)
  return None

def _choice_without_else(text: str) -> tuple[str, int, int] | None:
  """An `if` after the arrow with no `else` after it (outside brackets): a guard written after the result, or a `where`
  choice missing its `else`. (message, line, col), the caret under the `if`."""
  code = "\n".join(_strip_comment(x) for x in text.split("\n"))
  arrow = code.find("->")
  if arrow < 0: return None
  depth, last_if, last_where = 0, None, None
  for m in re.finditer(r"[(\[{]|[)\]}]|\b(?:if|else|where|for)\b", code[arrow:]):
    w, at = m.group(), arrow + m.start()
    if w in "([{": depth += 1
    elif w in ")]}": depth -= 1
    elif depth == 0 and w == "if": last_if = at
    elif depth == 0 and w == "else": last_if = None
    elif depth == 0 and w == "where": last_where, last_if = at, None
  if last_if is None: return None
  if last_where is not None:
    return ("a choice needs its `else`: `where name = A if COND else B`",) + _position(text, last_if)
  return ("a guard goes before the result: `PATTERN if GUARD -> RESULT` (a choice of results is `-> A if COND else B`)",) + _position(text, last_if)

def _position(text: str, index: int) -> tuple[int, int]:
  return text.count("\n", 0, index) + 1, index - (text.rfind("\n", 0, index) + 1) + 1

def _expected_hint(expected: set[str]) -> str:
  e = set(expected)
  if "RETURNS" in e: return ", expected 'returns per-source' or a doc string"
  if e == {"RETKIND"}: return ", expected 'per-source' (what each rule results in: a tuple, one entry per source)"
  if "RPAR" in e and len(e) <= 3: return ", expected ')'"
  if e & {"__ANON_0", "MINUS_GT"} or any("->" in x for x in e): return ", expected 'if' or '->'"
  return ""

def _one_line(text: str) -> str:
  parts = []
  for line in text.strip("\n").split("\n"):
    code = _strip_comment(line).strip()
    if code: parts.append(code)
  return " ".join(parts)

def _strip_comment(line: str) -> str:
  quote = None
  for i, ch in enumerate(line):
    if quote:
      if ch == quote: quote = None
    elif ch in "\"'": quote = ch
    elif ch == "#": return line[:i]
  return line

def _header_comment(source: str) -> str:
  out = []
  for line in source.split("\n"):
    if line.startswith("#"): out.append(line[1:].strip())
    elif line.strip(): break
    elif out: break
  return "\n".join(out)

def parse_rules(path: str, source: str | None = None, display_path: str | None = None) -> tuple[RuleFile | None, list[Diagnostic]]:
  """Parse one .rules file: the rule IR and every diagnostic found (the IR is None when the file can't be read as text)."""
  shown = display_path or path
  if source is None:
    try:
      with open(path, "rb") as f: raw = f.read()
    except OSError as e: return None, [Diagnostic(shown, 1, 1, f"can't read the file: {e.strerror}")]
    try: source = raw.decode("utf-8")
    except UnicodeDecodeError as e:
      start = raw.rfind(b"\n", 0, e.start) + 1
      line = raw[:e.start].count(b"\n") + 1
      col = len(raw[start:e.start].decode("utf-8")) + 1  # in characters, as every other column (the prefix is valid UTF-8)
      end = raw.find(b"\n", e.start)
      text = raw[start:end if end >= 0 else len(raw)].decode("utf-8", "replace")
      return None, [Diagnostic(shown, line, col, f"the file is not UTF-8 text: byte 0x{raw[e.start]:02x} can't be decoded", line_text=text)]
  try: source.encode("utf-8")
  except UnicodeEncodeError as e:  # text given as a str with lone surrogates (bytes that were never UTF-8)
    line = source.count("\n", 0, e.start) + 1
    col = e.start - (source.rfind("\n", 0, e.start) + 1) + 1
    text = source.split("\n")[line - 1].encode("utf-8", "replace").decode("utf-8")
    return None, [Diagnostic(shown, line, col, "the text is not valid Unicode (a lone surrogate)", line_text=text)]
  if "\x00" in source:
    i = source.index("\x00")
    line = source.count("\n", 0, i) + 1
    text = source.split("\n")[line - 1]
    return None, [Diagnostic(shown, line, i - (source.rfind("\n", 0, i) + 1) + 1, "the file contains a NUL byte: is it binary?", line_text=text)]
  fp = FileParser(path, source, shown)
  rf = fp.parse()
  return rf, fp.diags

__all__ = ["parse_rules", "grammar", "resolve_ops"]
