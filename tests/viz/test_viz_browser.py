"""The VIZ page in a real browser (headless Chromium through chromedriver; skipped without Debian's chromium and
chromium-driver, which .ci/run installs when it can): pick the kernel of `Tensor([1,2,3,4]) + 3 + 4`, step through its
symbolic rewrite with the buttons and the keyboard, check each step's graph is drawn and its rule is the .rules line, and
save a screenshot of the step that folds 3 + 4 into 7 (a test artifact: TEST_ARTIFACTS, else a folder in /tmp)."""
import os, re
import pytest
import webdriver
from viz_helpers import ROOT

pytestmark = pytest.mark.skipif(not webdriver.available(), reason="needs chromium and chromedriver (apt-get install chromium chromium-driver)")

def source_line(file: str, line: int) -> str:
  with open(os.path.join(ROOT, file)) as f: return f.read().split("\n")[line - 1]

def norm(s: str) -> str: return " ".join(s.split())

@pytest.fixture(scope="module")
def browser():
  with webdriver.Browser() as b: yield b

def loaded(b, r: int, s: int) -> None: b.wait(f"return document.body.dataset.loaded === '{r}:{s}'")

def test_step_through_the_rewrites_of_a_kernel(browser, served):
  b = browser
  b.get(served.url + "/")
  b.wait("return document.body.dataset.loaded")
  assert b.text("#title").startswith("schedule / ")
  # open the kernel's group and pick its symbolic rewrite
  groups = b.run("return [...document.querySelectorAll('.group')].map(e => e.textContent)")
  assert groups[0].startswith("schedule") and any(g.startswith("E_4n") for g in groups)  # E_4 and a digest of its AST
  k = next(i for i, g in enumerate(groups) if g.startswith("E_4n"))
  b.click(f".group[data-group='{k}']")
  r = b.run("return +[...document.querySelectorAll('.rw')].find(e => e.offsetParent && e.textContent.startsWith('symbolic ')).dataset.r")
  b.click(f".rw[data-r='{r}']")
  loaded(b, r, 1)
  assert re.fullmatch(r"E_4n[0-9a-f]{4} / symbolic", b.text("#title"))
  n = int(b.text("#stepinfo").split("/")[1].split()[0])
  b.click("#first")
  loaded(b, r, 0)
  assert b.text("#rule-text") == "(the input graph)"
  shot = None
  for s in range(1, n + 1):
    b.click("#next") if s % 2 else b.run("document.dispatchEvent(new KeyboardEvent('keydown', {key: 'ArrowRight'}))")
    loaded(b, r, s)
    # the graph is drawn: one node element per node, the changed one highlighted
    drawn = b.run("return document.querySelectorAll('#graph svg .n').length")
    assert drawn > 0 and f"· {drawn} nodes" in b.text("#stepinfo") and b.run("return document.querySelectorAll('#graph svg .n.changed').length") == 1
    # the rule shown is the line the link points at
    file, line = b.text("#rule-link").rsplit(":", 1)
    assert norm(source_line(file, int(line))) in norm(b.text("#rule-text"))
    assert b.run("return document.getElementById('rule-link').getAttribute('href')") == f"/source?file={file.replace('/', '%2F')}#L{line}"
    if "CONST 7" in b.text("#change"):
      shot = b.screenshot(os.path.join(webdriver.artifacts_dir(), "viz_tensor_add_3_4.png"))
      folded = (file, int(line), b.text("#rule-text"))
  assert shot is not None, "no step folded 3 + 4 into 7"
  with open(shot, "rb") as f: png = f.read()
  assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000, "the screenshot is empty"
  # the rule's link opens its file at that line
  b.get(f"{served.url}/source?file={folded[0]}#L{folded[1]}")
  row = b.run("return document.querySelector('tr:target').textContent")
  assert norm(folded[2]).startswith(norm(row.split(maxsplit=1)[1]))
