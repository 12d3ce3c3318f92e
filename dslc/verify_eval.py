"""The symbolic half of `dslc verify`: nodes whose values are z3 terms (`SNode`), and an evaluator of a rule's guards,
`where` lines and result over them with Python's meaning (ints that never wrap, bools, doubles) and the SMT meanings of the
helpers that have one (dslc/smt.py gives the ops theirs). Whatever it can't give a meaning raises smt.Unsupported.
"""
from __future__ import annotations
import ast, builtins, math
from typing import Any, Callable
import z3
from runtime.dtype import DType, DTYPE_NAMES, dtypes
from runtime.ops import ARITY, GroupOp, Ops
from dslc import smt
from dslc.ir import Cond, Construct, Lit, PyResult, Ref, Result, Rule, Seq, Splice, Update
from dslc.smt import PInt, Unsupported

IDENTITY = {Ops.DETACH, Ops.CONTIGUOUS, Ops.CONTIGUOUS_BACKWARD}

class SNode:
  """A node of a rule instance: its op (None: a capture the pattern does not look into), dtype, sources, arg (a Python value,
  symbolic for a CONST) and its value, a z3 term."""
  __slots__ = ("op", "dtype", "src", "arg", "value", "name", "bounds", "op_is")
  def __init__(self, op: Ops | None, dtype: DType, src: tuple, arg: Any, value: z3.ExprRef, name: str = ""):
    self.op, self.dtype, self.src, self.arg, self.value, self.name = op, dtype, src, arg, value, name
    self.bounds: tuple | None = None
    self.op_is: dict[Ops, z3.BoolRef] = {}
  def __repr__(self) -> str: return f"SNode({self.op}, {self.dtype}, {self.name or self.value})"

class Maybe:
  """A result that declines (the rule does not fire) where `fires` is false."""
  def __init__(self, node: SNode, fires: z3.BoolRef): self.node, self.fires = node, fires

class Opaque:
  """A value nothing is known of (a rule set's parameter, as `caps`): tests of it are free booleans."""
  def __init__(self, name: str): self.name = name

class OpOf:
  """`x.op` of a capture the pattern does not look into."""
  def __init__(self, node: SNode): self.node = node

def is_sym(v: Any) -> bool: return isinstance(v, (PInt, z3.ExprRef))

def py_bool(v: Any) -> Any:
  """Python's truth of a value: a z3 Bool, or a Python bool."""
  if isinstance(v, z3.BoolRef): return v
  if isinstance(v, PInt): return v.e != 0
  if isinstance(v, z3.FPRef): return z3.Not(z3.fpIsZero(v))
  if isinstance(v, (SNode, Opaque, OpOf)): return True
  return bool(v)

def and_(*xs) -> Any:
  xs = [x for x in xs if x is not True]
  if any(x is False for x in xs): return False
  return True if not xs else xs[0] if len(xs) == 1 else z3.And(*xs)

class Sym:
  """One instance of a rule: the facts its nodes satisfy, what evaluating it may raise, and the ops it needed with no meaning."""
  def __init__(self, tag: str):
    self.tag, self.count = tag, 0
    self.facts: list = []
    self.raises: list[tuple[Any, str]] = []
    self.opaque: set[str] = set()
    self.path: list = []
    self.same_cache: dict = {}

  def name(self, base: str) -> str:
    self.count += 1
    return f"{base}!{self.count}"

  def leaf(self, name: str, d: DType) -> SNode:
    v = smt.fresh(self.name(name), d)
    self.fact(smt.in_range(v, d))
    return SNode(None, d, (), None, v, name)

  def fact(self, f) -> None:
    if f is not True: self.facts.append(f)

  def raise_if(self, cond, what: str) -> None:
    c = and_(*self.path, cond)
    if c is not False: self.raises.append((c, what))

  # ---- nodes and their values ----
  def make(self, op: Ops, d: DType, src: tuple, arg: Any = None, name: str = "") -> SNode:
    """A node built of its sources, with its value by the SMT meaning of its op."""
    if op is Ops.CONST:
      value = smt.from_python(arg, d)
      return SNode(op, d, (), smt.to_python(value, d) if d in smt.SCALARS else arg, value, name)
    if op in GroupOp.ALU:
      operand = src[1].dtype if op is Ops.WHERE else src[0].dtype if op in GroupOp.Comparison else d
      want = [dtypes.bool, d, d] if op is Ops.WHERE else [operand] * len(src)
      if any(s.dtype is not w for s, w in zip(src, want)):
        raise Unsupported(f"({op.name}:{d.name} ...) would have sources of {', '.join(s.dtype.name for s in src)}")
      if op in smt.OPAQUE_ALU: self.opaque.add(op.name)
      return SNode(op, d, src, arg, smt.alu(op, d, [s.value for s in src], operand), name)
    if op in IDENTITY and len(src) == 1 and src[0].dtype is d:  # the tensor graph's bookkeeping: the source's values
      return SNode(op, d, src, arg, src[0].value, name)
    if op is Ops.CAST and len(src) == 1 and d in smt.SCALARS and src[0].dtype in smt.SCALARS:
      return SNode(op, d, src, arg, smt.cast(src[0].value, src[0].dtype, d), name)
    if op is Ops.BITCAST and len(src) == 1 and d in smt.SCALARS and src[0].dtype in smt.SCALARS:
      return SNode(op, d, src, arg, smt.bitcast(src[0].value, src[0].dtype, d), name)
    # an op with no SMT meaning: a function of its sources (and arg, when known), nothing more
    self.opaque.add(op.name)
    if is_sym(arg) or any(isinstance(a, (SNode, PInt, z3.ExprRef)) for a in (arg if isinstance(arg, tuple) else ())):
      return SNode(op, d, src, arg, smt.fresh(self.name(op.name), d), name)
    fn = z3.Function(f"{op.name}<{d!r},{arg!r}>", *[smt.sort_of(s.dtype) for s in src], smt.sort_of(d))
    return SNode(op, d, src, arg, fn(*[s.value for s in src]) if src else smt.fresh(f"{op.name}<{d!r},{arg!r}>", d), name)

  def const(self, d: DType, value: Any) -> SNode:
    if value is None: raise Unsupported("a None where a node is needed")
    return self.make(Ops.CONST, d, (), value)

  def ite(self, c, a: SNode, b: SNode) -> SNode:
    if c is True: return a
    if c is False: return b
    if a.dtype is not b.dtype: raise Unsupported(f"a choice between {a.dtype} and {b.dtype} nodes")
    return SNode(None, a.dtype, (), None, smt.ite(c, a.value, b.value), "choice")

  # ---- what a guard reads of a node ----
  def op_test(self, n: SNode, op: Ops) -> Any:
    """n.op is op: known for a node the pattern matched, a free boolean for a capture (CONST ones have their value as bounds)."""
    if n.op is not None: return n.op is op
    if op not in n.op_is:
      b = z3.Bool(self.name(f"{n.name}.op_is_{op.name}"))
      for other in n.op_is.values(): self.fact(z3.Not(z3.And(b, other)))
      n.op_is[op] = b
      if op is Ops.CONST and n.dtype in smt.SCALARS and not dtypes.is_float(n.dtype):
        lo, hi = self.bounds(n)
        v = smt.to_python(n.value, n.dtype)
        self.fact(z3.Implies(b, z3.And(smt.p_cmp("==", lo, v), smt.p_cmp("==", hi, v))))
    return n.op_is[op]

  def identical(self, a: SNode, b: SNode) -> Any:
    """a is b: hash-consing makes it structural equality; for two different captures a free boolean that implies equal values."""
    if a is b: return True
    if a.dtype is not b.dtype: return False
    key = (id(a), id(b))
    if key not in self.same_cache:
      s = z3.Bool(self.name(f"{a.name}_is_{b.name}"))
      facts = [smt.same(a.value, b.value, a.dtype)]
      if a.op is None and b.op is None and a.dtype in smt.SCALARS and not dtypes.is_float(a.dtype):
        (alo, ahi), (blo, bhi) = self.bounds(a), self.bounds(b)
        facts += [smt.p_cmp("==", alo, blo), smt.p_cmp("==", ahi, bhi)]
      self.fact(z3.Implies(s, z3.And(*facts)))
      self.same_cache[key] = s
    return self.same_cache[key]

  def bounds(self, n: SNode) -> tuple:
    """(vmin, vmax): range analysis (runtime/uop.py) as it runs, on symbolic bounds; a capture's are free, around its value."""
    if n.bounds is None: n.bounds = self._bounds(n)
    return n.bounds

  def _bounds(self, n: SNode) -> tuple:
    d = n.dtype
    if d not in smt.SCALARS: raise Unsupported(f"the bounds of a {d} node")
    if dtypes.is_float(d):
      if n.op is Ops.CONST: return n.arg, n.arg
      if n.op is None:  # a float capture: any bounds (a constant's are its value)
        return z3.FP(self.name(f"{n.name}.vmin"), smt.F64), z3.FP(self.name(f"{n.name}.vmax"), smt.F64)
      return -math.inf, math.inf
    v = smt.to_python(n.value, d)
    if n.op is Ops.CONST: return smt.as_pint(n.arg), smt.as_pint(n.arg)
    if n.op is Ops.RANGE and n.src: return PInt.of(0), smt.p_sub(self.bounds(n.src[0])[1], 1)
    if n.op in GroupOp.ALU and all(s.dtype in smt.SCALARS and not dtypes.is_float(s.dtype) for s in n.src):
      sb = [self.bounds(s) for s in n.src]
      out = smt.int_bounds(n.op, d, sb)
      if n.op in (Ops.ADD, Ops.SUB, Ops.NEG, Ops.MUL) and d is not dtypes.bool: self.interval_lemma(n, sb, out)
      return out
    if n.op in GroupOp.ALU: return smt.dtype_bounds(d)
    if n.op is Ops.CAST and n.src and n.src[0].dtype in smt.SCALARS and not dtypes.is_float(n.src[0].dtype):
      return smt.cast_bounds(d, *self.bounds(n.src[0]))
    if n.op is not None and n.op not in (Ops.CAST, Ops.DEFINE_VAR, Ops.BIND, Ops.SPECIAL, Ops.RANGE):
      return smt.dtype_bounds(d)  # _bounds_of gives the dtype's range to every other op
    # a capture (or what the port does not follow): bounds that hold its value, nothing more
    w = smt.bits(d) + 1
    lo, hi = smt.fresh_pint(self.name(f"{n.name}.vmin"), w), smt.fresh_pint(self.name(f"{n.name}.vmax"), w)
    dlo, dhi = smt.dtype_bounds(d)
    self.fact(z3.And(smt.p_cmp("<=", dlo, lo), smt.p_cmp("<=", lo, v), smt.p_cmp("<=", v, hi), smt.p_cmp("<=", hi, dhi)))
    return lo, hi

  def interval_lemma(self, n: SNode, sb: list, out: tuple) -> None:
    """Theorems of integer arithmetic z3 does not find alone, as facts: with its sources in their bounds, the exact sum,
    difference or product lies between the ends' (range analysis's bounds before _fits); so a node whose bounds are not its
    dtype's whole range did not wrap, and its value is within its bounds."""
    xs = [smt.to_python(s.value, s.dtype) for s in n.src]
    inside = z3.And(*[z3.And(smt.p_cmp("<=", lo, x), smt.p_cmp("<=", x, hi)) for x, (lo, hi) in zip(xs, sb)])
    if n.op is Ops.MUL:
      (a, b), (c, e) = sb
      exact = smt.p_mul(xs[0], xs[1])
      corners = [smt.p_mul(u, w) for u in (a, b) for w in (c, e)]
      lo = smt.p_min(smt.p_min(corners[0], corners[1]), smt.p_min(corners[2], corners[3]))
      hi = smt.p_max(smt.p_max(corners[0], corners[1]), smt.p_max(corners[2], corners[3]))
    elif n.op is Ops.ADD: exact, lo, hi = smt.p_add(xs[0], xs[1]), smt.p_add(sb[0][0], sb[1][0]), smt.p_add(sb[0][1], sb[1][1])
    elif n.op is Ops.SUB: exact, lo, hi = smt.p_sub(xs[0], xs[1]), smt.p_sub(sb[0][0], sb[1][1]), smt.p_sub(sb[0][1], sb[1][0])
    else: exact, lo, hi = smt.p_neg(xs[0]), smt.p_neg(sb[0][1]), smt.p_neg(sb[0][0])
    dlo, dhi = smt.dtype_bounds(n.dtype)
    v = smt.to_python(n.value, n.dtype)
    fits = z3.And(smt.p_cmp("<=", dlo, lo), smt.p_cmp("<=", hi, dhi))
    self.fact(z3.Implies(inside, z3.And(smt.p_cmp("<=", lo, exact), smt.p_cmp("<=", exact, hi))))
    self.fact(z3.Implies(z3.And(inside, fits), smt.p_cmp("==", v, exact)))
    self.fact(z3.Implies(inside, z3.And(smt.p_cmp("<=", out[0], v), smt.p_cmp("<=", v, out[1]))))

  def exact(self, n: SNode) -> Any:
    if not (dtypes.is_int(n.dtype) and n.dtype in smt.SCALARS): return False
    lo, hi = self.bounds(n)
    dlo, dhi = smt.dtype_bounds(n.dtype)
    return z3.Not(z3.And(smt.p_cmp("==", lo, dlo), smt.p_cmp("==", hi, dhi)))

# ---- helpers with an SMT meaning, by qualified name ----

def _fold_alu(sym: Sym, u: SNode) -> SNode:
  if u.op not in GroupOp.ALU: raise Unsupported("fold_alu of a node that is not an ALU op")
  return SNode(Ops.CONST, u.dtype, (), smt.to_python(u.value, u.dtype), u.value, "fold_alu")

def _cast_value(sym: Sym, v: Any, d: Any) -> Any:
  if not isinstance(d, DType) or d not in smt.SCALARS: raise Unsupported("cast_value to a dtype not known when the rule is written")
  return smt.to_python(smt.from_python(v, d), d)

WRAPPING = {Ops.ADD, Ops.SUB, Ops.MUL, Ops.NEG, Ops.AND, Ops.OR, Ops.XOR, Ops.MULACC}
def _exec_alu(sym: Sym, op: Any, d: Any, operands: Any) -> Any:
  if not isinstance(op, Ops) or not isinstance(d, DType) or not isinstance(operands, (list, tuple)):
    raise Unsupported("exec_alu of an op or dtype not known when the rule is written")
  if op in GroupOp.Comparison or op is Ops.WHERE: raise Unsupported("exec_alu of a comparison or WHERE")
  vals = []
  for v in operands:
    # C's wrapping is a ring map: ADD, MUL, ... of the wrapped operands wrap alike; other ops need operands of the dtype's range
    if op not in WRAPPING and isinstance(v, PInt) and smt.is_int(d) and v.w > smt.bits(d) + (0 if smt.signed(d) else 1):
      raise Unsupported("exec_alu on an int that may be outside its dtype's range")
    vals.append(smt.from_python(v, d))
  return smt.to_python(smt.alu(op, d, vals, d), d)

MEANINGS: dict[str, Callable] = {
  "rules.symbolic_helpers.fold_alu": _fold_alu,
  "rules.symbolic_helpers.exact": lambda sym, u: sym.exact(u),
  "runtime.ops.cast_value": _cast_value,
  "runtime.ops.exec_alu": _exec_alu,
}

class Helper:
  """An imported function: its SMT meaning, or none (a call is unsupported)."""
  def __init__(self, qualname: str, fn: Any): self.qualname, self.fn = qualname, fn

SAFE_BUILTINS = {n: getattr(builtins, n) for n in ("len", "isinstance", "tuple", "list", "range", "zip", "enumerate", "reversed", "sorted",
                                                   "set", "frozenset", "dict", "str", "type", "sum", "any", "all", "min", "max", "abs",
                                                   "int", "bool", "float", "getattr", "hasattr", "repr", "divmod")}

class Evaluator:
  """Python's meaning of a guard or an expression over symbolic values; names come from `env` (captures, `where` names, op
  variables) and `glob` (imports, Ops, dtypes, ...)."""
  def __init__(self, sym: Sym, env: dict, glob: dict):
    self.sym, self.env, self.glob = sym, env, glob

  def run(self, text: str) -> Any:
    try: tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as e: raise Unsupported(f"can't read {text!r}") from e
    return self.ev(tree.body)

  def ev(self, n: ast.AST) -> Any:
    m = getattr(self, "ev_" + type(n).__name__, None)
    if m is None: raise Unsupported(f"Python's {type(n).__name__} ({ast.unparse(n)})")
    return m(n)

  def ev_Constant(self, n): return n.value
  def ev_Tuple(self, n): return tuple(self.ev(e) for e in n.elts)
  def ev_List(self, n): return [self.ev(e) for e in n.elts]
  def ev_Set(self, n): return {self.ev(e) for e in n.elts}

  def ev_Name(self, n):
    if n.id in self.env: return self.env[n.id]
    if n.id in self.glob: return self.glob[n.id]
    if n.id == "ctx": raise Unsupported("reads ctx")
    if n.id in SAFE_BUILTINS: return SAFE_BUILTINS[n.id]
    raise Unsupported(f"the name {n.id!r}")

  def ev_Attribute(self, n):
    obj = self.ev(n.value)
    a = n.attr
    if isinstance(obj, SNode):
      if a == "dtype": return obj.dtype
      if a == "op": return obj.op if obj.op is not None else OpOf(obj)
      if a in ("vmin", "vmax"): return self.sym.bounds(obj)[a == "vmax"]
      if a == "bounds": return self.sym.bounds(obj)
      if a == "arg":
        if obj.op is None: raise Unsupported(f"the arg of {obj.name}, a node the pattern does not look into")
        return obj.arg
      if a == "src":
        if obj.op is None: raise Unsupported(f"the sources of {obj.name}, a node the pattern does not look into")
        return obj.src
      if a in ("cast", "bitcast", "const_like"): return (obj, a)
      raise Unsupported(f"a node's {a!r}")
    if isinstance(obj, (Opaque, OpOf)) or is_sym(obj): raise Unsupported(f"{a!r} of a symbolic value")
    if isinstance(obj, Helper): raise Unsupported(f"{obj.qualname}.{a}")
    try: return getattr(obj, a)
    except AttributeError as e: raise Unsupported(f"{type(obj).__name__} has no {a!r}") from e

  def ev_Subscript(self, n):
    obj, key = self.ev(n.value), self.ev(n.slice)
    if is_sym(key) or is_sym(obj) or isinstance(obj, (SNode, Opaque)): raise Unsupported(f"an index into a symbolic value ({ast.unparse(n)})")
    try: return obj[key]
    except (KeyError, IndexError, TypeError) as e:
      self.sym.raise_if(True, f"{type(e).__name__} in `{ast.unparse(n)}`")
      raise Unsupported(f"`{ast.unparse(n)}` raises {type(e).__name__}") from e
  def ev_Slice(self, n):
    return slice(*(None if x is None else self.ev(x) for x in (n.lower, n.upper, n.step)))

  def ev_IfExp(self, n):
    c = py_bool(self.ev(n.test))
    if c is True: return self.ev(n.body)
    if c is False: return self.ev(n.orelse)
    self.sym.path.append(c)
    try: a = self.ev(n.body)
    finally: self.sym.path.pop()
    self.sym.path.append(z3.Not(c))
    try: b = self.ev(n.orelse)
    finally: self.sym.path.pop()
    return choose(self.sym, c, a, b)

  def ev_BoolOp(self, n):
    # in a guard `and` and `or` are tests: a boolean, the later operands evaluated only where the earlier ones let them
    is_and = isinstance(n.op, ast.And)
    conds: list = []
    try:
      for e in n.values:
        v = self.ev(e)
        if v is None: v = False
        if not isinstance(v, (bool, z3.BoolRef)): raise Unsupported(f"`{ast.unparse(n)}` on values that are not booleans")
        if v is (not is_and): return v
        if v is is_and: continue
        conds.append(v)
        self.sym.path.append(v if is_and else z3.Not(v))
      return is_and if not conds else conds[0] if len(conds) == 1 else (z3.And if is_and else z3.Or)(*conds)
    finally:
      for _ in conds: self.sym.path.pop()

  def ev_UnaryOp(self, n):
    v = self.ev(n.operand)
    if isinstance(n.op, ast.Not):
      b = py_bool(v)
      return (not b) if isinstance(b, bool) else z3.Not(b)
    if isinstance(n.op, ast.USub):
      if isinstance(v, PInt): return smt.p_neg(v)
      if isinstance(v, z3.FPRef): return z3.fpNeg(v)
      if isinstance(v, z3.BoolRef): return smt.p_neg(smt.as_pint(v))
      return -v
    if isinstance(n.op, ast.UAdd): return v
    if isinstance(n.op, ast.Invert):
      if is_sym(v): return smt.p_sub(smt.p_neg(v), 1)
      return ~v
    raise Unsupported(ast.unparse(n))

  def ev_BinOp(self, n):
    a, b = self.ev(n.left), self.ev(n.right)
    return binop(self.sym, type(n.op), a, b, ast.unparse(n))

  def ev_Compare(self, n):
    out: list = []
    left = self.ev(n.left)
    for op, right_n in zip(n.ops, n.comparators):
      right = self.ev(right_n)
      out.append(compare(self.sym, type(op), left, right))
      if out[-1] is False: return False
      left = right
    return and_(*out)

  def ev_Call(self, n):
    fn = self.ev(n.func)
    args = [self.ev(a) for a in n.args]
    if n.keywords: raise Unsupported(f"a call with keywords ({ast.unparse(n)})")
    return call(self.sym, fn, args, ast.unparse(n))

  def comprehension(self, gens: list, elem: Callable) -> list:
    out: list = []
    def loop(i: int) -> None:
      if i == len(gens):
        out.append(elem())
        return
      g = gens[i]
      it = self.ev(g.iter)
      if is_sym(it) or isinstance(it, (SNode, Opaque)): raise Unsupported(f"a loop over a symbolic value ({ast.unparse(g.iter)})")
      for item in it:
        bind_target(self.env, g.target, item)
        conds = [py_bool(self.ev(c)) for c in g.ifs]
        if any(c is False for c in conds): continue
        if any(not isinstance(c, bool) for c in conds): raise Unsupported("a comprehension's condition on symbolic values")
        loop(i + 1)
    saved = dict(self.env)
    try: loop(0)
    finally: self.env.clear(); self.env.update(saved)
    return out
  def ev_ListComp(self, n): return self.comprehension(n.generators, lambda: self.ev(n.elt))
  def ev_GeneratorExp(self, n): return iter(self.comprehension(n.generators, lambda: self.ev(n.elt)))
  def ev_SetComp(self, n): return set(self.comprehension(n.generators, lambda: self.ev(n.elt)))

def bind_target(env: dict, target: ast.AST, item: Any) -> None:
  if isinstance(target, ast.Name): env[target.id] = item
  elif isinstance(target, (ast.Tuple, ast.List)):
    items = list(item)
    if len(items) != len(target.elts): raise Unsupported("a comprehension target of another length")
    for t, x in zip(target.elts, items): bind_target(env, t, x)
  else: raise Unsupported(f"the target {ast.unparse(target)}")

def choose(sym: Sym, c, a: Any, b: Any) -> Any:
  """`a if c else b` for a symbolic c."""
  if isinstance(a, SNode) and isinstance(b, SNode): return sym.ite(c, a, b)
  if isinstance(a, SNode) and b is None: return Maybe(a, c)
  if a is None and isinstance(b, SNode): return Maybe(b, z3.Not(c))
  if isinstance(a, (bool, z3.BoolRef)) and isinstance(b, (bool, z3.BoolRef)): return z3.If(c, a, b)
  if isinstance(a, z3.FPRef) or isinstance(b, z3.FPRef): return z3.If(c, to_float(a), to_float(b))
  if isinstance(a, (int, PInt, z3.BoolRef)) and isinstance(b, (int, PInt, z3.BoolRef)): return smt.p_ite(c, a, b)
  if a == b and not is_sym(a): return a
  raise Unsupported(f"a choice between {type(a).__name__} and {type(b).__name__}")

def to_float(v: Any) -> z3.FPRef:
  if isinstance(v, z3.FPRef): return v
  if isinstance(v, float): return z3.FPVal(v, smt.F64)
  if isinstance(v, bool): return z3.FPVal(float(v), smt.F64)
  if isinstance(v, int): return z3.FPVal(float(v), smt.F64)  # Python's float(int) rounds to nearest, ties to even
  if isinstance(v, (PInt, z3.BoolRef)):
    p = smt.as_pint(v)
    return z3.fpToFP(smt.RNE, p.bv(p.w), smt.F64)
  raise Unsupported(f"{type(v).__name__} as a float")

def _exact_int_for_float(v: Any) -> None:
  if isinstance(v, PInt) and v.w > 54: raise Unsupported("an int of more than 53 bits against a float (Python compares them exactly)")

def _is_num(v: Any) -> bool: return isinstance(v, (int, float, PInt, z3.BoolRef, z3.FPRef)) and not isinstance(v, (z3.BitVecRef,))

def binop(sym: Sym, op: type, a: Any, b: Any, text: str) -> Any:
  if not is_sym(a) and not is_sym(b):
    try: return {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b, ast.FloorDiv: lambda: a // b,
                 ast.Mod: lambda: a % b, ast.Pow: lambda: a ** b, ast.LShift: lambda: a << b, ast.RShift: lambda: a >> b,
                 ast.BitAnd: lambda: a & b, ast.BitOr: lambda: a | b, ast.BitXor: lambda: a ^ b, ast.Div: lambda: a / b}[op]()
    except ZeroDivisionError:
      sym.raise_if(True, f"ZeroDivisionError in `{text}`")
      raise Unsupported(f"`{text}` divides by zero") from None
    except TypeError as e: raise Unsupported(f"`{text}`: {e}") from e
  if not (_is_num(a) and _is_num(b)): raise Unsupported(f"`{text}` on {type(a).__name__} and {type(b).__name__}")
  if isinstance(a, (float, z3.FPRef)) or isinstance(b, (float, z3.FPRef)) or op is ast.Div:
    _exact_int_for_float(a); _exact_int_for_float(b)
    x, y = to_float(a), to_float(b)
    if op in (ast.Div, ast.FloorDiv, ast.Mod): sym.raise_if(z3.fpIsZero(y), f"ZeroDivisionError in `{text}`")
    f = {ast.Add: z3.fpAdd, ast.Sub: z3.fpSub, ast.Mult: z3.fpMul, ast.Div: z3.fpDiv}.get(op)
    if f is None: raise Unsupported(f"`{text}` on floats")
    return f(smt.RNE, x, y)
  if op in (ast.FloorDiv, ast.Mod):
    sym.raise_if(smt.p_cmp("==", b, 0), f"ZeroDivisionError in `{text}`")
    # b may be 0 only where the rule raises (reported apart): divide by 1 there
    b = smt.p_ite(smt.p_cmp("==", b, 0), 1, b)
    return smt.p_floordiv(a, b) if op is ast.FloorDiv else smt.p_mod(a, b)
  if op is ast.Add: return smt.p_add(a, b)
  if op is ast.Sub: return smt.p_sub(a, b)
  if op is ast.Mult: return smt.p_mul(a, b)
  if op in (ast.BitAnd, ast.BitOr, ast.BitXor):
    if isinstance(a, z3.BoolRef) and isinstance(b, z3.BoolRef): return {ast.BitAnd: z3.And, ast.BitOr: z3.Or, ast.BitXor: z3.Xor}[op](a, b)
    return smt.p_bit({ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^"}[op], a, b)
  if op in (ast.LShift, ast.RShift) and isinstance(b, int) and 0 <= b < 128:
    return smt.p_shl(a, b) if op is ast.LShift else smt.p_shr(a, b)
  raise Unsupported(f"`{text}` on symbolic ints")

def compare(sym: Sym, op: type, a: Any, b: Any) -> Any:
  if op in (ast.Is, ast.IsNot):
    r = identity(sym, a, b)
    return r if op is ast.Is else (not r) if isinstance(r, bool) else z3.Not(r)
  if op in (ast.In, ast.NotIn):
    r = membership(sym, a, b)
    return r if op is ast.In else (not r) if isinstance(r, bool) else z3.Not(r)
  name = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}[op]
  if not is_sym(a) and not is_sym(b):
    if isinstance(a, (SNode, OpOf, Opaque)) or isinstance(b, (SNode, OpOf, Opaque)):
      if name in ("==", "!="):
        r = identity(sym, a, b)
        return r if name == "==" else (not r) if isinstance(r, bool) else z3.Not(r)
      raise Unsupported(f"{name} of nodes")
    import operator
    try: return {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne}[name](a, b)
    except TypeError as e: raise Unsupported(f"{name} of {type(a).__name__} and {type(b).__name__}") from e
  if not (_is_num(a) and _is_num(b)):
    if name in ("==", "!=") and (a is None or b is None): return name == "!="
    raise Unsupported(f"{name} of {type(a).__name__} and {type(b).__name__}")
  if isinstance(a, (float, z3.FPRef)) or isinstance(b, (float, z3.FPRef)):
    _exact_int_for_float(a); _exact_int_for_float(b)
    x, y = to_float(a), to_float(b)
    return {"<": z3.fpLT, "<=": z3.fpLEQ, ">": z3.fpGT, ">=": z3.fpGEQ, "==": z3.fpEQ, "!=": lambda p, q: z3.Not(z3.fpEQ(p, q))}[name](x, y)
  return smt.p_cmp(name, a, b)

def identity(sym: Sym, a: Any, b: Any) -> Any:
  if isinstance(a, OpOf) and isinstance(b, Ops): return sym.op_test(a.node, b)
  if isinstance(b, OpOf) and isinstance(a, Ops): return sym.op_test(b.node, a)
  if isinstance(a, SNode) and isinstance(b, SNode): return sym.identical(a, b)
  if isinstance(a, Opaque) or isinstance(b, Opaque):
    return False if a is None or b is None else z3.Bool(sym.name("opaque_is"))  # caps is None: a free boolean
  if isinstance(a, OpOf) or isinstance(b, OpOf): raise Unsupported("an op compared with something that is not an op")
  if is_sym(a) or is_sym(b):
    if isinstance(a, z3.BoolRef) and isinstance(b, bool): return a if b else z3.Not(a)
    if isinstance(b, z3.BoolRef) and isinstance(a, bool): return b if a else z3.Not(b)
    if a is None or b is None: return False
    raise Unsupported("`is` on symbolic values")
  return a is b

def membership(sym: Sym, item: Any, container: Any) -> Any:
  if isinstance(container, Opaque): return z3.Bool(sym.name(f"in_{container.name}"))
  if isinstance(item, OpOf):
    if not isinstance(container, (frozenset, set, tuple, list, dict)): raise Unsupported("`in` on an op")
    tests = [sym.op_test(item.node, o) for o in container if isinstance(o, Ops)]
    return z3.Or(*tests) if tests else False
  if is_sym(item) or isinstance(item, SNode):
    if is_sym(container) or not isinstance(container, (tuple, list, set, frozenset)): raise Unsupported("`in` on symbolic values")
    if isinstance(item, SNode): tests = [sym.identical(item, x) if isinstance(x, SNode) else False for x in container]
    else: tests = [compare(sym, ast.Eq, item, x) for x in container if _is_num(x)]
    tests = [t for t in tests if t is not False]
    return True if any(t is True for t in tests) else z3.Or(*tests) if tests else False
  if is_sym(container): raise Unsupported("`in` a symbolic value")
  if isinstance(container, tuple) and any(isinstance(x, SNode) for x in container): raise Unsupported("`in` a tuple of nodes")
  return item in container

def call(sym: Sym, fn: Any, args: list, text: str) -> Any:
  if isinstance(fn, Helper):
    meaning = MEANINGS.get(fn.qualname)
    if meaning is None: raise Unsupported(f"helper {fn.qualname.rsplit('.', 1)[-1]} has no SMT meaning")
    return meaning(sym, *args)
  if isinstance(fn, tuple) and len(fn) == 2 and isinstance(fn[0], SNode):
    node, method = fn
    if method == "cast" or method == "bitcast":
      d = args[0]
      if not isinstance(d, DType): raise Unsupported(f"{method} to a dtype not known when the rule is written")
      return node if d is node.dtype else sym.make(Ops.CAST if method == "cast" else Ops.BITCAST, d, (node,))
    return sym.const(node.dtype, args[0])  # const_like
  if fn in (min, max) and any(is_sym(a) for a in (args[0] if len(args) == 1 else args)):
    xs = list(args[0]) if len(args) == 1 else args
    out = xs[0]
    for x in xs[1:]:
      if any(isinstance(v, (float, z3.FPRef)) for v in (out, x)): raise Unsupported(f"{fn.__name__} of symbolic floats")
      out = smt.p_min(out, x) if fn is min else smt.p_max(out, x)
    return out
  if fn is abs and is_sym(args[0]): return smt.p_abs(args[0]) if not isinstance(args[0], z3.FPRef) else z3.fpAbs(args[0])
  if fn in (all, any):
    xs = [py_bool(x) for x in args[0]]
    if fn is all: return and_(*xs)
    xs = [x for x in xs if x is not False]
    return True if any(x is True for x in xs) else z3.Or(*xs) if xs else False
  if fn is bool: return py_bool(args[0])
  if fn is int and args and is_sym(args[0]):
    if isinstance(args[0], z3.FPRef): raise Unsupported("int() of a symbolic float")
    return smt.as_pint(args[0])
  if fn is float and args and is_sym(args[0]): return to_float(args[0])
  if any(is_sym(a) or isinstance(a, (SNode, Opaque, OpOf)) for a in args) and fn not in (len, isinstance, tuple, list, zip, enumerate, reversed):
    raise Unsupported(f"`{text}` on symbolic values")
  if isinstance(fn, type) and issubclass(fn, z3.AstRef): raise Unsupported(text)
  try: return fn(*args)
  except (ValueError, TypeError, KeyError, IndexError, ZeroDivisionError) as e:
    sym.raise_if(True, f"{type(e).__name__} in `{text}`")
    raise Unsupported(f"`{text}` raises {type(e).__name__}") from e

def globals_for(imports: dict[str, Any], params: list[str]) -> dict:
  """The names a guard or result may read besides its captures: the file's imports, its rule set's parameters, and the
  namespace of generated modules."""
  import runtime.ops as ops_mod
  g: dict[str, Any] = {"Ops": Ops, "GroupOp": GroupOp, "dtypes": dtypes, "math": math, "inf": math.inf, "nan": math.nan,
                       "exec_alu": Helper("runtime.ops.exec_alu", ops_mod.exec_alu),
                       "cast_value": Helper("runtime.ops.cast_value", ops_mod.cast_value), "ARITY": ARITY}
  g.update(imports)
  for p in params: g[p] = Opaque(p)
  return g

# ---- results ----

class Results:
  """Builds a rule's result (and its `where` names) as SNodes, as the generated code builds UOps (dslc/emit_result.py)."""
  def __init__(self, sym: Sym, rule: Rule, ev: Evaluator, root: SNode):
    self.sym, self.rule, self.ev, self.root = sym, rule, ev, root
    self.plain: set[str] = set()   # names bound to plain values (an arg, a literal `where`): a constant where a node goes

  def bind_wheres(self) -> None:
    for b in self.rule.bindings:
      if isinstance(b.value, Lit):
        self.ev.env[b.name] = b.value.value
        self.plain.add(b.name)
      elif isinstance(b.value, PyResult):
        self.ev.env[b.name] = self.ev.run(b.value.expr.text)
        if not isinstance(self.ev.env[b.name], (SNode, Maybe)): self.plain.add(b.name)
      else: self.ev.env[b.name] = self.build(b.value, self.root.dtype)

  def top(self) -> Any:
    return self.build(self.rule.result, self.root.dtype, top=True)

  def static_dtype(self, r: Result) -> DType | None:
    """The dtype the emitter infers for a source before building it (ResultBuilder.dtype_of)."""
    if isinstance(r, Ref):
      v = self.ev.env.get(r.name)
      return v.dtype if isinstance(v, SNode) and r.name not in self.plain else v.node.dtype if isinstance(v, Maybe) else None
    if isinstance(r, Cond): return self.static_dtype(r.then) or self.static_dtype(r.other)
    if isinstance(r, Construct): return self.construct_dtype(r, None)
    if isinstance(r, Update):
      if "dtype" in r.fields: return self.dtype_expr(r.fields["dtype"].text)
      v = self.ev.env.get(r.name)
      return v.dtype if isinstance(v, SNode) else None
    return None

  def dtype_expr(self, text: str) -> DType:
    d = DTYPE_NAMES.get(text.strip()) or self.ev.run(text)
    if not isinstance(d, DType): raise Unsupported(f"the dtype {text!r}")
    return d

  def construct_dtype(self, r: Construct, ctx_dt: DType | None) -> DType | None:
    if r.dtype is not None: return self.dtype_expr(r.dtype.text)
    op = self.op_of(r)
    first = next((d for s in r.src if (d := self.static_dtype(s)) is not None), None)
    if first is None and (spliced := next((x for x in r.src if isinstance(x, Splice)), None)) is not None:
      items = self.ev.env.get(spliced.name) or ()
      first = items[0].dtype if items and isinstance(items[0], SNode) else None
    if op is Ops.CONST: return ctx_dt
    if op in GroupOp.Comparison: return dtypes.bool
    if op is Ops.WHERE: return next((d for s in r.src[1:] if (d := self.static_dtype(s)) is not None), ctx_dt)
    if op in GroupOp.ALU: return first or ctx_dt
    if op in (Ops.SINK, Ops.STORE, Ops.NOOP, Ops.BARRIER, Ops.END, Ops.ENDIF, Ops.IF, Ops.GROUP): return dtypes.void
    if op in (Ops.CAST, Ops.BITCAST, Ops.GEP, Ops.VCONST, Ops.DEFINE_VAR, Ops.SPECIAL, Ops.RANGE, Ops.VECTORIZE, Ops.LOAD): return None
    return first

  def op_of(self, r: Construct) -> Ops:
    if r.op is not None: return r.op
    op = self.ev.env.get(r.opvar) if r.opvar else None
    if not isinstance(op, Ops): raise Unsupported(f"the op variable {r.opvar}")
    return op

  def as_node(self, v: Any, d: DType | None) -> SNode | Maybe:
    if isinstance(v, (SNode, Maybe)): return v
    if v is None: raise Unsupported("a result that is None where a node is needed")
    if d is None: raise Unsupported("a number whose dtype can't be known")
    if isinstance(v, (bool, int, float, PInt, z3.BoolRef, z3.FPRef)): return self.sym.const(d, v)
    raise Unsupported(f"a result that is a {type(v).__name__}")

  def build(self, r: Result, ctx_dt: DType | None, top: bool = False) -> Any:
    sym, ev = self.sym, self.ev
    if isinstance(r, Ref):
      v = ev.env.get(r.name)
      if r.name in self.plain or not isinstance(v, (SNode, Maybe)): return self.as_node(v, ctx_dt)
      return v
    if isinstance(r, Lit): return self.as_node(r.value, ctx_dt)
    if isinstance(r, PyResult):
      v = ev.run(r.expr.text)
      return None if v is None and top else self.as_node(v, ctx_dt)
    if isinstance(r, Cond):
      c = py_bool(ev.run(r.test.text))
      if c is True: return self.build(r.then, ctx_dt, top)
      if c is False: return self.build(r.other, ctx_dt, top)
      a, b = self.build(r.then, ctx_dt, top), self.build(r.other, ctx_dt, top)
      if isinstance(a, Maybe) or isinstance(b, Maybe): raise Unsupported("a choice between results that may decline")
      return choose(sym, c, a, b)
    if isinstance(r, Update):
      base = ev.env.get(r.name)
      if not isinstance(base, SNode) or base.op is None: raise Unsupported(f"an update of {r.name}, whose op the pattern does not fix")
      f = r.fields
      op = ev.run(f["op"].text) if "op" in f else base.op
      d = self.dtype_expr(f["dtype"].text) if "dtype" in f else base.dtype
      src = tuple(ev.run(f["src"].text)) if "src" in f else base.src
      arg = ev.run(f["arg"].text) if "arg" in f else base.arg
      if not isinstance(op, Ops) or not all(isinstance(s, SNode) for s in src): raise Unsupported("an update with symbolic fields")
      return sym.make(op, d, src, arg)
    if isinstance(r, Construct): return self.construct(r, ctx_dt)
    if isinstance(r, Seq): raise Unsupported("a sequence result")
    raise Unsupported(f"a {type(r).__name__} result")

  def construct(self, r: Construct, ctx_dt: DType | None) -> SNode:
    if r.comp is not None: raise Unsupported("a comprehension among a node's sources")
    op = self.op_of(r)
    d = self.construct_dtype(r, ctx_dt)
    if d is None: raise Unsupported(f"the dtype of ({op.name} ...)")
    arg = self.ev.run(r.arg.text) if r.arg is not None else None
    if op is Ops.CONST: return self.sym.const(d, arg)
    operand = d
    if op in GroupOp.Comparison: operand = next((x for s in r.src if (x := self.static_dtype(s)) is not None), ctx_dt)  # type: ignore[assignment]
    srcs: list[SNode] = []
    for i, s in enumerate(r.src):
      if isinstance(s, Splice):
        items = self.ev.env.get(s.name)
        if not isinstance(items, tuple) or not all(isinstance(x, SNode) for x in items): raise Unsupported(f"the splice {s.name}*")
        srcs.extend(items)
        continue
      sdt = dtypes.bool if op is Ops.WHERE and i == 0 else dtypes.index if op is Ops.INDEX and i > 0 else operand
      v = self.build(s, sdt)
      if isinstance(v, Maybe): raise Unsupported("a source that may decline")
      if not isinstance(v, SNode): raise Unsupported(f"a source that is a {type(v).__name__}")
      srcs.append(v)
    if op in GroupOp.Associative and len(srcs) > 2:
      out = srcs[0]
      for s in srcs[1:]: out = self.sym.make(op, d, (out, s), arg)
      return out
    if op in ARITY and ARITY[op] != len(srcs): raise Unsupported(f"({op.name} ...) with {len(srcs)} sources")
    return self.sym.make(op, d, tuple(srcs), arg)
