"""What a rule's Python touches, checked before it runs (a part of dslc's checks): names on `dtypes`, `GroupOp` and `math`,
attributes of dtypes (`x.dtype.itemsize`) and of args whose type the op says (`c.arg.is_integer()`), and calls of imported
helpers: how many arguments they take and, where the helper's parameters are annotated, what kind of value each gets.

Each expression is read with Python's ast; a value's kind (node, dtype, int, tuple, ...) is known from the pattern (a capture,
an arg of a known op) and from what is read of it; unknown kinds are never reported (no claim without proof).
"""
from __future__ import annotations
import ast, difflib, inspect, math
from typing import Any, Callable
from runtime.dtype import DType, PtrDType, dtypes
from runtime.ops import GroupOp, Ops
from dslc.ir import Construct, Pat, Rule
from dslc.pyinfo import arity

NUMBER = frozenset({"int", "float", "bool"})
# the Python types of an op's arg (only where every node of that op has it)
ARG_KINDS: dict[Ops, frozenset[str]] = {
  Ops.CONST: NUMBER, Ops.RANGE: frozenset({"int"}), Ops.DEFINE_GLOBAL: frozenset({"int"}), Ops.DEFINE_REG: frozenset({"int"}),
  Ops.DEFINE_VAR: frozenset({"tuple"}), Ops.GEP: frozenset({"tuple"}), Ops.REDUCE_AXIS: frozenset({"tuple"}), Ops.REDUCE: frozenset({"op"}),
  Ops.DEVICE: frozenset({"str"}), Ops.BUFFER: frozenset({"int"}), Ops.UNROLL: frozenset({"tuple"}), Ops.CONTRACT: frozenset({"tuple"}),
  **{o: frozenset({"tuple"}) for o in (Ops.RESHAPE, Ops.EXPAND, Ops.PERMUTE, Ops.PAD, Ops.SHRINK, Ops.FLIP)},
  **{o: frozenset({"none"}) for o in GroupOp.ALU | {Ops.CAST, Ops.BITCAST}},
}
# a value of each kind, to ask what attributes it has (an Ops member's `name`, an int's `bit_length`)
SAMPLES: dict[str, Any] = {"int": 0, "float": 0.0, "bool": True, "tuple": (), "str": "", "op": Ops.ADD, "none": None, "list": []}
DTYPE_ATTRS = frozenset(a for k in (DType, PtrDType) for a in [*dir(k), *getattr(k, "__slots__", ())] if not a.startswith("_"))
MODULES: dict[str, Any] = {"dtypes": dtypes, "GroupOp": GroupOp, "math": math}
# what a node's attribute is (the rest: any)
NODE_ATTR_KINDS = {"dtype": frozenset({"dtype"}), "src": frozenset({"tuple"}), "op": frozenset({"op"}), "vmin": NUMBER, "vmax": NUMBER,
                   "shape": frozenset({"tuple", "none"})}
DTYPE_ATTR_KINDS = {"scalar": frozenset({"dtype"}), "base": frozenset({"dtype"}), "itemsize": frozenset({"int"}), "count": frozenset({"int"}),
                    "name": frozenset({"str"}), "size": frozenset({"int"}), "priority": frozenset({"int"})}
# an annotation's names -> the kinds a parameter takes
ANNOTATION_KINDS = {"UOp": {"node"}, "DType": {"dtype"}, "PtrDType": {"dtype"}, "int": {"int", "bool"}, "float": {"float", "int", "bool"},
                    "bool": {"bool"}, "str": {"str"}, "tuple": {"tuple"}, "list": {"list"}, "Ops": {"op"}, "None": {"none"}}
KIND_TEXT = {"node": "a node", "dtype": "a dtype", "int": "an int", "float": "a float", "bool": "a bool", "str": "a string", "tuple": "a tuple",
             "list": "a list", "op": "an op", "none": "None"}

def kinds_text(kinds) -> str:
  names = [KIND_TEXT[k] for k in KIND_TEXT if k in kinds]
  return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]

def close(name: str, names) -> str:
  m = difflib.get_close_matches(name, sorted(names), n=1)
  return f" (did you mean '{m[0]}'?)" if m else ""

class Kinds:
  """The kinds of the names a rule binds, from its pattern: a node capture is a node, an arg capture has its op's arg kinds."""
  def __init__(self, rule: Rule, objects: dict[str, Any]):
    self.rule, self.objects = rule, objects
    self.names: dict[str, frozenset[str]] = {}
    self.ops: dict[str, frozenset[Ops] | None] = {}   # node capture -> the ops it can have (None: any)
    for p in rule.pattern.walk():
      if p.name: self.node(p.name, p)
      if p.arg_name:
        kinds = self.arg_kinds(p.ops)
        self.names[p.arg_name] = kinds if kinds is not None else frozenset()
    for b in rule.bindings:
      if isinstance(b.value, Construct): self.names[b.name] = frozenset({"node"})
    self.local: set[str] = set()   # names an expression binds itself (comprehension targets, lambda parameters): unknown

  def node(self, name: str, p: Pat) -> None:
    ops = None if p.alternatives is not None else p.ops
    if p.alternatives is not None and all(a.ops is not None for a in p.alternatives):
      ops = frozenset().union(*(a.ops for a in p.alternatives))  # type: ignore[arg-type]
    if name in self.ops and self.ops[name] is not None and ops is not None: ops = self.ops[name] & ops  # type: ignore[operator]
    elif name in self.ops: ops = self.ops[name] or ops
    self.ops[name], self.names[name] = ops, frozenset({"node"})

  @staticmethod
  def arg_kinds(ops: frozenset[Ops] | None) -> frozenset[str] | None:
    if ops is None or not all(o in ARG_KINDS for o in ops): return None
    return frozenset().union(*(ARG_KINDS[o] for o in ops))

  def of(self, e: ast.AST) -> frozenset[str] | None:
    """The kinds an expression can be (None: unknown)."""
    if isinstance(e, ast.Constant):
      v = e.value
      return frozenset({"none" if v is None else "bool" if isinstance(v, bool) else type(v).__name__}) if type(v) in (int, float, str, bool) \
        or v is None else None
    if isinstance(e, ast.Tuple): return frozenset({"tuple"})
    if isinstance(e, ast.List): return frozenset({"list"})
    if isinstance(e, ast.Name): return None if e.id in self.local else self.names.get(e.id) or None
    if isinstance(e, ast.Attribute):
      if isinstance(e.value, ast.Name) and e.value.id == "dtypes":
        return frozenset({"dtype"}) if isinstance(getattr(dtypes, e.attr, None), DType) else None
      base = self.of(e.value)
      if base == {"node"}:
        if e.attr == "arg" and isinstance(e.value, ast.Name): return self.arg_kinds(self.ops.get(e.value.id))
        return NODE_ATTR_KINDS.get(e.attr)
      if base == {"dtype"}: return DTYPE_ATTR_KINDS.get(e.attr)
      return None
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in ("vec", "ptr") and self.of(e.func.value) == {"dtype"}:
      return frozenset({"dtype"})
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and callable(f := self.objects.get(e.func.id)):
      return returns(f)
    return None

def annotation_kinds(text: Any) -> set[str] | None:
  """The kinds an annotation (a string, with `from __future__ import annotations`) allows; None: anything."""
  if text is inspect.Parameter.empty or not isinstance(text, str): return None
  out: set[str] = set()
  for part in text.replace("Optional[", "").replace("]", "").split("|"):
    name = part.strip().split("[")[0]
    if name not in ANNOTATION_KINDS: return None
    out |= ANNOTATION_KINDS[name]
  return out

def returns(f: Callable) -> frozenset[str] | None:
  try: ann = inspect.signature(f).return_annotation
  except (TypeError, ValueError): return None
  kinds = annotation_kinds(ann)
  return frozenset(kinds) if kinds else None

def problems(rule: Rule, exprs: list, objects: dict[str, Any]) -> list[tuple[str, Any, str]]:
  """(message, span, where the caret goes: a name, or `.attr` for an attribute) for each problem of the rule's expressions."""
  kinds = Kinds(rule, objects)
  out: list[tuple[str, Any, str]] = []
  for x in exprs:
    try: tree = ast.parse(x.text, mode="eval")
    except SyntaxError: continue
    span = x.span or rule.span
    kinds.local = {t.id for c in ast.walk(tree) if isinstance(c, ast.comprehension) for t in ast.walk(c.target) if isinstance(t, ast.Name)}
    kinds.local |= {a.arg for c in ast.walk(tree) if isinstance(c, ast.Lambda) for a in c.args.args}
    for n in ast.walk(tree):
      if isinstance(n, ast.Attribute):
        out += [(m, span, "." + n.attr) for m in attribute_problems(n, kinds)]
      elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and callable(f := objects.get(n.func.id)) and not isinstance(f, type):
        out += [(m, span, n.func.id) for m in call_problems(n, f, kinds)]
      if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and kinds.of(n.func.value) == {"dtype"}:
        out += [(m, span, "." + n.func.attr) for m in dtype_call_problems(n.func)]
  return out

def attribute_problems(n: ast.Attribute, kinds: Kinds) -> list[str]:
  if isinstance(n.value, ast.Name) and n.value.id in MODULES and n.value.id not in kinds.names and n.value.id not in kinds.local:
    mod = MODULES[n.value.id]
    if not hasattr(mod, n.attr):
      if mod is dtypes and n.attr in ("ints", "uints", "sints", "floats", "bools"):
        return [f"dtypes has no '{n.attr}': '{n.attr}' is a class of dtypes in patterns (x:{n.attr}); in a guard, dtypes.is_int(x.dtype), "
                "dtypes.is_unsigned(x.dtype), dtypes.is_float(x.dtype)"]
      public = [a for a in dir(mod) if not a.startswith("_")]
      return [f"{n.value.id} has no '{n.attr}'{close(n.attr, public)}"]
    return []
  base = kinds.of(n.value)
  if base == {"dtype"} and n.attr not in DTYPE_ATTRS:
    return [f"a dtype has no attribute '{n.attr}'{close(n.attr, DTYPE_ATTRS)}"]
  if base and "node" not in base and "dtype" not in base and all(k in SAMPLES for k in base):
    if not any(hasattr(SAMPLES[k], n.attr) for k in base):
      what = kinds_text(base)
      attrs = {a for k in base for a in dir(SAMPLES[k]) if not a.startswith("_")}
      return [f"'{ast.unparse(n.value)}' is {what}: it has no attribute '{n.attr}'{close(n.attr, attrs)}"]
  return []

def dtype_call_problems(f: ast.Attribute) -> list[str]:
  """`x.dtype.scalar()`: a dtype's field called as a method (a TypeError at rewrite time)."""
  value = getattr(dtypes.int32, f.attr, None)
  if f.attr not in DTYPE_ATTRS or value is None or callable(value): return []
  what = kinds_text(DTYPE_ATTR_KINDS[f.attr]) if f.attr in DTYPE_ATTR_KINDS else "a field"
  return [f"a dtype's '{f.attr}' is {what}, not a method: write {ast.unparse(f)}, without the call"]

def call_problems(n: ast.Call, f: Callable, kinds: Kinds) -> list[str]:
  name = n.func.id  # type: ignore[attr-defined]
  if any(isinstance(a, ast.Starred) for a in n.args) or n.keywords: return []
  a = arity(f)
  if a is None: return []
  lo, hi = a
  given = len(n.args)
  if given < lo or (hi is not None and given > hi):
    try: params = ", ".join(p for p in inspect.signature(f).parameters)
    except (TypeError, ValueError): params = ""
    want = str(lo) if lo == hi else f"{lo} or more" if hi is None else f"{lo} to {hi}"
    return [f"{name}() takes {want} argument{'s' if want != '1' else ''} ({params}), this call gives it {given}"]
  out = []
  try: params = [p for p in inspect.signature(f).parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
  except (TypeError, ValueError): return []
  for p, arg in zip(params, n.args):
    allowed = annotation_kinds(p.annotation)
    got = kinds.of(arg)
    if allowed is None or not got or "any" in got or got & allowed: continue
    what = kinds_text(got)
    out.append(f"{name}()'s parameter '{p.name}' is {p.annotation}, and '{ast.unparse(arg)}' is {what}")
  return out
