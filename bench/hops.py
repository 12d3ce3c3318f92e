"""The path a realize takes through the codebase: which of our modules it enters, in order, and how many hops (calls or
returns that cross from one module to another) it makes. Issue 13 reads it before and after a change of the pipeline.

  python bench/hops.py                 # Tensor([1,2,3,4]) + 3 + 4, realized cold (new graph), warm (same shape again), hot (a third time)
  python bench/hops.py --expr "Tensor.ones(4, 4).sum(0) * 2"

A "cold" realize in a process that finds its kernels in the disk cache skips lowering and rendering; run with a fresh
CACHE_DIR to see the whole compile path.
"""
from __future__ import annotations
import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OURS = ("tensor", "runtime", "rules", "dslc")

def module_of(filename: str) -> str | None:
  """Our dotted module name of a source file, None for the standard library, numpy and other packages."""
  path = os.path.abspath(filename)
  if not path.startswith(ROOT + os.sep): return None
  rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
  return rel.removesuffix(".__init__") if rel.split(".")[0] in OURS else None

def trace(fn) -> list[str]:
  """The modules entered while fn runs, one entry per hop (consecutive frames in one module are one entry)."""
  path: list[str] = []
  def profiler(frame, event, arg):
    if event not in ("call", "return"): return
    mod = module_of(frame.f_code.co_filename) if event == "call" else (module_of(frame.f_back.f_code.co_filename) if frame.f_back else None)
    if mod is not None and (not path or path[-1] != mod): path.append(mod)
  sys.setprofile(profiler)
  try: fn()
  finally: sys.setprofile(None)
  return path

def report(label: str, path: list[str]) -> None:
  first: list[str] = []
  for m in path:
    if m not in first: first.append(m)
  print(f"{label}: {len(path)} hops through {len(first)} modules")
  print("  " + " -> ".join(first))

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--expr", default="Tensor([1, 2, 3, 4]) + 3 + 4", help="a Tensor expression (Tensor is in scope)")
  args = ap.parse_args()
  sys.path.insert(0, ROOT)
  from tensor import Tensor
  build = lambda: eval(args.expr, {"Tensor": Tensor})  # noqa: E731
  report("cold", trace(lambda: build().realize()))
  report("warm", trace(lambda: build().realize()))  # the first hit (it prepares the launches)
  report("hot", trace(lambda: build().realize()))  # a later hit

if __name__ == "__main__": main()
