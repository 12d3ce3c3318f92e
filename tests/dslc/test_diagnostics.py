"""dslc diagnostics, data-driven: each tests/dslc/fail/*.rules opens with `# error: LINE:COL: message` lines, one per error it must produce.

Every file must give exactly those errors (file, line, column, message substring), each printed with its source line and a
caret under the column. The acceptance case is also run through `python -m dslc check` in a subprocess.
"""
import glob, os, re, subprocess, sys
import pytest
from dslc.compile import compile_rules
from dslc.diagnostics import Diagnostic, DslError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FAIL = os.path.join(ROOT, "tests", "dslc", "fail")
FILES = sorted(glob.glob(os.path.join(FAIL, "*.rules")))
EXPECT = re.compile(r"# error: (\d+):(\d+): (.*)")

def expected(path: str) -> list[tuple[int, int, str]]:
  with open(path, "rb") as f: head = f.read().decode("utf-8", "replace").split("\n")
  out = []
  for line in head:
    m = EXPECT.fullmatch(line.rstrip())
    if m is None: break
    out.append((int(m[1]), int(m[2]), m[3]))
  return out

def source_lines(path: str) -> list[str]:
  # the lines as a diagnostic shows them: undecodable bytes replaced, tabs as spaces, NUL as a visible symbol
  with open(path, "rb") as f: text = f.read().decode("utf-8", "replace")
  return [x.replace("\t", " ").replace("\x00", "\u2400") for x in text.split("\n")]

def test_there_are_many_cases():
  assert len(FILES) >= 40
  for path in FILES: assert expected(path), f"{path}: the first line must be '# error: LINE:COL: message'"

@pytest.mark.parametrize("path", FILES, ids=[os.path.basename(p)[:-6] for p in FILES])
def test_fail_file(path):
  rel = os.path.relpath(path, ROOT)
  want = expected(path)
  with pytest.raises(DslError) as info: compile_rules(path, rel)
  got = info.value.diagnostics
  assert len(got) == len(want), "\n".join(d.format(None) for d in got)
  lines = source_lines(path)
  blocks = str(info.value).split("\n")
  # str(DslError) is every diagnostic as three lines: `file:line:col: error: message`, the source line, the caret
  assert len(blocks) == 3 * len(got), str(info.value)
  for i, (d, (line, col, message)) in enumerate(zip(got, sorted(want))):
    assert isinstance(d, Diagnostic)
    assert (d.file, d.line, d.col) == (rel, line, col), f"{d.file}:{d.line}:{d.col}: {d.message}"
    assert message in d.message, d.message
    head, text, caret = blocks[3 * i: 3 * i + 3]
    assert head == f"{rel}:{line}:{col}: error: {d.message}"
    assert text == lines[line - 1]
    assert caret == " " * (col - 1) + "^", f"caret at column {len(caret)}, expected {col}"
    assert 1 <= col <= len(text) + 1

# ---- the acceptance case through the command line ----

def run_check(*files: str) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, "-m", "dslc", "check", *files], cwd=ROOT, capture_output=True, text=True, timeout=60)

def test_cli_check_reports_all_three():
  r = run_check("tests/dslc/fail/acceptance.rules")
  assert r.returncode == 1
  assert r.stdout == ""
  out = r.stderr.split("\n")
  lines = source_lines(os.path.join(FAIL, "acceptance.rules"))
  for line, col, message in expected(os.path.join(FAIL, "acceptance.rules")):
    i = next(i for i, x in enumerate(out) if x.startswith(f"tests/dslc/fail/acceptance.rules:{line}:{col}: error: "))
    assert message in out[i]
    assert out[i + 1] == lines[line - 1]
    assert out[i + 2] == " " * (col - 1) + "^"
  assert out[-2] == "3 errors"

def test_cli_check_clean_file():
  r = run_check("rules/symbolic.rules", "tests/dslc/golden/basic.rules")
  assert (r.returncode, r.stdout, r.stderr) == (0, "", "")

def test_cli_check_counts_errors_over_files():
  r = run_check("tests/dslc/fail/unknown_op.rules", "tests/dslc/fail/acceptance.rules")
  assert r.returncode == 1 and r.stderr.rstrip().endswith("4 errors")

def test_missing_file():
  with pytest.raises(DslError) as info: compile_rules(os.path.join(FAIL, "no_such_file.rules"), "no_such_file.rules")
  (d,) = info.value.diagnostics
  assert (d.line, d.col) == (1, 1) and "can't read the file" in d.message

# ---- diagnostics of text given as a string ----

def diags(text: str) -> list[Diagnostic]:
  with pytest.raises(DslError) as info: compile_rules("t.rules", source=text)
  return info.value.diagnostics

def test_errors_in_every_item_are_reported_together():
  # one bad item never hides the next: a parse error, a check error and a bracket error in one file
  text = "ruleset t\n(ADD x $) -> x\n(NEG x) -> (ADD x)\n(MUL x (NEG y) -> x\n(SUB x 0) -> w\n"
  assert [(d.line, d.col) for d in diags(text)] == [(2, 8), (3, 12), (4, 1), (5, 14)]

def test_lone_surrogate_text():
  (d,) = diags("ruleset t\n(ADD \udcff 1) -> x\n")
  assert (d.line, d.col) == (2, 6) and "not valid Unicode" in d.message
  assert str(DslError([d])).split("\n")[2] == "     ^"

def test_deep_let_chain_is_a_diagnostic():
  # named patterns nest into each other: depth is checked on the whole pattern, not only on brackets
  lets = "".join(f"let A{i} = " + "(NEG " * 30 + (f"A{i - 1}" if i else "x") + ")" * 30 + "\n" for i in range(4))
  ds = diags(lets + "(ADD A3 y) -> y\n")
  assert ds and all("nests more than" in d.message for d in ds)

def test_special_float_literals_compile():
  # inf and nan are numbers (the generated module defines them); nan is only refused where it is compared with ==
  code = compile_rules("t.rules", source="ruleset t\n(ADD x inf) -> x\n(ADD x -inf) -> inf\n(ADD [(1, inf)] x 0) -> -inf\n(MUL x 0) -> nan\n")
  assert "inf" in code

def test_a_line_that_needs_more_goes_on():
  # `->`, `and`, an operator at the end of a line: the next line continues the item (it used to be cut there, with an
  # error on each half); a line that starts another item still ends it, with the error on the incomplete line
  for text in ("ruleset t\n(ADD x y) if x.vmin >= 0 ->\n  y\n", "ruleset t\n(ADD x y)\n  if x.vmin >= 0 and\n  not y.vmin\n  -> y\n",
               "ruleset t\n(ADD x y) ->\n(MUL x 2)\n", "ruleset a\n(ADD x 0) -> x\nruleset b = a +\n  a\n",
               "ruleset t\n(ADD x 0) -> x  # a comment that ends in ->\n(MUL x 1) -> x\n"):
    compile_rules("t.rules", source=text)
  (d,) = diags("ruleset t\n(ADD x y) ->\nruleset u\n(MUL x 1) -> x\n")
  assert (d.line, d.col) == (2, 13) and "unexpected end of the rule" in d.message
