"""build.py: `--check` passes on the repository, fails naming a stale or missing generated file until `python build.py` runs,
and a .rules file with an error fails the build with nothing written. Each case runs on a copy of the repository."""
import os, shutil, subprocess, sys, time
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# a rule set of its own, so no rule of the file can make it a duplicate or shadow it
EXTRA = "\nruleset added_by_test_build\n(XOR x:ints x) -> 0\n"
IGNORE = shutil.ignore_patterns(".git", "__pycache__", ".hypothesis", ".pytest_cache", ".ruff_cache", "*.egg-info", ".venv*")

def build(root: str, *args: str) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, "build.py", *args], cwd=root, capture_output=True, text=True, timeout=120)

@pytest.fixture
def repo(tmp_path) -> str:
  """A copy of the repository (its working tree, without .git), to edit freely."""
  dst = str(tmp_path / "repo")
  shutil.copytree(ROOT, dst, ignore=IGNORE)
  return dst

def snapshot(root: str) -> dict[str, bytes]:
  rules = os.path.join(root, "rules")
  return {f: open(os.path.join(rules, f), "rb").read() for f in sorted(os.listdir(rules)) if f.endswith(".py")}

def test_check_passes_on_the_repository():
  r = build(ROOT, "--check")
  assert r.returncode == 0, r.stderr
  assert r.stdout == "" and r.stderr == ""

def test_the_copy_builds_from_its_own_sources(repo):
  # build.py puts its own directory first on sys.path: the copy compiles with the copy's dslc, not the installed one
  with open(os.path.join(repo, "dslc", "emit.py"), "a") as f: f.write("\nraise SystemExit('the copy is used')\n")
  r = build(repo, "--check")
  assert r.returncode != 0 and "the copy is used" in r.stderr

def test_edited_rules_are_stale_until_built(repo):
  path = os.path.join(repo, "rules", "symbolic.rules")
  with open(path, "a") as f: f.write(EXTRA)
  before = snapshot(repo)
  r = build(repo, "--check")
  assert r.returncode == 1
  assert "rules/symbolic.py: stale: regenerate it from rules/symbolic.rules with `python build.py`" in r.stderr
  assert snapshot(repo) == before, "--check never writes"
  r = build(repo)
  assert r.returncode == 0, r.stderr
  assert r.stdout.startswith("build.py: ") and "1 regenerated" in r.stdout
  assert "(XOR x:ints x) -> 0" in open(os.path.join(repo, "rules", "symbolic.py")).read()
  r = build(repo, "--check")
  assert (r.returncode, r.stderr) == (0, "")

def test_comment_edit_makes_the_module_stale_too(repo):
  # the source hash and the line table are in the generated module: any edit needs a rebuild, which is cheap
  path = os.path.join(repo, "rules", "symbolic.rules")
  text = open(path).read()
  with open(path, "w") as f: f.write("# one more header line\n" + text)
  assert build(repo, "--check").returncode == 1
  assert build(repo).returncode == 0
  assert build(repo, "--check").returncode == 0

def test_missing_and_orphaned_modules(repo):
  os.remove(os.path.join(repo, "rules", "symbolic.py"))
  r = build(repo, "--check")
  assert r.returncode == 1 and "rules/symbolic.py: missing" in r.stderr
  assert build(repo).returncode == 0 and os.path.exists(os.path.join(repo, "rules", "symbolic.py"))
  # a generated module whose .rules file is gone
  shutil.copy(os.path.join(repo, "rules", "symbolic.py"), os.path.join(repo, "rules", "gone.py"))
  r = build(repo, "--check")
  assert r.returncode == 1 and "rules/gone.py: generated from a .rules file that no longer exists" in r.stderr

def test_an_error_fails_the_build_and_writes_nothing(repo):
  # one broken file, and one good file edited: neither output is written
  with open(os.path.join(repo, "rules", "broken.rules"), "w") as f: f.write("ruleset broken\n(ADDD x 0) -> x\n")
  with open(os.path.join(repo, "rules", "symbolic.rules"), "a") as f: f.write(EXTRA)
  before = snapshot(repo)
  r = build(repo)
  assert r.returncode == 1
  assert "rules/broken.rules:2:2: error: unknown op or op group 'ADDD'" in r.stderr
  assert "nothing written" in r.stderr
  assert snapshot(repo) == before
  assert not os.path.exists(os.path.join(repo, "rules", "broken.py"))
  assert not [f for f in os.listdir(os.path.join(repo, "rules")) if ".tmp" in f]
  # --check reports the error as well
  assert build(repo, "--check").returncode == 1

def test_build_time(repo):
  # speed is measured, never asserted: printed for the log (the target is well under 2 s for every rule file)
  os.remove(os.path.join(repo, "rules", "symbolic.py"))
  t0 = time.perf_counter()
  r = build(repo)
  dt = time.perf_counter() - t0
  assert r.returncode == 0, r.stderr
  print(f"\n{r.stdout.strip()}; {dt * 1000:.0f} ms wall time including interpreter start")

def mtimes(root: str) -> dict[str, int]:
  rules = os.path.join(root, "rules")
  return {f: os.stat(os.path.join(rules, f)).st_mtime_ns for f in sorted(os.listdir(rules)) if f.endswith(".py")}

def compiled(r: subprocess.CompletedProcess) -> int:
  assert r.returncode == 0, r.stderr
  return int(r.stdout.split(" compiled")[0].rsplit(" ", 1)[1])

def test_unchanged_files_are_skipped(repo):
  # the copy has no stamp (rules/__pycache__ is not copied): the first build compiles every file and writes none
  n = len([f for f in os.listdir(os.path.join(repo, "rules")) if f.endswith(".rules")])
  before = mtimes(repo)
  assert compiled(build(repo)) == n
  assert mtimes(repo) == before
  # nothing changed: nothing compiled, nothing written; printed for the log, never asserted (target: under 0.3 s)
  t0 = time.perf_counter()
  r = build(repo)
  print(f"\nno change: {r.stdout.strip()}; {(time.perf_counter() - t0) * 1000:.0f} ms wall time including interpreter start")
  assert compiled(r) == 0 and mtimes(repo) == before
  # one .rules file edited: that one only
  with open(os.path.join(repo, "rules", "symbolic.rules"), "a") as f: f.write(EXTRA)
  t0 = time.perf_counter()
  r = build(repo)
  print(f"one file: {r.stdout.strip()}; {(time.perf_counter() - t0) * 1000:.0f} ms wall time including interpreter start")
  assert compiled(r) == 1 and "1 regenerated" in r.stdout
  after = mtimes(repo)
  assert {f for f in after if after[f] != before[f]} == {"symbolic.py"}
  assert compiled(build(repo)) == 0

def test_what_invalidates_the_skip(repo):
  n = len([f for f in os.listdir(os.path.join(repo, "rules")) if f.endswith(".rules")])
  assert compiled(build(repo)) == n
  # a generated module edited by hand (or checked out from another branch) is compiled again, and restored
  path = os.path.join(repo, "rules", "lower.py")
  text = open(path).read()
  with open(path, "a") as f: f.write("# edited\n")
  r = build(repo)
  assert compiled(r) == 1 and "1 regenerated" in r.stdout and open(path).read() == text
  # a deleted one too
  os.remove(path)
  assert compiled(build(repo)) == 1 and open(path).read() == text
  # the compiler changed: every file is compiled again (the output did not change, so nothing is written)
  with open(os.path.join(repo, "dslc", "emit.py"), "a") as f: f.write("\n# a comment\n")
  r = build(repo)
  assert compiled(r) == n and " 0 regenerated" in r.stdout
  # --check and --all always compile everything
  assert build(repo, "--check").returncode == 0 and compiled(build(repo, "--all")) == n

def test_a_module_older_than_its_rules_does_not_import(repo):
  # a failed build leaves the old module: importing it is an error that says to build (issue 23), cheaply (no dslc, no lark)
  path = os.path.join(repo, "rules", "symbolic.rules")
  text = open(path).read()
  with open(path, "w") as f: f.write(text + EXTRA + "(ADDD x 0) -> x\n")
  assert build(repo).returncode == 1
  def load() -> subprocess.CompletedProcess:
    # the check loads no dslc and no lark (nor anything else: rules/__init__.py imports only what runtime has loaded)
    code = "import sys, rules.symbolic; print('lark' in sys.modules, 'dslc' in sys.modules)"
    return subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, timeout=120)
  r = load()
  assert r.returncode == 1 and ("StaleModuleError: rules/symbolic.rules changed since rules/symbolic.py was built from it: run `python build.py`"
                                in r.stderr), r.stderr
  # fixed and rebuilt, every file (expand.rules reads rules.symbolic's names while it is still the old module): it imports
  with open(path, "w") as f: f.write(text + EXTRA)
  assert build(repo, "--all").returncode == 0
  r = load()
  assert r.returncode == 0 and r.stdout.split() == ["False", "False"], r.stderr
