"""Editor support for .rules: the Pygments lexer (dslc/lexer.py, the `rules` entry point) and the TextMate grammar
(editors/vscode) give every character of every rules/*.rules file and of docs/rules.md's examples a token class; no
error tokens, nothing left as plain text."""
import glob, json, os, re, subprocess, sys
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RULE_FILES = sorted(glob.glob(os.path.join(ROOT, "rules", "*.rules")))
GRAMMAR = os.path.join(ROOT, "editors", "vscode", "syntaxes", "rules.tmLanguage.json")

def doc_blocks() -> list[str]:
  text = open(os.path.join(ROOT, "docs", "rules.md")).read()
  return [b.split("```", 1)[0] for b in text.split("```rules\n")[1:]]

def samples() -> list[tuple[str, str]]:
  return [(os.path.relpath(f, ROOT), open(f).read()) for f in RULE_FILES] + [(f"docs/rules.md block {i}", b) for i, b in enumerate(doc_blocks())]

# ---- Pygments ----

pygments = pytest.importorskip("pygments", reason="the lexer needs Pygments (pip install -e '.[tools]')")
from pygments.token import Error, Text, Token  # noqa: E402
from dslc.lexer import RulesLexer  # noqa: E402

@pytest.mark.parametrize("name,source", samples(), ids=[n for n, _ in samples()])
def test_the_lexer_classifies_every_character(name, source):
  toks = list(RulesLexer().get_tokens(source))
  assert "".join(v for _, v in toks).rstrip("\n") == source.rstrip("\n")
  assert not [(t, v) for t, v in toks if t in Error], "error tokens"
  assert not [(t, v) for t, v in toks if t is Text and v.strip()], "text left unclassified"

def test_the_rule_files_use_every_main_token_class():
  seen: set = set()
  for f in RULE_FILES: seen |= {t for t, _ in RulesLexer().get_tokens(open(f).read())}
  wanted = {Token.Comment.Single, Token.Keyword, Token.Keyword.Declaration, Token.Keyword.Namespace, Token.Keyword.Type, Token.Keyword.Constant,
            Token.Name.Builtin, Token.Name.Builtin.Pseudo, Token.Name.Class, Token.Name.Namespace, Token.Name.Variable, Token.Name.Variable.Magic,
            Token.Name.Function, Token.Name.Attribute, Token.Name.Constant, Token.Operator, Token.Operator.Word, Token.Punctuation,
            Token.Literal.Number.Integer, Token.Literal.String.Doc}
  assert wanted <= seen, wanted - seen

def test_specific_tokens():
  toks = [(t, v) for t, v in RulesLexer().get_tokens("u@(CAST:float32 c@(CONST [2.5])) if c.arg > 0x10 -> {float(c.arg)}\n") if v.strip()]
  assert toks[:4] == [(Token.Name.Variable, "u"), (Token.Operator, "@"), (Token.Punctuation, "("), (Token.Name.Builtin, "CAST")]
  assert (Token.Keyword.Type, "float32") in toks and (Token.Literal.Number.Float, "2.5") in toks and (Token.Literal.Number.Hex, "0x10") in toks
  assert (Token.Name.Builtin, "float") in toks  # inside {...}: Python's own lexer

def test_the_entry_point_makes_pygmentize_highlight_rules_files():
  from pygments.lexers import get_lexer_by_name, get_lexer_for_filename
  assert isinstance(get_lexer_by_name("rules"), RulesLexer) and isinstance(get_lexer_for_filename("x.rules"), RulesLexer)
  r = subprocess.run([sys.executable, "-m", "pygments", "-f", "html", RULE_FILES[0]], capture_output=True, text=True, timeout=120)
  assert r.returncode == 0 and '<span class="c1">' in r.stdout and '<span class="err">' not in r.stdout

# ---- TextMate (a small interpreter of the grammar's match and begin/end rules, enough to check coverage) ----

class TextMate:
  def __init__(self, path: str):
    self.g = json.load(open(path))
    self.cache: dict = {}

  def flat(self, patterns: list) -> list:
    out = []
    for p in patterns:
      inc = p.get("include")
      if inc is None: out.append(p)
      elif inc.startswith("#"):
        rule = self.g["repository"][inc[1:]]
        out += [rule] if "match" in rule or "begin" in rule else self.flat(rule["patterns"])  # a rule, or a group of rules
      # another language (source.python): its text is covered by the embedding rule's contentName
    return out

  def scopes(self, source: str) -> list[list[str | None]]:
    """Per line, the scope given to each character (None: only the file's own scope)."""
    stack: list[dict] = []  # open begin/end rules
    out = []
    for line in source.split("\n"):
      cover: list[str | None] = [None] * len(line)
      pos = 0
      while pos <= len(line):
        frame = stack[-1] if stack else None
        pats = self.flat(frame.get("patterns", [])) if frame else self.flat(self.g["patterns"])
        best = None
        if frame is not None:
          m = re.compile(frame["end"]).search(line, pos)
          if m: best = (m.start(), -1, m, frame)
        for i, p in enumerate(pats):
          m = re.compile(p.get("match") or p["begin"], re.M).search(line, pos)
          if m and (m.end() > m.start() or "begin" in p) and (best is None or m.start() < best[0]): best = (m.start(), i, m, p)
        inner = (frame.get("contentName") or frame.get("name")) if frame else None
        if best is None:
          for k in range(pos, len(line)): cover[k] = cover[k] or inner
          break
        start, _, m, p = best
        for k in range(pos, start): cover[k] = cover[k] or inner
        if p is frame:  # the end of the open rule
          for k in range(m.start(), m.end()): cover[k] = frame.get("name") or "end"
          stack.pop()
        else:
          for k in range(m.start(), m.end()): cover[k] = p.get("name") or inner
          for gi, cap in (p.get("captures") or p.get("beginCaptures") or {}).items():
            if m.group(int(gi)) is not None:
              for k in range(m.start(int(gi)), m.end(int(gi))): cover[k] = cap["name"]
          if "begin" in p: stack.append(p)
        pos = max(m.end(), pos + (1 if m.end() == m.start() and "begin" not in p else 0))
      out.append(cover)
    return out

@pytest.mark.parametrize("name,source", samples(), ids=[n for n, _ in samples()])
def test_the_textmate_grammar_covers_every_character(name, source):
  tm = TextMate(GRAMMAR)
  for n, (line, cover) in enumerate(zip(source.split("\n"), tm.scopes(source)), 1):
    bare = [line[k] for k in range(len(line)) if cover[k] is None and not line[k].isspace()]
    assert not bare, f"{name}:{n}: no scope for {bare!r} in {line!r}"

def test_the_textmate_grammar_scopes():
  tm = TextMate(GRAMMAR)
  line = "(ADD x:ints 0) if x.vmin >= 0 -> {x if True else None}  # note"
  cover = tm.scopes(line)[0]
  at = lambda text: cover[line.index(text)]  # noqa: E731
  assert at("ADD") == "support.function.op.rules" and at("ints") == "storage.type.dtype.rules" and at("->") == "keyword.operator.arrow.rules"
  assert at("# note") == "comment.line.number-sign.rules" and at("if x.vmin") == "keyword.control.conditional.rules"
  assert at("x if True") == "source.python"
  for f in glob.glob(os.path.join(ROOT, "editors", "vscode", "*.json")): json.load(open(f))
  pkg = json.load(open(os.path.join(ROOT, "editors", "vscode", "package.json")))
  assert pkg["contributes"]["grammars"][0]["path"] == "./syntaxes/rules.tmLanguage.json"
  assert re.compile(pkg["contributes"]["languages"][0]["extensions"][0].replace(".", r"\.") + "$").search("x.rules")
