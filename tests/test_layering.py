"""The layers of ARCHITECTURE.md, checked over the whole import graph: every import statement of runtime/, dslc/, rules/ and
tensor/, the ones inside functions included (a lazy import is a dependency all the same), TYPE_CHECKING blocks excluded.

  runtime  <  rules, dslc  <  tensor.renderer  <  tensor.codegen  <  tensor.engine  <  tensor (frontend)  <  tensor.nn, tensor.viz, tensor.llm

A module imports only its own layer and the ones below; the packages form a DAG; a cycle of modules stays inside one
package, and only in a package whose reason is written in ALLOWED_CYCLES. Then each package is imported alone in a fresh
interpreter: nothing of a higher layer may load (the engine without the frontend, codegen without the engine, ...).
bench/layers.py holds the layer table and builds the graph.
"""
from __future__ import annotations
import json, os, subprocess, sys
import pytest

from bench.layers import LAYER, ROOT, TOPS, import_graph, package

# imports allowed to climb, with the reason: none (UOp.simplify() runs the rule set the rules package installs, so runtime
# names no higher layer)
ALLOWED_CLIMBS: dict[tuple[str, str], str] = {}  # (importer, imported) -> why; none today

# packages whose modules may import each other in a cycle, and why; every other package's modules form a DAG
ALLOWED_CYCLES = {
  "runtime": "UOp's convenience methods (u.substitute, u.simplify, u.to_dot, as tinygrad's) call the modules built on UOp "
             "(rewrite, graph), imported when called; rewrite and rule_error/trace refer to each other's errors and statistics",
  "rules": "a helper of rules/symbolic.rules runs that rule set itself (a nested rewrite), imported when called",
}

GRAPH = import_graph()

def _edges(allow_climbs: bool = True):
  for a, bs in GRAPH.items():
    for b in bs:
      if allow_climbs and (a, b) in ALLOWED_CLIMBS: continue
      yield a, b

def test_no_import_climbs_a_layer():
  climbs = sorted(f"{a} ({package(a)}) imports {b} ({package(b)})" for a, b in _edges() if LAYER[package(b)] > LAYER[package(a)])
  assert not climbs, "imports from a lower layer to a higher one:\n" + "\n".join(climbs)

def test_the_packages_form_a_dag():
  deps: dict[str, set[str]] = {p: set() for p in LAYER}
  for a, b in _edges():
    if package(a) != package(b): deps[package(a)].add(package(b))
  order: list[str] = []
  while len(order) < len(deps):
    ready = [p for p in deps if p not in order and deps[p] <= set(order)]
    assert ready, f"a cycle among the packages {sorted(set(deps) - set(order))}: {({p: sorted(deps[p]) for p in deps if p not in order})}"
    order += sorted(ready)

def _cycles() -> list[list[str]]:
  """The strongly connected components of more than one module (iterative Tarjan)."""
  edges: dict[str, list[str]] = {m: [] for m in GRAPH}
  for a, b in _edges(): edges[a].append(b)
  index: dict[str, int] = {}
  low: dict[str, int] = {}
  on: set[str] = set()
  stack: list[str] = []
  out: list[list[str]] = []
  for root in sorted(edges):
    if root in index: continue
    work = [(root, iter(sorted(edges[root])))]
    index[root] = low[root] = len(index)
    stack.append(root)
    on.add(root)
    while work:
      v, it = work[-1]
      w = next(it, None)
      if w is not None:
        if w not in index:
          index[w] = low[w] = len(index)
          stack.append(w)
          on.add(w)
          work.append((w, iter(sorted(edges[w]))))
        elif w in on: low[v] = min(low[v], index[w])
        continue
      work.pop()
      if work: low[work[-1][0]] = min(low[work[-1][0]], low[v])
      if low[v] == index[v]:
        comp = []
        while True:
          w = stack.pop()
          on.discard(w)
          comp.append(w)
          if w == v: break
        if len(comp) > 1: out.append(sorted(comp))
  return out

def test_module_cycles_stay_inside_a_package_that_says_why():
  for comp in _cycles():
    pkgs = {package(m) for m in comp}
    assert len(pkgs) == 1, f"a cycle of modules across packages {sorted(pkgs)}: {comp}"
    assert pkgs <= set(ALLOWED_CYCLES), f"a cycle of modules in {pkgs.pop()}, which allows none: {comp}"

def test_the_checker_sees_lazy_imports_and_skips_type_checking():
  # tensor/tensor.py imports the engine at its top; tensor/__init__.py imports the frontend inside __getattr__ only;
  # the topic modules name Tensor under TYPE_CHECKING only
  assert "tensor.engine.realize" in GRAPH["tensor.tensor"] and "tensor.tensor" in GRAPH["tensor"]
  assert "tensor.tensor" not in GRAPH["tensor.random"] and "tensor.tensor" not in GRAPH["tensor.indexing"]
  assert ("runtime.uop", "rules.symbolic") in ALLOWED_CLIMBS or "rules.symbolic" not in GRAPH["runtime.uop"]

# each package imported alone (all its modules): the top-level package of each module that must not load
HIGHER = {p: [q for q in LAYER if LAYER[q] > LAYER[p]] for p in LAYER}

@pytest.mark.parametrize("pkg", ["runtime", "rules", "tensor.renderer", "tensor.codegen", "tensor.engine"])
def test_a_package_imports_alone(pkg):
  mods = sorted(m for m in GRAPH if package(m) == pkg and not m.endswith("__main__"))
  code = ("import importlib, json, sys\n"
          f"for m in {mods!r}: importlib.import_module(m)\n"
          "print(json.dumps(sorted(sys.modules)))")
  r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300, env={**os.environ, "PYTHONPATH": ROOT})
  assert r.returncode == 0, r.stderr
  # the package `tensor` itself is every tensor.X's parent: its __init__ loads (and imports the frontend only on first use)
  loaded = [m for m in json.loads(r.stdout) if m.split(".")[0] in TOPS and package(m) in HIGHER[pkg] and m != "tensor"]
  allowed = {b for (a, b) in ALLOWED_CLIMBS if package(a) == pkg}
  assert not [m for m in loaded if m not in allowed and not any(m.startswith(b + ".") for b in allowed)], \
    f"importing {pkg} loads higher layers: {loaded}"
