"""Python's meaning for `dslc verify`: a rule's guards and expressions evaluated over symbolic values (ints that never
wrap, bools, doubles, SNodes), `and` and `or` short-circuiting, a division by zero recorded as what the rule raises where it
runs. Whatever it can't give a meaning raises smt.Unsupported.
"""
from __future__ import annotations
import ast, builtins, math
from typing import Any, Callable
import z3
from runtime.dtype import DType, dtypes
from runtime.ops import ARITY, GroupOp, Ops
from dslc import smt
from dslc.smt import PInt, Unsupported
from dslc.verify_contracts import CONTRACTS
from dslc.verify_nodes import MEANINGS, Helper, Maybe, Opaque, OpOf, SNode, Sym, and_, is_sym, py_bool

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
    meaning = MEANINGS.get(fn.qualname) or CONTRACTS.get(fn.qualname)
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
