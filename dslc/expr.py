"""Expressions of the .rules language (guards, args, call arguments, {python}) and literals: a Lark tree to Python source, with
the names it reads and a cost estimate. Used by the parser (parse.py, parse_patterns.py, parse_results.py).
"""
from __future__ import annotations
import ast, math, operator, re, warnings
from typing import Any, Callable
from lark import Token, Tree
from runtime.ops import Ops
from dslc.ir import Expr

class SourceError(Exception):
  """A problem at a line and column of the source; the parser turns it into a Diagnostic."""
  def __init__(self, message: str, line: int, col: int):
    super().__init__(message)
    self.line, self.col = line, col

def pos(t: Tree | Token) -> tuple[int, int]:
  if isinstance(t, Token): return t.line or 1, t.column or 1
  m = t.meta
  return (getattr(m, "line", 1) or 1, getattr(m, "column", 1) or 1)

def parse_python(text: str) -> ast.Expression:
  with warnings.catch_warnings():
    # what Python only warns about (`1if x else 2`, `x is 1`) is an error here: it is reported at the rule, not on stderr
    warnings.simplefilter("error", SyntaxWarning)
    return ast.parse(text, mode="eval")

def free_names(text: str, line: int, col: int) -> frozenset[str]:
  try: tree = parse_python(text)
  except SyntaxError as e:
    # `{f((NEG x))}`: a constructor is .rules, not Python
    node = re.search(r"\(\s*[A-Z][A-Z0-9_]*[\s:\[]", text) is not None
    hint = " (a node, (OP ...), is .rules syntax, not Python: build it outside the braces, as f((NEG x)))" if node else ""
    raise SourceError(f"invalid Python expression: {e.msg}{hint}", line, col + max((e.offset or 1) - 1, 0)) from None
  except (RecursionError, MemoryError): raise SourceError("this Python expression is nested too deeply", line, col) from None
  loads, stores = set(), set()
  for n in ast.walk(tree):
    # yield/await would turn the generated matcher into a generator or a syntax error, and := could overwrite its variables
    if isinstance(n, (ast.Yield, ast.YieldFrom, ast.Await, ast.NamedExpr)):
      what = {ast.Yield: "yield", ast.YieldFrom: "yield from", ast.Await: "await", ast.NamedExpr: "':='"}[type(n)]
      raise SourceError(f"{what} is not allowed in a {{python}} expression", line, col)
    if isinstance(n, ast.Name): (loads if isinstance(n.ctx, ast.Load) else stores).add(n.id)
    elif isinstance(n, ast.arg): stores.add(n.arg)
  return frozenset(loads - stores)

class ExprBuilder:
  """Turns an expression tree into (python text, precedence); collects the names it reads. `rename` maps a named pattern's
  parameters to the names a use gave them. `node` takes a node built inside the expression, `(NEG x)`, and gives the name
  that holds it (results only: elsewhere there is none)."""
  def __init__(self, rename: dict[str, str] | None = None, node: Callable[[Tree], str] | None = None):
    self.names: set[str] = set()
    self.cost = 1
    self.rename = rename or {}
    self.node = node

  def build(self, t: Tree | Token) -> Expr:
    text = self.wrap(t, 1)  # a conditional expression in parentheses: callers put the text after `and`, `in`, ...
    line, col = pos(t)
    return Expr(text, frozenset(self.names), self.cost, None)

  def emit(self, t: Tree | Token) -> tuple[str, float]:
    if isinstance(t, Token): return self.token(t), 9
    k = t.data
    c = t.children
    if k == "or_" or k == "and_":
      word, p = (" or ", 1) if k == "or_" else (" and ", 2)
      return word.join(self.wrap(x, p) for x in c), p
    if k == "ifexp": return f"{self.wrap(c[0], 1)} if {self.wrap(c[1], 1)} else {self.wrap(c[2], 0.5)}", 0.5
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
    if k == "getslice":
      lo, hi = (self.emit(x)[0] if x is not None else "" for x in c[1:])
      return f"{self.wrap(c[0], 9)}[{lo}:{hi}]", 9
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
      if head == "Ops" and attr not in Ops.__members__: raise SourceError(f"unknown op '{attr}'", *pos(c[0]))
      self.names.add(head)
      return str(c[0]), 9
    if k in ("literal", "true", "false", "none"):
      literal_node_value(t)  # an invalid number (`03`) is reported here, not as broken generated code
      return literal_text(t), 9
    if k == "string":
      literal_value(str(c[0]), *pos(c[0]))  # likewise an invalid escape ("\\N")
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
    if k == "walrus":
      raise SourceError(f"a binding `{c[0]} := ...` is a whole part of a rule's guard, between `if` and `->` and joined by `and`: "
                        f"`if {c[0]} := f(x) and {c[0]} > 1`", *pos(t))
    if k == "node_expr":
      if self.node is None:
        raise SourceError(f"a node, ({c[0]} ...), can be built only in a rule's result: in the result, a `where` value, an update's fields, "
                          "a constructor's [arg] or a helper's arguments there (a guard or a pattern compares with what is matched)", *pos(t))
      name = self.node(t)
      self.names.add(name)
      return name, 9
    if k == "pyexpr":
      text = str(c[0])[1:-1].strip()
      names = free_names(text, *pos(c[0]))
      if names & self.rename.keys(): text, names = rename_python(text, self.rename), frozenset(self.rename.get(n, n) for n in names)
      self.names |= names
      self.cost = 10
      return f"({text})", 9
    raise SourceError(f"unexpected expression '{k}'", *pos(t))

  def comprehension(self, body, comp: Tree) -> str:
    """`body for targets in iter [if cond] [for ...]`: the targets are local, so they are not names the expression reads
    (a clause's iter reads the names of the clauses before it)."""
    clauses, bound, c = [], frozenset(), comp
    while c is not None:
      targets, names = comp_targets(c.children[0])
      clauses.append((targets, c.children[1], c.children[2], bound))
      bound = bound | names
      c = c.children[3]
    inner = ExprBuilder({k: v for k, v in self.rename.items() if k not in bound}, self.node)
    parts = []
    for targets, it, cond, before in clauses:
      # the first clause's iter is read outside the comprehension; the others' see the targets before them
      reader = self if not before else inner
      parts.append(f"for {targets} in {reader.wrap(it, 1)}" + (f" if {inner.wrap(cond, 1)}" if cond is not None else ""))
    text = f"{inner.emit(body)[0]} " + " ".join(parts)
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

def literal_text(t: Tree) -> str:
  if t.data == "true": return "True"
  if t.data == "false": return "False"
  if t.data == "none": return "None"
  if t.data == "cexpr": return " ".join(str(x.children[0]) if x.data == "cop" else literal_text(x) for x in t.children)
  if isinstance(t.children[0], Tree): return literal_text(t.children[0])
  return str(t.children[0])

def literal_node_value(t: Tree) -> Any:
  tok = t.children[0] if t.children else t
  if isinstance(tok, Tree) and tok.data == "cexpr" or t.data == "cexpr":
    e = tok if t.data != "cexpr" else t
    return const_value(literal_text(e), *pos(e))
  return literal_value(literal_text(t), *pos(tok))

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
      if isinstance(n.op, (ast.Pow, ast.LShift)) and isinstance(b, int) and b > 1024:
        raise SourceError(f"{text}: this constant is too large", line, col)
      try: return _CONST_OPS[type(n.op)](a, b)
      except (ArithmeticError, ValueError, TypeError) as e: raise SourceError(f"{text}: {e}", line, col) from None
    raise SourceError(f"invalid constant expression {text}", line, col)
  try: tree = parse_python(text)
  except SyntaxError as e: raise SourceError(f"invalid constant expression {text}: {e.msg}", line, col) from None
  return ev(_InfNan().visit(tree).body)

class _InfNan(ast.NodeTransformer):
  # `inf` and `nan` are numbers in .rules (generated modules define them); Python's literal_eval does not know them
  def visit_Name(self, n: ast.Name) -> ast.AST: return ast.Constant(math.inf if n.id == "inf" else math.nan) if n.id in ("inf", "nan") else n

def literal_value(text: str, line: int, col: int) -> Any:
  """The Python value of a literal written in a .rules file; an invalid one (`03`, `"\\N"`) is a diagnostic, not a crash."""
  try: tree = parse_python(text.strip())
  except SyntaxError as e: raise SourceError(f"invalid literal {text.strip()}: {e.msg}", line, col) from None
  except (RecursionError, MemoryError): raise SourceError("this literal is nested too deeply", line, col) from None
  # ValueError: not a literal (callers that accept other expressions catch it); TypeError: an unhashable key, as {[1]: 2}
  try: return ast.literal_eval(_InfNan().visit(tree))
  except TypeError as e: raise ValueError(str(e)) from None

def rename_python(text: str, rename: dict[str, str]) -> str:
  class Renamer(ast.NodeTransformer):
    def visit_Name(self, n: ast.Name) -> ast.AST: return ast.copy_location(ast.Name(rename.get(n.id, n.id), n.ctx), n)
  return ast.unparse(Renamer().visit(parse_python(text)))

def conjuncts(e) -> list:
  """The parts of a top-level `and`: each is a test of its own. `a and b and c` nests to the left, as (a and b) and c; with a
  binding among them (`d := f(x)`) every part is one, so the binding splits the guard where it is written."""
  if not (isinstance(e, Tree) and e.data == "and_"): return [e]
  flat = [x for c in e.children for x in conjuncts(c)]
  return flat if any(isinstance(x, Tree) and x.data == "walrus" for x in flat) else e.children
