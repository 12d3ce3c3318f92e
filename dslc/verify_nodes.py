"""Symbolic nodes for `dslc verify`: a node of a rule instance whose value is a z3 term (`SNode`), the facts an instance's
nodes satisfy and what evaluating it may raise (`Sym`: range analysis on symbolic bounds, tests of a capture's op), and the
helpers of rules/*_helpers.py and runtime that have an SMT meaning. dslc/smt.py gives the ops theirs.
"""
from __future__ import annotations
import math
from typing import Any, Callable
import z3
from runtime.dtype import DType, dtypes
from runtime.ops import GroupOp, Ops
from dslc import smt
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
