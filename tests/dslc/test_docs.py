"""docs/rules.md can't rot: every code block in it is run.

  ```rules          a complete .rules file: compiles with no diagnostic
  ```               right after a ```rules block, lines `# EXPR  ==>  EXPR`: the block's last rule set rewrites the left
                    side to the right one (a, b int variables; p, q bool ones; UOp, Ops, dtypes, sink in scope);
                    `# rewrite(EXPR, ctx=EXPR)  ==>  EXPR`: Matcher.rewrite, one rule on one node (a tuple, a node or None)
  ```rules-error    its first lines `# error: LINE:COL: message`: exactly those diagnostics, line and column within the block
  ```console        `$ python -m dslc check NAME.rules`: the output of that command on the block before it, verbatim
  ```python generated   an excerpt (`...` between parts) of the module the ```rules block before it compiles to
  ```python         runs
"""
import math, os, re, subprocess, sys
import pytest
from runtime import UOp, Ops, dtypes, graph_rewrite
from dslc.compile import compile_rules, load_rules, exec_module
from dslc.diagnostics import DslError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(ROOT, "docs", "rules.md")
FENCE = re.compile(r"^```([\w-]*(?: \w+)?)\n(.*?)^```$", re.M | re.S)
CHECK = re.compile(r"# (.+?)\s+==>\s+(.+)")
EXPECT = re.compile(r"# error: (\d+):(\d+): (.*)")

def blocks() -> list[tuple[str, str, int]]:
  """(info string, text, line of the block's first text line in the doc) for every fenced block, in order."""
  with open(DOC) as f: doc = f.read()
  return [(m[1], m[2], doc.count("\n", 0, m.start(2)) + 1) for m in FENCE.finditer(doc)]

BLOCKS = blocks()
def select(kind: str) -> list[tuple[int, str, int]]:
  return [(i, text, line) for i, (info, text, line) in enumerate(BLOCKS) if info == kind]

def following(i: int, kind: str) -> str | None:
  return BLOCKS[i + 1][1] if i + 1 < len(BLOCKS) and BLOCKS[i + 1][0] == kind else None

def load(text: str, path: str = "example.rules") -> dict:
  ns: dict = {}
  exec_module(compile_rules(path, source=text), path, ns)
  return ns

def test_the_doc_has_examples():
  kinds = [info for info, _, _ in BLOCKS]
  assert kinds.count("rules") >= 15 and kinds.count("rules-error") >= 8 and "console" in kinds and "python generated" in kinds

@pytest.mark.parametrize("i,text,line", select("rules"), ids=[f"line{x[2]}" for x in select("rules")])
def test_rules_block_compiles(i, text, line):
  try: ns = load(text)
  except DslError as e: pytest.fail(f"docs/rules.md:{line}: the example does not compile:\n{e}")
  checks = following(i, "")
  if checks is None: return
  rulesets = load_rules("example.rules", source=text).rulesets
  matcher = ns[rulesets[-1].name]
  a, b = UOp.variable("a", 0, 10), UOp.variable("b", -5, 5)
  p, q = UOp.variable("p", 0, 1, dtypes.bool), UOp.variable("q", 0, 1, dtypes.bool)
  env = {"a": a, "b": b, "p": p, "q": q, "UOp": UOp, "Ops": Ops, "dtypes": dtypes, "sink": lambda *s: UOp(Ops.SINK, dtypes.void, s), "math": math}
  lines = checks.strip("\n").split("\n")
  assert lines, f"docs/rules.md:{line}: an empty check block"
  for k, check in enumerate(lines):
    m = CHECK.fullmatch(check.strip())
    assert m, f"docs/rules.md:{line + len(text.split(chr(10))) + 1 + k}: not a check line `# EXPR  ==>  EXPR`: {check!r}"
    if m[1].startswith("rewrite("):
      # one rule on one node, as Matcher.rewrite: a node, a tuple (a rule set that returns per-source) or None
      got, after = eval(m[1], {**env, "rewrite": matcher.rewrite}), eval(m[2], dict(env))
      assert got == after, f"docs/rules.md: {check.strip()}: got {got}"
      continue
    before, after = eval(m[1], dict(env)), eval(m[2], dict(env))
    got = graph_rewrite(before, matcher)
    assert got is after, f"docs/rules.md: {check.strip()}: got {got.render()}, expected {after.render()}"

def expected(text: str) -> list[tuple[int, int, str]]:
  out = []
  for x in text.split("\n"):
    m = EXPECT.fullmatch(x)
    if m is None: break
    out.append((int(m[1]), int(m[2]), m[3]))
  return out

@pytest.mark.parametrize("i,text,line", select("rules-error"), ids=[f"line{x[2]}" for x in select("rules-error")])
def test_rules_error_block(i, text, line):
  want = expected(text)
  assert want, f"docs/rules.md:{line}: a rules-error block starts with `# error: LINE:COL: message` lines"
  with pytest.raises(DslError) as info: compile_rules("example.rules", source=text)
  got = [(d.line, d.col, d.message) for d in info.value.diagnostics]
  assert len(got) == len(want), f"docs/rules.md:{line}: expected {len(want)} errors, got:\n{info.value}"
  for (gl, gc, gm), (wl, wc, wm) in zip(got, sorted(want)):
    assert (gl, gc) == (wl, wc) and wm in gm, f"docs/rules.md:{line}: expected {wl}:{wc}: {wm}, got {gl}:{gc}: {gm}"

@pytest.mark.parametrize("i,text,line", select("console"), ids=[f"line{x[2]}" for x in select("console")])
def test_console_block(i, text, line, tmp_path):
  command, *output = text.rstrip("\n").split("\n")
  m = re.fullmatch(r"\$ python -m dslc check (\w+\.rules)", command)
  assert m, f"docs/rules.md:{line}: a console block runs `python -m dslc check NAME.rules`"
  source = BLOCKS[i - 1][1]
  (tmp_path / m[1]).write_text(source)
  env = {**os.environ, "PYTHONPATH": ROOT}
  r = subprocess.run([sys.executable, "-m", "dslc", "check", m[1]], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=60)
  assert r.returncode == (1 if BLOCKS[i - 1][0] == "rules-error" else 0)
  assert r.stdout + r.stderr == "\n".join(output) + "\n"

@pytest.mark.parametrize("i,text,line", select("python generated"), ids=[f"line{x[2]}" for x in select("python generated")])
def test_generated_excerpt(i, text, line):
  m = re.match(r"# Code generated by build.py from (\S+)\. DO NOT EDIT\.", text)
  assert m, f"docs/rules.md:{line}: a generated excerpt starts with the header line"
  source = next(t for info, t, _ in reversed(BLOCKS[:i]) if info == "rules")
  code = compile_rules(m[1], source=source)
  # each part between `...` lines appears in the generated module, in order
  at = 0
  for part in re.split(r"^\.\.\.\n", text, flags=re.M):
    found = code.find(part, at)
    assert found >= 0, f"docs/rules.md:{line}: this part of the excerpt is not in the generated code:\n{part}\n---- generated:\n{code}"
    at = found + len(part)

@pytest.mark.parametrize("i,text,line", select("python"), ids=[f"line{x[2]}" for x in select("python")])
def test_python_block_runs(i, text, line):
  if "dslc.verify" in text: pytest.importorskip("z3", reason="dslc verify needs z3: pip install -e '.[verify]'")
  exec(compile(text, f"docs/rules.md:{line}", "exec"), {})
