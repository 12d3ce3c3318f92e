"""The path a realize takes through the codebase: which of our modules it enters, in order, how many hops (calls or
returns that cross from one module to another) it makes, and the climbs among them: calls from a module of a lower layer
into one of a higher layer (ARCHITECTURE.md's layers: the engine calling back into the frontend would be one). Issues 13
and 20 read it before and after a change of the pipeline.

  python bench/hops.py                 # Tensor([1,2,3,4]) + 3 + 4, realized cold (new graph), warm (same shape again), hot (a third time)
  python bench/hops.py --expr "Tensor.ones(4, 4).sum(0) * 2"
  python bench/hops.py --tree ../other-checkout   # the same walk through another checkout's code (this script's measure)

A "cold" realize in a process that finds its kernels in the disk cache skips lowering and rendering; run with a fresh
CACHE_DIR to see the whole compile path.
"""
from __future__ import annotations
import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OURS = ("tensor", "runtime", "rules", "dslc")
sys.path.insert(0, ROOT)
from bench.layers import import_graph, layer  # noqa: E402  (this script runs as a file: its checkout first on the path)

def module_of(filename: str) -> str | None:
  """Our dotted module name of a source file, None for the standard library, numpy and other packages."""
  path = os.path.abspath(filename)
  if not path.startswith(ROOT + os.sep): return None
  rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
  return rel.removesuffix(".__init__") if rel.split(".")[0] in OURS else None

def trace(fn, climbs: list[tuple[str, str]] | None = None) -> list[str]:
  """The modules entered while fn runs, one entry per hop (consecutive frames in one module are one entry). `climbs`, when
  given, gets (caller, callee) for each call from a module of a lower layer into one of a higher layer."""
  path: list[str] = []
  def profiler(frame, event, arg):
    if event not in ("call", "return"): return
    mod = module_of(frame.f_code.co_filename) if event == "call" else (module_of(frame.f_back.f_code.co_filename) if frame.f_back else None)
    if mod is not None and (not path or path[-1] != mod):
      if climbs is not None and event == "call" and path and layer(path[-1]) < layer(mod): climbs.append((path[-1], mod))
      path.append(mod)
  sys.setprofile(profiler)
  try: fn()
  finally: sys.setprofile(None)
  return path

def report(label: str, path: list[str], climbs: list[tuple[str, str]], imports: dict[str, set[str]]) -> None:
  """The hops and modules, and the climbs: through an import (the lower module imports the higher one) or a callback (a
  function the higher layer handed down: a rule set to graph_rewrite, a gate to toposort, a ctx's method to a rule)."""
  first: list[str] = []
  for m in path:
    if m not in first: first.append(m)
  through = [c for c in climbs if c[1] in imports.get(c[0], ())]
  print(f"{label}: {len(path)} hops through {len(first)} modules; calls climbing a layer: {len(through)} through an import, "
        f"{len(climbs) - len(through)} callbacks")
  print("  " + " -> ".join(first))
  kinds: dict[tuple[str, str], int] = {}
  for c in through: kinds[c] = kinds.get(c, 0) + 1
  for (a, b), n in sorted(kinds.items(), key=lambda x: -x[1]): print(f"  climb through an import x{n}: {a} -> {b}")

def main() -> None:
  global ROOT
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--expr", default="Tensor([1, 2, 3, 4]) + 3 + 4", help="a Tensor expression (Tensor is in scope)")
  ap.add_argument("--tree", default=ROOT, help="the checkout whose code to walk (default: this one)")
  args = ap.parse_args()
  ROOT = os.path.abspath(args.tree)
  sys.path.insert(0, ROOT)
  from tensor import Tensor
  build = lambda: eval(args.expr, {"Tensor": Tensor})  # noqa: E731
  imports = import_graph(ROOT)
  for label in ("cold", "warm", "hot"):  # a new graph; the first hit (it prepares the launches); a later hit
    climbs: list[tuple[str, str]] = []
    report(label, trace(lambda: build().realize(), climbs), climbs, imports)

if __name__ == "__main__": main()
