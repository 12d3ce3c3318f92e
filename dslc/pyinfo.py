"""What dslc's checks know of the Python objects a rule file names (a ctx's class, imported helpers): their members and
how many arguments each method takes, read from the live objects and, for fields set in methods, from the class's source.
"""
from __future__ import annotations
import ast, inspect, textwrap
from dataclasses import dataclass

@dataclass(frozen=True)
class Member:
  kind: str                     # "method" or "field"
  min_args: int = 0             # a method's positional arguments (self not counted)
  max_args: int | None = None   # None: any number (or unknown)

def arity(fn) -> tuple[int, int | None] | None:
  """(required, most) positional arguments of a callable, None when Python can't say (some builtins)."""
  try: sig = inspect.signature(fn)
  except (TypeError, ValueError): return None
  ps = [p for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
  most = None if any(p.kind is p.VAR_POSITIONAL for p in sig.parameters.values()) else len(ps)
  return sum(1 for p in ps if p.default is p.empty), most

def class_members(cls: type) -> dict[str, Member]:
  """The public members of a class: its methods (with their arguments), properties, class attributes, NamedTuple and
  dataclass fields, and the attributes its methods assign to `self`."""
  out: dict[str, Member] = {}
  for name in dir(cls):
    if name.startswith("_"): continue
    raw = inspect.getattr_static(cls, name)
    if isinstance(raw, (staticmethod, classmethod)) or inspect.isfunction(raw) or inspect.ismethoddescriptor(raw) and callable(raw):
      a = arity(getattr(cls, name))
      bound = 0 if isinstance(raw, (staticmethod, classmethod)) else 1  # self
      out[name] = Member("method", max(a[0] - bound, 0), None if a[1] is None else max(a[1] - bound, 0)) if a else Member("method", 0, None)
    else: out[name] = Member("field")
  for name, t in getattr(cls, "__annotations__", {}).items():
    # a field annotated Callable (a NamedTuple's `new_id: Callable[[], int]`) is called as a method, with any arguments
    if not name.startswith("_"): out[name] = Member("method", 0, None) if "Callable" in str(t) else out.get(name, Member("field"))
  for name in _self_attributes(cls): out.setdefault(name, Member("field"))
  return out

def _self_attributes(cls: type) -> set[str]:
  """Names assigned as `self.NAME = ...` in the methods of cls and of its bases (from their source; none when it is not
  available, as for builtins)."""
  out: set[str] = set()
  for k in cls.__mro__:
    if k is object or k.__module__ == "builtins": continue
    try: tree = ast.parse(textwrap.dedent(inspect.getsource(k)))
    except (OSError, TypeError, SyntaxError): continue
    for n in ast.walk(tree):
      targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, (ast.AnnAssign, ast.AugAssign)) else []
      for t in targets:
        for x in ast.walk(t):
          if isinstance(x, ast.Attribute) and isinstance(x.value, ast.Name) and x.value.id == "self" and not x.attr.startswith("_"): out.add(x.attr)
  return out
