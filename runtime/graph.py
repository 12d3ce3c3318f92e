"""Graph export (runtime layer): a UOp graph as Graphviz DOT or Mermaid text, nodes coloured by op class, each node's
sources in order. `UOp.to_dot()` / `UOp.to_mermaid()` call these; GRAPH=1 makes the engine write them (tensor/engine);
the VIZ explorer (tensor/viz) uses the same op classes and colours.
"""
from __future__ import annotations
import os, shutil, subprocess
from typing import Iterator
from runtime import safe_files
from runtime.helpers import ContextVar
from runtime.ops import GroupOp, Ops
from runtime.uop import UOp

GRAPH = ContextVar("GRAPH", 0)

# op class -> (ops, fill colour)
OP_CLASSES: dict[str, tuple[frozenset[Ops], str]] = {
  "const": (frozenset({Ops.CONST, Ops.VCONST, Ops.DEFINE_VAR, Ops.BIND}), "#e0e0e0"),
  "alu": (frozenset(GroupOp.ALU) | {Ops.CAST, Ops.BITCAST}, "#ffffc0"),
  "movement": (frozenset(GroupOp.Movement) | {Ops.VIEW}, "#c0ffc0"),
  "memory": (frozenset({Ops.BUFFER, Ops.BUFFER_VIEW, Ops.DEFINE_GLOBAL, Ops.DEFINE_LOCAL, Ops.DEFINE_REG, Ops.INDEX, Ops.LOAD, Ops.STORE,
                        Ops.COPY, Ops.ASSIGN, Ops.CONTIGUOUS, Ops.CONTIGUOUS_BACKWARD, Ops.DETACH, Ops.DEVICE, Ops.UNIQUE}), "#ffc0c0"),
  "reduce": (frozenset({Ops.REDUCE_AXIS, Ops.REDUCE}), "#ffa0a0"),
  "loop": (frozenset({Ops.RANGE, Ops.END, Ops.SPECIAL, Ops.IF, Ops.ENDIF, Ops.BARRIER, Ops.AT}), "#c0c0ff"),
  "vector": (frozenset({Ops.VECTORIZE, Ops.GEP, Ops.UNROLL, Ops.CONTRACT, Ops.WMMA}), "#ffd8a0"),
  "kernel": (frozenset({Ops.SINK, Ops.KERNEL, Ops.GROUP, Ops.AFTER, Ops.NOOP}), "#e0c0ff"),
}
OTHER_COLOR = "#ffffff"
_CLASS_OF: dict[str, str] = {op.name: cls for cls, (ops, _) in OP_CLASSES.items() for op in ops}

def op_class(op_name: str) -> str:
  """The class of an op, by name ("ADD" -> "alu"); "other" for ops in no class."""
  return _CLASS_OF.get(op_name, "other")

def op_color(op_name: str) -> str: return OP_CLASSES[c][1] if (c := op_class(op_name)) in OP_CLASSES else OTHER_COLOR

def preorder(root: UOp) -> Iterator[UOp]:
  """Every node once, root first, then each node's sources in order, depth first (as the seeds list them)."""
  seen: set[UOp] = set()
  stack = [root]
  while stack:
    u = stack.pop()
    if u in seen: continue
    seen.add(u)
    yield u
    stack.extend(reversed(u.src))

def _arg_text(u: UOp, limit: int = 60) -> str:
  t = repr(u.arg)
  return t if len(t) <= limit else t[:limit - 3] + "..."

def _dot_escape(s: str) -> str: return s.replace("\\", "\\\\").replace('"', '\\"')

def to_dot(root: UOp, name: str = "G") -> str:
  """Graphviz DOT: an edge from each node to each of its sources, left to right in source order (ordering=out)."""
  ids = {u: i for i, u in enumerate(preorder(root))}
  lines = [f'digraph "{_dot_escape(name)}" {{', "  ordering=out;", '  node [shape=box, style="rounded,filled", fontname="monospace", fontsize=10];',
           '  edge [color="#606060", arrowsize=0.6];']
  for u, i in ids.items():
    label = f"{u.op.name}\\n{_dot_escape(str(u.dtype))}" + (f"\\narg={_dot_escape(_arg_text(u))}" if u.arg is not None else "")
    lines.append(f'  n{i} [label="{label}", fillcolor="{op_color(u.op.name)}"];')
  for u, i in ids.items():
    for k, s in enumerate(u.src): lines.append(f'  n{i} -> n{ids[s]}' + (f' [taillabel="{k}", fontsize=8]' if len(u.src) > 1 else "") + ";")
  lines.append("}")
  return "\n".join(lines) + "\n"

def _mermaid_id(i: int) -> str:
  # A, B, ..., Z, AA, AB, ...: the seeds' names
  s = ""
  i += 1
  while i:
    i, r = divmod(i - 1, 26)
    s = chr(65 + r) + s
  return s

def _mermaid_text(s: str) -> str:
  # inside ["..."] a double quote ends the label: Mermaid's entity for it, and HTML's for the brackets (as the seeds write them)
  return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "#quot;")

def to_mermaid(root: UOp, direction: str = "TD") -> str:
  """Mermaid flowchart text as the seeds draw graphs: `A["ADD<br/>dtypes.int<br/>arg=None"]` and `A --> B` to each source."""
  ids = {u: _mermaid_id(i) for i, u in enumerate(preorder(root))}
  lines = [f"flowchart {direction}"]
  for u, i in ids.items():
    lines.append(f'    {i}["{u.op.name}<br/>{_mermaid_text(str(u.dtype))}<br/>arg={_mermaid_text(_arg_text(u))}"]:::{op_class(u.op.name)}')
  lines.append("")
  for u, i in ids.items():
    for s in u.src: lines.append(f"    {i} --> {ids[s]}")
  used = {op_class(u.op.name) for u in ids}
  lines += [""] + [f"    classDef {c} fill:{OP_CLASSES[c][1] if c in OP_CLASSES else OTHER_COLOR},stroke:#333" for c in sorted(used)]
  return "\n".join(lines) + "\n"

def dot_to_svg(dot: str) -> str | None:
  """The SVG Graphviz draws for DOT text, or None when the `dot` program is not installed."""
  exe = shutil.which("dot")
  if exe is None: return None
  r = subprocess.run([exe, "-Tsvg"], input=dot, capture_output=True, text=True, timeout=120)
  if r.returncode != 0: raise RuntimeError(f"dot failed: {r.stderr.strip()}")
  return r.stdout

def graph_dir() -> str:
  """GRAPH_DIR, else the folder graph in this user's private temporary folder (a fixed name in the shared temporary folder
  could be another user's folder or link)."""
  return os.environ.get("GRAPH_DIR") or safe_files.private_path("graph")

def write_graph(root: UOp, name: str, folder: str | None = None) -> list[str]:
  """GRAPH=1: write NAME.dot, NAME.mmd and, when Graphviz is installed, NAME.svg; returns the paths written."""
  folder = folder or graph_dir()
  os.makedirs(folder, mode=0o700, exist_ok=True)
  safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)
  dot = to_dot(root, name)
  outs = [(f"{safe}.dot", dot), (f"{safe}.mmd", to_mermaid(root))]
  svg = dot_to_svg(dot) if len(dot) < 2_000_000 else None  # dot takes minutes on huge graphs: the .dot is there to render by hand
  if svg is not None: outs.append((f"{safe}.svg", svg))
  paths = []
  for fname, text in outs:
    paths.append(safe_files.write_text(os.path.join(folder, fname), text))
  return paths
