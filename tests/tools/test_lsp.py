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

# ---- hardening (issue 22 items 2 and 14) ----

EVIL = "import os\nopen(os.environ['MARKER'], 'w').close()\nprint('junk on stdout breaks the LSP framing')\ndef f(x): return x\n"

def test_hover_and_definition_never_import_workspace_modules(tmp_path, monkeypatch):
  """A hover or go-to-definition on a helper ran importlib.import_module on the module the document names: a workspace's
  evil.py ran as the user (and its prints killed the session)."""
  marker = tmp_path / "ran"
  monkeypatch.setenv("MARKER", str(marker))
  (tmp_path / "evil.py").write_text(EVIL)
  monkeypatch.syspath_prepend(str(tmp_path))  # as `python -m dslc lsp` started in that workspace has it
  monkeypatch.chdir(tmp_path)
  src = "from evil import f\nruleset t\nu@(ADD x 0) -> f(u)\n"
  col = src.split("\n")[2].index("f(u)")
  assert not rules_lsp.hover_text("t.rules", src, 2, col).startswith("```python\nf(")  # the rule's hover, no helper's
  assert rules_lsp.definition("t.rules", src, 2, col) is None
  assert rules_lsp.hover_text("t.rules", src, 0, 8) is None
  assert not marker.exists()
  # the installation's helpers are still found, by reading their source
  assert rules_lsp.module_file("rules.symbolic_helpers").endswith(os.path.join("rules", "symbolic_helpers.py"))
  assert rules_lsp.module_file("evil") is None and rules_lsp.module_file("rules.x.__init__") is None

def raw_server(cwd, **env):
  import resource
  def limit():  # a server that tried to hold a 100 GB message dies of MemoryError at once
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
  return subprocess.Popen([sys.executable, "-m", "dslc", "lsp"], cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env={**os.environ, "PYTHONPATH": ROOT, **env}, preexec_fn=limit)

def frame(msg: dict) -> bytes:
  body = json.dumps(msg).encode()
  return b"Content-Length: %d\r\n\r\n" % len(body) + body

def read_message(stream) -> dict:
  length = None
  while (line := stream.readline()) not in (b"\r\n", b""):
    if line.lower().startswith(b"content-length:"): length = int(line.split(b":")[1])
  assert length is not None, "the server closed the stream"
  return json.loads(stream.read(length))

def answer_to(proc, msg_id) -> dict:
  while (m := read_message(proc.stdout)).get("id") != msg_id or "method" in m: pass
  return m

def start(proc, text: str, uri: str = "file:///w/t.rules") -> None:
  proc.stdin.write(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}))
  proc.stdin.flush()
  answer_to(proc, 1)
  proc.stdin.write(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
  open_doc(proc, text, uri)

def open_doc(proc, text: str, uri: str) -> None:
  proc.stdin.write(frame({"jsonrpc": "2.0", "method": "textDocument/didOpen",
                          "params": {"textDocument": {"uri": uri, "languageId": "rules", "version": 1, "text": text}}}))
  proc.stdin.flush()

def hover(proc, msg_id: int, line: int, character: int, uri: str = "file:///w/t.rules") -> dict:
  proc.stdin.write(frame({"jsonrpc": "2.0", "id": msg_id, "method": "textDocument/hover",
                          "params": {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}}))
  proc.stdin.flush()
  return answer_to(proc, msg_id)

def test_the_server_imports_nothing_from_its_workspace(tmp_path):
  """Started in a workspace (editors do), the compiler's import check found rules.* there first: a workspace rules/
  package ran. The server takes the working folder off sys.path: rules.* are this installation's."""
  pytest.importorskip("pygls", reason="the language server needs pygls (pip install -e '.[tools]')")
  marker = tmp_path / "ran"
  (tmp_path / "rules").mkdir()
  (tmp_path / "rules" / "__init__.py").write_text(EVIL)
  (tmp_path / "rules" / "evil.py").write_text(EVIL)
  (tmp_path / "evil.py").write_text(EVIL)
  proc = raw_server(tmp_path, MARKER=str(marker))  # this tree on PYTHONPATH, after the workspace (cwd) that python -m puts first
  try:
    for i, module in enumerate(("evil", "rules.evil")):
      src = f"from {module} import f\nruleset t\nu@(ADD x 0) -> f(u)\n"
      uri = f"file://{tmp_path}/t{i}.rules"
      start(proc, src, uri) if i == 0 else open_doc(proc, src, uri)
      assert "rule r" in hover(proc, 10 * i + 2, 2, 1, uri)["result"]["contents"]["value"]
      assert not hover(proc, 10 * i + 3, 2, src.split("\n")[2].index("f(u)"), uri)["result"]["contents"]["value"].startswith("```python\nf(")
      proc.stdin.write(frame({"jsonrpc": "2.0", "id": 10 * i + 4, "method": "textDocument/definition",
                              "params": {"textDocument": {"uri": uri}, "position": {"line": 2, "character": src.split("\n")[2].index("f(u)")}}}))
      proc.stdin.flush()
      assert answer_to(proc, 10 * i + 4)["result"] is None
  finally:
    proc.stdin.close()
    proc.wait(timeout=60)
  assert not marker.exists(), proc.stderr.read().decode()[-2000:]

def test_a_huge_content_length_is_dropped_not_allocated(tmp_path):
  """`Content-Length: 99999999999` made the server exit with MemoryError."""
  pytest.importorskip("pygls", reason="the language server needs pygls (pip install -e '.[tools]')")
  proc = raw_server(ROOT)
  start(proc, "ruleset t\n(ADD x 0) -> x\n")
  assert "result" in hover(proc, 2, 1, 2)
  proc.stdin.write(b"Content-Length: 99999999999\r\n\r\n{}")
  proc.stdin.close()
  assert proc.wait(timeout=60) == 0
  err = proc.stderr.read().decode()
  assert "a message of 99999999999 bytes is over the limit" in err and "MemoryError" not in err

def test_a_negative_position_gets_an_error_answer(tmp_path):
  """A hover with a negative character got no answer at all (pygls could not read it): the client waited for ever."""
  pytest.importorskip("pygls", reason="the language server needs pygls (pip install -e '.[tools]')")
  proc = raw_server(ROOT)
  try:
    start(proc, "ruleset t\n(ADD x 0) -> x\n")
    bad = hover(proc, 2, 1, -1)
    assert bad["error"]["code"] == -32602 and "position.character = -1" in bad["error"]["message"]
    assert hover(proc, 3, -5, 0)["error"]["code"] == -32602
    assert "rule r" in hover(proc, 4, 1, 2)["result"]["contents"]["value"]  # and it goes on answering
  finally:
    proc.stdin.close()
    proc.wait(timeout=60)
