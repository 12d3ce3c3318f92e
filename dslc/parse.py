"""The .rules front end: text -> items (split.py) -> Lark trees (grammar.lark) -> rule IR (ir.py), with names resolved.

Every problem becomes a Diagnostic with file:line:col; parsing goes on after an error, so one run reports them all.
"""
from __future__ import annotations
import ast, hashlib, keyword, math, operator, os, warnings
from dataclasses import dataclass
from functools import cache
from typing import Any
from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from runtime.dtype import DTYPE_NAMES, DType, dtypes
from runtime.ops import GroupOp, Ops
from dslc.diagnostics import Diagnostic
from dslc.ir import (Binding, CallResult, Comprehension, Construct, Expr, Lit, Pat, PyResult, Ref, Result, Rule, RuleFile, RuleSet, Span, Splice,
                     TupleResult, Update)
from dslc.split import MAX_DEPTH, split_items

DTYPE_CLASSES = {"ints": frozenset(d for d in dtypes.all() if dtypes.is_int(d)), "uints": frozenset(d for d in dtypes.all() if dtypes.is_unsigned(d)),
                 "sints": frozenset(d for d in dtypes.all() if dtypes.is_int(d) and not dtypes.is_unsigned(d)),
                 "floats": frozenset(d for d in dtypes.all() if dtypes.is_float(d)), "bools": frozenset({dtypes.bool})}
GROUPS: dict[str, frozenset[Ops]] = {k: v for k, v in vars(GroupOp).items() if isinstance(v, frozenset)}

@cache
def grammar() -> Lark:
  with open(os.path.join(os.path.dirname(__file__), "grammar.lark")) as f:
    return Lark(f.read(), start="item", parser="lalr", propagate_positions=True, maybe_placeholders=True)

class _Error(Exception):
  def __init__(self, message: str, line: int, col: int):
    super().__init__(message)
    self.line, self.col = line, col

def _pos(t: Tree | Token) -> tuple[int, int]:
  if isinstance(t, Token): return t.line or 1, t.column or 1
  m = t.meta
  return (getattr(m, "line", 1) or 1, getattr(m, "column", 1) or 1)

def resolve_ops(name: str, line: int, col: int) -> frozenset[Ops]:
  if name in Ops.__members__: return frozenset({Ops[name]})
  if name in GROUPS: return GROUPS[name]
  raise _Error(f"unknown op or op group '{name}'", line, col)

# ---- expressions: a Lark tree to Python source, with the names it reads and a cost estimate ----

_PREC = {"or_": 1, "and_": 2, "not_": 3, "compare": 4, "binop+": 5, "binop*": 6, "unop": 7, "pow_": 8}

def _parse_python(text: str) -> ast.Expression:
  with warnings.catch_warnings():
    # what Python only warns about (`1if x else 2`, `x is 1`) is an error here: it is reported at the rule, not on stderr
    warnings.simplefilter("error", SyntaxWarning)
    return ast.parse(text, mode="eval")

def _free_names(text: str, line: int, col: int) -> frozenset[str]:
  try: tree = _parse_python(text)
  except SyntaxError as e: raise _Error(f"invalid Python expression: {e.msg}", line, col + max((e.offset or 1) - 1, 0)) from None
  except (RecursionError, MemoryError): raise _Error("this Python expression is nested too deeply", line, col) from None
  loads, stores = set(), set()
  for n in ast.walk(tree):
    # yield/await would turn the generated matcher into a generator or a syntax error, and := could overwrite its variables
    if isinstance(n, (ast.Yield, ast.YieldFrom, ast.Await, ast.NamedExpr)):
      what = {ast.Yield: "yield", ast.YieldFrom: "yield from", ast.Await: "await", ast.NamedExpr: "':='"}[type(n)]
      raise _Error(f"{what} is not allowed in a {{python}} expression", line, col)
    if isinstance(n, ast.Name): (loads if isinstance(n.ctx, ast.Load) else stores).add(n.id)
    elif isinstance(n, ast.arg): stores.add(n.arg)
  return frozenset(loads - stores)

class ExprBuilder:
  """Turns an expression tree into (python text, precedence); collects the names it reads. `rename` maps a named pattern's
  parameters to the names a use gave them."""
  def __init__(self, rename: dict[str, str] | None = None):
    self.names: set[str] = set()
    self.cost = 1
    self.rename = rename or {}

  def build(self, t: Tree | Token) -> Expr:
    text, _ = self.emit(t)
    line, col = _pos(t)
    return Expr(text, frozenset(self.names), self.cost, None)

  def emit(self, t: Tree | Token) -> tuple[str, float]:
    if isinstance(t, Token): return self.token(t), 9
    k = t.data
    c = t.children
    if k == "or_" or k == "and_":
      word, p = (" or ", 1) if k == "or_" else (" and ", 2)
      return word.join(self.wrap(x, p) for x in c), p
    if k == "not_": return "not " + self.wrap(c[0], 3), 3
    if k == "compare":
      parts = [self.wrap(c[0], 4.2)]
      for i in range(1, len(c), 2): parts += [" ".join(str(x) for x in c[i].children), self.wrap(c[i + 1], 4.2)]
      return " ".join(parts), 4
    if k == "bitop":
      # between comparisons (4) and + - (5), as Python binds them: | 4.2, ^ 4.4, & 4.6, << >> 4.8
      op = str(c[1]) if len(c) == 3 else "|"
      left, right = (c[0], c[2]) if len(c) == 3 else (c[0], c[1])
      p = {"|": 4.2, "^": 4.4, "&": 4.6}.get(op, 4.8)
      return f"{self.wrap(left, p)} {op} {self.wrap(right, p + 0.1)}", p
    if k == "binop":
      p = 5 if str(c[1]) in "+-" else 6
      return f"{self.wrap(c[0], p)} {c[1]} {self.wrap(c[2], p + 1)}", p
    if k == "unop": return f"{c[0]}{self.wrap(c[1], 7)}", 7
    if k == "pow_": return f"{self.wrap(c[0], 9)} ** {self.wrap(c[1], 7)}", 8
    if k == "getattr":
      if str(c[1]) in ("vmin", "vmax", "bounds"): self.cost = max(self.cost, 3)
      return f"{self.wrap(c[0], 9)}.{c[1]}", 9
    if k == "method":
      self.cost = 10
      return f"{self.wrap(c[0], 9)}.{c[1]}{self.args(c[2])})", 9
    if k == "getitem": return f"{self.wrap(c[0], 9)}[{self.emit(c[1])[0]}]", 9
    if k == "fcall":
      self.cost = 10
      self.names.add(str(c[0])[:-1])
      return f"{c[0]}{self.args(c[1])})", 9
    if k == "name":
      name = self.rename.get(str(c[0]), str(c[0]))
      self.names.add(name)
      return name, 9
    if k == "qualname":
      head, attr = str(c[0]).split(".", 1)
      if head == "Ops" and attr not in Ops.__members__: raise _Error(f"unknown op '{attr}'", *_pos(c[0]))
      self.names.add(head)
      return str(c[0]), 9
    if k in ("literal", "true", "false", "none"):
      _literal_value(t)  # an invalid number (`03`) is reported here, not as broken generated code
      return _literal_text(t), 9
    if k == "string":
      literal_value(str(c[0]), *_pos(c[0]))  # likewise an invalid escape ("\\N")
      return str(c[0]), 9
    if k == "tuple":
      items = [self.emit(x)[0] for x in c if x is not None]
      return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")", 9
    if k == "list": return "[" + ", ".join(self.emit(x)[0] for x in c if x is not None) + "]", 9
    if k in ("listcomp", "genexp", "fcall_gen"):
      head = f"{c[0]}" if k == "fcall_gen" else ""
      if k == "fcall_gen":
        self.cost = 10
        self.names.add(str(c[0])[:-1])
      body, comp = (c[1], c[2]) if k == "fcall_gen" else (c[0], c[1])
      text = f"{self.comprehension(body, comp)}"
      return (head + text + ")" if k == "fcall_gen" else f"[{text}]" if k == "listcomp" else f"({text})"), 9
    if k == "pyexpr":
      text = str(c[0])[1:-1].strip()
      names = _free_names(text, *_pos(c[0]))
      if names & self.rename.keys(): text, names = _rename_python(text, self.rename), frozenset(self.rename.get(n, n) for n in names)
      self.names |= names
      self.cost = 10
      return f"({text})", 9
    raise _Error(f"unexpected expression '{k}'", *_pos(t))

  def comprehension(self, body, comp: Tree) -> str:
    """`body for targets in iter [if cond]`: the targets are local, so they are not names the expression reads."""
    targets, bound = comp_targets(comp.children[0])
    inner = ExprBuilder({k: v for k, v in self.rename.items() if k not in bound})
    text = f"{inner.emit(body)[0]} for {targets} in {self.emit(comp.children[1])[0]}"
    if comp.children[2] is not None: text += f" if {inner.emit(comp.children[2])[0]}"
    self.names |= inner.names - bound
    self.cost = max(self.cost, inner.cost)
    return text

  def wrap(self, t, prec: float) -> str:
    text, p = self.emit(t)
    return text if p >= prec else f"({text})"
  def args(self, t) -> str: return "" if t is None else ", ".join(self.emit(x)[0] for x in t.children)
  def token(self, t: Token) -> str: return str(t)

def comp_targets(t: Tree) -> tuple[str, frozenset[str]]:
  """The Python text of a comprehension's targets and the names they bind."""
  def one(x) -> tuple[str, set[str]]:
    if x.data == "target_name": return str(x.children[0]), {str(x.children[0])}
    parts = [one(y) for y in x.children]
    return "(" + ", ".join(p for p, _ in parts) + ")", set().union(*(n for _, n in parts))
  parts = [one(x) for x in t.children]
  return ", ".join(p for p, _ in parts), frozenset().union(*(n for _, n in parts))

def _literal_text(t: Tree) -> str:
  if t.data == "true": return "True"
  if t.data == "false": return "False"
  if t.data == "none": return "None"
  if t.data == "cexpr": return " ".join(str(x.children[0]) if x.data == "cop" else _literal_text(x) for x in t.children)
  if isinstance(t.children[0], Tree): return _literal_text(t.children[0])
  return str(t.children[0])

def _literal_value(t: Tree) -> Any:
  tok = t.children[0] if t.children else t
  if isinstance(tok, Tree) and tok.data == "cexpr" or t.data == "cexpr":
    e = tok if t.data != "cexpr" else t
    return const_value(_literal_text(e), *_pos(e))
  return literal_value(_literal_text(t), *_pos(tok))

_CONST_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv,
              ast.Mod: operator.mod, ast.Pow: operator.pow, ast.LShift: operator.lshift, ast.RShift: operator.rshift, ast.BitAnd: operator.and_,
              ast.BitXor: operator.xor}

def const_value(text: str, line: int, col: int) -> Any:
  """The value of an integer expression of literals (`1<<32`, `2**31 - 1`), with Python's precedence."""
  def ev(n: ast.AST) -> Any:
    if isinstance(n, ast.Constant) and isinstance(n.value, (int, float, bool)): return n.value
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.USub, ast.UAdd, ast.Invert)): return {ast.USub: lambda v: -v, ast.UAdd: lambda v: +v,
                                                                                                  ast.Invert: lambda v: ~v}[type(n.op)](ev(n.operand))
    if isinstance(n, ast.BinOp) and type(n.op) in _CONST_OPS:
      a, b = ev(n.left), ev(n.right)
      # a huge power or shift would stall the compiler: no constant of a dtype needs more than a few hundred bits
      if isinstance(n.op, (ast.Pow, ast.LShift)) and isinstance(b, int) and b > 1024: raise _Error(f"{text}: this constant is too large", line, col)
      try: return _CONST_OPS[type(n.op)](a, b)
      except (ArithmeticError, ValueError, TypeError) as e: raise _Error(f"{text}: {e}", line, col) from None
    raise _Error(f"invalid constant expression {text}", line, col)
  try: tree = _parse_python(text)
  except SyntaxError as e: raise _Error(f"invalid constant expression {text}: {e.msg}", line, col) from None
  return ev(_InfNan().visit(tree).body)

class _InfNan(ast.NodeTransformer):
  # `inf` and `nan` are numbers in .rules (generated modules define them); Python's literal_eval does not know them
  def visit_Name(self, n: ast.Name) -> ast.AST: return ast.Constant(math.inf if n.id == "inf" else math.nan) if n.id in ("inf", "nan") else n

def literal_value(text: str, line: int, col: int) -> Any:
  """The Python value of a literal written in a .rules file; an invalid one (`03`, `"\\N"`) is a diagnostic, not a crash."""
  try: tree = _parse_python(text.strip())
  except SyntaxError as e: raise _Error(f"invalid literal {text.strip()}: {e.msg}", line, col) from None
  except (RecursionError, MemoryError): raise _Error("this literal is nested too deeply", line, col) from None
  # ValueError: not a literal (callers that accept other expressions catch it); TypeError: an unhashable key, as {[1]: 2}
  try: return ast.literal_eval(_InfNan().visit(tree))
  except TypeError as e: raise ValueError(str(e)) from None

# ---- the file ----

class FileParser:
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

  def error(self, message: str, line: int, col: int) -> None: self.diags.append(Diagnostic(self.path, line, col, message))
  def span(self, t) -> Span:
    line, col = _pos(t)
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
      try: self.item(tree, item.text)
      except _Error as e: self.error(str(e), e.line, e.col)
    for var, _, span in self.scopes: self.error(f"'for {var}' block is never closed with '}}'", span.line, span.col)
    return RuleFile(self.path, self.source, self.rulesets, self.imports, header=_header_comment(self.source))

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
      if tok.type == "$END":
        # the caret goes right after the last code of the item, not after a trailing comment or blank line
        code = [_strip_comment(x).rstrip() for x in item.text.split("\n")]
        n = max((i for i, x in enumerate(code) if x), default=0)
        has_arrow = any("->" in x for x in code)
        self.error("unexpected end of the rule" if has_arrow else "unexpected end of the rule: it needs '-> result'", n + 1, len(code[n]) + 1)
      else: self.error(f"unexpected {tok.value!r}{_expected_hint(e.expected)}", tok.line or line, tok.column or col)
    else: self.error("unexpected end of input", line, col)

  # ---- items ----
  def item(self, t: Tree, text: str) -> None:
    k = t.data
    if k == "ruleset_decl":
      name, params, returns, doc_tok = t.children
      name = str(name)
      problem = self.new_ruleset_problem(name, t)
      try: doc = literal_value(str(doc_tok), *_pos(doc_tok)) if doc_tok is not None else ""
      except _Error as e: doc, problem = "", problem or e
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
        raise _Error(f"helpers come from modules under rules/ or runtime/, not '{module}'", *_pos(t.children[0]))
      self.imports.append((module, [str(x) for x in t.children[1:]], self.span(t)))
    elif k == "let_decl":
      head, *rest = t.children
      name = str(head).rstrip("(")
      if name in self.named: raise _Error(f"pattern '{name}' is defined twice", *_pos(t))
      params = tuple(str(x) for x in rest if isinstance(x, Token)) if head.type == "UCALL" else None
      body, guard = [x for x in rest if isinstance(x, Tree)][0], rest[-1] if isinstance(rest[-1], Tree) and rest[-1].data == "guard" else None
      # a stand-in while the definition is checked: a problem in it is reported here once, and the rules using it stay quiet
      self.named[name] = NamedPattern(Pat(span=self.span(t)), params, [])
      self.let_guards, self.defining = [], name
      try: p = self.pattern(body)
      finally: self.defining = None
      if _depth(p) > MAX_DEPTH + 1: raise _Error(f"pattern '{name}' nests more than {MAX_DEPTH} deep", *_pos(t))
      if params is not None:
        for x in params:
          if params.count(x) > 1: raise _Error(f"parameter '{x}' is listed twice", *_pos(t))
          if x not in p.names(): raise _Error(f"parameter '{x}' is not bound by the pattern", *_pos(t))
        if extra := sorted(p.names() - set(params)):
          raise _Error(f"a named pattern with parameters binds only its parameters: '{extra[0]}' is not one (write '_', or add it to them)",
                       *_pos(t))
      guards = self.let_guards + ([(c, {}) for c in _conjuncts(guard.children[0])] if guard is not None else [])
      self.named[name] = NamedPattern(p, params, guards)
    elif k == "for_open":
      var = str(t.children[0])
      problem: _Error | None = None
      try: self.check_for_variable(var, t)
      except _Error as e: problem = e
      ops: set[Ops] = set()
      for o in t.children[1:]:
        try:
          head = o.children[0] if isinstance(o, Tree) else o
          if head.type != "UNAME": raise _Error(f"'{head}' is not an op or op group", *_pos(head))
          ops |= self.minus(o)
        except _Error as e: problem = problem or e
      # the block opens even with a problem, so its '}' is not reported too as closing nothing
      self.scopes.append((var, frozenset(ops), self.span(t)))
      if problem is not None: raise problem
    elif k == "for_close":
      if not self.scopes: raise _Error("'}' closes no 'for' block", *_pos(t))
      self.scopes.pop()
    elif k == "rule": self.rule(t, text)
    else: raise _Error(f"unexpected item '{k}'", *_pos(t))

  def params(self, params: Tree | None, problem: _Error | None) -> tuple[dict[str, str | None], _Error | None]:
    """`(ctx: UOp, caps)`: ctx is the rewrite context; any other name is a parameter the rule set is instantiated with."""
    declared: dict[str, str | None] = {}
    for prm in params.children if params is not None else ():
      pname, ptype = str(prm.children[0]), prm.children[1]
      if pname in declared: problem = problem or _Error(f"parameter '{pname}' is declared twice", *_pos(prm))
      elif pname != "ctx":
        try: self.check_capture_name(pname, prm.children[0])
        except _Error as e: problem = problem or e
      declared[pname] = str(ptype) if ptype is not None else None
    return declared, problem

  def new_ruleset_problem(self, name: str, t: Tree) -> _Error | None:
    if self.scopes: return _Error("a ruleset can't start inside a 'for' block", *_pos(t))
    # the generated module's own globals start with '_' (_const, _uop, _rest_0, ...)
    if name.startswith("_"): return _Error(f"ruleset names can't start with '_' ('{name}')", *_pos(t.children[0]))
    # a rule set is a name of the generated module
    if keyword.iskeyword(name): return _Error(f"'{name}' is a Python keyword: it can't name a ruleset", *_pos(t.children[0]))
    for rs in self.rulesets:
      if rs.name == name: return _Error(f"ruleset '{name}' is already defined at line {rs.span.line}", *_pos(t))
    return None

  def check_for_variable(self, var: str, t: Tree) -> None:
    if any(v == var for v, _, _ in self.scopes): raise _Error(f"'{var}' is already a for variable here", *_pos(t))
    # the variable is a local of generated functions (`op = _u.op`), as captures are: it must not hide a name they use
    self.check_capture_name(var, t.children[0])
    from dslc.emit import PRELUDE_NAMES  # here: emit imports this module
    if var in PRELUDE_NAMES | {"len", "match_all"} or any(var in names for _, names, _ in self.imports):
      raise _Error(f"'{var}' can't be a for variable: the generated code uses that name", *_pos(t.children[0]))

  def rule(self, t: Tree, text: str) -> None:
    if self.current is None:
      if any(rs.compose is not None for rs in self.rulesets):
        # reported once; the rules that follow go to a stand-in set (never emitted: the file has an error), so their own
        # problems are still checked and reported
        self.current = RuleSet("_orphans", "", [], self.span(t))
        self.rulesets.append(self.current)
        raise _Error("a rule after a composed ruleset needs its own 'ruleset' line", *_pos(t))
      self.current = RuleSet(os.path.splitext(os.path.basename(self.path))[0], "", [], Span(self.path, 1, 1))
      self.rulesets.append(self.current)
    self.opvar_seen: dict[str, Pat] = {}
    self.let_guards = []
    pattern = self.pattern(t.children[0])
    if _depth(pattern) > MAX_DEPTH + 1: raise _Error(f"this pattern nests more than {MAX_DEPTH} deep", *_pos(t))
    # the guards of the named patterns it uses, then its own
    guards = [self.guard_expr(g, rename) for g, rename in self.let_guards]
    guards += self.guards(t.children[1]) if t.children[1] is not None else []
    bindings = [(str(b.children[0]), self.result(b.children[1]), self.span(b)) for w in t.children[3:] for b in w.children]
    result = self.top_result(t.children[2])
    one_line = _one_line(text)
    opvars = {v: ops for v, ops, _ in self.scopes}
    seen: set[str] = set()
    for name, _, span in bindings:
      self.check_capture_name(name, Token("NAME", name, line=span.line, column=span.col))
      if name in seen: raise _Error(f"'{name}' is bound twice by `where`", span.line, span.col)
      seen.add(name)
    r = Rule(pattern, guards, result, one_line, self.span(t), opvars, returns=self.current.returns,
             bindings=[Binding(name, value, span) for name, value, span in bindings])
    domain = ";".join(f"{v}={sorted(o.name for o in ops)}" for v, ops in opvars.items())
    r.id = "r" + hashlib.sha1(f"{self.current.name}|{domain}|{one_line}".encode()).hexdigest()[:6]
    self.current.rules.append(r)

  def guards(self, t: Tree) -> list[Expr]:
    return [self.guard_expr(c, {}) for c in _conjuncts(t.children[0])]

  def guard_expr(self, t, rename: dict[str, str]) -> Expr:
    x = ExprBuilder(rename).build(t)
    x.span = self.span(t)
    return x

  # ---- patterns ----
  def pattern(self, t) -> Pat:
    k = t.data
    if k == "bind":
      name = str(t.children[0])
      self.check_capture_name(name, t.children[0])
      p = self.pattern(t.children[1])
      if id(p) in self.optionals: raise _Error(f"'{name}@' can't name an optional node (it may be absent): name its first source", *_pos(t))
      if p.name is not None: raise _Error(f"'{name}@' names a node that is already named '{p.name}'", *_pos(t))
      p.name = name
      return p
    if k == "wildcard":
      p = Pat(span=self.span(t))
      if t.children[0] is not None: self.dtypes(p, t.children[0])  # `_:uint64`: any node of that dtype, not bound
      return p
    if k == "capture":
      name = str(t.children[0])
      self.check_capture_name(name, t.children[0])
      p = Pat(name=name, span=self.span(t))
      if t.children[1] is not None: self.dtypes(p, t.children[1])
      return p
    if k == "const_pattern":
      value = _literal_value(t.children[0])
      _check_not_nan(value, t)
      return Pat(ops=frozenset({Ops.CONST}), arg_eq=value, has_arg_eq=True, span=self.span(t))
    if k in ("named_pattern", "named_call"):
      name = str(t.children[0]).rstrip("(")
      if name not in self.named:
        raise _Error(f"unknown pattern '{name}' (an op goes in parentheses: '({name} ...)'; a named pattern needs a 'let')", *_pos(t))
      if name == self.defining: raise _Error(f"pattern '{name}' refers to itself", *_pos(t))
      np = self.named[name]
      args = [str(x) for x in t.children[1:]]
      if np.params is None and k == "named_call": raise _Error(f"pattern '{name}' has no parameters: write it without them, as {name}", *_pos(t))
      if np.params is not None and len(args) != len(np.params):
        want = ", ".join(np.params)
        raise _Error(f"pattern '{name}' takes {len(np.params)} name{'s' if len(np.params) != 1 else ''} ({name}({want})), "
                     f"this gives {'it ' + str(len(args)) if args else 'none'}", *_pos(t))
      for a, tok in zip(args, t.children[1:]): self.check_capture_name(a, tok)
      rename = dict(zip(np.params or (), args))
      # its guards go to the rule (or the named pattern) that uses it, with its parameters renamed
      self.let_guards += [(g, {**m, **{k2: rename.get(v, v) for k2, v in m.items()}, **{p: a for p, a in rename.items() if p not in m}})
                          for g, m in np.guards]
      return _rename_pat(_copy_pat(np.pat), rename)
    if k == "node": return self.node(t)
    raise _Error(f"unexpected pattern '{k}'", *_pos(t))

  def check_capture_name(self, name: str, tok) -> None:
    if name.startswith("_"): raise _Error(f"capture names can't start with '_' ('{name}')", *_pos(tok))
    if keyword.iskeyword(name): raise _Error(f"'{name}' is a Python keyword: it can't name anything here", *_pos(tok))
    if name in ("ctx",): raise _Error("'ctx' is the rewrite context, not a capture name", *_pos(tok))

  def node(self, t: Tree) -> Pat:
    """`(ADD|MUL x y)`, `(A x | CAST (A x))`, `(CAST? x)`: a bare op before `|` (no '!', '?', dtype, arg or sources) lists
    another op for the body after it; bodies with more are alternatives, which must bind the same names."""
    groups: list[list[Tree]] = [[]]
    for b in t.children:
      groups[-1].append(b)
      if any(c is not None for c in b.children[1:]): groups.append([])
    if not groups[-1]: groups.pop()
    alts = [self.node_body(g) for g in groups]
    if len(alts) == 1:
      alts[0].span = self.span(t)  # at its '(' (an alternative's span is where its body starts)
      return alts[0]
    first = alts[0].names()
    for a in alts[1:]:
      if a.names() != first:
        missing, extra = sorted(first - a.names()), sorted(a.names() - first)
        what = (f"'{missing[0]}' is bound by the first alternative, not by this one" if missing
                else f"'{extra[0]}' is not bound by the first alternative")
        raise _Error(f"every alternative must bind the same names: {what}", a.span.line, a.span.col)  # type: ignore[union-attr]
    return Pat(alternatives=tuple(alts), span=self.span(t))

  def node_body(self, bodies: list[Tree]) -> Pat:
    """One alternative: the ops of `bodies` (all bare but the last) with the last one's '!', '?', dtype, arg and sources."""
    refs = [b.children[0] for b in bodies]
    body = bodies[-1]
    _, bang, qmark, dts, argpat, *srcs = body.children
    p = Pat(span=self.span(body))
    ordered = bang is not None
    ops: set[Ops] = set()
    for r in refs:
      if isinstance(r, Tree):  # `Binary - THREEFRY`
        if r.children[0].type == "NAME": raise _Error(f"the for variable '{r.children[0]}' can't have ops taken out of it", *_pos(r))
        ops |= self.minus(r)
        continue
      if r.type == "ANYOP":
        if len(refs) > 1: raise _Error("'_' (any op) can't be combined with other ops", *_pos(r))
        ops = set()
        break
      if r.type == "NAME":
        if len(refs) > 1: raise _Error(f"the for variable '{r}' can't be combined with other ops", *_pos(r))
        scope = [s for s in self.scopes if s[0] == str(r)]
        if not scope: raise _Error(f"unknown op variable '{r}' (ops are upper case; a variable needs an enclosing 'for {r} in ...')", *_pos(r))
        p.opvar = str(r)
        ops = set(scope[0][1])
        break
      ops |= resolve_ops(str(r), *_pos(r))
    p.ops = frozenset(ops) if ops else None
    if dts is not None: self.dtypes(p, dts)
    if argpat is not None: self.argpat(p, argpat.children[0])
    src: list[Pat] = []
    for i, s in enumerate(srcs):
      if s.data == "psplice":
        name = str(s.children[0])
        if i != len(srcs) - 1: raise _Error(f"'{name}*' (the other sources) must come last", *_pos(s))
        self.check_capture_name(name, s.children[0])
        p.rest, p.splice = Pat(span=self.span(s)), name
        continue
      sub = self.pattern(s.children[0])
      if s.children[1] is not None:
        if i != len(srcs) - 1: raise _Error("'...' (any number of sources) must come last", *_pos(s.children[1]))
        p.rest = sub
      else: src.append(sub)
    # no sources written: they are not looked at, as `(LOAD)` matches any LOAD
    p.src = tuple(src) if srcs else None
    if p.ops is not None and p.rest is None:
      p.any_order = not ordered and len(src) == 2 and all(o in GroupOp.Commutative for o in p.ops)
    if ordered and not (p.ops and all(o in GroupOp.Commutative for o in p.ops)):
      raise _Error("'!' (sources in the order written) is only meaningful on commutative ops", *_pos(refs[0]))
    if ordered and not srcs: raise _Error("'!' (sources in the order written) needs the sources written", *_pos(bang))
    return self.optional(p, qmark) if qmark is not None else p

  def minus(self, t: Tree | Token) -> frozenset[Ops]:
    """The ops of `GROUP - OP - ...` (`_ - OP`: every op but those), or of one op or group."""
    if isinstance(t, Token): return resolve_ops(str(t), *_pos(t))
    head, *out = t.children
    ops = frozenset(Ops) if head.type == "ANYOP" else resolve_ops(str(head), *_pos(head))
    for o in out:
      gone = resolve_ops(str(o), *_pos(o))
      if not gone & ops: raise _Error(f"'{o}' is not in '{head}': nothing to take out", *_pos(o))
      ops -= gone
    if not ops: raise _Error(f"'{head}' without {', '.join(map(str, out))} is no op at all", *_pos(head))
    return ops

  def optional(self, p: Pat, qmark: Token) -> Pat:
    """`(CAST? x ...)`: x alone, or the node around it (GCC's `convert?`). Only the first source may bind names."""
    if not p.src: raise _Error("an optional node '?' needs a first source: the pattern that matches without the node", *_pos(qmark))
    inner, others = p.src[0], Pat(src=p.src[1:], rest=p.rest, arg_name=p.arg_name, splice=p.splice)
    if others.names():
      raise _Error(f"only the first source of an optional node can bind names ('{sorted(others.names())[0]}' would be unbound without the node)",
                   *_pos(qmark))
    alt = Pat(alternatives=(p, _copy_pat(inner)), span=p.span)
    self.optionals.add(id(alt))
    return alt

  def dtypes(self, p: Pat, t: Tree) -> None:
    exact: set[DType] = set()
    classes: set[str] = set()
    for n in (c for c in t.children if c.type == "NAME"):
      name = str(n)
      if name in DTYPE_CLASSES: classes.add(name)
      elif name in DTYPE_NAMES: exact.add(DTYPE_NAMES[name])
      else: raise _Error(f"unknown dtype '{name}' (dtype names are those of dtypes, or a class: {', '.join(DTYPE_CLASSES)})", *_pos(n))
    p.dtypes = frozenset(exact) if exact else None
    p.dtype_classes = frozenset(classes) if classes else None

  def argpat(self, p: Pat, e) -> None:
    """`[c]` binds the arg to c; `[0]`, `[(1, 2)]` compare it with a literal; anything else (`[Invalid]`, `[Ops.ADD]`,
    `[1 << 32]`) with an expression of constants: upper-case and imported names, never captures."""
    imported = {n for _, names, _ in self.imports for n in names}
    if isinstance(e, Tree) and e.data == "name" and e.children[0].type == "NAME" and str(e.children[0]) not in imported:
      name = str(e.children[0])
      self.check_capture_name(name, e.children[0])
      p.arg_name = name
      return
    b = ExprBuilder()
    x = b.build(e)
    try: p.arg_eq = literal_value(x.text, *_pos(e))
    except ValueError:
      x.span = self.span(e)
      p.arg_expr = x
      return
    _check_not_nan(p.arg_eq, e)
    p.has_arg_eq = True

  # ---- results ----
  def top_result(self, t) -> Result:
    """A rule's whole result: in a rule set that returns per-source, a tuple (or a helper's call giving one)."""
    per_source = self.current is not None and self.current.returns == "per-source"
    if isinstance(t, Tree) and t.data == "constructor" and per_source and self.tuple_head(t): return self.tuple_result(t)
    if isinstance(t, Tree) and t.data == "tresult":
      if not per_source:
        raise _Error("a tuple result needs a rule set that returns one entry per source: declare it as `ruleset NAME returns per-source`",
                     *_pos(t))
      return self.tuple_result(t)
    r = self.result(t)
    if per_source and not isinstance(r, PyResult):
      raise _Error(f"rule set '{self.current.name}' returns one entry per source: write the result as a tuple, "  # type: ignore[union-attr]
                   "as (x) or ((NEG ctx) _)", *_pos(t))
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
        raise _Error(f"a tuple's entry is a node or '_' (no value), not a tuple{hint}", *_pos(x))
      else: entries.append(self.result(x))
    return TupleResult(entries, self.span(t), self.comp(comp))

  def result(self, t) -> Result:
    if isinstance(t, Token): raise _Error(f"unexpected result {t!r}", *_pos(t))
    k = t.data
    if k == "nothing": raise _Error("'_' (no value) can only be an entry of a tuple result", *_pos(t))
    if k == "splice":
      name = t.children[0]
      raise _Error(f"'{name}*' (sources a pattern bound) can only be spliced among a node's sources, as (OP x {name}*)", *_pos(t))
    if k == "update": return self.update(t)
    if k == "tresult": raise _Error("a tuple can only be a whole result, not a source of a node", *_pos(t))
    if k == "ref": return Ref(str(t.children[0]), self.span(t))
    if k in ("literal", "true", "false", "none"):
      v = _literal_value(t)
      if v is None: raise _Error("a rule can't result in None: leave the rule out, or return None from a helper", *_pos(t))
      return Lit(v, self.span(t))
    if k == "constructor": return self.construct(t)
    if k in ("call", "term_attr", "pyexpr"):
      b = ExprBuilder()
      if k == "call": text = f"{t.children[0]}{b.args(t.children[1])})"; b.names.add(str(t.children[0])[:-1])  # noqa: E702
      elif k == "pyexpr": text = b.emit(t)[0]
      else: text = self.term_attr(t, b)
      return PyResult(Expr(text, frozenset(b.names), 10, self.span(t)), self.span(t))
    raise _Error(f"unexpected result '{k}'", *_pos(t))

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
    it = ExprBuilder().build(t.children[1])
    it.span = self.span(t.children[1])
    cond = None
    if t.children[2] is not None:
      cond = ExprBuilder().build(t.children[2])
      cond.span = self.span(t.children[2])
    return Comprehension(targets, bound, it, cond, self.span(t))

  def construct(self, t: Tree) -> Construct:
    opref, cdt, carg, *srcs, comp = t.children
    op, opvar = None, None
    if opref.type == "NAME":
      if not any(s[0] == str(opref) for s in self.scopes): raise _Error(f"unknown op variable '{opref}'", *_pos(opref))
      opvar = str(opref)
    elif opref.type == "ANYOP": raise _Error("a result needs a real op, not '_'", *_pos(opref))
    else:
      if str(opref) not in Ops.__members__:
        raise _Error(f"unknown op '{opref}'" + (" (a group can't build a node)" if str(opref) in GROUPS else ""), *_pos(opref))
      op = Ops[str(opref)]
    dtype = None
    if cdt is not None:
      names = [str(x) for x in cdt.children]
      if len(names) == 1 and names[0] in DTYPE_NAMES: dtype = Expr(f"dtypes.{names[0]}", frozenset({"dtypes"}), 1, self.span(cdt))
      elif len(names) == 1: raise _Error(f"unknown dtype '{names[0]}'", *_pos(cdt))
      else: dtype = Expr(".".join(names), frozenset({names[0]}), 1, self.span(cdt))
    arg = None
    if carg is not None:
      b = ExprBuilder()
      arg = b.build(carg.children[0])
      arg.span = self.span(carg)
    src = [Splice(str(s.children[0]), self.span(s)) if isinstance(s, Tree) and s.data == "splice" else self.result(s) for s in srcs]
    if comp is not None and not srcs: raise _Error("a comprehension repeats the sources written before its 'for': write them", *_pos(comp))
    return Construct(op, opvar, dtype, arg, src, self.span(t), self.comp(comp))

  def update(self, t: Tree) -> Update:
    """`x{field: value, ...}`: a bare dtype name is that dtype (as in (CAST:float32 ...)), a bare op name that op."""
    name = str(t.children[0])[:-1]
    fields: dict[str, Expr] = {}
    for f in t.children[1:]:
      if f is None: continue
      key, value = str(f.children[0]), f.children[1]
      if key not in UPDATE_FIELDS:
        raise _Error(f"a node has no field '{key}' to replace: {', '.join(UPDATE_FIELDS)}{_did_you_mean(key, UPDATE_FIELDS)}", *_pos(f))
      if key in fields: raise _Error(f"field '{key}' is given twice", *_pos(f))
      bare = str(value.children[0]) if isinstance(value, Tree) and value.data == "name" else None
      if key == "dtype" and bare in DTYPE_NAMES: e = Expr(f"dtypes.{bare}", frozenset({"dtypes"}), 1)
      elif key == "op" and bare is not None and bare[:1].isupper():
        resolve_ops(bare, *_pos(value))
        if bare not in Ops.__members__: raise _Error(f"'{bare}' is a group of ops: a node gets one op", *_pos(value))
        e = Expr(f"Ops.{bare}", frozenset({"Ops"}), 1)
      else: e = ExprBuilder().build(value)
      # sources are a tuple: anything else (a list, `(x,) + rest`) is made one
      if key == "src" and not (isinstance(value, Tree) and value.data == "tuple"): e.text = f"tuple({e.text})"
      e.span = self.span(value)
      fields[key] = e
    return Update(name, fields, self.span(t))

UPDATE_FIELDS = ("op", "dtype", "arg", "src")

def _did_you_mean(name: str, choices) -> str:
  import difflib
  close = difflib.get_close_matches(name, list(choices), n=1)
  return f" (did you mean '{close[0]}'?)" if close else ""

def _expected_hint(expected: set[str]) -> str:
  e = set(expected)
  if "RETURNS" in e: return ", expected 'returns per-source' or a doc string"
  if e == {"RETKIND"}: return ", expected 'per-source' (what each rule results in: a tuple, one entry per source)"
  if "RPAR" in e and len(e) <= 3: return ", expected ')'"
  if e & {"__ANON_0", "MINUS_GT"} or any("->" in x for x in e): return ", expected 'if' or '->'"
  return ""

def _check_not_nan(value: Any, t) -> None:
  # a pattern tests the arg with ==, and nan == nan is False: such a rule could never fire
  if isinstance(value, float) and value != value:
    raise _Error("nan equals nothing, not even nan: match any constant and test it in a guard, as c@(CONST) if {math.isnan(c.arg)}", *_pos(t))

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

def _depth(p: Pat) -> int:
  """How deep a pattern nests (iteratively: this guards the recursive passes after it)."""
  deepest, stack = 0, [(p, 1)]
  while stack:
    x, d = stack.pop()
    deepest = max(deepest, d)
    stack += [(s, d + 1) for s in (*(x.src or ()), *((x.rest,) if x.rest else ()), *(x.alternatives or ()))]
  return deepest

def _copy_pat(p: Pat) -> Pat:
  import copy
  return copy.deepcopy(p)

def _rename_pat(p: Pat, rename: dict[str, str]) -> Pat:
  if rename:
    for x in p.walk():
      x.name, x.arg_name, x.splice = (rename.get(n, n) if n else n for n in (x.name, x.arg_name, x.splice))
  return p

def _rename_python(text: str, rename: dict[str, str]) -> str:
  class Renamer(ast.NodeTransformer):
    def visit_Name(self, n: ast.Name) -> ast.AST: return ast.copy_location(ast.Name(rename.get(n.id, n.id), n.ctx), n)
  return ast.unparse(Renamer().visit(_parse_python(text)))

def _conjuncts(e) -> list:
  """The parts of a top-level `and`: each is a test of its own."""
  return e.children if isinstance(e, Tree) and e.data == "and_" else [e]

@dataclass
class NamedPattern:
  """A `let`: its pattern, its parameters (None: its captures bind in the rule that uses it) and its guards (expression
  trees, with the renames of the named patterns it uses in turn)."""
  pat: Pat
  params: tuple[str, ...] | None
  guards: list[tuple[Any, dict[str, str]]]

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

__all__ = ["parse_rules", "resolve_ops", "DTYPE_CLASSES", "GROUPS", "CallResult", "Lit", "Ref", "Construct", "PyResult"]
