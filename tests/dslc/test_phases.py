"""dslc's modules form a DAG in the order of its phases (STYLE.md: grammar -> parse -> ir -> check -> emit, the drivers on top):
no module imports one of a later phase, lazy imports included, and there is no cycle."""
from __future__ import annotations
import ast, glob, os

DSLC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "dslc")

# the phase of each module: a module may import modules of its own phase or an earlier one
PHASES = [
  {"diagnostics", "split", "stamp", "lang", "ir"},          # the vocabulary, the IR, text splitting
  {"expr"},                                                 # expressions (Lark trees -> Python text)
  {"parse_patterns", "parse_results", "parse"},             # the front end
  {"shadow", "typecheck", "infer", "pyinfo", "guards"},     # analyses of the IR and of the Python it names
  {"check"},
  {"emit_result", "emit"},
  {"compile", "upat", "explain", "stats", "coverage", "lsp", "lexer", "__main__", "__init__",
   "smt", "verify", "verify_eval", "verify_exhaustive", "verify_nodes", "verify_contracts", "verify_pattern", "verify_replay",
   "verify_results"},  # drivers and tools
]
PHASE = {m: i for i, ms in enumerate(PHASES) for m in ms}

def imports_of(path: str) -> set[str]:
  """The dslc modules a file imports anywhere (functions included), TYPE_CHECKING blocks left out."""
  tree = ast.parse(open(path, encoding="utf-8").read())
  skip = {id(x) for n in ast.walk(tree) if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test) for b in n.body for x in ast.walk(b)}
  out = set()
  for n in ast.walk(tree):
    if id(n) in skip: continue
    if isinstance(n, ast.ImportFrom) and n.module == "dslc": out |= {a.name for a in n.names if a.name in PHASE}
    elif isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("dslc."): out.add(n.module.split(".")[1])
    elif isinstance(n, ast.Import): out |= {a.name.split(".")[1] for a in n.names if a.name.startswith("dslc.")}
  return out

def graph() -> dict[str, set[str]]:
  return {os.path.basename(p)[:-3]: imports_of(p) - {os.path.basename(p)[:-3]} for p in sorted(glob.glob(os.path.join(DSLC, "*.py")))}

def test_every_module_has_a_phase():
  assert set(graph()) <= set(PHASE), f"give these dslc modules a phase here: {sorted(set(graph()) - set(PHASE))}"

def test_no_module_imports_a_later_phase():
  late = [f"dslc/{m}.py imports dslc.{i} ({'/'.join(sorted(PHASES[PHASE[i]]))} comes after {'/'.join(sorted(PHASES[PHASE[m]]))})"
          for m, deps in graph().items() for i in sorted(deps) if PHASE.get(i, 0) > PHASE.get(m, 0)]
  assert not late, "\n".join(late)

def test_no_cycle():
  g = graph()
  state: dict[str, int] = {}
  def visit(m: str, path: list[str]) -> None:
    if state.get(m) == 2: return
    assert state.get(m) != 1, "import cycle: " + " -> ".join(path[path.index(m):] + [m])
    state[m] = 1
    for d in sorted(g.get(m, ())): visit(d, path + [m])
    state[m] = 2
  for m in g: visit(m, [])
