"""A rule's instances for `dslc verify`: its pattern expanded into shapes (one per op, alternative and order of a commutative
node's sources), the scalar dtypes its nodes may have, and each instance built as SNodes with its guard and result evaluated.
"""
from __future__ import annotations
import ast, itertools
from dataclasses import dataclass, field
from typing import Any
import z3
from runtime.dtype import DType, dtypes
from runtime.ops import ARITY, GroupOp, Ops
from dslc import smt
from dslc.ir import Pat, Rule
from dslc.smt import Unsupported
from dslc.verify_eval import Evaluator, compare
from dslc.verify_nodes import Maybe, SNode, Sym, py_bool
from dslc.verify_results import Results

MAX_INSTANCES = 3000
CLASSES = {"ints": frozenset(d for d in smt.SCALARS if dtypes.is_int(d)), "uints": frozenset(d for d in smt.SCALARS if dtypes.is_unsigned(d)),
           "sints": frozenset(d for d in smt.SCALARS if smt.signed(d)), "floats": frozenset(d for d in smt.SCALARS if dtypes.is_float(d)),
           "bools": frozenset({dtypes.bool})}

# ops whose dtype is their source's (this one): the tensor graph's movement and bookkeeping ops
SAME_DTYPE = {**{o: 0 for o in GroupOp.Movement}, Ops.DETACH: 0, Ops.CONTIGUOUS: 0, Ops.CONTIGUOUS_BACKWARD: 0, Ops.COPY: 0,
              Ops.REDUCE_AXIS: 0, Ops.REDUCE: 0, Ops.AFTER: 0, Ops.BIND: 0, Ops.ASSIGN: 0}

# ---- a pattern's instances: ops, source orders and dtypes chosen ----

@dataclass(eq=False)
class Shape:
  """One node of an instance of a pattern: its op (None: a capture the pattern does not look into) and sources in the
  node's order."""
  pat: Pat | None
  op: Ops | None
  src: list[Shape] = field(default_factory=list)
  name: str | None = None
  splice: tuple[str, list[Shape]] | None = None

  def walk(self):
    yield self
    for s in self.src: yield from s.walk()
    if self.splice: yield from self.splice[1]

def expand(p: Pat | None, opvars: dict[str, Ops]) -> list[Shape]:
  """Every shape pattern p can match, one per choice of op, alternative and order of a commutative node's sources."""
  if p is None or p.is_wildcard(): return [Shape(p, None, name=p.name if p is not None else None)]
  if p.alternatives is not None:
    out = []
    for alt in p.alternatives:
      for s in expand(alt, opvars):
        if p.name is not None: s.name = p.name
        out.append(s)
    return out
  if p.opvar is not None:
    if p.opvar not in opvars: raise Unsupported(f"the op variable {p.opvar}")
    ops = [opvars[p.opvar]] if p.ops is None or opvars[p.opvar] in p.ops else []
  elif p.ops is not None: ops = sorted(p.ops, key=lambda o: o.value)
  else:
    if p.src is not None or p.rest is not None or p.splice is not None or p.has_arg_eq or p.arg_expr is not None or p.arg_name:
      raise Unsupported("a node of any op whose sources or arg the pattern tests")
    return [Shape(p, None, name=p.name)]  # a capture with a dtype test
  out = []
  for op in ops:
    written = list(p.src or ())
    n = ARITY.get(op, 1 if op is Ops.RANGE else 0 if op is Ops.CONST else None)
    extra: list = []
    if p.src is None and p.rest is None and p.splice is None:
      written = [None] * (n or 0)  # sources not looked at: anything
      if n is None and op is not Ops.RANGE: raise Unsupported(f"{op.name} with any number of sources")
    elif n is not None:
      if len(written) > n or (len(written) < n and p.rest is None and p.splice is None): continue
      if p.rest is not None: written += [p.rest] * (n - len(written))
      elif p.splice is not None: extra = [None] * (n - len(written))
    elif p.rest is not None or p.splice is not None: raise Unsupported(f"{op.name} with any number of sources")
    orders = [tuple(range(len(written)))]
    if p.any_order and op in GroupOp.Commutative | {Ops.MULACC} and len(written) >= 2 and written[0] is not written[1]:
      orders.append((1, 0) + tuple(range(2, len(written))))
    for srcs in itertools.product(*[expand(w, opvars) for w in written]):
      for perm in orders:
        node_src: list = [None] * len(srcs)
        for i, s in enumerate(srcs): node_src[perm[i]] = s  # the written source i is the node's source perm[i]
        splice = (p.splice, [Shape(None, None) for _ in extra]) if p.splice is not None else None
        out.append(Shape(p, op, [_copy(s) for s in node_src] + (splice[1] if splice else []), p.name, splice))
  return out

def _copy(s: Shape) -> Shape:
  return Shape(s.pat, s.op, [_copy(x) for x in s.src], s.name, (s.splice[0], [_copy(x) for x in s.splice[1]]) if s.splice else None)

def dtype_choices(root: Shape) -> list[dict[int, DType]] | None:
  """Every assignment of scalar dtypes to the shape's nodes that the pattern and the ops' typing allow."""
  nodes = list(root.walk())
  parent = {id(n): id(n) for n in nodes}
  def find(i):
    while parent[i] != i: parent[i] = parent[parent[i]]; i = parent[i]
    return i
  def union(a: Shape, b: Shape): parent[find(id(a))] = find(id(b))
  allowed: dict[int, set] = {}
  def restrict(n: Shape, ds) -> None: allowed.setdefault(id(n), set(smt.SCALARS)).intersection_update(ds)
  named: dict[str, Shape] = {}
  for n in nodes:
    if n.name is not None:
      if n.name in named: union(n, named[n.name])
      else: named[n.name] = n
    p = n.pat
    if p is not None and (p.dtypes is not None or p.dtype_classes is not None):
      restrict(n, set(p.dtypes or ()) | set().union(*(CLASSES[c] for c in p.dtype_classes or ())))
    if n.op in GroupOp.Comparison:
      union(n.src[0], n.src[1]); restrict(n, {dtypes.bool})
    elif n.op is Ops.WHERE:
      restrict(n.src[0], {dtypes.bool}); union(n, n.src[1]); union(n, n.src[2])
    elif n.op in GroupOp.ALU:
      for s in n.src: union(n, s)
    elif n.op is Ops.RANGE and n.src:
      union(n, n.src[0]); restrict(n, CLASSES["ints"])
    elif n.op in SAME_DTYPE and n.src: union(n, n.src[SAME_DTYPE[n.op]])
  classes: dict[int, set] = {}
  for n in nodes:
    c = find(id(n))
    classes.setdefault(c, set(smt.SCALARS))
    if id(n) in allowed: classes[c] &= allowed[id(n)]
  keys = sorted(classes, key=lambda c: [i for i, n in enumerate(nodes) if find(id(n)) == c][0])
  total = 1
  for k in keys: total *= len(classes[k])
  if total > MAX_INSTANCES: return None
  out = []
  for combo in itertools.product(*[sorted(classes[k], key=lambda d: d.priority) for k in keys]):
    by_class = dict(zip(keys, combo))
    dt = {id(n): by_class[find(id(n))] for n in nodes}
    ok = True
    for n in nodes:
      if n.op in GroupOp.ALU:
        operand = dt[id(n.src[0])] if n.op in GroupOp.Comparison else dt[id(n)]
        if not smt.has_meaning(n.op, operand): ok = False
      if n.op is Ops.BITCAST and n.src:
        a, b = dt[id(n)], dt[id(n.src[0])]
        if a.itemsize != b.itemsize or dtypes.bool in (a, b): ok = False
    if ok: out.append(dt)
  return out

# ---- one instance: its nodes, guard and result ----

class Instance:
  """A rule's pattern with every choice made: SNodes for its nodes, its guard and its result, ready for a query."""
  def __init__(self, rule: Rule, shape: Shape, dt: dict[int, DType], glob: dict, opvars: dict[str, Ops]):
    self.rule, self.shape, self.dt = rule, shape, dt
    smt.forget_raw()
    self.sym = Sym(rule.id)
    self.env: dict[str, Any] = dict(opvars)
    self.nodes: dict[int, SNode] = {}
    self.ev = Evaluator(self.sym, self.env, glob)
    self.root = self.build(shape)
    self.guards: list = []
    self.result: SNode | None = None
    self.fires: Any = True

  def build(self, s: Shape) -> SNode:
    sym, d = self.sym, self.dt[id(s)]
    if s.name is not None and s.name in self.env:
      prev = self.env[s.name]
      if s.op is not None: raise Unsupported(f"'{s.name}' names two patterns")
      self.nodes[id(s)] = prev
      return prev
    p = s.pat
    if s.op is None: node = sym.leaf(s.name or "_", d)
    elif s.op is Ops.CONST:
      node = sym.leaf(s.name or "c", d)
      node = SNode(Ops.CONST, d, (), smt.to_python(node.value, d), node.value, node.name)
      if p is not None and p.has_arg_eq:
        lit = p.arg_eq
        if lit is None or isinstance(lit, bool):  # compared with `is`
          sym.fact(lit is not None and d is dtypes.bool and (node.value if lit else z3.Not(node.value)))
        else: sym.fact(compare(sym, ast.Eq, node.arg, lit))
      if p is not None and p.arg_expr is not None:
        sym.fact(compare(sym, ast.Eq, node.arg, self.ev.run(p.arg_expr.text)))
    else:
      srcs = tuple(self.build(x) for x in s.src)
      arg = None
      if p is not None and p.has_arg_eq: arg = p.arg_eq
      elif s.op not in GroupOp.ALU and s.op not in (Ops.CAST, Ops.BITCAST): arg = ("?", id(s))  # an arg nothing is known of
      if s.op is Ops.RANGE:
        v = sym.leaf(s.name or "r", d).value
        e = smt.norm(srcs[0].value, d)
        sym.fact(z3.And(v >= 0, v < e) if smt.signed(d) or smt.int_mode() else z3.ULT(v, e))  # a loop index is below its end
        node = SNode(Ops.RANGE, d, srcs, arg, v, s.name or "r")
      else: node = sym.make(s.op, d, srcs, arg, s.name or "")
    if p is not None and p.arg_name:
      if p.arg_name in self.env: sym.fact(compare(sym, ast.Eq, self.env[p.arg_name], node.arg))
      else: self.env[p.arg_name] = node.arg
    if s.name is not None: self.env[s.name] = node
    if s.splice is not None: self.env[s.splice[0]] = tuple(self.build(x) for x in s.splice[1])
    self.nodes[id(s)] = node
    return node

  def evaluate(self) -> bool:
    """The guard and the result; False when no node of this instance can match (a guard false, a result that always declines)."""
    for g in self.rule.guards:
      v = py_bool(self.ev.run(g.text))
      if v is False: return False
      self.guards.append(v)
      self.sym.path.append(v)
    res = Results(self.sym, self.rule, self.ev, self.root)
    res.bind_wheres()
    out = res.top()
    self.sym.facts.extend(smt.take_defs())
    if out is None: return False
    if isinstance(out, Maybe): out, self.fires = out.node, out.fires
    if not isinstance(out, SNode): raise Unsupported(f"a result that is a {type(out).__name__}")
    self.result = out
    return True

  def pre(self) -> list: return [*self.sym.facts, *[g for g in self.guards if g is not True], *([self.fires] if self.fires is not True else [])]
