"""The patterns of .rules rules: Lark trees -> Pat (ir.py), with ops, groups, dtypes and named patterns resolved. A mixin of
the parser (parse.py): it reads the parser's state (for scopes, named patterns, imports).
"""
from __future__ import annotations
import copy, keyword
from dataclasses import dataclass
from typing import Any
from lark import Token, Tree
from runtime.dtype import DTYPE_NAMES, DType
from runtime.ops import ARITY, GroupOp, Ops
from dslc.diagnostics import did_you_mean
from dslc.expr import ExprBuilder, SourceError, literal_node_value, literal_value, pos
from dslc.ir import Pat
from dslc.lang import DTYPE_CLASSES, GROUPS

def resolve_ops(name: str, line: int, col: int) -> frozenset[Ops]:
  if name in Ops.__members__: return frozenset({Ops[name]})
  if name in GROUPS: return GROUPS[name]
  raise SourceError(f"unknown op or op group '{name}'{did_you_mean(name, [*Ops.__members__, *GROUPS])}", line, col)

@dataclass
class NamedPattern:
  """A `let`: its pattern, its parameters (None: its captures bind in the rule that uses it) and its guards (expression
  trees, with the renames of the named patterns it uses in turn)."""
  pat: Pat
  params: tuple[str, ...] | None
  guards: list[tuple[Any, dict[str, str]]]

class PatternReader:
  """Reads patterns; FileParser supplies scopes, named, imports, optionals, defining, let_guards and span()."""
  def pattern(self, t) -> Pat:
    k = t.data
    if k == "bind":
      name = str(t.children[0])
      self.check_capture_name(name, t.children[0])
      p = self.pattern(t.children[1])
      if id(p) in self.optionals: raise SourceError(f"'{name}@' can't name an optional node (it may be absent): name its first source", *pos(t))
      if p.name is not None: raise SourceError(f"'{name}@' names a node that is already named '{p.name}'", *pos(t))
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
      value = literal_node_value(t.children[0])
      check_not_nan(value, t)
      return Pat(ops=frozenset({Ops.CONST}), arg_eq=value, has_arg_eq=True, span=self.span(t))
    if k in ("named_pattern", "named_call"):
      name = str(t.children[0]).rstrip("(")
      if name not in self.named:
        raise SourceError(f"unknown pattern '{name}' (an op goes in parentheses: '({name} ...)'; a named pattern needs a 'let')", *pos(t))
      if name == self.defining: raise SourceError(f"pattern '{name}' refers to itself", *pos(t))
      np = self.named[name]
      args = [str(x) for x in t.children[1:]]
      if np.params is None and k == "named_call": raise SourceError(f"pattern '{name}' has no parameters: write it without them, as {name}", *pos(t))
      if np.params is not None and len(args) != len(np.params):
        want = ", ".join(np.params)
        raise SourceError(f"pattern '{name}' takes {len(np.params)} name{'s' if len(np.params) != 1 else ''} ({name}({want})), "
                          f"this gives {'it ' + str(len(args)) if args else 'none'}", *pos(t))
      for a, tok in zip(args, t.children[1:]): self.check_capture_name(a, tok)
      rename = dict(zip(np.params or (), args))
      # its guards go to the rule (or the named pattern) that uses it, with its parameters renamed
      self.let_guards += [(g, {**m, **{k2: rename.get(v, v) for k2, v in m.items()}, **{p: a for p, a in rename.items() if p not in m}})
                          for g, m in np.guards]
      return rename_pat(copy_pat(np.pat), rename)
    if k == "node": return self.node(t)
    raise SourceError(f"unexpected pattern '{k}'", *pos(t))

  def check_capture_name(self, name: str, tok) -> None:
    if name.startswith("_"): raise SourceError(f"capture names can't start with '_' ('{name}')", *pos(tok))
    if keyword.iskeyword(name): raise SourceError(f"'{name}' is a Python keyword: it can't name anything here", *pos(tok))
    if name in ("ctx",): raise SourceError("'ctx' is the rewrite context, not a capture name", *pos(tok))

  def node(self, t: Tree) -> Pat:
    """`(ADD|MUL x y)`, `(A x | CAST (A x))`, `(CAST? x)`: a bare op before `|` (no '!', '?', dtype, arg or sources) lists
    another op for the body after it; bodies with more are alternatives, which must bind the same names."""
    groups: list[list[Tree]] = [[]]
    for b in t.children:
      groups[-1].append(b)
      if any(c is not None for c in b.children[1:]): groups.append([])
    if not groups[-1]: groups.pop()
    alts = [self.node_body(g, first=i == 0) for i, g in enumerate(groups)]
    if len(alts) == 1:
      alts[0].span = self.span(t)  # at its '(' (an alternative's span is where its body starts)
      return alts[0]
    first = alts[0].names()
    for a in alts[1:]:
      if a.names() != first:
        missing, extra = sorted(first - a.names()), sorted(a.names() - first)
        what = (f"'{missing[0]}' is bound by the first alternative, not by this one" if missing
                else f"'{extra[0]}' is not bound by the first alternative")
        raise SourceError(f"every alternative must bind the same names: {what}", a.span.line, a.span.col)  # type: ignore[union-attr]
    return Pat(alternatives=tuple(alts), span=self.span(t))

  def node_body(self, bodies: list[Tree], first: bool = True) -> Pat:
    """One alternative: the ops of `bodies` (all bare but the last) with the last one's '!', '?', dtype, arg and sources."""
    refs = [b.children[0] for b in bodies]
    body = bodies[-1]
    _, bang, qmark, dts, argpat, *srcs = body.children
    p = Pat(span=self.span(body))
    ordered = bang is not None
    ops: set[Ops] = set()
    named: list[tuple[Ops, Token, bool]] = []  # ops written by name (not a group): (op, where, written bare before a '|')
    for i, r in enumerate(refs):
      if isinstance(r, Token) and r.type == "UNAME" and str(r) in Ops.__members__: named.append((Ops[str(r)], r, not first and i < len(refs) - 1))
      if isinstance(r, Tree):  # `Binary - THREEFRY`
        if r.children[0].type == "NAME": raise SourceError(f"the for variable '{r.children[0]}' can't have ops taken out of it", *pos(r))
        ops |= self.minus(r)
        continue
      if r.type == "ANYOP":
        if len(refs) > 1: raise SourceError("'_' (any op) can't be combined with other ops", *pos(r))
        ops = set()
        break
      if r.type == "NAME":
        if len(refs) > 1: raise SourceError(f"the for variable '{r}' can't be combined with other ops", *pos(r))
        scope = [s for s in self.scopes if s[0] == str(r)]
        if not scope: raise SourceError(f"unknown op variable '{r}' (ops are upper case; a variable needs an enclosing 'for {r} in ...')", *pos(r))
        p.opvar = str(r)
        ops = set(scope[0][1])
        break
      ops |= resolve_ops(str(r), *pos(r))
    p.ops = frozenset(ops) if ops else None
    if dts is not None: self.dtypes(p, dts)
    if argpat is not None: self.argpat(p, argpat.children[0])
    src: list[Pat] = []
    for i, s in enumerate(srcs):
      if s.data == "psplice":
        name = str(s.children[0])
        if i != len(srcs) - 1: raise SourceError(f"'{name}*' (the other sources) must come last", *pos(s))
        self.check_capture_name(name, s.children[0])
        p.rest, p.splice = Pat(span=self.span(s)), name
        continue
      sub = self.pattern(s.children[0])
      if s.children[1] is not None:
        if i != len(srcs) - 1: raise SourceError("'...' (any number of sources) must come last", *pos(s.children[1]))
        p.rest = sub
      else: src.append(sub)
    # no sources written: they are not looked at, as `(LOAD)` matches any LOAD
    p.src = tuple(src) if srcs else None
    if p.ops is not None and p.rest is None:
      p.any_order = not ordered and len(src) == 2 and all(o in GroupOp.Commutative for o in p.ops)
    if ordered and not (p.ops and all(o in GroupOp.Commutative for o in p.ops)):
      raise SourceError("'!' (sources in the order written) is only meaningful on commutative ops", *pos(refs[0]))
    if ordered and not srcs: raise SourceError("'!' (sources in the order written) needs the sources written", *pos(bang))
    if len(refs) > 1: self.check_listed_arity(named, p)
    return self.optional(p, qmark) if qmark is not None else p

  def check_listed_arity(self, named: list, p: Pat) -> None:
    """An op listed with others, `(NEG|ADD x y)` or a bare `(... | NEG | ADD x y)`, whose number of sources the body can't
    have: it would never match, and no other check says so (the node matches the others)."""
    if p.src is None: return
    n = len(p.src)
    for o, tok, bare in named:
      k = ARITY.get(o)
      if k is None or (k == n if p.rest is None else k >= n): continue
      what = f"{n} or more" if p.rest is not None else str(n)
      if bare:
        raise SourceError(f"{o.name}, bare before '|', joins the next alternative, whose body gives it {what} source{'s' if what != '1' else ''}, "
                          f"and {o.name} takes {k}: it never matches. Give it a body of its own, ({o.name} _...), or list it with ops of its "
                          "arity", *pos(tok))
      raise SourceError(f"{o.name} takes {k} source{'s' if k != 1 else ''}, this body gives it {what}: listed here it never matches", *pos(tok))

  def minus(self, t: Tree | Token) -> frozenset[Ops]:
    """The ops of `GROUP - OP - ...` (`_ - OP`: every op but those), or of one op or group."""
    if isinstance(t, Token): return resolve_ops(str(t), *pos(t))
    head, *out = t.children
    ops = frozenset(Ops) if head.type == "ANYOP" else resolve_ops(str(head), *pos(head))
    for o in out:
      gone = resolve_ops(str(o), *pos(o))
      if not gone & ops: raise SourceError(f"'{o}' is not in '{head}': nothing to take out", *pos(o))
      ops -= gone
    if not ops: raise SourceError(f"'{head}' without {', '.join(map(str, out))} is no op at all", *pos(head))
    return ops

  def optional(self, p: Pat, qmark: Token) -> Pat:
    """`(CAST? x ...)`: x alone, or the node around it (GCC's `convert?`). Only the first source may bind names."""
    if not p.src: raise SourceError("an optional node '?' needs a first source: the pattern that matches without the node", *pos(qmark))
    inner, others = p.src[0], Pat(src=p.src[1:], rest=p.rest, arg_name=p.arg_name, splice=p.splice)
    if others.names():
      raise SourceError(f"only the first source of an optional node can bind names ('{sorted(others.names())[0]}' would be unbound without the node)",
                        *pos(qmark))
    alt = Pat(alternatives=(p, copy_pat(inner)), span=p.span)
    self.optionals.add(id(alt))
    return alt

  def dtypes(self, p: Pat, t: Tree) -> None:
    exact: set[DType] = set()
    classes: set[str] = set()
    for n in (c for c in t.children if c.type == "NAME"):
      name = str(n)
      if name in DTYPE_CLASSES: classes.add(name)
      elif name in DTYPE_NAMES: exact.add(DTYPE_NAMES[name])
      else:
        hint = did_you_mean(name, [*DTYPE_NAMES, *DTYPE_CLASSES]) or f" (dtype names are those of dtypes, or a class: {', '.join(DTYPE_CLASSES)})"
        raise SourceError(f"unknown dtype '{name}'{hint}", *pos(n))
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
    try: p.arg_eq = literal_value(x.text, *pos(e))
    except ValueError:
      x.span = self.span(e)
      p.arg_expr = x
      return
    check_not_nan(p.arg_eq, e)
    p.has_arg_eq = True

def check_not_nan(value: Any, t) -> None:
  # a pattern tests the arg with ==, and nan == nan is False: such a rule could never fire
  if isinstance(value, float) and value != value:
    raise SourceError("nan equals nothing, not even nan: match any constant and test it in a guard, as c@(CONST) if {math.isnan(c.arg)}", *pos(t))

def pattern_depth(p: Pat) -> int:
  """How deep a pattern nests (iteratively: this guards the recursive passes after it)."""
  deepest, stack = 0, [(p, 1)]
  while stack:
    x, d = stack.pop()
    deepest = max(deepest, d)
    stack += [(s, d + 1) for s in (*(x.src or ()), *((x.rest,) if x.rest else ()), *(x.alternatives or ()))]
  return deepest

def copy_pat(p: Pat) -> Pat:
  return copy.deepcopy(p)

def rename_pat(p: Pat, rename: dict[str, str]) -> Pat:
  if rename:
    for x in p.walk():
      x.name, x.arg_name, x.splice = (rename.get(n, n) if n else n for n in (x.name, x.arg_name, x.splice))
  return p
