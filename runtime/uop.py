"""UOp: the immutable, hash-consed node of the IR that every layer builds and rewrites.

Building the same (op, dtype, src, arg, tag) twice returns the same object, so `is` is structural equality and
hashing is by identity. The cache holds weak references: a graph no longer used is freed by reference counting.
Also here: operator sugar for ALU nodes, toposort, substitute, range analysis (vmin/vmax), sym_infer and render.
"""
from __future__ import annotations
import math, numbers, weakref
from typing import Any, Callable, Iterator
from runtime.dtype import DType, PtrDType, dtypes
from runtime.ops import Ops, GroupOp, exec_alu, cast_value

# (op, dtype, src, arg, tag) -> weakref to the one live UOp with those fields: the hash-consing table, an interning table of
# pure values (a node is its fields), so one for the process and every engine in it
_ucache: dict[tuple, weakref.ref] = {}
_UNSET = object()  # a cached field not computed yet
# the same, for a hot path elsewhere that reads a node's _shape or _device slot instead of the property (tensor/tensor.py)
UNSET = _UNSET

# UOp.axis's function (tensor/multi.py axis_of), registered by the layer that has the rules lowering multi-device graphs
SPLIT_AXIS: list = []

class UOpMetaClass(type):
  def __call__(cls, op: Ops, dtype: DType = dtypes.void, src: tuple = (), arg: Any = None, tag: Any = None) -> UOp:
    return uop(op, dtype, tuple(src), arg, tag)

def _float_key(x: Any) -> Any:
  # Python's == says 0.0 == -0.0 and nan != nan, but -0.0 is another constant (1/x) and every nan is the same one
  if x.__class__ is float:
    if x != x: return ("nan",)
    if x == 0.0 and math.copysign(1.0, x) < 0: return ("-0.0",)
  return x

def _cache_key(op: Ops, dtype: DType, src: tuple, arg: Any, tag: Any) -> tuple:
  if arg.__class__ is tuple: return (op, dtype, src, tuple(_float_key(x) for x in arg), tag)
  return (op, dtype, src, _float_key(arg), tag)

# members of Ops the per-node paths below compare with, as module names: `Ops.X` costs about 0.3 us in Python 3.11 (the enum
# metaclass's attribute lookup), a module global a few nanoseconds
_VCONST, _BUFFER, _COPY, _KERNEL, _DEVICE, _RESHAPE, _EXPAND, _CAST, _BIND, _DEFINE_VAR, _UNIQUE = (
  Ops.VCONST, Ops.BUFFER, Ops.COPY, Ops.KERNEL, Ops.DEVICE, Ops.RESHAPE, Ops.EXPAND, Ops.CAST, Ops.BIND, Ops.DEFINE_VAR, Ops.UNIQUE)
_VOID = dtypes.void

# UOp.simplify()'s rules are a higher layer's (rules/symbolic.rules): importing the `rules` package installs them here. A
# program that imported only runtime finds them on its first simplify() through the entry point group `rulegrad.hooks`
# (pyproject.toml), whose `simplify` entry is that package: runtime names no higher layer.
_simplifier: Callable[[UOp], UOp] | None = None

def install_simplifier(fn: Callable[[UOp], UOp]) -> None:
  """Make `fn` what UOp.simplify() runs (the rules package installs its symbolic rule set when imported)."""
  global _simplifier
  _simplifier = fn

def _load_simplifier() -> Callable[[UOp], UOp]:
  from importlib.metadata import entry_points
  for ep in entry_points(group="rulegrad.hooks", name="simplify"): ep.load()  # importing the package installs it
  if _simplifier is None:
    raise RuntimeError("UOp.simplify() needs the symbolic rules, which importing the `rules` package installs: `import rules` first, "
                       "or install the project (pip install -e .) so that runtime finds them")
  return _simplifier

def uop(op: Ops, dtype: DType, src: tuple = (), arg: Any = None, tag: Any = None) -> UOp:
  """The raw constructor used by the engine and by generated matchers: no checks, no dtype inference."""
  key = (op, dtype, src, arg, tag) if arg.__class__ is not float and op is not _VCONST else _cache_key(op, dtype, src, arg, tag)
  ref = _ucache.get(key)
  if ref is not None and (u := ref()) is not None: return u
  u = object.__new__(UOp)
  u.op, u.dtype, u.src, u.arg, u.tag, u._key, u._bounds, u._shape, u._device = op, dtype, src, arg, tag, key, None, _UNSET, _UNSET
  # setdefault, not a store: another thread may have made the same node since the lookup, and there must be one
  if (first := _ucache.setdefault(key, r := weakref.ref(u))) is not r:
    if (v := first()) is not None: return v
    _ucache[key] = r
  return u

def buffer_node(dtype: DType, device: UOp, size: int, unique: int, device_name: str) -> UOp:
  """uop(BUFFER, dtype, (uop(UNIQUE, void, (), unique), device), size) with its shape (size,) and device facts (with_facts):
  the node of each eager op's output (tensor/engine/prepared.py), in one call. A unique id no node has (what a storage's
  counter gives) makes two nodes no lookup can find, so they are made and registered without one; an id a node has (made
  by hand, or unpickled) goes through uop()."""
  ukey = (_UNIQUE, _VOID, (), unique, None)
  if ukey in _ucache: return with_facts(uop(_BUFFER, dtype, (uop(_UNIQUE, _VOID, (), unique), device), size), (size,), device_name)
  n = _new_node(UOp)
  n.op, n.dtype, n.src, n.arg, n.tag, n._key, n._bounds, n._shape, n._device = _UNIQUE, _VOID, (), unique, None, ukey, None, _UNSET, _UNSET
  _ucache[ukey] = _weak(n)
  src = (n, device)
  u = _new_node(UOp)
  u.op, u.dtype, u.src, u.arg, u.tag, u._key, u._bounds, u._shape, u._device = \
    _BUFFER, dtype, src, size, None, (key := (_BUFFER, dtype, src, size, None)), None, (size,), device_name
  _ucache[key] = _weak(u)
  return u

_new_node, _weak = object.__new__, weakref.ref

def with_facts(u: UOp, shape: Any, device: str | None) -> UOp:
  """u with its tensor-graph shape and device cached from the caller that built it and knows them (a new BUFFER of n
  elements, an op on a tensor and a broadcast number): the walks that would compute them are skipped. A node that has them
  already keeps its own. The facts must be the ones `shape` and `device` would compute."""
  if u._shape is _UNSET: u._shape = shape
  if u._device is _UNSET: u._device = device
  return u

def live_uops() -> int:
  """How many UOps are alive (a test and benchmark aid)."""
  return sum(1 for r in _ucache.values() if r() is not None)

class UOp(metaclass=UOpMetaClass):
  """One node: `op` applied to `src` (a tuple of UOps), producing `dtype`; `arg` holds op-specific data."""
  __slots__ = ("op", "dtype", "src", "arg", "tag", "_key", "_bounds", "_shape", "_device", "__weakref__")
  op: Ops
  dtype: DType
  src: tuple[UOp, ...]
  arg: Any
  tag: Any

  def __del__(self):
    # drop our cache entry unless a newer node with the same key replaced it (possible when the GC breaks a cycle): popped
    # and put back in that rare case, so the usual one hashes the key once
    try:
      if (ref := _ucache.pop(self._key, None)) is not None and (o := ref()) is not None and o is not self: _ucache[self._key] = ref
    except (AttributeError, TypeError): pass  # interpreter shutdown

  def __reduce__(self): return (uop, (self.op, self.dtype, self.src, self.arg, self.tag))
  def replace(self, **kwargs) -> UOp:
    f = {"op": self.op, "dtype": self.dtype, "src": self.src, "arg": self.arg, "tag": self.tag, **kwargs}
    return uop(f["op"], f["dtype"], tuple(f["src"]), f["arg"], f["tag"])

  # ---- constants and variables ----
  @staticmethod
  def const(dtype: DType, value) -> UOp:
    """A constant of `dtype`; a vector dtype with a scalar value broadcasts it, with a tuple gives a VCONST."""
    if isinstance(value, UOp): raise TypeError(f"UOp.const takes a Python value, not {value!r}")
    if isinstance(value, tuple):
      if len(value) != dtype.count: raise ValueError(f"{len(value)} values for the {dtype.count} lanes of {dtype}")
      return uop(Ops.VCONST, dtype, (), tuple(cast_value(v, dtype.scalar) for v in value))
    c = uop(Ops.CONST, dtype.scalar, (), cast_value(value, dtype.scalar))
    return c if dtype.count == 1 else uop(Ops.VECTORIZE, dtype, (c,) * dtype.count)
  def const_like(self, value) -> UOp: return UOp.const(self.dtype, value)

  @staticmethod
  def variable(name: str, min_val: int, max_val: int, dtype: DType = dtypes.index) -> UOp:
    """A named integer in [min_val, max_val] (both included), for symbolic shapes and index expressions."""
    if min_val > max_val: raise ValueError(f"variable {name!r}: empty range [{min_val}, {max_val}]")
    return uop(Ops.DEFINE_VAR, dtype, (), (name, min_val, max_val))
  @property
  def expr(self) -> str:
    if self.op is not Ops.DEFINE_VAR: raise AttributeError(f"only a DEFINE_VAR has a name, not {self.op}")
    return self.arg[0]
  def unbind_name(self) -> str:
    """The name of a Variable, bound or not."""
    return (self.src[0] if self.op is Ops.BIND else self).arg[0]
  def bind(self, value: int) -> UOp:
    if self.op is not Ops.DEFINE_VAR: raise TypeError(f"only a variable can be bound, not {self.op}")
    if not self.arg[1] <= value <= self.arg[2]: raise ValueError(f"{value} is outside {self.arg[0]}'s range [{self.arg[1]}, {self.arg[2]}]")
    return uop(Ops.BIND, self.dtype, (self, self.const_like(value)))

  # ---- ALU sugar (tinygrad's names; == stays identity) ----
  def _operand(self, x) -> UOp:
    if x.__class__ is UOp:
      if x.dtype is not self.dtype: raise TypeError(f"dtype mismatch: {self.dtype} and {x.dtype} (operands {self.render()} and {x.render()})")
      return x
    if isinstance(x, float) and not dtypes.is_float(self.dtype):
      raise TypeError(f"can't combine the {self.dtype} expression {self.render()} with the float constant {x}")
    return self.const_like(x)
  def alu(self, op: Ops, *others) -> UOp:
    # another type's operand (a Tensor: v * x with v a bound Variable) is its business: Python then tries its reflected op
    if any(not isinstance(x, (UOp, int, float)) and not isinstance(x, numbers.Number) for x in others): return NotImplemented
    src = (self, *(self._operand(x) for x in others)) if op is not Ops.WHERE else (self, *others)
    if op in GroupOp.Comparison: dt = dtypes.bool.vec(self.dtype.count)
    elif op is Ops.WHERE: dt = src[1].dtype
    else: dt = self.dtype
    return uop(op, dt, src)
  def _ralu(self, op: Ops, x) -> UOp:
    if not isinstance(x, (UOp, int, float)) and not isinstance(x, numbers.Number): return NotImplemented
    return uop(op, self.dtype, (self._operand(x), self))
  def __add__(self, x): return self.alu(Ops.ADD, x)
  def __radd__(self, x): return self._ralu(Ops.ADD, x)
  def __sub__(self, x): return self.alu(Ops.SUB, x)
  def __rsub__(self, x): return self._ralu(Ops.SUB, x)
  def __mul__(self, x): return self.alu(Ops.MUL, x)
  def __rmul__(self, x): return self._ralu(Ops.MUL, x)
  def __floordiv__(self, x): return self.alu(Ops.IDIV, x)
  def __rfloordiv__(self, x): return self._ralu(Ops.IDIV, x)
  def __mod__(self, x): return self.alu(Ops.MOD, x)
  def __rmod__(self, x): return self._ralu(Ops.MOD, x)
  def __truediv__(self, x): return self.alu(Ops.FDIV, x)
  def __rtruediv__(self, x): return self._ralu(Ops.FDIV, x)
  def __and__(self, x): return self.alu(Ops.AND, x)
  def __rand__(self, x): return self._ralu(Ops.AND, x)
  def __or__(self, x): return self.alu(Ops.OR, x)
  def __ror__(self, x): return self._ralu(Ops.OR, x)
  def __xor__(self, x): return self.alu(Ops.XOR, x)
  def __rxor__(self, x): return self._ralu(Ops.XOR, x)
  def __lshift__(self, x): return self.alu(Ops.SHL, x)
  def __rshift__(self, x): return self.alu(Ops.SHR, x)
  def __neg__(self): return uop(Ops.NEG, self.dtype, (self,))
  def __lt__(self, x): return self.alu(Ops.CMPLT, x)
  def __gt__(self, x): return self._operand(x).alu(Ops.CMPLT, self)
  def __le__(self, x): return self._operand(x).alu(Ops.CMPLT, self).logical_not()
  def __ge__(self, x): return self.alu(Ops.CMPLT, x).logical_not()
  def ne(self, x) -> UOp: return self.alu(Ops.CMPNE, x)
  def eq(self, x) -> UOp: return self.alu(Ops.CMPEQ, x)
  def logical_not(self) -> UOp: return self.ne(True)
  def maximum(self, x) -> UOp: return self.alu(Ops.MAX, x)
  def minimum(self, x) -> UOp:
    # -max(-a, -b) would be wrong for unsigned ints and INT_MIN; floats keep max's nan propagation
    x = self._operand(x)
    if dtypes.is_float(self.dtype): return -((-self).maximum(-x))
    return (self < x).where(self, x)
  def where(self, x, y) -> UOp:
    if x.__class__ is not UOp and y.__class__ is not UOp: raise TypeError("where needs at least one UOp branch to take its dtype from")
    x = y._operand(x) if x.__class__ is not UOp else x
    y = x._operand(y)
    return self.alu(Ops.WHERE, x, y)
  def cast(self, dtype: DType) -> UOp: return self if dtype is self.dtype else uop(Ops.CAST, dtype, (self,))
  def bitcast(self, dtype: DType) -> UOp: return self if dtype is self.dtype else uop(Ops.BITCAST, dtype, (self,))
  def __bool__(self):
    raise TypeError(f"the truth value of a UOp is undefined ({self.op}): compare with `is None`, or evaluate it with sym_infer")
  def __len__(self): raise TypeError("a UOp has no length; use len(u.src)")

  # ---- graph walks ----
  def toposort(self, gate: Callable[[UOp], bool] | None = None) -> dict[UOp, None]:
    """Every node reachable from this one, sources before users (an ordered dict used as a set). Iterative.
    `gate(u)` False keeps u but skips its sources."""
    out: dict[UOp, None] = {}
    stack: list[tuple[UOp, bool]] = [(self, False)]
    while stack:
      u, ready = stack.pop()
      if u in out: continue
      if ready or (gate is not None and not gate(u)):
        out[u] = None
        continue
      stack.append((u, True))
      for s in reversed(u.src):
        if s not in out: stack.append((s, False))
    return out
  def sparents(self) -> Iterator[UOp]: return iter(self.toposort())

  def substitute(self, mapping: dict[UOp, UOp]) -> UOp:
    """This graph with every node in `mapping` replaced (matched on the original nodes, not on replacements)."""
    from runtime.rewrite import substitute
    return substitute(self, mapping)

  def simplify(self) -> UOp:
    """This expression simplified by the symbolic rule set (rules/symbolic.rules, installed by the rules package)."""
    return (_simplifier or _load_simplifier())(self)

  # ---- tensor-graph facts ----
  @property
  def shape(self) -> tuple[int, ...] | None:
    """The shape of a tensor-graph node (None for nodes that are not tensors: DEVICE, SINK, kernel ops, ...)."""
    s = self._shape
    return _compute_shape(self) if s is _UNSET else s
  @property
  def size(self) -> int:
    """The number of elements storage for this node needs: a symbolic dim (a Variable) counts at its maximum."""
    n = 1
    for d in self.shape or (): n *= d if d.__class__ is int else dim_max(d)
    return n
  @property
  def device(self) -> str | None:
    """The device of a tensor-graph node: the DEVICE below it, following first sources (cached on each node on the way,
    so a chain of n ops costs n steps in all, not one walk per call)."""
    d = self._device
    return _compute_device(self) if d is _UNSET else d

  @property
  def axis(self) -> int | None:
    """The axis a tensor over several devices is split on (None: whole on each device, or on one device). Found by lowering
    its graph with rules/multi.rules, which sit above this layer: tensor/multi.py registers the function (SPLIT_AXIS)."""
    if self.device.__class__ is not tuple or not SPLIT_AXIS: return None
    return SPLIT_AXIS[0](self)

  # ---- range analysis ----
  @property
  def vmin(self): return (self._bounds or _compute_bounds(self))[0]
  @property
  def vmax(self): return (self._bounds or _compute_bounds(self))[1]
  @property
  def bounds(self) -> tuple: return self._bounds or _compute_bounds(self)

  def sym_infer(self, var_vals: dict) -> Any:
    """The value of this expression with the variables set (keys: variable UOps or their names)."""
    return sym_infer(self, var_vals)

  # ---- printing ----
  def render(self) -> str:
    """A one-line rendering of an index expression, e.g. '((a*4)+(b//2))'."""
    return render(self)
  def __repr__(self) -> str: return pretty(self)
  def to_dot(self) -> str:
    """This graph as Graphviz DOT text (runtime/graph.py)."""
    from runtime.graph import to_dot
    return to_dot(self)
  def to_mermaid(self) -> str:
    """This graph as Mermaid flowchart text, as the seeds draw graphs (runtime/graph.py)."""
    from runtime.graph import to_mermaid
    return to_mermaid(self)

def _arg_repr(arg) -> str: return repr(arg)

def pretty(u: UOp, max_depth: int = 200) -> str:
  """tinygrad's nested repr; a shared node is printed once as `xN:=` and referenced as `xN` after.
  A graph deeper than max_depth prints flat, one node per line, so repr never recurses deeply."""
  topo = list(u.toposort())
  users: dict[UOp, int] = {}
  depth: dict[UOp, int] = {}
  for x in topo:
    depth[x] = 1 + max((depth[s] for s in x.src), default=0)
    for s in x.src: users[s] = users.get(s, 0) + 1
  if depth[u] > max_depth:
    names = {x: f"x{i}" for i, x in enumerate(topo)}
    return "\n".join(f"{names[x]} = UOp({x.op!r}, {x.dtype!r}, arg={_arg_repr(x.arg)}, src=({''.join(names[s] + ', ' for s in x.src)}))"
                     for x in topo)
  named: dict[UOp, str] = {}
  def rec(x: UOp, indent: int) -> str:
    if x in named: return " " * indent + " " + named[x]  # one space more than the node, as tinygrad prints it
    prefix = ""
    if users.get(x, 0) > 1:
      named[x] = f"x{len(named)}"
      prefix = f"{named[x]}:="
    tag = "" if x.tag is None else f", tag={x.tag!r}"
    head = f"{' ' * indent}{prefix}UOp({x.op!r}, {x.dtype!r}, arg={_arg_repr(x.arg)}{tag}, src=("
    if not x.src: return head + "))"
    return head + "\n" + ",\n".join(rec(s, indent + 2) for s in x.src) + ",))"
  return rec(u, 0)

_infix = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*", Ops.IDIV: "//", Ops.MOD: "%", Ops.FDIV: "/", Ops.CMPLT: "<", Ops.CMPNE: "!=",
          Ops.CMPEQ: "==", Ops.AND: "&", Ops.OR: "|", Ops.XOR: "^", Ops.SHL: "<<", Ops.SHR: ">>"}

def render(root: UOp) -> str:
  # pieces appended to one list as a depth-first walk meets them, joined once: memory and time linear in the output (a
  # string per node, each holding its sources' strings, took 3.1 GB for a 20,000-deep chain). A shared node is written
  # out at each use, as the text needs it there.
  out: list[str] = []
  stack: list = [root]
  while stack:
    u = stack.pop()
    if u.__class__ is str:
      out.append(u)
      continue
    op, s = u.op, u.src
    if op is Ops.CONST: out.append(str(u.arg))
    elif op is Ops.DEFINE_VAR: out.append(u.arg[0])
    elif op is Ops.RANGE: out.append(f"ridx{u.arg}")
    elif op is Ops.SPECIAL: out.append(str(u.arg[0]))
    elif op is Ops.BIND: stack.append(s[0])
    elif op in _infix: stack.extend((")", s[1], _infix[op], s[0], "("))
    elif op is Ops.NEG: stack.extend((")", s[0], "(-"))
    elif op is Ops.MAX: stack.extend((")", s[1], ", ", s[0], "max("))
    elif op is Ops.WHERE: stack.extend((")", s[2], ":", s[1], "?", s[0], "("))
    elif op is Ops.CAST: stack.extend((s[0], f"({u.dtype.name})"))
    else:
      parts: list = [f"{op.name}("]
      for i, x in enumerate(s): parts += [", ", x] if i else [x]
      parts.append(f", {u.arg!r})" if u.arg is not None else ")")  # no sources: "DEFINE_GLOBAL(, 0)", as before
      stack.extend(reversed(parts))
  return "".join(out)

def sym_infer(expr: UOp | int, var_vals: dict) -> Any:
  """The value of `expr` with its variables set from `var_vals` (keys: variable UOps or names), with C semantics."""
  if not isinstance(expr, UOp): return expr
  vals: dict[UOp, Any] = {}
  by_name = {(k.arg[0] if isinstance(k, UOp) else k): v for k, v in var_vals.items()}
  # a BIND carries its value: don't visit its variable, which var_vals need not name
  for u in expr.toposort(gate=lambda x: x.op is not Ops.BIND):
    if u.op is Ops.CONST: v = u.arg
    elif u.op is Ops.DEFINE_VAR:
      if u.arg[0] not in by_name: raise KeyError(f"no value for variable {u.arg[0]!r}")
      v = by_name[u.arg[0]]
    elif u.op is Ops.BIND: v = u.src[1].arg
    elif u.op is Ops.CAST: v = cast_value(vals[u.src[0]], u.dtype)
    elif u.op in GroupOp.ALU: v = exec_alu(u.op, u.dtype, [vals[s] for s in u.src])
    else: raise ValueError(f"sym_infer can't evaluate {u.op}")
    vals[u] = v
  return vals[expr]

def _device_step(u: UOp) -> UOp | None:
  """The node u's device is read from (None: u has none of its own)."""
  if u.op is _COPY or u.op is _BUFFER: return u.src[1]
  if u.op is _KERNEL or not u.src: return None
  # `Variable(...).bind(8) - t`: a bound variable (broadcast) has no device, the other operand has it
  if len(u.src) > 1 and _is_bound_variable(u.src[0]): return u.src[1]
  return u.src[0]

def _is_bound_variable(u: UOp) -> bool:
  while u.op is _RESHAPE or u.op is _EXPAND or u.op is _CAST: u = u.src[0]
  return u.op is _BIND or u.op is _DEFINE_VAR

def _compute_device(root: UOp) -> str | None:
  path, u = [], root
  while u._device is _UNSET:
    if u.op is _DEVICE:
      u._device = u.arg
      break
    if u.op is Ops.MULTI:  # a tensor over several devices: the tuple of its shards' devices
      u._device = tuple(s.device for s in u.src)
      break
    path.append(u)
    nxt = _device_step(u)
    if nxt is None:
      u._device = None
      break
    u = nxt
  d = u._device
  for x in path: x._device = d
  return d

# ---- shapes of tensor-graph nodes ----

_NO_SHAPE_DIMS = frozenset({Ops.CONST, Ops.VCONST, Ops.DEFINE_VAR, Ops.BIND})
_SAME_SHAPE = frozenset({Ops.CONV, Ops.COPY, Ops.CAST, Ops.BITCAST, Ops.CONTIGUOUS, Ops.CONTIGUOUS_BACKWARD, Ops.DETACH, Ops.ASSIGN, Ops.FLIP})

def _compute_shape(root: UOp):
  stack = [root]
  while stack:
    u = stack[-1]
    if u._shape is not _UNSET: stack.pop(); continue  # noqa: E702
    pending = [s for s in u.src if s._shape is _UNSET]
    if pending: stack.extend(pending); continue  # noqa: E702
    stack.pop()
    u._shape = _shape_of(u)
  return root._shape

def _shape_of(u: UOp):
  op = u.op
  if op is _BUFFER: return (u.arg,)
  if op is Ops.MULTI:  # the whole tensor: its shards side by side on the axis it is split on
    s = u.src[0]._shape
    return s if u.arg is None or s is None else tuple(d * len(u.src) if i == u.arg else d for i, d in enumerate(s))
  if op is Ops.DEFINE_GLOBAL: return (u.dtype.size,) if isinstance(u.dtype, PtrDType) else None
  if op in _NO_SHAPE_DIMS: return ()
  if op is _RESHAPE or op is _EXPAND: return tuple(u.arg)
  if not u.src: return None
  s = u.src[0]._shape
  if op in _SAME_SHAPE: return s
  if s is None: return None
  if op is Ops.PERMUTE: return tuple(s[i] for i in u.arg)
  # a symbolic size (an expression of Variables) is simplified, so equal sizes are one node
  if op is Ops.PAD: return tuple(d + b + a if d.__class__ is int and b.__class__ is int and a.__class__ is int else sint_add(d, b, a)
                                 for d, (b, a) in zip(s, u.arg))
  if op is Ops.SHRINK: return tuple(e - b if e.__class__ is int and b.__class__ is int else sint_add(e, -b if b.__class__ is int else -1 * b)
                                    for b, e in u.arg)
  if op is Ops.REDUCE_AXIS: return tuple(1 if i in u.arg[1] else d for i, d in enumerate(s))
  if op is Ops.GATHER: return None if u.src[1]._shape is None else u.src[1]._shape + s[1:]
  if op in GroupOp.ALU: return s
  return None

# ---- symbolic sizes: a dim is an int, or an int expression of Variables (n, 2*n, n+1, n*m): in a tensor graph its
# Variables are BINDs (each carries its value), in a kernel AST their DEFINE_VARs ----

def is_symbolic(d: Any) -> bool: return d.__class__ is UOp

def dim_vars(d: Any) -> list[UOp]:
  """The Variables of a dim, as they stand in it (BIND or DEFINE_VAR), each once; [] for an int."""
  if d.__class__ is not UOp: return []
  if d.op is Ops.BIND or d.op is Ops.DEFINE_VAR: return [d]
  return [u for u in d.toposort(gate=lambda x: x.op is not Ops.BIND) if u.op is Ops.BIND or u.op is Ops.DEFINE_VAR]

def dim_value(d: Any) -> int:
  """The size a dim has now: an int, or the expression at its bound Variables' values (with an unbound Variable it has
  none: its maximum is taken)."""
  if d.__class__ is not UOp: return d
  if d.op is Ops.BIND: return d.src[1].arg
  if any(v.op is Ops.DEFINE_VAR for v in dim_vars(d)): return d.vmax
  return sym_infer(d, {})

def dim_max(d: Any) -> int:
  """The largest size a dim can take (what storage is allocated for)."""
  return d if d.__class__ is not UOp else d.vmax

def sint_add(*terms: Any) -> Any:
  """The sum of sizes (ints or expressions): an int when all are ints, else the expression simplified, so equal sizes are
  one node (shapes compare by identity)."""
  if all(t.__class__ is int for t in terms): return sum(terms)
  e: Any = 0
  # the expressions in one order (ints last), so j + i + 0 and i + 0 + j are one node: a cat by two Variables pads each
  # piece to the same sum from its own side
  for t in sorted(terms, key=lambda t: (t.__class__ is int, "" if t.__class__ is int else t.render())):
    if not (t.__class__ is int and t == 0): e = t if e.__class__ is int and e == 0 else e + t
  if e.__class__ is not UOp: return e
  e = e.simplify()
  return e.arg if e.op is Ops.CONST else e  # sp + (8 - sp) is the int 8: a pad undoing a shrink by a Variable keeps an int size

def unbind_dim(d: Any) -> Any:
  """A dim with its bound Variables unbound (one dim for every value)."""
  if d.__class__ is not UOp: return d
  if d.op is Ops.BIND: return d.src[0]
  binds = [b for b in dim_vars(d) if b.op is Ops.BIND]
  return d.substitute({b: b.src[0] for b in binds}) if binds else d

def unbind_shape(shape: tuple) -> tuple:
  """A shape with its bound Variables unbound: one shape for every value (what TinyJit compares inputs by)."""
  return tuple(unbind_dim(d) if d.__class__ is UOp else d for d in shape)

def rebind_dim(d: Any, var_vals: dict[str, int]) -> Any:
  """A dim with each of its bound Variables named in var_vals bound to that value instead."""
  if d.__class__ is not UOp: return d
  mapping = {b: b.src[0].bind(var_vals[b.unbind_name()]) for b in dim_vars(d) if b.op is Ops.BIND and b.unbind_name() in var_vals}
  return mapping.get(d, d) if d.op is Ops.BIND else d.substitute(mapping) if mapping else d

def dim_str(d: Any) -> str:
  """A dim for names and messages: 4, n, (n*2)."""
  if d.__class__ is not UOp: return str(d)
  return d.unbind_name() if d.op is Ops.BIND or d.op is Ops.DEFINE_VAR else d.render()

_IDENT = str.maketrans({"*": "x", "+": "p", "-": "m", "/": "d", "%": "r", "(": None, ")": None, " ": None})

def dim_ident(d: Any) -> str:
  """A dim as a piece of a C identifier (kernel names): 4, n, nx2 for (n*2), np1 for (n+1)."""
  return dim_str(d).translate(_IDENT)

def shape_str(shape: tuple) -> str:
  """A shape for messages: (3, n=5) for a bound Variable, ((n*2)=10, 3) for an expression, (3, n) for an unbound one."""
  parts = [dim_str(d) + (f"={dim_value(d)}" if d.__class__ is UOp and all(v.op is Ops.BIND for v in dim_vars(d)) else "") for d in shape]
  return f"({', '.join(parts)}{',' if len(parts) == 1 else ''})"

def arg_str(x: Any) -> str:
  """An argument for messages, its symbolic sizes written as sizes: (3, n=5), ((0, (n*2)=8), None)."""
  if x.__class__ is UOp: return shape_str((x,))[1:-2]
  if isinstance(x, (tuple, list)):
    inner = ", ".join(arg_str(v) for v in x)
    return f"({inner}{',' if len(x) == 1 else ''})" if isinstance(x, tuple) else f"[{inner}]"
  return repr(x)

# ---- range analysis: sound bounds [vmin, vmax] of every value a node can take, cached on the node ----

def _compute_bounds(root: UOp) -> tuple:
  # the common case: every source already has its bounds
  for s in root.src:
    if s._bounds is None: break
  else:
    root._bounds = _bounds_of(root)
    return root._bounds
  # iterative: sources first, so a deep chain never recurses
  stack = [root]
  while stack:
    u = stack[-1]
    if u._bounds is not None: stack.pop(); continue
    pending = [s for s in u.src if s._bounds is None]
    if pending: stack.extend(pending); continue
    stack.pop()
    u._bounds = _bounds_of(u)
  return root._bounds

def _dtype_bounds(d: DType) -> tuple: return (dtypes.min(d), dtypes.max(d))

def _fits(d: DType, lo, hi) -> tuple:
  # an integer result outside its dtype's range may have wrapped: then nothing is known. The symbolic rules rely on
  # this (rules/symbolic_helpers.exact): bounds narrower than the dtype's whole range mean nothing on the way wrapped.
  if dtypes.is_int(d) and (lo < dtypes.min(d) or hi > dtypes.max(d)): return _dtype_bounds(d)
  if d.scalar is dtypes.bool: return (bool(lo), bool(hi))
  return (lo, hi)

def _trunc_div(a: int, b: int) -> int:
  q = abs(a) // abs(b)
  return q if (a < 0) == (b < 0) else -q

def _bounds_of(u: UOp) -> tuple:
  op, d = u.op, u.dtype
  if d.count != 1 or isinstance(d, PtrDType): return (None, None) if d is dtypes.void else _safe_dtype_bounds(d)
  if op is Ops.CONST: return (u.arg, u.arg)
  if op is Ops.DEFINE_VAR: return (u.arg[1], u.arg[2])
  if op is Ops.BIND: return u.src[0]._bounds
  if op is Ops.RANGE: return (0, u.src[0]._bounds[1] - 1) if u.src else _dtype_bounds(d)
  if op is Ops.SPECIAL: return (0, u.arg[1] - 1) if isinstance(u.arg, tuple) and isinstance(u.arg[1], int) else _dtype_bounds(d)
  if not (dtypes.is_int(d) or d is dtypes.bool) or not u.src: return _safe_dtype_bounds(d)
  s = [x._bounds for x in u.src]
  if op is Ops.CAST: return _cast_bounds(d, s[0])
  if any(b[0] is None or isinstance(b[0], float) for b in s): return _dtype_bounds(d)
  # ops whose result is exact whatever the operands' type
  if op in GroupOp.Comparison:
    (alo, ahi), (blo, bhi) = s
    if op is Ops.CMPLT: return (True, True) if ahi < blo else (False, False) if alo >= bhi else (False, True)
    always_eq = alo == ahi == blo == bhi
    never_eq = ahi < blo or bhi < alo
    if op is Ops.CMPNE: return (True, True) if never_eq else (False, False) if always_eq else (False, True)
    return (True, True) if always_eq else (False, False) if never_eq else (False, True)
  if op is Ops.WHERE:
    (clo, chi), (alo, ahi), (blo, bhi) = s
    if clo: return (alo, ahi)
    if not chi: return (blo, bhi)
    return (min(alo, blo), max(ahi, bhi))
  if d is dtypes.bool:
    if op is Ops.AND or op is Ops.MUL: return (s[0][0] and s[1][0], s[0][1] and s[1][1])
    if op is Ops.OR or op is Ops.ADD or op is Ops.MAX: return (s[0][0] or s[1][0], s[0][1] or s[1][1])
    return (False, True)
  # integer arithmetic
  if op is Ops.ADD: return _fits(d, s[0][0] + s[1][0], s[0][1] + s[1][1])
  if op is Ops.SUB: return _fits(d, s[0][0] - s[1][1], s[0][1] - s[1][0])
  if op is Ops.NEG: return _fits(d, -s[0][1], -s[0][0])
  if op is Ops.MUL:
    p = [a * b for a in s[0] for b in s[1]]
    return _fits(d, min(p), max(p))
  if op is Ops.MAX: return (max(s[0][0], s[1][0]), max(s[0][1], s[1][1]))
  if op is Ops.IDIV:
    (alo, ahi), (blo, bhi) = s
    if blo > 0 or bhi < 0:  # the divisor keeps one sign: truncating division is monotonic in each operand
      q = [_trunc_div(a, b) for a in (alo, ahi) for b in (blo, bhi)]
      return _fits(d, min(q), max(q))
    m = max(abs(alo), abs(ahi))  # x // 0 == 0, and |x // y| <= |x| otherwise
    return _fits(d, -m, m)
  if op is Ops.MOD:
    (alo, ahi), (blo, bhi) = s
    if blo > 0 or bhi < 0:
      m = min(abs(blo), abs(bhi))
      if 0 <= alo and ahi < m: return (alo, ahi)  # x % y == x
      m = max(abs(blo), abs(bhi)) - 1  # |x % y| < |y|, with the sign of x
      return (max(alo, -m) if alo < 0 else 0, min(ahi, m) if ahi > 0 else 0)
    return (min(alo, 0), max(ahi, 0))  # x % 0 == x, and |x % y| <= |x| otherwise
  if op in (Ops.AND, Ops.OR, Ops.XOR) and s[0][0] >= 0 and s[1][0] >= 0:
    if op is Ops.AND: return (0, min(s[0][1], s[1][1]))
    top = (1 << max(s[0][1], s[1][1]).bit_length()) - 1  # no bit above the operands' highest bit
    return (max(s[0][0], s[1][0]) if op is Ops.OR else 0, top)
  bits = 8 * d.itemsize
  if op is Ops.SHL and s[1][0] == s[1][1] and 0 <= s[1][0] < bits: return _fits(d, s[0][0] << s[1][0], s[0][1] << s[1][0])
  if op is Ops.SHR and s[1][0] == s[1][1] and 0 <= s[1][0] < bits: return (s[0][0] >> s[1][0], s[0][1] >> s[1][0])
  return _dtype_bounds(d)

def _cast_bounds(d: DType, b: tuple) -> tuple:
  lo, hi = b
  if lo is None: return _dtype_bounds(d)
  if isinstance(lo, float) or isinstance(hi, float):
    if not (math.isfinite(lo) and math.isfinite(hi)): return _dtype_bounds(d)
    lo, hi = math.trunc(lo), math.trunc(hi)
  if d is dtypes.bool: return (False, True) if lo <= 0 <= hi and lo != hi else (bool(lo) or bool(hi), bool(lo) or bool(hi))
  lo, hi = int(lo), int(hi)
  return (lo, hi) if dtypes.min(d) <= lo and hi <= dtypes.max(d) else _dtype_bounds(d)

def _safe_dtype_bounds(d: DType) -> tuple:
  try: return _dtype_bounds(d.scalar)
  except KeyError: return (None, None)

