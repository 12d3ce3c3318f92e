"""`python -m dslc verify FILE.rules`: each rule proved with the z3 SMT solver, for every node it matches, its result has the
value of the node it replaces. A rule's pattern is instantiated once per choice of ops, source orders and scalar dtypes;
each instance asks z3 for values of its captures (and their range-analysis bounds) where the guard holds and the two values
differ. None: proved. One: a counterexample, replayed on real UOps through the generated rule and exec_alu before it is
reported. Meanings are dslc/smt.py's (exec_alu's, bit for bit); what has none makes the rule unsupported, with the reason.
"""
from __future__ import annotations
import itertools, json, os, re, time
from dataclasses import dataclass, field
from typing import Any
import z3
from runtime.dtype import DType, dtypes
from runtime.ops import ARITY, GroupOp, Ops, cast_value, exec_alu
from runtime.uop import UOp, uop
from dslc import smt, verify_exhaustive
from dslc.ir import Pat, Rule, RuleFile
from dslc.smt import NoMeaning, Unsupported
from dslc.verify_eval import Evaluator, Helper, Maybe, Results, SNode, Sym, compare, globals_for, py_bool

# z3's resource limit per query, deterministic unlike a time limit (1M is about a second): an instance is tried in the
# bit-vector encoding with RLIMIT/4, then the integer encodings with RLIMIT each, then bit-vectors again with 3*RLIMIT
RLIMIT = 3_000_000
MAX_INSTANCES = 3000
CLASSES = {"ints": frozenset(d for d in smt.SCALARS if dtypes.is_int(d)), "uints": frozenset(d for d in smt.SCALARS if dtypes.is_unsigned(d)),
           "sints": frozenset(d for d in smt.SCALARS if smt.signed(d)), "floats": frozenset(d for d in smt.SCALARS if dtypes.is_float(d)),
           "bools": frozenset({dtypes.bool})}
STATUSES = ("proved", "counterexample", "unsupported", "timeout")
# ops whose dtype is their source's (this one): the tensor graph's movement and bookkeeping ops
SAME_DTYPE = {**{o: 0 for o in GroupOp.Movement}, Ops.DETACH: 0, Ops.CONTIGUOUS: 0, Ops.CONTIGUOUS_BACKWARD: 0, Ops.COPY: 0,
              Ops.REDUCE_AXIS: 0, Ops.REDUCE: 0, Ops.AFTER: 0, Ops.BIND: 0, Ops.ASSIGN: 0}

@dataclass
class Outcome:
  rule: Rule
  status: str
  detail: str = ""
  instances: int = 0
  seconds: float = 0.0
  @property
  def where(self) -> str: return f"{self.rule.span.file}:{self.rule.span.line}:{self.rule.span.col}"

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
        else: sym.fact(compare(sym, __import__("ast").Eq, node.arg, lit))
      if p is not None and p.arg_expr is not None:
        sym.fact(compare(sym, __import__("ast").Eq, node.arg, self.ev.run(p.arg_expr.text)))
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
      if p.arg_name in self.env: sym.fact(compare(sym, __import__("ast").Eq, self.env[p.arg_name], node.arg))
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

# ---- queries ----

def solver(rlimit: int) -> z3.Solver:
  s = z3.Solver()
  s.set("rlimit", rlimit)
  return s

@dataclass
class Verdict:
  status: str                      # proved, counterexample, unsupported, timeout, vacuous
  detail: str = ""

def check_instance(inst: Instance, rlimit: int, replay) -> Verdict:
  if inst.result.dtype is not inst.root.dtype:
    # the result has another dtype: a finding only if the real rule makes it on a node some values reach
    s = solver(rlimit)
    s.add(*inst.pre())
    r = s.check()
    if r == z3.unsat: return Verdict("vacuous")
    if r == z3.unknown: return Verdict("timeout", "whether the guard can hold")
    return replay(inst, s.model(), None)
  for cond, what in inst.sym.raises:
    s = solver(rlimit)
    s.add(*inst.sym.facts, cond)
    r = s.check()
    if r == z3.sat: return replay(inst, s.model(), what)
    if r == z3.unknown: return Verdict("timeout", f"whether {what} can happen")
  goal = smt.same(inst.result.value, inst.root.value, inst.root.dtype)
  if inst.result.value.eq(inst.root.value) or z3.is_true(z3.simplify(goal)): return Verdict("proved")
  s = solver(rlimit)
  s.add(*inst.pre())
  s.add(z3.Not(goal))
  r = s.check()
  if r == z3.unsat: return Verdict("proved")
  if r == z3.unknown: return Verdict("timeout", s.reason_unknown())
  return replay(inst, s.model(), None)

def satisfiable(inst: Instance, rlimit: int) -> bool:
  s = solver(rlimit)
  s.add(*inst.pre())
  return s.check() != z3.unsat

# ---- counterexamples: replayed on real UOps through the generated rule ----

def describe(inst: Instance, model: z3.ModelRef) -> str:
  parts, seen = [], set()
  for name, v in inst.env.items():
    if isinstance(v, SNode) and name not in seen and v.op is not Ops.CONST:
      seen.add(name)
      val = smt.concrete(model.eval(v.value, model_completion=True), v.dtype)
      text = f"{name} = {val!r}:{smt.dname(v.dtype)}"
      if v.bounds is not None and not isinstance(v.bounds[0], (float, z3.FPRef)):
        lo, hi = (smt.concrete(model.eval(b.e, model_completion=True)) for b in v.bounds)
        text += f" in [{lo}, {hi}]"
      parts.append(text)
    elif isinstance(v, SNode):
      seen.add(name)
      parts.append(f"{name} = {smt.concrete(model.eval(v.value, model_completion=True), v.dtype)!r}:{smt.dname(v.dtype)}")
    elif isinstance(v, (smt.PInt, z3.ExprRef)) and name not in seen:
      e = v.e if isinstance(v, smt.PInt) else v
      parts.append(f"{name} = {smt.concrete(model.eval(e, model_completion=True))!r}")
  return ", ".join(parts)

class Replayer:
  """Builds an instance with a model's values as real UOps, runs the generated rule on it and evaluates both sides with
  exec_alu: a counterexample is reported only when the real rule gets it wrong too."""
  def __init__(self, rules_by_line: dict[int, Any]):
    self.rules_by_line = rules_by_line

  def __call__(self, inst: Instance, model: z3.ModelRef, raises: str | None) -> Verdict:
    values = describe(inst, model)
    try: root, env = self.concrete(inst, model)
    except Unsupported as e:
      if inst.sym.opaque: return Verdict("unsupported", f"depends on the value of {', '.join(sorted(inst.sym.opaque))} (no SMT meaning)")
      return Verdict("unsupported", f"a possible counterexample ({values}) that can't be replayed: {e}")
    fn = self.rules_by_line.get(inst.rule.span.line)
    if fn is None: return Verdict("unsupported", f"no generated rule to replay a possible counterexample ({values}) on")
    try: out = fn(root, None)
    except Exception as e:  # noqa: BLE001 -- whatever the rule raises on this node is the finding
      if raises is not None: return Verdict("counterexample", f"{raises}: {values}; the rule raises {type(e).__name__}: {e}")
      return Verdict("counterexample", f"the rule raises {type(e).__name__} ({e}) on {values}")
    if raises is not None: return Verdict("unsupported", f"the model says {raises} on {values}, the generated rule does not raise")
    if out is None: return self.disagree(inst, values, "the generated rule does not fire there")
    if not isinstance(out, UOp): return Verdict("unsupported", f"the rule results in a {type(out).__name__}")
    if out.dtype is not root.dtype: return Verdict("counterexample", f"the result is {out.dtype}, the node {root.dtype}: {values}")
    try: want, got = evaluate(root, env), evaluate(out, env)
    except Unsupported as e: return Verdict("unsupported", f"a possible counterexample ({values}): {e}")
    if same_bits(want, got, root.dtype): return self.disagree(inst, values, f"both sides are {want!r} there")
    return Verdict("counterexample", f"{values}: the node is {want!r}, the result {got!r}")

  def disagree(self, inst: Instance, values: str, why: str) -> Verdict:
    if inst.sym.opaque: return Verdict("unsupported", f"depends on the value of {', '.join(sorted(inst.sym.opaque))} (no SMT meaning)")
    return Verdict("unsupported", f"the SMT model finds {values} but {why} (a gap in dslc/smt.py's meanings)")

  def concrete(self, inst: Instance, model: z3.ModelRef) -> tuple[UOp, dict]:
    env: dict[str, Any] = {}
    made: dict[int, UOp] = {}
    by_node: dict[int, UOp] = {}
    def val(e, d): return smt.concrete(model.eval(e, model_completion=True), d)
    def go(s: Shape) -> UOp:
      n = inst.nodes[id(s)]
      if id(n) in by_node: return by_node[id(n)]
      d = n.dtype
      if s.op is None:
        v = val(n.value, d)
        if n.op_is.get(Ops.CONST) is not None and z3.is_true(model.eval(n.op_is[Ops.CONST], model_completion=True)): u = UOp.const(d, v)
        else:
          if n.bounds is not None and not dtypes.is_float(d): lo, hi = (val(b.e, None) for b in n.bounds)
          elif n.bounds is not None: lo, hi = (val(b, None) if isinstance(b, z3.ExprRef) else b for b in n.bounds)
          else: lo = hi = v
          if d is dtypes.bool: lo, hi = bool(lo), bool(hi)
          name = f"{n.name or 'v'}{len(env)}"
          u = uop(Ops.DEFINE_VAR, d, (), (name, lo, hi))
          env[name] = v
      elif s.op is Ops.CONST: u = UOp.const(d, val(n.value, d))
      elif s.op in GroupOp.ALU or s.op in (Ops.CAST, Ops.BITCAST): u = uop(s.op, d, tuple(go(x) for x in s.src))
      elif s.op is Ops.RANGE:
        u = uop(Ops.RANGE, d, (go(s.src[0]),), len(env))
        env[u] = val(n.value, d)
      else: raise Unsupported(f"{s.op.name} can't be evaluated")
      by_node[id(n)] = made[id(s)] = u
      return u
    root = go(inst.shape)
    for name, ss in ([inst.shape.splice] if inst.shape.splice else []): pass
    return root, env

def evaluate(u: UOp, env: dict) -> Any:
  """u's value with C semantics (exec_alu, cast_value, the PYTHON device's bitcast); variables and loop indices from env."""
  from runtime.ops_python import _bitcast
  vals: dict[UOp, Any] = {}
  for x in u.toposort():
    if x.op is Ops.CONST: v = x.arg
    elif x.op is Ops.DEFINE_VAR: v = env[x.arg[0]]
    elif x.op is Ops.RANGE: v = env[x]
    elif x.op is Ops.CAST: v = cast_value(vals[x.src[0]], x.dtype)
    elif x.op is Ops.BITCAST: v = _bitcast(vals[x.src[0]], x.src[0].dtype, x.dtype)
    elif x.op in GroupOp.ALU:
      try: v = exec_alu(x.op, x.dtype, [vals[s] for s in x.src])
      except ValueError as e: raise Unsupported(f"{x.op.name} on {x.dtype}: {e}") from e
    else: raise Unsupported(f"{x.op.name} can't be evaluated")
    vals[x] = v
  return vals[u]

def same_bits(a: Any, b: Any, d: DType) -> bool:
  if dtypes.is_float(d):
    import math, struct
    if math.isnan(a) or math.isnan(b): return math.isnan(a) and math.isnan(b)
    return struct.pack("<d", a) == struct.pack("<d", b)
  return a == b

# ---- a rule, a file ----

def rule_namespace(rf: RuleFile, shown: str) -> dict[int, Any]:
  """line -> the generated standalone function of the rule there (`Rule.fn`), from the module the file compiles to."""
  from dslc.compile import compile_rules
  from runtime.rewrite import Rule as RuntimeRule
  ns: dict = {}
  exec(compile(compile_rules(rf.path, shown, source=rf.source), shown.replace(".rules", ".py"), "exec"), ns)  # noqa: S102
  return {v.line: v.fn for v in ns.values() if isinstance(v, RuntimeRule)}

def file_globals(rf: RuleFile) -> dict[str, Any]:
  """The file's imports: a function as a Helper (called by its SMT meaning, if it has one), data as itself."""
  import importlib
  out: dict[str, Any] = {}
  for module, names, _ in rf.imports:
    mod = importlib.import_module(module)
    for n in names:
      obj = getattr(mod, n)
      out[n] = Helper(f"{module}.{n}", obj) if callable(obj) and not isinstance(obj, type) else obj
  return out

def verify_rule(rule: Rule, params: list[str], glob: dict, rlimit: int, replay: Replayer, returns: str, source: str | None = None) -> Outcome:
  t0 = time.perf_counter()
  smt.fresh_context()
  def done(status: str, detail: str = "", n: int = 0) -> Outcome: return Outcome(rule, status, detail, n, time.perf_counter() - t0)
  if returns != "node": return done("unsupported", "its rule set returns one entry per source: not a node of the same value")
  if source is not None and (approx := verify_exhaustive.annotation(rule, source)) is not None:
    return done(*approximate(rule, approx, replay))
  g = globals_for(glob, params)
  # division and remainder: the integer encoding first (z3 proves // and % identities there)
  n_inst, proved, firing, prefer = 0, 0, False, "int" if re.search(r"IDIV|MOD|//|%", rule.text) else "bv"
  timeouts: list[str] = []
  unsupported: str | None = None
  try:
    opvar_sets = [[(v, o) for o in sorted(ops, key=lambda o: o.value)] for v, ops in rule.opvars.items()]
    for choice in itertools.product(*opvar_sets):
      opvars = dict(choice)
      for shape in expand(rule.pattern, opvars):
        choices = dtype_choices(shape)
        if choices is None: return done("unsupported", f"more than {MAX_INSTANCES} dtype choices")
        for dt in choices:
          try: v, prefer = prove(rule, shape, dt, g, opvars, rlimit, replay, prefer, not firing, bool(timeouts))
          except Unsupported as e:
            unsupported = unsupported or f"{e}{_for(opvars, dt)}"
            continue
          if v is not None and v.status == "proved" and not firing: firing = v.detail == "fires"
          if v is None: continue
          n_inst += 1
          what = _for(opvars, dt)
          if v.status == "counterexample": return done("counterexample", f"{v.detail}{what}", n_inst)
          if v.status == "unsupported": unsupported = unsupported or f"{v.detail}{what}"
          elif v.status == "timeout": timeouts.append(what.strip(" ()").removeprefix("for ") or "it")
          else: proved += 1
  except Unsupported as e: return done("unsupported", str(e), n_inst)
  if unsupported is not None: return done("unsupported", unsupported, n_inst)
  if timeouts:
    which = ", ".join(timeouts[:6]) + (" ..." if len(timeouts) > 6 else "")
    return done("timeout", f"z3 gave up on {len(timeouts)} of {n_inst} instances: {which}", n_inst)
  if not firing: return done("unsupported", "no scalar node satisfies its pattern and guard (vectors only?)", n_inst)
  return done("proved", f"{n_inst} instance{'s' if n_inst != 1 else ''}", n_inst)

def approximate(rule: Rule, approx: tuple[str, float], replay: Replayer) -> tuple[str, str, int]:
  """An approximate rule (`# verify: FN within K ulp`), checked on every value of its input, per dtype it matches."""
  fn, tolerance = approx
  rule_fn = replay.rules_by_line.get(rule.span.line)
  if rule_fn is None: return "unsupported", "no generated rule to run", 0
  dts = sorted({dt[id(shape)] for shape in expand(rule.pattern, {}) for dt in dtype_choices(shape) or []}, key=lambda d: d.priority)
  results = [(d, *verify_exhaustive.check(rule, fn, tolerance, d, rule_fn, verify_exhaustive.scalar)) for d in dts]
  for want in ("counterexample", "unsupported"):
    bad = [detail for d, status, detail in results if status == want]
    if bad: return want, "; ".join(bad + [detail for d, status, detail in results if status == "proved"]), len(dts)
  return "proved", "; ".join(detail for _, _, detail in results), len(dts)

def prove(rule: Rule, shape: Shape, dt: dict, g: dict, opvars: dict, rlimit: int, replay: Replayer, prefer: str,
          check_fires: bool, quick: bool = False) -> tuple[Verdict | None, str]:
  """One instance, in the encoding that last worked first: a small bit-vector budget, the integer encodings, then a large
  bit-vector budget (quick: the first only: the rule timed out already, only a counterexample could change its outcome, and
  one is found fast). None: no node of the instance can match. Proved verdicts say "fires" when some node satisfies the guard."""
  tiers = [("bv", rlimit // 4), ("int", rlimit), ("intq", rlimit), ("bv", rlimit * 3)]
  first = next(i for i, t in enumerate(tiers) if t[0] == prefer)
  tiers.insert(0, tiers.pop(first))
  if quick: tiers = [("bv", rlimit // 4)]
  v = None
  for mode, limit in tiers:
    with smt.encoding(mode):
      try:
        inst = Instance(rule, shape, dt, g, opvars)
        if not inst.evaluate(): return None, prefer
      except NoMeaning: return None, prefer
      except (TypeError, AttributeError, KeyError, IndexError, ValueError, z3.Z3Exception) as e:
        # Python the evaluator does not follow (a guard on a value it models differently): not a finding, a limit
        raise Unsupported(f"dslc verify can't evaluate it ({type(e).__name__}: {e})") from e
      v = check_instance(inst, limit, replay)
      if v.status == "vacuous": return None, prefer
      if v.status == "proved" and check_fires and satisfiable(inst, limit): v = Verdict("proved", "fires")
    if v.status != "timeout": return v, mode
  return v, prefer

def _for(opvars: dict, dt: dict[int, DType]) -> str:
  """Which instance: its op variables' ops and its dtypes, `(for ADD int8 bool)`."""
  ds = sorted(set(dt.values()), key=lambda d: d.priority)
  return f" (for {' '.join([o.name for o in opvars.values()] + [smt.dname(d) for d in ds])})"

def verify_file(path: str, shown: str | None = None, rlimit: int = RLIMIT, lines: set[int] | None = None, report=None,
                jobs: int = 1, source: str | None = None) -> list[Outcome]:
  """Every rule of a .rules file (or of `source`, named path) verified, in file order; report(outcome) is called as each one
  is done. jobs > 1 verifies rules in that many processes (each rule's outcome is the same either way: a fresh z3 context
  per rule)."""
  shown = shown or path
  loaded = _load(path, shown, source)
  rf = loaded[0]
  todo = [(rs, r) for rs in rf.rulesets if rs.compose is None for r in rs.rules if lines is None or r.span.line in lines]
  tasks = [(path, shown, source, rlimit, r.span.line, r.span.col) for _, r in todo]
  if jobs > 1 and len(tasks) > 1:
    import multiprocessing
    pool = multiprocessing.get_context("spawn").Pool(min(jobs, len(tasks)))
    results = pool.imap(_verify_task, tasks)
  else: pool, results = None, map(_verify_task, tasks)
  out = []
  try:
    for (_, r), res in zip(todo, results):
      o = Outcome(r, *res)
      out.append(o)
      if report is not None: report(o)
  finally:
    if pool is not None: pool.terminate()
  return out

_LOADED: dict[tuple, tuple] = {}
def _load(path: str, shown: str, source: str | None = None) -> tuple:
  """The checked rule file, its imports and the replayer of its generated rules (once per process)."""
  key = (path, shown, source)
  if key not in _LOADED:
    from dslc.compile import load_rules
    rf = load_rules(path, shown, source)
    _LOADED[key] = (rf, file_globals(rf), Replayer(rule_namespace(rf, shown)))
  return _LOADED[key]

def _verify_task(task: tuple) -> tuple:
  path, shown, source, rlimit, line, col = task
  rf, glob, replay = _load(path, shown, source)
  rs, r = next((rs, r) for rs in rf.rulesets if rs.compose is None for r in rs.rules if (r.span.line, r.span.col) == (line, col))
  if "ctx" in rs.params and rs.params["ctx"] not in (None, "None") and _reads_ctx(r): o = Outcome(r, "unsupported", "reads ctx")
  else: o = verify_rule(r, rs.caps, glob, rlimit, replay, rs.returns, rf.source)
  return o.status, o.detail, o.instances, o.seconds

def _reads_ctx(r: Rule) -> bool:
  return bool(re.search(r"\bctx\b", r.text))

# ---- reports ----

def summary(outcomes: list[Outcome]) -> dict[str, int]:
  out = {s: 0 for s in STATUSES}
  for o in outcomes: out[o.status] += 1
  return out

def table(by_file: dict[str, list[Outcome]]) -> str:
  rows = [f"{'file':<30}{'rules':>6}{'proved':>8}{'counterexample':>16}{'unsupported':>13}{'timeout':>9}"]
  tot = {s: 0 for s in STATUSES}
  for path, outs in by_file.items():
    s = summary(outs)
    for k in tot: tot[k] += s[k]
    rows.append(f"{path:<30}{len(outs):>6}{s['proved']:>8}{s['counterexample']:>16}{s['unsupported']:>13}{s['timeout']:>9}")
  if len(by_file) > 1:
    rows.append(f"{'total':<30}{sum(tot.values()):>6}{tot['proved']:>8}{tot['counterexample']:>16}{tot['unsupported']:>13}{tot['timeout']:>9}")
  return "\n".join(rows)

def line(o: Outcome) -> str:
  return f"{o.where}: {o.status} ({o.seconds:.1f} s): {o.rule.text}" + (f"\n    {o.detail}" if o.detail and o.status != "proved" else "")

def run(args) -> int:
  """The CLI: every rule of each file with its outcome (-q: only those not proved), then the table; exit 1 on a counterexample."""
  import sys
  from dslc.diagnostics import DslError
  by_file: dict[str, list[Outcome]] = {}
  t0 = time.perf_counter()
  for path in args.files:
    shown = os.path.relpath(os.path.abspath(path)).replace(os.sep, "/")
    shown = path if shown.startswith("..") else shown
    def report(o: Outcome) -> None:
      if not (args.quiet and o.status == "proved"): print(line(o), flush=True)
    try: outs = verify_file(path, shown, args.rlimit, set(args.line) if args.line else None, report, args.jobs)
    except DslError as e:
      print(str(e), file=sys.stderr)
      return 1
    by_file[shown] = outs
  print()
  print(table(by_file))
  print(f"{time.perf_counter() - t0:.1f} s")
  if args.json:
    with open(args.json, "w") as f:
      json.dump({p: {"summary": summary(o), "rules": [{"line": x.rule.span.line, "status": x.status, "detail": x.detail} for x in o]}
                 for p, o in by_file.items()}, f, indent=1)
  return 1 if any(o.status == "counterexample" for outs in by_file.values() for o in outs) else 0
