"""The rule IR: what both front ends (.rules text and Python UPats) produce and the checks and emitter consume.

A rule is a pattern (a tree of `Pat`), guards (Python expressions over the pattern's captures) and a result.
"""
from __future__ import annotations
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator
from runtime.dtype import DType
from runtime.ops import GroupOp, Ops

@dataclass(frozen=True)
class Span:
  file: str
  line: int
  col: int
  end_line: int = 0
  end_col: int = 0
  def __str__(self) -> str: return f"{self.file}:{self.line}:{self.col}"

@dataclass(eq=False)
class Pat:
  """Matches one node. None in a field means "anything"."""
  ops: frozenset[Ops] | None = None          # the node's op is one of these
  opvar: str | None = None                   # a `for` variable: the op is bound to it (the same name twice: the same op)
  dtypes: frozenset[DType] | None = None     # the node's dtype is one of these
  dtype_classes: frozenset[str] | None = None  # or its scalar is in one of these classes ("ints", "floats", ...)
  arg_eq: Any = None                         # the node's arg == this value (when has_arg_eq)
  has_arg_eq: bool = False
  arg_name: str | None = None                # the arg is bound to this name (the same name twice: equal args)
  src: tuple[Pat, ...] | None = None         # the sources, in order (None: sources are not looked at)
  rest: Pat | None = None                    # every source after `src` matches this (any number of them)
  any_order: bool = False                    # `src` may match in any order of the node's sources
  name: str | None = None                    # the node is bound to this name (the same name twice: the same node)
  alternatives: tuple[Pat, ...] | None = None  # matches if any alternative does (UPat.any); other fields unused
  span: Span | None = None
  perm: tuple[int, ...] | None = None        # set by emit.variants on a root: the node's source each written source matched
  splice: str | None = None                  # `rest*` last: the sources after `src` are bound to this name, as a tuple
  arg_expr: Expr | None = None               # the arg == this expression of constants (`[Invalid]`, `[1 << 32]`)

  def walk(self, rest: bool = True, skip: Pat | None = None) -> Iterator[Pat]:
    """This pattern and every one inside it: sources, alternatives, and repeated patterns (unless rest=False)."""
    stack: list[Pat] = [self]
    while stack:
      x = stack.pop()
      if x is skip: continue
      yield x
      stack += list(x.src or ()) + ([x.rest] if x.rest is not None and rest else []) + list(x.alternatives or ())

  def names(self, skip: Pat | None = None) -> set[str]:
    """Every capture name in the pattern: nodes, args and spliced sources."""
    return {n for x in self.walk(skip=skip) for n in (x.name, x.arg_name, x.splice) if n}

  def is_wildcard(self) -> bool:
    return (self.ops is None and self.opvar is None and self.dtypes is None and self.dtype_classes is None and not self.has_arg_eq
            and self.arg_name is None and self.src is None and self.rest is None and self.alternatives is None and self.splice is None
            and self.arg_expr is None)

@dataclass(eq=False)
class Expr:
  """A Python expression (a guard, an arg, a call argument) with the names it reads."""
  text: str
  names: frozenset[str]
  cost: int = 1                              # 1: attribute tests; 3: range analysis; 10: calls
  span: Span | None = None
  binds: str | None = None                   # a guard `name := value`: binds name (the rule does not fire when it is None)

# ---- results ----

@dataclass(eq=False)
class Ref:
  """The node (or op or arg) bound to a name."""
  name: str
  span: Span | None = None

@dataclass(eq=False)
class Lit:
  """A Python constant: as a result or a source it becomes a CONST of the dtype the context gives."""
  value: Any
  span: Span | None = None

@dataclass(eq=False)
class Comprehension:
  """`for TARGETS in ITER [if COND] [for ...]` after a constructor's sources, a tuple's entries or a sequence's element:
  they repeat once per element (of the innermost clause, as in Python)."""
  targets: str                               # Python text: `i`, `i, j`, `(b, e), d`
  bound: frozenset[str]                      # the names the targets of every clause bind (local to the comprehension)
  iter: Expr
  cond: Expr | None = None
  span: Span | None = None
  inner: Comprehension | None = None         # the next `for` clause (it may read this one's names)

  def clauses(self) -> list[Comprehension]:
    out, c = [], self
    while c is not None: out, c = out + [c], c.inner
    return out

  def head(self) -> str:
    """The Python text after the element: `t in it if cond for t2 in it2 ...`."""
    return " for ".join(f"{c.targets} in {c.iter.text}" + (f" if {c.cond.text}" if c.cond is not None else "") for c in self.clauses())

  def exprs(self) -> list[Expr]:
    return [e for c in self.clauses() for e in (c.iter, c.cond) if e is not None]

@dataclass(eq=False)
class Construct:
  """A new node: op (or a `for` variable's op), dtype (None: inferred), arg, sources (repeated by comp, if any)."""
  op: Ops | None
  opvar: str | None
  dtype: Expr | None
  arg: Expr | None
  src: list[Result]
  span: Span | None = None
  comp: Comprehension | None = None

@dataclass(eq=False)
class PyResult:
  """A Python expression: a node, a number (made a CONST), or None (the rule does not fire)."""
  expr: Expr
  span: Span | None = None

@dataclass(eq=False)
class CallResult:
  """A Python function (UPat front end) called with the captures it names; None means the rule does not fire."""
  fn: Callable
  params: tuple[str, ...]
  span: Span | None = None

@dataclass(eq=False)
class Splice:
  """`rest*` among a constructor's sources: the sources a pattern's `rest*` bound, in place."""
  name: str
  span: Span | None = None

@dataclass(eq=False)
class Update:
  """`x{dtype: ..., arg: ...}`: the node bound to `name` with some of its fields (op, dtype, arg, src, tag) replaced."""
  name: str
  fields: dict[str, Expr]
  span: Span | None = None

@dataclass(eq=False)
class TupleResult:
  """A tuple: in a rule set that `returns per-source`, one entry per source of the pattern as written (None: no value)."""
  entries: list[Result | None]
  span: Span | None = None
  comp: Comprehension | None = None          # the entries repeat once per element (their number is known when it fires)

@dataclass(eq=False)
class Seq:
  """`[TERM for TARGETS in ITER if COND]`: the term once per element, a list of nodes. A `where` value (spliced as `name*`), or
  spliced in place among a constructor's sources (`(AT x v [... for ...]*)`)."""
  elem: Result
  comp: Comprehension
  span: Span | None = None

@dataclass(eq=False)
class Cond:
  """`A if TEST else B`: a `where` value or a sequence's element that is one of two results."""
  test: Expr
  then: Result
  other: Result
  span: Span | None = None

Result = Ref | Lit | Construct | PyResult | CallResult | TupleResult | Splice | Update | Seq | Cond

@dataclass(eq=False)
class Binding:
  """`where name = value`: a part of a rule's result with a name, built once after the rule matched."""
  name: str
  value: Result
  span: Span | None = None
  hidden: bool = False                       # made by the parser for a node built inside an expression (`f((NEG x))`)

@dataclass(eq=False)
class Rule:
  pattern: Pat
  guards: list[Expr]
  result: Result
  text: str                                  # the rule as written (one line), for comments and statistics
  span: Span
  opvars: dict[str, frozenset[Ops]] = field(default_factory=dict)  # `for` variables in scope and their ops
  id: str = ""
  returns: str = "node"                      # its rule set's kind of result (RuleSet.returns)
  bindings: list[Binding] = field(default_factory=list)  # `where name = term`, in order: evaluated before the result
  priority: int = 0                          # `priority N` before it: rules are tried by priority, then in file order

@dataclass(eq=False)
class RuleSet:
  name: str
  doc: str
  rules: list[Rule]
  span: Span
  compose: list[str] | None = None           # `ruleset a = b + c`: the sets it concatenates
  params: dict[str, str | None] = field(default_factory=dict)  # `ruleset g(ctx: UOp, caps)`: parameter -> its type's name
  returns: str = "node"                      # what each rule results in: "node", or "per-source" (a tuple, one per source)

  @property
  def caps(self) -> list[str]:
    """The parameters other than ctx: the generated rule set is a function of them, `late(caps)` -> a Matcher."""
    return [p for p in self.params if p != "ctx"]

@dataclass(eq=False)
class CtxMember:
  """One thing a declared context offers: a method `f(x, y) -> type`, a field `name: type`, or indexing `[x] -> type`."""
  name: str                                  # "[]" for indexing
  kind: str                                  # "method", "field" or "index"
  params: tuple[str, ...]
  type: str                                  # node, bool, int, ..., None, or a class name (documentation; `check` knows the names)
  span: Span

@dataclass(eq=False)
class CtxDecl:
  """`ctx KernelContext: is_input(x) -> bool, ...`: what a rule set declared `(ctx: KernelContext)` may read of ctx."""
  name: str
  members: dict[str, CtxMember]
  span: Span
  impls: tuple[str, ...] = ()                # `ctx NAME(A, B): ...`: the classes that implement it

@dataclass(eq=False)
class RuleFile:
  path: str
  source: str
  rulesets: list[RuleSet]
  imports: list[tuple[str, list[str], Span]]  # (module, names, where)
  header: str = ""                           # the leading comment block, kept as the generated module's docstring
  contexts: dict[str, CtxDecl] = field(default_factory=dict)  # `ctx NAME: ...` declarations

# ---- queries on rules, for every phase after parsing ----

def root_ops(rule: Rule) -> frozenset[Ops] | None:
  """The ops a rule's root can match (None: any op)."""
  pats = rule.pattern.alternatives or (rule.pattern,)
  if any(p.ops is None for p in pats): return None
  return frozenset().union(*(p.ops for p in pats))  # type: ignore[arg-type]

def is_unconditional(rule: Rule) -> bool:
  """No guard, and a result that is never None: the rule fires whenever its pattern matches."""
  return not rule.guards and fires_when_guards_hold(rule)

def fires_when_guards_hold(rule: Rule) -> bool:
  """A result that is never None: the rule fires whenever its pattern matches and its guards hold."""
  if isinstance(rule.result, (PyResult, CallResult)): return False
  if isinstance(rule.result, Cond) and any(isinstance(x, (PyResult, CallResult)) for x in (rule.result.then, rule.result.other)): return False
  if any(isinstance(b.value, (PyResult, CallResult)) for b in rule.bindings): return False
  # a name bound only inside a repeated pattern is None when it repeats zero times
  rest_only = set().union(*(x.rest.names() for x in rule.pattern.walk(rest=False) if x.rest is not None))
  return not (isinstance(rule.result, Ref) and rule.result.name in rest_only)

def has_repeated_names(p: Pat) -> bool:
  """A name bound twice in the pattern (the same node, op or arg twice: a constraint between two places)."""
  seen = [n for x in p.walk() for n in (x.name, x.arg_name, x.opvar) if n]
  return len(seen) != len(set(seen))

def is_fold(r: Construct) -> bool:
  """An associative op (ADD, MUL, AND, ...) with more than two sources, any number spliced, or a comprehension: a fold."""
  if r.op is None or r.op not in GroupOp.Associative: return False
  return r.comp is not None or len(r.src) > 2 or any(isinstance(s, (Splice, Seq)) for s in r.src)
