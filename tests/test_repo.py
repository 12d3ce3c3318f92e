"""Repository-level checks: generated rules are up to date, the code is ruff clean, README and CI agree."""
import os, shutil, subprocess, sys
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

def test_generated_rules_are_up_to_date():
  r = subprocess.run([sys.executable, "build.py", "--check"], cwd=ROOT, capture_output=True, text=True)
  assert r.returncode == 0, r.stderr

@pytest.mark.skipif(shutil.which("ruff") is None and subprocess.run([sys.executable, "-m", "ruff", "--version"], capture_output=True).returncode != 0,
                    reason="ruff is not installed (pip install -e '.[test]' installs it)")
def test_ruff_clean():
  r = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=ROOT, capture_output=True, text=True)
  assert r.returncode == 0, r.stdout + r.stderr

def test_ci_runs_the_readme_commands():
  readme = open(os.path.join(ROOT, "README.md")).read()
  ci = open(os.path.join(ROOT, ".ci", "run")).read()
  block = readme.split("```bash\n", 1)[1].split("```", 1)[0].strip().splitlines()
  assert len(block) >= 2
  for cmd in block[:2]: assert cmd.strip() in ci, f"README command {cmd!r} is not what .ci/run runs"

def test_readme_python_examples_run():
  readme = open(os.path.join(ROOT, "README.md")).read()
  blocks = [b.split("```", 1)[0] for b in readme.split("```python\n")[1:]]
  assert blocks
  for code in blocks:
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, f"README example failed:\n{code}\n{r.stderr}"

def test_tensor_never_imports_lark_or_dslc():
  # a user of the library needs numpy and a C compiler, nothing else: the generated rules stand alone
  code = ("import sys\nfrom tensor import Tensor\n(Tensor([1, 2]) + 1).sum().realize()\n"
          "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('lark', 'dslc'))\nassert not bad, bad")
  r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env={**os.environ, "DEV": "PYTHON"})
  assert r.returncode == 0, r.stderr

@pytest.mark.skipif(shutil.which("git") is None or not os.path.exists(os.path.join(ROOT, ".git")), reason="needs git and a git checkout")
def test_gitattributes_mark_exactly_the_generated_rules():
  # rules/X.py is generated from rules/X.rules; the hand-written helpers beside them (rules/X_helpers.py) are not
  files = sorted(f for f in os.listdir(os.path.join(ROOT, "rules")) if f.endswith(".py"))
  r = subprocess.run(["git", "check-attr", "linguist-generated", "--", *(f"rules/{f}" for f in files)], cwd=ROOT, capture_output=True, text=True)
  assert r.returncode == 0, r.stderr
  marked = {line.split(":")[0]: line.rsplit(": ", 1)[1] for line in r.stdout.splitlines()}
  for f in files:
    generated = os.path.exists(os.path.join(ROOT, "rules", f[:-3] + ".rules"))
    assert marked[f"rules/{f}"] == ("true" if generated else "false"), f
