"""docs/autograd.md can't rot: its Python examples run (each in a fresh interpreter), the rules it quotes are in
rules/gradient.rules word for word, and the rule count it states is the rule set's."""
import os, re, subprocess, sys
from rules.gradient import gradient as gradient_rules

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = open(os.path.join(ROOT, "docs", "autograd.md")).read()

def blocks(lang: str) -> list[str]: return [b.split("```", 1)[0] for b in DOC.split(f"```{lang}\n")[1:]]

def test_python_examples_run():
  assert len(blocks("python")) >= 3
  for code in blocks("python"):
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"docs/autograd.md example failed:\n{code}\n{r.stderr}"

def test_quoted_rules_are_the_rules():
  source = open(os.path.join(ROOT, "rules", "gradient.rules")).read().splitlines()
  quoted = [line for b in blocks("rules") for line in b.splitlines() if line.strip()]
  assert quoted
  for line in quoted: assert line in source, f"docs/autograd.md quotes a line rules/gradient.rules does not have: {line!r}"

def test_rule_count():
  n = int(re.search(r"## The rules \((\d+) in `rules/gradient.rules`\)", DOC).group(1))
  assert n == len(gradient_rules.rules)
