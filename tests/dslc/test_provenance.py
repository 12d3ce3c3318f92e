"""TRACK_RULES provenance: each node a rule makes records the rule and the node it replaced; why() gives the chain. Each
recorded step is checked by running that rule alone on the node it replaced."""
import os, subprocess, sys
import pytest
from runtime import UOp, dtypes, graph_rewrite
from runtime.provenance import forget, made_by, track_rules, why
from rules.symbolic import symbolic
from tests.dslc.test_cli import ROOT, dslc

@pytest.fixture
def tracking():
  forget()
  track_rules(True)
  yield
  track_rules(False)
  forget()

def steps(u: UOp) -> list:
  """Every (rule, before, after) recorded under u: its own chain and, recursively, its sources'."""
  out, seen, stack = [], set(), [u]
  while stack:
    n = stack.pop()
    if n in seen: continue
    seen.add(n)
    if (m := made_by(n)) is not None:
      out.append((m[0], m[1], n))
      stack.append(m[1])
    stack.extend(n.src)
  return out

@pytest.mark.parametrize("bottom_up", [False, True])
def test_why_names_the_rules_and_each_step_is_that_rule(tracking, bottom_up):
  x, y = UOp.variable("x", 0, 16, dtypes.int32), UOp.variable("y", 0, 7, dtypes.int32)
  e = ((x + 3) * 2 + -6) // 2 + (y * 4 + x * 4) // 4 + 0
  out = graph_rewrite(e, symbolic, bottom_up=bottom_up)
  assert out.render() == "((x*2)+y)"
  found = steps(out)
  assert len(found) >= 4
  lines = open(os.path.join(ROOT, "rules/symbolic.rules")).read().split("\n")
  for rule, before, after in found:
    assert rule.file == "rules/symbolic.rules" and lines[rule.line - 1].strip().startswith(rule.text.split(" ")[0])
    assert rule.fn(before, None) is after, f"{rule}: {before.render()} -> {after.render()}"
  text = "\n".join(why(out))
  if bottom_up: return  # it meets the nodes in another order, so other rules make the same result
  at = next(i for i, line in enumerate(lines, 1) if line.startswith("(IDIV s@(MUL x:ints y) y)"))  # not a fixed line: rules get added
  assert f"rules/symbolic.rules:{at}: (IDIV s@(MUL x:ints y) y)" in text and "(((y+x)*4)//4)  ->  (y+x)" in text
  assert "((x*2)//2)  ->  x" not in text  # x is a leaf of the input too: a rule that resulted in it says nothing of its use
  assert "rules/symbolic.rules:111: (MUL! (ADD! x:ints c1@(CONST)) c2@(CONST))" in text and "((x+3)*2)  ->  ((x*2)+6)" in text

def test_off_records_nothing():
  forget()
  x = UOp.variable("x", 0, 16, dtypes.int32)
  out = graph_rewrite((x * 3 + 0) * 1, symbolic)
  assert out is x * 3 and made_by(out) is None and why(out) == []
  assert symbolic.rewrite(x * 1) is x and made_by(x) is None

def test_matcher_rewrite_records(tracking):
  x = UOp.variable("x", 0, 16, dtypes.int32)
  assert symbolic.rewrite(x * 1) is x
  rule, before = made_by(x)
  assert before is x * 1 and rule.text == "(MUL! x 1) -> x"

def test_env_turns_it_on_at_import():
  code = ("from runtime import UOp, dtypes, graph_rewrite\nfrom runtime.provenance import why\nfrom rules.symbolic import symbolic\n"
          "x = UOp.variable('x', 0, 9, dtypes.int32)\nprint('\\n'.join(why(graph_rewrite((x + 2) + 3, symbolic))))")
  env = {**os.environ, "PYTHONPATH": ROOT, "TRACK_RULES": "1"}
  r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
  assert r.returncode == 0 and "rules/symbolic.rules:102: (op! (op! x:ints c1@(CONST)) c2@(CONST))" in r.stdout, r.stderr
  env["TRACK_RULES"] = "0"
  r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
  assert r.returncode == 0 and r.stdout == "\n", r.stderr

def test_explain_why_command_line():
  r = dslc("explain", "rules/symbolic.rules", "--why", "(IDIV (ADD (MUL (ADD x 3) 2) -6) 2)")
  assert r.returncode == 0, r.stderr
  assert r.stdout.startswith("graph_rewrite((IDIV (ADD (MUL (ADD x 3) 2) -6) 2), symbolic) = x\n")
  assert "rules/symbolic.rules:42: (ADD! x:ints 0) -> x\n        ((x*2)+0)  ->  (x*2)" in r.stdout
  r = dslc("explain", "rules/symbolic.rules", "--why", "(ADD x y)")
  assert r.returncode == 0 and r.stdout.endswith("no rule fired\n")
  r = dslc("explain", "rules/symbolic.rules", "--why", "(ADD x y)", "--on", "x")
  assert r.returncode == 2 and "not allowed with argument" in r.stderr
