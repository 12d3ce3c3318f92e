"""The .rules language server (`python -m dslc lsp`, over stdio; needs pygls, the `tools` extra): the compiler's diagnostics
as you type, hover on a rule (its id, rule set, statistics of the last RULESTATS run, generated code), and go-to-definition
for imported helpers, `let` patterns and rule sets. The analysis functions below take text and positions, not pygls types,
so they are tested without a client too; `server()` wires them to LSP.

The server runs no code from the workspace (docs/security.md): helpers are found by reading the source of this installation's
rules/ and runtime/ modules (the only ones a .rules file may import), never by importing what a document names; the
compiler's checks import those same installed modules, as the build does, with the working folder taken off sys.path.
"""
from __future__ import annotations
import ast, json, os, re, sys, threading
from dataclasses import dataclass
from typing import BinaryIO
from dslc.diagnostics import Diagnostic, DslError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # this installation: its rules/ and runtime/ are the helpers
HELPER_PACKAGES = ("rules", "runtime")
MAX_MESSAGE = 64 * 2**20  # bytes: a message longer than this is no edit of a .rules file (read and dropped, never held)

WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

def shown_path(path: str) -> str:
  """A document's path as the compiler names files (relative to the working folder when inside it: rules/x.rules)."""
  rel = os.path.relpath(os.path.abspath(path)).replace(os.sep, "/")
  return path if rel.startswith("..") else rel

def diagnostics(path: str, source: str) -> list[Diagnostic]:
  """Every problem the compiler finds in `source` (the checks, then the generated code), as `python -m dslc check` reports them."""
  from dslc.compile import compile_rules
  try: compile_rules(path, shown_path(path), source)
  except DslError as e: return e.diagnostics
  return []

def word_at(source: str, line: int, col: int) -> tuple[str, int, int] | None:
  """The identifier at 0-based (line, col), with its start and end columns."""
  lines = source.split("\n")
  if not 0 <= line < len(lines): return None
  for m in WORD.finditer(lines[line]):
    if m.start() <= col <= m.end(): return m.group(), m.start(), m.end()
  return None

@dataclass
class RuleAt:
  rule: object    # dslc.ir.Rule
  ruleset: str
  first: int      # 1-based lines of the item
  last: int

def rules_by_line(path: str, source: str) -> list[RuleAt]:
  """Each rule of the document with the lines its item spans (what parses of it, even when the file has errors)."""
  from dslc.parse import parse_rules
  from dslc.split import split_items
  rf, _ = parse_rules(path, source, shown_path(path))
  if rf is None: return []
  # an item's text keeps the lines before it blank (so positions are the file's): its last line is its line count
  last = {it.line: it.text.rstrip("\n").count("\n") + 1 for it in split_items(source)}
  return [RuleAt(r, rs.name, r.span.line, max(r.span.line, last.get(r.span.line, r.span.line))) for rs in rf.rulesets for r in rs.rules]

def rule_at(path: str, source: str, line: int) -> RuleAt | None:
  """The rule whose item covers 1-based `line`."""
  best = None
  for r in rules_by_line(path, source):
    if r.first <= line <= r.last and (best is None or r.first > best.first): best = r
  return best

def load_stats(path: str | None = None) -> dict:
  """The last RULESTATS table: `path`, else the newest of the places a run may have left one (runtime/trace.py), wherever
  CACHE_DIR pointed for that run."""
  from runtime.trace import rulestats_files
  for p in [path] if path else rulestats_files():
    try:
      with open(p) as f: return json.load(f)
    except (OSError, ValueError): continue
  return {}

def stats_for(stats: dict, file: str, rid: str) -> dict | None:
  for key, e in stats.get("rules", {}).items():
    if key.endswith(f":{rid}") and os.path.basename(e.get("file", "")) == os.path.basename(file): return e
  return None

def hover_text(path: str, source: str, line: int, col: int, stats_path: str | None = None) -> str | None:
  """Markdown for a hover at 0-based (line, col): a rule's id, set, statistics and generated code, or a helper's signature."""
  w = word_at(source, line, col)
  if w is not None and (found := _helper(source, w[0])) is not None:
    _, node = found
    if isinstance(node, ast.ClassDef): sig = node.name
    else: sig = f"{node.name}({ast.unparse(node.args)})" + (f" -> {ast.unparse(node.returns)}" if node.returns is not None else "")
    return f"```python\n{sig}\n```\n{ast.get_docstring(node) or ''}".rstrip()
  at = rule_at(path, source, line + 1)
  if at is None: return None
  from dslc.emit import rule_code
  r = at.rule
  parts = [f"**rule {r.id}** in ruleset `{at.ruleset}`, {r.span.file}:{r.span.line}", f"```rules\n{r.text}\n```"]
  s = stats_for(load_stats(stats_path), r.span.file, r.id)
  if s is None: parts.append("RULESTATS: no statistics for this rule yet (run `RULESTATS=1 python your_script.py`)")
  else:
    rate = f", {s['hits'] / s['attempts']:.0%} of attempts" if s.get("attempts") else ""
    parts.append(f"RULESTATS (last run): {s.get('attempts', 0)} attempts, {s.get('hits', 0)} hits{rate}, {s.get('time_ns', 0) / 1e6:.3f} ms")
  try: code = rule_code(r)
  except Exception as e: code = f"# no code: {type(e).__name__}: {e}"
  parts.append(f"generated code:\n```python\n{code.rstrip()}\n```")
  return "\n\n".join(parts)

def _imports(source: str) -> dict[str, str]:
  """Imported name -> module, from the document's `from M import a, b` lines (continued lines included), for the modules
  a .rules file may import: rules.* and runtime.* (the parser refuses any other)."""
  out: dict[str, str] = {}
  for m in re.finditer(r"^from\s+([\w.]+)\s+import\s+((?:[^\n]*,[ \t]*\n)*[^\n]*)", source, re.M):
    if m.group(1).split(".")[0] not in HELPER_PACKAGES: continue
    for name in re.split(r"[,\s]+", m.group(2)):
      if name: out[name] = m.group(1)
  return out

def module_file(module: str) -> str | None:
  """The source file of the helper module `module` (rules.x, runtime.x) in this installation, by path (nothing imported)."""
  parts = module.split(".")
  if parts[0] not in HELPER_PACKAGES or not all(p.isidentifier() for p in parts): return None
  path = os.path.join(ROOT, *parts) + ".py"
  return path if os.path.isfile(path) else None

def _top_level(file: str, name: str) -> ast.AST | None:
  """The top-level def or class `name` of a Python file, read with ast (None when it has none)."""
  try:
    with open(file, encoding="utf-8") as f: tree = ast.parse(f.read(), file)
  except (OSError, SyntaxError, ValueError): return None
  for node in tree.body:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name: return node
  return None

def _helper(source: str, name: str) -> tuple[str, ast.AST] | None:
  """(file, its def or class) of a helper function or class the document imports."""
  module = _imports(source).get(name)
  file = module_file(module) if module is not None else None
  node = _top_level(file, name) if file is not None else None
  return None if node is None else (file, node)  # type: ignore[return-value]

def definition(path: str, source: str, line: int, col: int) -> tuple[str, int, int] | None:
  """Where the name at 0-based (line, col) is defined: (file path, 0-based line, column), or None."""
  w = word_at(source, line, col)
  if w is None: return None
  name = w[0]
  lines = source.split("\n")
  # a `let` pattern or a rule set of this document
  for i, text in enumerate(lines):
    m = re.match(rf"(let|ruleset)\s+({name})\b", text)
    if m and i != line: return os.path.abspath(path), i, m.start(2)
  module = _imports(source).get(name)
  if module is None or (file := module_file(module)) is None: return None
  # a rule set imported from a generated module: its `ruleset` line in the .rules file beside it
  if os.path.exists(rules := file[:-3] + ".rules"):
    with open(rules, encoding="utf-8") as f:
      for i, text in enumerate(f.read().split("\n")):
        if (m := re.match(rf"ruleset\s+({name})\b", text)): return rules, i, m.start(1)
  if (node := _top_level(file, name)) is None: return None
  first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
  return file, first - 1, 0

# ---- the stream from the client ----

DROPPED = b'{"jsonrpc": "2.0", "method": "$/rulegrad/dropped", "params": {}}'  # what pygls reads in place of a message dropped here
_NEGATIVE = re.compile(rb'"(?:line|character)"\s*:\s*-')

def _negative_position(node, depth: int = 0) -> str | None:
  """The first `line` or `character` below 0 in a message's params, as `position.character = -1`, or None."""
  if depth > 32: return None
  if isinstance(node, dict):
    for k, v in node.items():
      if k in ("line", "character") and type(v) is int and v < 0: return f"{k} = {v}"
      if (inner := _negative_position(v, depth + 1)) is not None: return f"{k}.{inner}"
  elif isinstance(node, list):
    for v in node:
      if (inner := _negative_position(v, depth + 1)) is not None: return inner
  return None

class GuardedInput:
  """The client's stream as pygls reads it (readline for headers, read(n) for a body), with two guards pygls lacks:
  - a body over MAX_MESSAGE bytes is read in pieces and dropped (pygls would allocate it whole, and a MemoryError ends the
    server), said once on stderr;
  - a request with a negative line or character (LSP positions are unsigned) is answered here with an InvalidParams error
    (pygls can't read it and sends no answer, so the client would wait for ever).
  pygls reads a notification it ignores in place of either."""
  def __init__(self, raw: BinaryIO, out: BinaryIO):
    self.raw, self.out, self.lock = raw, out, threading.Lock()

  def readline(self) -> bytes: return self.raw.readline(65536)  # a header line; a longer one is no header pygls knows

  def read(self, n: int) -> bytes:
    if n > MAX_MESSAGE:
      left = n
      while left > 0 and (chunk := self.raw.read(min(left, 1 << 20))): left -= len(chunk)
      print(f"dslc lsp: a message of {n} bytes is over the limit of {MAX_MESSAGE}: dropped", file=sys.stderr, flush=True)
      return DROPPED
    body = self.raw.read(n)
    if _NEGATIVE.search(body):
      try: msg = json.loads(body)
      except (ValueError, RecursionError): return body  # pygls reports what it can't parse
      if isinstance(msg, dict) and "id" in msg and "method" in msg and (bad := _negative_position(msg.get("params"))) is not None:
        self.reply({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32602, "message": f"invalid params: {bad} (positions are 0 or more)"}})
        return DROPPED
    return body

  def reply(self, message: dict) -> None:
    body = json.dumps(message).encode()
    with self.lock:
      self.out.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
      self.out.flush()

# ---- the server ----

def server():
  """A pygls LanguageServer with the features above (raises ImportError without pygls)."""
  from lsprotocol import types as lsp
  from pygls.lsp.server import LanguageServer
  from pygls.uris import from_fs_path
  ls = LanguageServer("rulegrad-rules", "0.1.0", text_document_sync_kind=lsp.TextDocumentSyncKind.Full)

  def publish(uri: str) -> None:
    doc = ls.workspace.get_text_document(uri)
    lines = doc.source.split("\n")
    out = []
    for d in diagnostics(doc.path, doc.source):
      line = max(d.line - 1, 0)
      text = lines[line] if line < len(lines) else ""
      w = word_at(doc.source, line, d.col - 1)
      end = w[2] if w is not None and w[1] == d.col - 1 else min(d.col, len(text))
      span = lsp.Range(start=lsp.Position(line=line, character=d.col - 1), end=lsp.Position(line=line, character=max(end, d.col)))
      out.append(lsp.Diagnostic(range=span, message=d.message, source="dslc",
                                severity=lsp.DiagnosticSeverity.Error if d.severity == "error" else lsp.DiagnosticSeverity.Warning))
    ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, version=doc.version, diagnostics=out))

  @ls.feature("$/rulegrad/dropped")
  def dropped(params) -> None: pass  # GuardedInput's stand-in for a message it answered or dropped

  @ls.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
  def did_open(params: lsp.DidOpenTextDocumentParams) -> None: publish(params.text_document.uri)

  @ls.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
  def did_change(params: lsp.DidChangeTextDocumentParams) -> None: publish(params.text_document.uri)

  @ls.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
  def did_save(params: lsp.DidSaveTextDocumentParams) -> None: publish(params.text_document.uri)

  @ls.feature(lsp.TEXT_DOCUMENT_HOVER)
  def hover(params: lsp.HoverParams) -> lsp.Hover | None:
    doc = ls.workspace.get_text_document(params.text_document.uri)
    text = hover_text(doc.path, doc.source, params.position.line, params.position.character)
    return None if text is None else lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=text))

  @ls.feature(lsp.TEXT_DOCUMENT_DEFINITION)
  def goto(params: lsp.DefinitionParams) -> list[lsp.Location] | None:
    doc = ls.workspace.get_text_document(params.text_document.uri)
    found = definition(doc.path, doc.source, params.position.line, params.position.character)
    if found is None: return None
    file, line, col = found
    pos = lsp.Position(line=line, character=col)
    return [lsp.Location(uri=from_fs_path(file) or file, range=lsp.Range(start=pos, end=pos))]

  return ls

def main() -> int:
  # `python -m` puts the working folder (the editor's workspace) first on sys.path: take it off, so the compiler's checks
  # import rules.* and runtime.* from this installation, never a workspace's own rules/ or runtime/ package
  here = os.path.realpath(os.getcwd())
  sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != here or here == os.path.realpath(ROOT)]
  try: ls = server()
  except ImportError as e:
    print(f"python -m dslc lsp needs pygls ({e}): pip install -e '.[tools]'", file=sys.stderr)
    return 1
  ls.start_io(GuardedInput(sys.stdin.buffer, sys.stdout.buffer), sys.stdout.buffer)  # type: ignore[arg-type]
  return 0
