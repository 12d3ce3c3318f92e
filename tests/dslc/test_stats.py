"""`python -m dslc stats`: per rule file, rule sets, rules, rule lines and the code lines of the helpers it imports."""
import json, os, textwrap
from dslc.stats import FileStats, all_stats, code_lines, rule_lines, table
from tests.dslc.test_cli import dslc

HELPERS = textwrap.dedent('''
  """A helper module."""
  import math

  LIMIT = {1: 2,
           3: 4}

  def used(x):
    """Docstring lines are not code.

    Nor is this one."""
    # a comment is not code
    y = _private(x)

    return y + LIMIT[1]

  def _private(x): return math.floor(x)

  def unused(x):
    return x
  ''')

def test_code_lines_follow_what_a_helper_uses(tmp_path):
  (tmp_path / "h.py").write_text(HELPERS)
  got = sorted(line for _, line in code_lines(str(tmp_path / "h.py"), ["used"], str(tmp_path)))
  text = HELPERS.split("\n")
  assert [text[i - 1].strip() for i in got] == ["LIMIT = {1: 2,", "3: 4}", "def used(x):", "y = _private(x)", "return y + LIMIT[1]",
                                                "def _private(x): return math.floor(x)"]
  assert code_lines(str(tmp_path / "h.py"), ["nothing"], str(tmp_path)) == set()

def test_rule_lines_count_rules_and_lets_only():
  src = ("# header comment\nfrom rules.symbolic_helpers import exact\nctx K: f(x) -> node\nruleset t(ctx: K)\n\nlet Pos(x) = x if x.vmin > 0\n"
         "# x + 0 -> x\n(ADD x 0) -> x\nfor op in ADD, MUL {\n  (op x:ints\n     0) -> x\n}\n(MUL x 2) -> (ADD y y)\n  where y = x\n")
  assert rule_lines(src) == 6

def test_real_files(tmp_path):
  import rules.symbolic, rules.gradient
  stats = {s.path: s for s in all_stats()}
  sym, grad = stats["rules/symbolic.rules"], stats["rules/gradient.rules"]
  assert (sym.rulesets, sym.rules) == (1, len(rules.symbolic.symbolic.rules)) and sym.rule_lines >= sym.rules
  assert grad.rules == len(rules.gradient.gradient.rules) and 0 < grad.helper_lines < 100
  assert stats["rules/decompositions.rules"].helper_lines == 0  # imports no helper
  out = table([FileStats("a.rules", 1, 2, 4, 10), FileStats("b.rules", 2, 3, 6, 0)]).split("\n")
  assert out[1].split() == ["a.rules", "1", "2", "4", "10", "2.50"] and out[-1].split() == ["total", "3", "5", "10", "10", "1.00"]

def test_stats_command():
  r = dslc("stats")
  assert r.returncode == 0, r.stderr
  lines = r.stdout.strip().split("\n")
  assert lines[0].split()[:3] == ["file", "rule", "sets"] and any(x.startswith("rules/symbolic.rules ") for x in lines)
  assert lines[-1].startswith("total ")
  r = dslc("stats", "rules/gradient.rules")
  assert r.returncode == 0 and len(r.stdout.strip().split("\n")) == 3
  r = dslc("stats", "rules/nope.rules")
  assert r.returncode == 1 and "no such file: rules/nope.rules" in r.stderr

def test_every_rule_file_needs_at_most_two_helper_lines_per_rule_line():
  # issue 20: ctx classes count as helper code (they are imported: a rule set's ctx type is a class imported from a helper
  # module, or a declared context naming the classes that implement it)
  over = [f"{s.path}: {s.helper_lines} helper lines for {s.rule_lines} rule lines ({s.ratio:.2f})" for s in all_stats()
          if s.ratio > ALLOWED_RATIO.get(s.path, (2,))[0]]
  assert not over, "\n".join(over)

# files over the limit, each with a cap it may not pass and why (each is a debt: issue 24 turns multi's helpers into rules)
ALLOWED_RATIO = {
  "rules/multi.rules": (3.2, "per-shard ops, copies, constants and the movement ops' axis bookkeeping are rules (7.1 -> 3.1); the layout "
                             "moves (gather, a piece, concat), the all-reduce's copies and a reshape's axis arithmetic stay helpers"),
}

def test_ctx_classes_are_counted():
  from rules import kernelize_helpers, rangeify_helpers
  stats = {s.path: s for s in all_stats()}
  ctx_lines = code_lines(kernelize_helpers.__file__, ["KernelContext", "Params"], ".")
  assert len(ctx_lines) > 20 and stats["rules/kernelize.rules"].helper_lines >= len(ctx_lines)
  assert stats["rules/lower.rules"].helper_lines >= len(code_lines(rangeify_helpers.__file__, ["CodegenContext"], ".")) > 8

def test_contexts_with_methods_name_their_classes():
  # a method of a rules file's ctx is code run for its rules: the declaration names the class (checked and counted)
  import glob
  from dslc.parse import parse_rules
  for path in sorted(glob.glob("rules/*.rules")):
    rf, _ = parse_rules(path)
    imported = {n for _, names, _ in rf.imports for n in names}
    for decl in rf.contexts.values():
      if any(m.kind == "method" for m in decl.members.values()):
        assert decl.impls or decl.name in imported, f"{path}: ctx {decl.name} declares methods but names no class implementing them"

def test_stats_and_coverage_count_the_same_rules():
  from dslc.coverage import rule_tables
  from dslc.stats import all_stats
  stats = {s.path: s.rules for s in all_stats()}
  assert {f: len(rs) for f, rs in rule_tables().items()} == stats
  assert stats["rules/vectorize.rules"] > 0  # a rule set with parameters: its rules live inside a function of the module

def test_the_language_server_finds_the_last_statistics_wherever_they_went(tmp_path, monkeypatch):
  from dslc import lsp
  from runtime import trace
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home"))
  monkeypatch.delenv("RULESTATS_FILE", raising=False)
  monkeypatch.setenv("CACHE_DIR", str(tmp_path / "elsewhere"))
  from runtime.rewrite import Rule
  r = Rule("r123456", "rules/x.rules", 3, "(ADD x 0) -> x", None)
  r.attempts, r.hits = 5, 2
  monkeypatch.setattr("runtime.rewrite.rule_stats", lambda: [r])
  trace.save_rule_stats()
  assert os.path.exists(tmp_path / "elsewhere" / "rulestats.json")
  # an editor starts the server without that CACHE_DIR: the pointer in the default cache folder leads to the table
  monkeypatch.delenv("CACHE_DIR")
  assert json.load(open(trace.rulestats_pointer()))["path"] == str(tmp_path / "elsewhere" / "rulestats.json")
  assert lsp.stats_for(lsp.load_stats(), "rules/x.rules", "r123456")["hits"] == 2
