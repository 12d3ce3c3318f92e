"""`python -m dslc stats`: how much of each rule file is rules and how much is Python helpers.

Per .rules file: its rule sets, rules, rule lines (the lines of its rules and `let` patterns, comments and blank lines
left out) and helper lines: the code lines (no blank, comment or docstring lines) of what it imports from the hand-written
modules under rules/ (`from rules.X_helpers import f`), with every function, class or table of that module those reach
in turn (a helper's own private helpers count as its lines). A rule set's ctx class is among those: `check` makes a rule
set that reads ctx declare it, as a class imported from a helper module or a context naming the imported classes that
implement it. A line of a helper shared by two files counts in both; what a helper calls outside its module (runtime/,
tensor/) is not counted, nor are rule sets imported from generated modules.
"""
from __future__ import annotations
import ast, glob, os
from dataclasses import dataclass
from dslc.split import split_items

HEADERS = ("ruleset", "from", "for", "}", "ctx ")

@dataclass
class FileStats:
  path: str
  rulesets: int
  rules: int
  rule_lines: int
  helper_lines: int

  @property
  def ratio(self) -> float: return self.helper_lines / self.rule_lines if self.rule_lines else 0.0

def rule_lines(source: str) -> int:
  """The code lines of a file's rules and `let` patterns (its headers, imports, comments and blank lines left out)."""
  n = 0
  for item in split_items(source):
    lines = item.text.split("\n")[item.line - 1:]
    if lines and lines[0].lstrip().startswith(HEADERS): continue
    n += sum(1 for x in lines if x.strip() and not x.strip().startswith("#"))
  return n

def code_lines(module_path: str, names: list[str], root: str) -> set[tuple[str, int]]:
  """(file, line) of every code line of `names` in the module and of the module-level definitions they use, transitively."""
  with open(module_path, encoding="utf-8") as f: text = f.read()
  tree = ast.parse(text)
  lines = text.split("\n")
  defs: dict[str, ast.stmt] = {}
  for node in tree.body:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)): defs[node.name] = node
    elif isinstance(node, (ast.Assign, ast.AnnAssign)):
      for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
        if isinstance(t, ast.Name): defs[t.id] = node
  docstrings = {n.body[0].value for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body
                and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant) and isinstance(n.body[0].value.value, str)}
  skip = {i for d in docstrings for i in range(d.lineno, (d.end_lineno or d.lineno) + 1)}
  out: set[tuple[str, int]] = set()
  todo, seen = [n for n in names if n in defs], set()
  while todo:
    name = todo.pop()
    if name in seen: continue
    seen.add(name)
    node = defs[name]
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    for i in range(start, (node.end_lineno or node.lineno) + 1):
      x = lines[i - 1].strip()
      if x and not x.startswith("#") and i not in skip: out.add((module_path, i))
    todo += [n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in defs and n.id not in seen]
  return out

def _generated(path: str) -> bool:
  with open(path, encoding="utf-8") as f: return f.readline().startswith("# Code generated")

def counted_rules(rf) -> list:
  """The rules of a rule file that count: those of its rule sets, not of the sets it composes from them (`dslc coverage`
  counts the same)."""
  return [r for rs in rf.rulesets if rs.compose is None for r in rs.rules]

def file_stats(path: str, root: str) -> FileStats:
  from dslc.parse import parse_rules
  rf, _ = parse_rules(path)
  with open(path, encoding="utf-8") as f: source = f.read()
  rulesets = [rs for rs in (rf.rulesets if rf is not None else []) if rs.compose is None]
  helpers: set[tuple[str, int]] = set()
  for module, names, _ in rf.imports if rf is not None else []:
    if not module.startswith("rules."): continue  # runtime/ and math are the library, not this file's helpers
    mpath = os.path.join(root, *module.split(".")) + ".py"
    if not os.path.exists(mpath) or _generated(mpath): continue  # another rule file's rule sets (`from rules.symbolic import symbolic`)
    helpers |= code_lines(mpath, names, root)
  return FileStats(os.path.relpath(path, root).replace(os.sep, "/"), len(rulesets), len(counted_rules(rf)) if rf is not None else 0,
                   rule_lines(source), len(helpers))

def all_stats(paths: list[str] | None = None, root: str | None = None) -> list[FileStats]:
  root = root or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  paths = paths or sorted(glob.glob(os.path.join(root, "rules", "*.rules")))
  return [file_stats(p, root) for p in paths]

def table(stats: list[FileStats]) -> str:
  head = f"{'file':<28} {'rule sets':>9} {'rules':>6} {'rule lines':>10} {'helper lines':>12} {'helper/rule line':>16}"
  rows = [head] + [f"{s.path:<28} {s.rulesets:>9} {s.rules:>6} {s.rule_lines:>10} {s.helper_lines:>12} {s.ratio:>16.2f}" for s in stats]
  total = FileStats("total", sum(s.rulesets for s in stats), sum(s.rules for s in stats), sum(s.rule_lines for s in stats),
                    sum(s.helper_lines for s in stats))
  rows.append(f"{total.path:<28} {total.rulesets:>9} {total.rules:>6} {total.rule_lines:>10} {total.helper_lines:>12} {total.ratio:>16.2f}")
  return "\n".join(rows)
