"""The .rules language server (dslc/lsp.py): `python -m dslc lsp` driven by pygls' own client over stdio gives the compiler's
diagnostics as a document opens and changes, hover on a rule (id, RULESTATS statistics, generated code) and on a helper, and
go-to-definition for helpers, `let` patterns and rule sets. Skipped without pygls (pip install -e '.[tools]')."""
import asyncio, json, os, subprocess, sys
import pytest
from dslc import lsp as rules_lsp

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BROKEN = "ruleset t\n(ADDD x 0) -> x\n(ADD x 1) if z > 0 -> x\n"
GOOD = ("from rules.symbolic_helpers import fold_alu\nlet Zero = (CONST [0])\nruleset t\n(ADD x Zero) -> x\nu@(ALU (CONST)...) -> fold_alu(u)\n"
        "ruleset u = t\n")

# ---- the analysis, without a client ----

def test_diagnostics_are_the_compilers():
  ds = rules_lsp.diagnostics("x.rules", BROKEN)
  assert [(d.line, d.col, d.message) for d in ds] == [(2, 2, "unknown op or op group 'ADDD' (did you mean 'ADD'?)"),
                                                      (3, 14, "'z' is used in a guard but never bound")]
  assert rules_lsp.diagnostics("rules/symbolic.rules", open(os.path.join(ROOT, "rules/symbolic.rules")).read()) == []

def test_hover_and_definition_without_a_client(tmp_path):
  path = str(tmp_path / "g.rules")
  text = rules_lsp.hover_text(path, GOOD, 3, 2)
  assert "in ruleset `t`" in text and "(ADD x Zero) -> x" in text and "# rule r" in text and "# match:  (ADD x Zero)" in text and "return (r" in text
  assert rules_lsp.hover_text(path, GOOD, 4, GOOD.split("\n")[4].index("fold_alu") + 1).startswith("```python\nfold_alu(u")
  assert rules_lsp.hover_text(path, GOOD, 1, 3) is None  # a `let` line is no rule
  assert rules_lsp.definition(path, GOOD, 3, 8) == (path, 1, 4)  # Zero -> its let
  assert rules_lsp.definition(path, GOOD, 5, 12) == (path, 2, 8)  # t -> its ruleset line
  file, line, _ = rules_lsp.definition(path, GOOD, 4, GOOD.split("\n")[4].index("fold_alu") + 1)
  assert file.endswith("rules/symbolic_helpers.py") and open(file).read().split("\n")[line].startswith("def fold_alu(")

def test_a_multiline_rule_hovers_on_every_line():
  src = "ruleset t\n(IDIV x c@(CONST))\n  if c.arg > 0 and x.vmin >= 0\n  and x.vmax < c.arg\n  -> 0\n(MAX x y) -> x\n"
  lines = src.split("\n")
  first = next(i for i, x in enumerate(lines) if x.startswith("(IDIV"))
  for k in range(first, first + 4): assert "(IDIV x c@(CONST)) if c.arg > 0" in rules_lsp.hover_text("d.rules", src, k, 0), lines[k]
  assert "(MAX x y) -> x" in rules_lsp.hover_text("d.rules", src, first + 4, 0)

def test_rulestats_leaves_its_table_for_the_hover(tmp_path):
  stats = tmp_path / "stats.json"
  code = "from runtime import UOp\nx = UOp.variable('x', 0, 9)\nfor i in range(5): (x + 0 + i).simplify()\n"
  r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                     env={**os.environ, "RULESTATS": "1", "RULESTATS_FILE": str(stats)})
  assert r.returncode == 0 and "rules/symbolic.rules:42" in r.stdout, r.stderr
  data = json.loads(stats.read_text())
  e = next(e for e in data["rules"].values() if e["line"] == 42 and e["file"] == "rules/symbolic.rules")
  assert e["hits"] >= 5 and e["attempts"] >= e["hits"] and e["time_ns"] > 0
  src = open(os.path.join(ROOT, "rules/symbolic.rules")).read()
  text = rules_lsp.hover_text("rules/symbolic.rules", src, 41, 1, stats_path=str(stats))
  assert f"RULESTATS (last run): {e['attempts']} attempts, {e['hits']} hits" in text

# ---- over LSP, with pygls' client ----

pygls = pytest.importorskip("pygls", reason="the language server needs pygls (pip install -e '.[tools]')")
from lsprotocol import types as lsp  # noqa: E402
from pygls.lsp.client import BaseLanguageClient  # noqa: E402
from pygls.uris import from_fs_path  # noqa: E402

async def session(tmp_path, steps):
  client = BaseLanguageClient("test-client", "1")
  published: asyncio.Queue = asyncio.Queue()
  @client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
  def on_diagnostics(params): published.put_nowait(params)
  await client.start_io(sys.executable, "-m", "dslc", "lsp", cwd=ROOT, env={**os.environ, "RULESTATS_FILE": str(tmp_path / "none.json")})
  try:
    await asyncio.wait_for(client.initialize_async(lsp.InitializeParams(capabilities=lsp.ClientCapabilities(), root_uri=from_fs_path(ROOT))), 60)
    client.initialized(lsp.InitializedParams())
    await steps(client, published)
    await asyncio.wait_for(client.shutdown_async(None), 30)
    client.exit(None)
  finally:
    # a failed step leaves the server waiting for more: end it, so stop() does not wait for it
    proc = getattr(client, "_server", None)
    if proc is not None and proc.returncode is None:
      try: await asyncio.wait_for(proc.wait(), 5)
      except asyncio.TimeoutError: proc.kill()
    await asyncio.wait_for(client.stop(), 30)

def test_the_server_over_stdio(tmp_path):
  path = tmp_path / "doc.rules"
  path.write_text(BROKEN)
  uri = from_fs_path(str(path))
  doc = lsp.TextDocumentIdentifier(uri=uri)

  async def steps(client, published):
    item = lsp.TextDocumentItem(uri=uri, language_id="rules", version=1, text=BROKEN)
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(text_document=item))
    first = await asyncio.wait_for(published.get(), 60)
    assert first.uri == uri
    got = [(d.range.start.line, d.range.start.character, d.range.end.character, d.message, d.severity) for d in first.diagnostics]
    assert got == [(1, 1, 5, "unknown op or op group 'ADDD' (did you mean 'ADD'?)", lsp.DiagnosticSeverity.Error),
                   (2, 13, 14, "'z' is used in a guard but never bound", lsp.DiagnosticSeverity.Error)]
    # the user fixes the file: the diagnostics go away
    client.text_document_did_change(lsp.DidChangeTextDocumentParams(text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
                                                                     content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=GOOD)]))
    second = await asyncio.wait_for(published.get(), 60)
    assert list(second.diagnostics) == [], second
    at = lambda line, col: dict(text_document=doc, position=lsp.Position(line=line, character=col))  # noqa: E731
    hover = await asyncio.wait_for(client.text_document_hover_async(lsp.HoverParams(**at(3, 3))), 60)
    assert hover.contents.kind == lsp.MarkupKind.Markdown
    assert "**rule r" in hover.contents.value and "in ruleset `t`" in hover.contents.value and "RULESTATS: no statistics" in hover.contents.value
    assert "# match:  (ADD x Zero)" in hover.contents.value and "return (r" in hover.contents.value
    found = await asyncio.wait_for(client.text_document_definition_async(lsp.DefinitionParams(**at(3, 9))), 60)
    assert [(loc.uri, loc.range.start.line) for loc in found] == [(uri, 1)]
    col = GOOD.split("\n")[4].index("fold_alu")
    found = await asyncio.wait_for(client.text_document_definition_async(lsp.DefinitionParams(**at(4, col))), 60)
    assert found[0].uri.endswith("rules/symbolic_helpers.py")

  asyncio.run(session(tmp_path, steps))

def test_without_pygls_the_command_says_what_to_install(tmp_path):
  # a Python where pygls can't be imported: a sitecustomize that blocks it
  (tmp_path / "sitecustomize.py").write_text("import sys\nclass Block:\n  def find_spec(self, name, *a):\n"
                                             "    if name.split('.')[0] in ('pygls', 'lsprotocol'): raise ImportError('blocked: ' + name)\n"
                                             "sys.meta_path.insert(0, Block())\n")
  r = subprocess.run([sys.executable, "-m", "dslc", "lsp"], cwd=ROOT, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                     env={**os.environ, "PYTHONPATH": str(tmp_path)})
  assert r.returncode == 1 and "needs pygls" in r.stderr and "pip install -e '.[tools]'" in r.stderr
