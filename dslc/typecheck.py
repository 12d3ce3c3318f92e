"""Static dtypes of results, a part of dslc's checks (check.py runs it on every rule after the other checks pass).

From the pattern (ALU sources share their node's dtype, a comparison is bool, dtype annotations), from guards that compare
dtypes (`x.dtype == y.dtype`, `u.dtype is dtypes.int32`) and from what results build, each node gets the set of scalar
dtypes it can have. A rule is rejected when a result certainly has another dtype than the node it replaces, when an ALU
result's sources certainly differ, when a literal can't be a constant of the dtype it gets (1.5 or True for an int, 300
for a uint8), or when the result is certainly not a node. Where the check can't know, it says nothing: the sets are
"certainly" sets, so an author can always make a rule pass with an annotation (`x:int32`) or a guard.
"""
from __future__ import annotations
import ast
from runtime.dtype import DTYPE_NAMES, DType, dtypes
from runtime.ops import GroupOp, Ops
from dslc.ir import Cond, Construct, Lit, Pat, PyResult, Ref, Result, Rule, Seq, Splice, TupleResult, Update

ALL: frozenset[DType] = frozenset(dtypes.all()) | {dtypes.void}
BOOL = frozenset({dtypes.bool})
CLASSES = {"ints": frozenset(d for d in ALL if dtypes.is_int(d)), "uints": frozenset(d for d in ALL if dtypes.is_unsigned(d)),
           "sints": frozenset(d for d in ALL if dtypes.is_int(d) and not dtypes.is_unsigned(d)),
           "floats": frozenset(d for d in ALL if dtypes.is_float(d)), "bools": BOOL}
# ALU ops whose sources all have the node's dtype (a comparison's share theirs; WHERE's are (bool, node, node))
SAME = (GroupOp.ALU - GroupOp.Comparison) - {Ops.WHERE}
# ops whose node has its first source's scalar dtype (a movement, a load through an index, ...); VECTORIZE: every source's
PASS = GroupOp.Movement | {Ops.DETACH, Ops.CONTIGUOUS, Ops.CONTIGUOUS_BACKWARD, Ops.COPY, Ops.AT, Ops.INDEX, Ops.LOAD, Ops.GEP}
# what a UOp attribute is, for a result: a node, or certainly not one
NODE_METHODS = frozenset({"const_like", "cast", "bitcast", "replace", "alu", "where", "maximum", "minimum", "logical_not", "ne", "eq",
                          "simplify", "substitute"})
NOT_NODES = frozenset({"dtype", "src", "op", "shape", "device", "tag", "toposort", "render", "expr", "bounds"})

def dtype_name(d: DType) -> str:
  """The name a .rules file writes for a dtype (its first in DTYPE_NAMES: int32, not int or index)."""
  return next(k for k, v in DTYPE_NAMES.items() if v is d)

def describe(s: frozenset[DType] | None) -> str:
  if s is None: return "of any dtype"
  if len(s) == 1: return dtype_name(next(iter(s)))
  for name, c in CLASSES.items():
    if s == c: return f"one of the {name}"
  return "one of " + ", ".join(sorted(dtype_name(d) for d in s))

class RuleTypes:
  """Union-find over the pattern's nodes (and the rule's names): each class has the set of dtypes it can have."""
  def __init__(self, rule: Rule):
    self.rule = rule
    self.parent: dict[object, object] = {}
    self.sets: dict[object, frozenset[DType] | None] = {}
    self.names: dict[str, object] = {}
    self.problems: list[tuple[str, object]] = []   # (message, span): certain
    self.maybe: list[tuple[str, object]] = []      # (message, span): dtypes the check can't prove equal
    self.pattern(rule.pattern, "root", is_root=True)
    for g in rule.guards: self.guard(g.text)

  # ---- union-find ----
  def find(self, k: object) -> object:
    self.parent.setdefault(k, k)
    while self.parent[k] is not k:
      self.parent[k] = self.parent[self.parent[k]]
      k = self.parent[k]
    return k
  def get(self, k: object) -> frozenset[DType] | None: return self.sets.get(self.find(k))
  def restrict(self, k: object, s: frozenset[DType] | None) -> None:
    if s is None: return
    r = self.find(k)
    cur = self.sets.get(r)
    self.sets[r] = s if cur is None else cur & s
  def same(self, a: object, b: object) -> None:
    ra, rb = self.find(a), self.find(b)
    if ra is rb: return
    sa, sb = self.sets.pop(ra, None), self.sets.get(rb)
    self.parent[ra] = rb
    if sa is not None: self.sets[rb] = sa if sb is None else sa & sb

  # ---- the pattern ----
  def pattern(self, p: Pat, key: object, is_root: bool = False) -> None:
    if p.alternatives is not None:
      # each alternative may constrain differently: only a name over all of them is known (to be this node)
      if p.name: self.bind(p.name, key)
      return
    if p.name: self.bind(p.name, key)
    exact = frozenset(d.scalar for d in p.dtypes) if p.dtypes else None
    classes = frozenset().union(*(CLASSES[c] for c in p.dtype_classes)) if p.dtype_classes else None
    if exact is not None or classes is not None: self.restrict(key, (exact or frozenset()) | (classes or frozenset()))
    ops = p.ops
    if ops is not None and ops <= GroupOp.Comparison: self.restrict(key, BOOL)
    # `True`, `(CONST [False])`: the generated test is `arg is True`, which only a bool constant passes
    if p.has_arg_eq and isinstance(p.arg_eq, bool) and ops == {Ops.CONST}: self.restrict(key, BOOL)
    src = p.src or ()
    keys = [(key, i) for i in range(len(src))]
    for s, k in zip(src, keys): self.pattern(s, k)
    if ops is None or not src: return
    if ops <= SAME and all(len(src) == (3 if o in GroupOp.Ternary else 2 if o in GroupOp.Binary else 1) for o in ops):
      for k in keys: self.same(k, key)
    elif ops <= GroupOp.Comparison and len(src) == 2: self.same(keys[0], keys[1])
    elif ops == {Ops.WHERE} and len(src) == 3:
      self.restrict(keys[0], BOOL)
      self.same(keys[1], key)
      self.same(keys[2], key)
    elif ops <= PASS:
      self.same(keys[0], key)
      # AT(x, valid, i0, ...): the validity is a bool
      if ops == {Ops.AT} and len(keys) > 1: self.restrict(keys[1], BOOL)
    elif ops == {Ops.VECTORIZE}:
      for k in keys: self.same(k, key)

  def bind(self, name: str, key: object) -> None:
    if name in self.names: self.same(self.names[name], key)
    else: self.names[name] = key

  def guard(self, text: str) -> None:
    """`a.dtype == b.dtype`, `a.dtype is dtypes.X` (parts of an `and`): what a guard says of dtypes."""
    try: tree = ast.parse(text, mode="eval").body
    except SyntaxError: return
    for part in tree.values if isinstance(tree, ast.BoolOp) and isinstance(tree.op, ast.And) else [tree]:
      if not (isinstance(part, ast.Compare) and len(part.ops) == 1 and isinstance(part.ops[0], (ast.Eq, ast.Is))): continue
      a, b = self.dtype_of_expr(part.left), self.dtype_of_expr(part.comparators[0])
      if isinstance(a, frozenset) and isinstance(b, frozenset): continue
      if isinstance(a, frozenset): a, b = b, a
      if a is None: continue
      if isinstance(b, frozenset): self.restrict(a, b)
      elif b is not None: self.same(a, b)

  def dtype_of_expr(self, e: ast.AST) -> object | frozenset[DType] | None:
    """`x.dtype` (or .scalar/.base) -> x's key; `dtypes.X` -> {X}; else None."""
    if isinstance(e, ast.Attribute) and e.attr in ("scalar", "base") and isinstance(e.value, ast.Attribute): e = e.value
    if isinstance(e, ast.Attribute) and e.attr == "dtype" and isinstance(e.value, ast.Name) and e.value.id in self.names:
      return self.names[e.value.id]
    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "dtypes":
      d = getattr(dtypes, e.attr, None)
      if isinstance(d, DType): return frozenset({d.scalar})
    return None

  def python_dtype(self, text: str) -> object | frozenset[DType] | None:
    """The dtype of a {python} result where it says: a capture `x`, `x.cast(D)`, `x.bitcast(D)`, `x.const_like(v)`,
    `x.replace(dtype=D)`."""
    try: e = ast.parse(text, mode="eval").body
    except SyntaxError: return None
    if isinstance(e, ast.Name): return self.names.get(e.id)
    if not (isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and isinstance(e.func.value, ast.Name) and e.func.value.id in self.names):
      return None
    x, method = self.names[e.func.value.id], e.func.attr
    if method in ("cast", "bitcast") and len(e.args) == 1: return self.dtype_of_expr(e.args[0])
    if method == "const_like": return x
    if method == "replace":
      d = next((k.value for k in e.keywords if k.arg == "dtype"), None)
      return self.dtype_of_expr(d) if d is not None else x
    return None

  def dtype_text(self, text: str) -> object | frozenset[DType] | None:
    try: return self.dtype_of_expr(ast.parse(text, mode="eval").body)
    except SyntaxError: return None

  # ---- results ----
  def result(self, r: Result, want: object | None, span) -> object | frozenset[DType] | None:
    """The dtype of a result (a key, a set, or None for unknown), checking it against `want` (what its place needs)."""
    if isinstance(r, Ref):
      if r.name in self.names: return self.names[r.name]
      if r.name in self.bindings: return self.bindings[r.name]
      return want  # an arg capture or a plain value: a constant of the place's dtype
    if isinstance(r, Lit):
      self.literal(r.value, want, r.span or span)
      return want
    if isinstance(r, Update):
      return self.dtype_text(r.fields["dtype"].text) if "dtype" in r.fields else self.names.get(r.name)
    if isinstance(r, PyResult):
      head = r.expr.text.split("(")[0]
      parts = head.split(".")
      if len(parts) == 2 and parts[0] in self.names and parts[1] in NOT_NODES and "(" not in r.expr.text:
        self.problems.append((f"this result is {r.expr.text}, not a node: a rule results in a node (or a number, made a constant)", r.span))
        return None
      # {x.cast(dtypes.float32)} in place of an int32 node: only a dtype the check is sure of is reported
      got = self.python_dtype(r.expr.text)
      a, b = self.possible(got), self.possible(want)
      if want == "root" and a is not None and b is not None and not a & b:
        self.problems.append((f"this {{python}} result is {describe(a)}, where {describe(b)} belongs (the node it replaces): a result keeps the "
                              "dtype, cast it or build another node", r.span))
      return None
    if isinstance(r, Construct): return self.construct(r, want, span)
    if isinstance(r, Cond):
      # either branch: each is checked where it goes (the node it replaces, for a whole result), and the choice has a dtype
      # only when both are known to have it
      a, b = self.result(r.then, want, span), self.result(r.other, want, span)
      if want == "root":
        for x, t in ((r.then, a), (r.other, b)):
          if not isinstance(x, Lit): self.differ(t, "root", getattr(x, "span", None) or span, "this result")
      keys = a is not None and b is not None and not isinstance(a, frozenset) and not isinstance(b, frozenset)
      if a is not None and (a == b or keys and self.find(a) is self.find(b)): return a
      return None
    return None  # a sequence (Seq) is several nodes: spliced, it is not checked here

  def construct(self, r: Construct, want: object | None, span) -> object | frozenset[DType] | None:
    ops = {r.op} if r.op is not None else set(self.rule.opvars.get(r.opvar or "", ()))
    srcs = [s for s in r.src if not isinstance(s, (Splice, Seq))]
    if r.dtype is not None: node = self.dtype_text(r.dtype.text)
    elif r.op is Ops.CONST: node = want
    elif ops and ops <= GroupOp.Comparison: node = BOOL
    else: node = None
    # each source that is not a literal, with its dtype when known
    typed = [(s, t) for s in srcs if not isinstance(s, Lit) and (t := self.result(s, None, span)) is not None]
    lits = [s for s in srcs if isinstance(s, Lit)]
    if not ops or r.comp is not None or len(srcs) != len(r.src): return node
    name = next(iter(ops)).name if len(ops) == 1 else "ALU"
    if ops <= SAME:
      # sources of the node's dtype: a written dtype, or the first source that has one (as the emitter infers it)
      node = node if node is not None else typed[0][1] if typed else want
      for s, t in typed: self.differ(t, node, s.span or span, f"this {name} source")
      for s in lits: self.literal(s.value, node, s.span or span)
    elif ops <= GroupOp.Comparison and len(srcs) == 2:
      operand = typed[0][1] if typed else None
      for s, t in typed[1:]: self.differ(t, operand, s.span or span, f"this {name} source")
      for s in lits: self.literal(s.value, operand, s.span or span)
    elif ops == {Ops.WHERE} and len(srcs) == 3:
      cond, *branches = srcs
      if isinstance(cond, Lit): self.literal(cond.value, BOOL, cond.span or span)
      for s, t in typed:
        if s is cond: self.differ(t, BOOL, s.span or span, "this WHERE's condition")
      typed = [(s, t) for s, t in typed if s is not cond]
      node = node if node is not None else typed[0][1] if typed else want
      for s, t in typed: self.differ(t, node, s.span or span, "this WHERE branch")
      for s in branches:
        if isinstance(s, Lit): self.literal(s.value, node, s.span or span)
    return node

  def possible(self, t: object | frozenset[DType] | None) -> frozenset[DType] | None:
    return t if isinstance(t, frozenset) or t is None else self.get(t)

  def differ(self, got: object | frozenset[DType] | None, want: object | frozenset[DType] | None, span, what: str) -> bool:
    """Report when got is another dtype than want, or may be one: the check can't tell they are the same."""
    if got is None or want is None: return False
    if not isinstance(got, frozenset) and not isinstance(want, frozenset) and self.find(got) is self.find(want): return False
    a, b = self.possible(got), self.possible(want)
    if a is not None and b is not None and len(a) == 1 and a == b: return False
    if a is not None and b is not None and not a & b: self.problems.append((f"{what} is {describe(a)}, where {describe(b)} belongs", span))
    elif a is None and b is None: return False  # nothing known of either: no claim (a SINK's or a CAST's sources)
    else:
      self.maybe.append((f"{what} may have another dtype than {self.what(want)} ({describe(a)} and {describe(b)}, and nothing says they are the "
                         "same): annotate one (x:int32), compare their dtypes in a guard (x.dtype == y.dtype), or cast", span))
    return True

  def what(self, k: object | frozenset[DType] | None) -> str:
    if k == "root": return "the node it replaces"
    names = [n for n, v in self.names.items() if not isinstance(k, frozenset) and k is not None and self.find(v) is self.find(k)]
    return f"{names[0]}" if names else describe(self.possible(k))

  def literal(self, v: object, want: object | frozenset[DType] | None, span) -> None:
    s = self.possible(want)
    if s is None or not s or v is None: return None
    def fits(d: DType) -> bool: return dtypes.min(d) <= v <= dtypes.max(d)  # type: ignore[operator]
    if isinstance(v, bool): ok = any(d is dtypes.bool or dtypes.is_float(d) for d in s)
    elif isinstance(v, int): ok = any(d is not dtypes.bool and d is not dtypes.void and (dtypes.is_float(d) or fits(d)) for d in s)
    elif isinstance(v, float): ok = any(dtypes.is_float(d) for d in s) or v.is_integer() and any(dtypes.is_int(d) and fits(d) for d in s)
    else: ok = True
    if not ok: self.problems.append((f"the literal {v!r} can't be a constant of {describe(s)}", span))
    return None

  def check(self) -> list[tuple[str, object]]:
    r = self.rule
    for k, v in self.sets.items():
      if v is not None and not v:
        # ALU sources share a dtype, comparisons are bool: annotations that contradict that match nothing
        self.problems.append(("this pattern never matches: the dtypes it asks for contradict each other (an ALU op's sources and the op have "
                              "one dtype; a comparison is bool; WHERE's condition is bool)", r.pattern.span))
        return self.problems
    self.bindings: dict[str, object | frozenset[DType] | None] = {}
    for b in r.bindings: self.bindings[b.name] = self.result(b.value, None, b.span)
    if isinstance(r.result, TupleResult):
      for i, e in enumerate(r.result.entries):
        if e is None or r.result.comp is not None: continue
        # entry i stands for source i: a gradient has its source's dtype
        want = ("root", i) if r.pattern.alternatives is None and r.pattern.src is not None and i < len(r.pattern.src) else None
        got = self.result(e, want, r.result.span)
        if want is not None and not isinstance(e, Lit): self.differ(got, want, getattr(e, "span", None) or r.result.span, f"entry {i} of this tuple")
    elif r.returns == "node":
      got = self.result(r.result, "root", r.span)
      if not isinstance(r.result, (Lit, Cond)): self.differ(got, "root", getattr(r.result, "span", None) or r.span, "this result")
    return self.problems

def proven_same(rule: Rule) -> bool:
  """Whether the check proved that the rule's result (a node) has the dtype of the node it replaces."""
  t = RuleTypes(rule)
  t.check()
  if t.problems or t.maybe or rule.returns != "node" or isinstance(rule.result, (Lit, PyResult)): return False
  got = t.result(rule.result, "root", rule.span)
  if got is None: return False
  if not isinstance(got, frozenset) and t.find(got) is t.find("root"): return True
  a, b = t.possible(got), t.possible("root")
  return a is not None and b is not None and len(a) == 1 and a == b

def type_problems(rule: Rule) -> list[tuple[str, object]]:
  """Every dtype problem of a rule, (message, span): certain ones, and dtypes the check can't prove equal."""
  t = RuleTypes(rule)
  t.check()
  return t.problems + t.maybe

__all__ = ["type_problems", "proven_same"]
