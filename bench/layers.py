"""The layers of ARCHITECTURE.md and the project's import graph: the layer of each module, and which of our modules each
one imports (every import statement, the ones inside functions included, TYPE_CHECKING blocks excluded). Read by
tests/test_layering.py (no import climbs a layer; the packages form a DAG) and bench/hops.py (which calls climb).

  runtime  <  rules, dslc  <  tensor.renderer  <  tensor.codegen  <  tensor.engine  <  tensor (frontend)  <  tensor.nn, tensor.viz
"""
from __future__ import annotations
import ast, os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOPS = ("runtime", "dslc", "rules", "tensor")
TENSOR_SUBPACKAGES = ("renderer", "codegen", "engine", "nn", "viz", "llm")
LAYER = {"runtime": 0, "rules": 1, "dslc": 1, "tensor.renderer": 2, "tensor.codegen": 3, "tensor.engine": 4, "tensor": 5,
         "tensor.nn": 6, "tensor.viz": 6, "tensor.llm": 6}

def package(mod: str) -> str:
  """The package a module belongs to in the layer table (tensor's subpackages are packages of their own)."""
  parts = mod.split(".")
  if parts[0] == "tensor" and len(parts) > 1 and parts[1] in TENSOR_SUBPACKAGES: return f"tensor.{parts[1]}"
  return parts[0]

def layer(mod: str) -> int: return LAYER[package(mod)]

def modules(root: str = ROOT) -> dict[str, str]:
  """Dotted name -> path of every module of the four packages."""
  out = {}
  for top in TOPS:
    for d, _, files in os.walk(os.path.join(root, top)):
      for f in files:
        if not f.endswith(".py"): continue
        path = os.path.join(d, f)
        out[os.path.relpath(path, root)[:-3].replace(os.sep, ".").removesuffix(".__init__")] = path
  return out

def _type_checking_lines(tree: ast.AST) -> set[int]:
  skip: set[int] = set()
  for n in ast.walk(tree):
    if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
      for b in n.body: skip.update(x.lineno for x in ast.walk(b) if hasattr(x, "lineno"))
  return skip

def import_graph(root: str = ROOT) -> dict[str, set[str]]:
  """module -> the project modules it imports (`from pkg import sub` names the submodule, not pkg/__init__)."""
  mods = modules(root)
  def known(name: str) -> str | None:
    parts = name.split(".")
    while parts and ".".join(parts) not in mods: parts.pop()
    return ".".join(parts) or None
  graph: dict[str, set[str]] = {m: set() for m in mods}
  for me, path in mods.items():
    with open(path) as f: tree = ast.parse(f.read())
    skip = _type_checking_lines(tree)
    for n in ast.walk(tree):
      if getattr(n, "lineno", None) in skip: continue
      if isinstance(n, ast.Import): targets = [a.name for a in n.names]
      elif isinstance(n, ast.ImportFrom):
        if n.level:  # relative: against this module's package
          base = me.split(".") if path.endswith("__init__.py") else me.split(".")[:-1]
          mod = ".".join(base[:len(base) - (n.level - 1)] + ([n.module] if n.module else []))
        else: mod = n.module or ""
        subs = [f"{mod}.{a.name}" for a in n.names if f"{mod}.{a.name}" in mods]
        targets = subs if len(subs) == len(n.names) else [mod, *subs]
      else: continue
      for t in targets:
        if (k := known(t)) is not None and k != me: graph[me].add(k)
  return graph

__all__ = ["LAYER", "TOPS", "package", "layer", "modules", "import_graph"]
