"""What the engine shows people (tensor/engine/realize.py calls these): DEBUG=2 kernel names coloured by axis kind, and
GRAPH=1 graph files (the tensor graph of each realize, each kernel's AST) as DOT, Mermaid and SVG (runtime/graph.py).
"""
from __future__ import annotations
import re, sys
from runtime.graph import GRAPH, write_graph
from runtime.helpers import colored
from runtime.uop import UOp

# the seeds' debug colours: global blue, local light blue, reduce red, upcast yellow, unroll purple, group green
AXIS_COLORS = {"global": "blue", "local": "cyan", "reduce": "red", "upcast": "yellow", "unroll": "magenta", "group": "green"}
_NAME = re.compile(r"([A-Za-z]+)_([0-9]+(?:_[0-9]+)*)(n[0-9a-f]+)?")  # E_4_8n1c3f: kind, dims, the digest (codegen.kernel_name)

def axis_kinds(n_dims: int, n_global: int, opts: list[tuple]) -> list[str]:
  """The kind of each dimension a kernel name lists: its output dims (global, or upcast when an UPCAST opt unrolled the
  loop), then its reduce dims (reduce, or unroll when the reduction was split into interleaved lanes)."""
  kinds = ["global"] * min(n_global, n_dims) + ["reduce"] * max(n_dims - n_global, 0)
  for kind, axis, _ in opts:
    if kind == "UPCAST" and 0 <= axis < n_global: kinds[axis] = "upcast"
    elif kind == "LOCAL" and 0 <= axis < n_global: kinds[axis] = "local"
    # UNROLL and GROUP name a reduce loop by range id, not by position: the innermost reduce dim is the one split
    elif kind in ("UNROLL", "GROUP") and n_dims > n_global: kinds[-1] = kind.lower()
  return kinds

def colored_name(name: str, n_global: int, opts: list[tuple], width: int = 0) -> str:
  """`name` with each dimension coloured by its kind (plain when stdout is not a terminal), padded to `width` visible characters."""
  pad = " " * max(width - len(name), 0)
  m = _NAME.fullmatch(name)
  if m is None or not sys.stdout.isatty(): return name + pad
  dims = m.group(2).split("_")
  kinds = axis_kinds(len(dims), n_global, opts)
  return f"{m.group(1)}_" + "_".join(colored(d, AXIS_COLORS[k]) for d, k in zip(dims, kinds)) + (m.group(3) or "") + pad

# the number of GRAPH files this process wrote (they are numbered in order): a debug tool's counter, not engine state
_written = 0

def graph_out(root: UOp, name: str) -> None:
  """GRAPH=1: write `root` as NAME.dot/.mmd (and .svg with Graphviz) into GRAPH_DIR, saying where on stderr."""
  global _written
  if not GRAPH: return
  _written += 1
  paths = write_graph(root, f"{_written:03d}_{name}")
  print(f"GRAPH: {', '.join(paths)}", file=sys.stderr)
