"""Rule coverage (dslc/coverage.py, RULECOVERAGE in runtime/trace.py): every process of a workload adds how often each rule
fired into one file; `python -m dslc coverage` lists the rules that never fired, per .rules file, and a summary line."""
import json, os, re, subprocess, sys
from dslc.coverage import load_counts, report, rule_tables

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = "from runtime import UOp\nx = UOp.variable('x', 0, 9)\nfor i in range({n}): (x + 0 + i * 0).simplify()\n"

def dslc(*args, **env):
  return subprocess.run([sys.executable, "-m", "dslc", *args], cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, **env})

def symbolic_rule(line: int):
  return next(r for r in rule_tables()["rules/symbolic.rules"] if r.line == line)

def test_processes_add_their_counts_into_one_file(tmp_path):
  cov = tmp_path / "cov.json"
  for n in (3, 4):
    script = tmp_path / f"w{n}.py"
    script.write_text(SCRIPT.format(n=n))
    r = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "RULECOVERAGE": str(cov)})
    assert r.returncode == 0, r.stderr
  add_zero = symbolic_rule(42)  # (ADD! x:ints 0) -> x
  counts = load_counts(str(cov))
  # x + 0 fires once per expression, in each process (simplify is memoized per expression, not across them)
  assert counts[f"rules/symbolic.rules:{add_zero.id}"] >= 7
  assert all(k.split(":")[0].endswith(".rules") or k.split(":")[0].endswith(".py") for k in counts)
  assert not [p for p in os.listdir(tmp_path) if ".tmp" in p]

def test_the_report_lists_what_never_fired_and_ends_with_a_summary(tmp_path):
  script = tmp_path / "w.py"
  script.write_text(SCRIPT.format(n=2))
  r = dslc("coverage", str(script))
  assert r.returncode == 0, r.stderr
  lines = r.stdout.strip().split("\n")
  m = re.fullmatch(r"rule coverage: (\d+) of (\d+) rules fired \(([\d.]+)%\); (\d+) never fired in (.*)", lines[-1])
  assert m and m.group(5) == str(script)
  fired, total = int(m.group(1)), int(m.group(2))
  assert 0 < fired < total == sum(len(rs) for rs in rule_tables().values()) and int(m.group(4)) == total - fired
  never = [x for x in lines if x.startswith("  rules/")]
  assert len(never) == total - fired
  assert "  rules/symbolic.rules:42  (ADD! x:ints 0) -> x" not in never
  assert "  rules/symbolic.rules:44  (MUL! x 1) -> x" in never
  for f in rule_tables(): assert any(x.startswith(f"{f}: ") for x in lines)

def test_from_a_file_and_summary_only(tmp_path):
  cov = tmp_path / "cov.json"
  rule = symbolic_rule(42)
  entry = {"file": "rules/symbolic.rules", "line": 42, "text": rule.text, "id": rule.id, "hits": 3}
  cov.write_text(json.dumps({f"rules/symbolic.rules:{rule.id}": entry}))
  r = dslc("coverage", "--from", str(cov), "--summary")
  total = sum(len(rs) for rs in rule_tables().values())
  want = f"rule coverage: 1 of {total} rules fired ({100 / total:.1f}%); {total - 1} never fired in the run that wrote {cov}\n"
  assert r.returncode == 0 and r.stdout == want
  r = dslc("coverage", "--from", str(tmp_path / "missing.json"))
  assert r.returncode == 1 and "does not exist" in r.stderr

def test_with_nothing_fired_every_rule_is_listed_once():
  text, fired, total = report({}, "nothing")
  listed = [x for x in text.split("\n") if x.startswith("  rules/")]
  assert fired == 0 and len(listed) == len(set(listed)) == total == sum(len(rs) for rs in rule_tables().values())
  # a `for` block's rule is one rule over several ops
  assert "  rules/symbolic.rules:30  (op! c@(CONST) x) if x.op is not Ops.CONST -> (op x c)" in listed

def test_rules_applied_one_node_at_a_time_count_too(tmp_path):
  # the C renderer applies rules/render_c.rules with Matcher.rewrite, node by node, not through graph_rewrite
  cov = tmp_path / "cov.json"
  code = "from tensor import Tensor\nprint((Tensor([1, 2, 3, 4]) + 3 + 4).tolist())\n"
  r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                     env={**os.environ, "RULECOVERAGE": str(cov), "DEV": "CPU", "NOOPT": "0"})  # upcast: four lanes rendered
  assert r.returncode == 0, r.stderr
  counts = load_counts(str(cov))
  render = {r.text.split(" ->")[0]: counts.get(f"{r.file}:{r.id}", 0) for r in rule_tables()["rules/render_c.rules"]}
  assert render["(ADD a b)"] >= 4 and render["(STORE idx v)"] >= 4  # four upcast lanes
