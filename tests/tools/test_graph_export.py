"""Graph export (runtime/graph.py): `to_dot()` / `to_mermaid()` on any UOp, and GRAPH=1 writing the tensor graph and each
kernel's AST as DOT, Mermaid and (with Graphviz) SVG."""
import os, re, shutil, subprocess, sys
import pytest
from runtime import UOp, Ops, dtypes
from runtime.graph import op_class, preorder, to_dot, to_mermaid
from tensor import Tensor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

def graph():
  x = UOp.variable("x", 0, 10)
  return ((x + 3) * (x + 3)).maximum(UOp.const(dtypes.int, 5)) // 2  # x + 3 is one node used twice

def test_mermaid_lists_every_node_once_and_every_edge_in_source_order():
  g = graph()
  text = g.to_mermaid()
  lines = text.splitlines()
  assert lines[0] == "flowchart TD"
  nodes = [m.groups() for m in re.finditer(r'^    ([A-Z]+)\["(\w+)<br/>(dtypes\.\w+)<br/>arg=(.*?)"\]:::(\w+)$', text, re.M)]
  topo = list(g.toposort())
  assert len(nodes) == len(topo)
  assert nodes[0][:3] == ("A", "IDIV", "dtypes.int")  # the root first, as the seeds draw it
  ids = {u: n[0] for u, n in zip(preorder(g), nodes)}
  edges = re.findall(r"^    ([A-Z]+) --> ([A-Z]+)$", text, re.M)
  assert edges == [(ids[u], ids[s]) for u in ids for s in u.src]
  assert all(cls == op_class(op) for _, op, _, _, cls in nodes)
  assert "classDef alu fill:#ffffc0" in text

def test_mermaid_escapes_what_would_end_a_label():
  u = UOp(Ops.CUSTOM, dtypes.int, arg='f("<x>")')
  text = to_mermaid(u)
  assert '#quot;' in text and "&lt;x&gt;" in text and text.count('"') == 2

def test_dot_is_valid_and_keeps_source_order():
  g = graph()
  dot = to_dot(g)
  assert dot.startswith('digraph "G" {') and "ordering=out;" in dot
  assert len(re.findall(r"^  n\d+ \[label=", dot, re.M)) == len(g.toposort())
  assert len(re.findall(r"^  n\d+ -> n\d+", dot, re.M)) == sum(len(u.src) for u in g.toposort())
  root_edges = re.findall(r'^  n0 -> n\d+ \[taillabel="(\d)"', dot, re.M)
  assert root_edges == ["0", "1"]
  if shutil.which("dot"):
    r = subprocess.run(["dot", "-Tsvg"], input=dot, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "<svg" in r.stdout

def test_to_dot_and_to_mermaid_on_a_tensor_graph():
  t = Tensor([1, 2, 3, 4]) + 3 + 4
  assert t.uop.to_mermaid().count("<br/>") == 2 * len(t.uop.toposort())
  assert "COPY" in t.uop.to_dot() and t.tolist() == [8, 9, 10, 11]

def test_graph_1_writes_the_tensor_graph_and_each_kernel(tmp_path):
  code = "from tensor import Tensor\nprint((Tensor([1, 2, 3, 4]) + 3 + 4).tolist())\n"
  r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                     env={**os.environ, "GRAPH": "1", "GRAPH_DIR": str(tmp_path), "DEV": "CPU"})
  assert r.returncode == 0 and r.stdout.strip() == "[8, 9, 10, 11]", r.stderr
  files = sorted(os.listdir(tmp_path))
  exts = (".dot", ".mmd", ".svg") if shutil.which("dot") else (".dot", ".mmd")
  stem = next(f for f in files if f.startswith("002_kernel_E_4n"))[:-len(exts[0])]  # E_4 and a digest of its AST
  assert files == sorted(f"{s}{e}" for s in ("001_tensor_graph", stem) for e in exts)
  kernel = (tmp_path / f"{stem}.mmd").read_text()
  assert kernel.startswith("flowchart TD\n    A[\"SINK<br/>dtypes.void") and "STORE" in kernel and "CONST<br/>dtypes.int<br/>arg=3" in kernel
  assert "GRAPH: " in r.stderr and str(tmp_path) in r.stderr
  assert not [f for f in files if ".tmp" in f]

@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz (dot) is not installed")
def test_graph_1_renders_svg_with_graphviz(tmp_path):
  from runtime.graph import write_graph
  paths = write_graph(graph(), "g", str(tmp_path))
  svg = open(next(p for p in paths if p.endswith(".svg"))).read()
  assert svg.lstrip().startswith("<?xml") and svg.count('class="node"') == len(graph().toposort())
