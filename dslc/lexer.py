"""A Pygments lexer for .rules files (docs/rules.md has the language), registered as the `pygments.lexers` entry point
`rules`: `pygmentize rules/symbolic.rules` and Sphinx or MkDocs ```rules blocks highlight with it. Needs only Pygments
(the `tools` extra); the editors' TextMate grammar (editors/) follows the same token classes.
"""
from __future__ import annotations
import re
from pygments.lexer import RegexLexer, bygroups, using
from pygments.lexers.python import PythonLexer
from pygments.token import Comment, Keyword, Name, Number, Operator, Punctuation, String, Whitespace

__all__ = ["RulesLexer"]

IDENT = r"[a-z_][A-Za-z0-9_]*"
CAP = r"[A-Z][A-Za-z0-9_]*"

class RulesLexer(RegexLexer):
  """The .rules language: rule sets, patterns over UOps, guards and results (rules/*.rules)."""
  name = "Rules"
  aliases = ["rules", "dslc"]
  filenames = ["*.rules"]
  mimetypes = ["text/x-rules"]
  url = "https://github.com/rulegrad/rulegrad"
  flags = re.MULTILINE

  tokens = {
    "root": [
      (r"[ \t\r\n\f]+", Whitespace),
      (r"#.*?$", Comment.Single),
      (r'"""', String.Doc, "docstring"),
      (r'"[^"\n]*"|\'[^\'\n]*\'', String),
      # header lines
      (rf"\b(from)(\s+)({IDENT}(?:\.{IDENT})*)(\s+)(import)\b",
       bygroups(Keyword.Namespace, Whitespace, Name.Namespace, Whitespace, Keyword.Namespace)),
      (rf"\b(ruleset)(\s+)({IDENT})", bygroups(Keyword.Declaration, Whitespace, Name.Class)),
      (rf"\b(let)(\s+)({CAP})", bygroups(Keyword.Declaration, Whitespace, Name.Constant)),
      (rf"\b(for)(\s+)({IDENT})(\s+)(in)\b", bygroups(Keyword, Whitespace, Name.Variable.Magic, Whitespace, Keyword)),
      # `{` ending a `for` line opens a block; `{...}` elsewhere is a Python expression
      (r"\{(?=[ \t]*(?:#.*)?$)", Punctuation),
      (r"(\{)([^{}]*(?:\{[^{}]*\}[^{}]*)*)(\})", bygroups(Punctuation, using(PythonLexer), Punctuation)),
      (r"[{}]", Punctuation),
      (r"->", Operator),
      (r"\.\.\.", Operator),
      # a dtype or dtype class after ':' (`x:ints|bool`, `(CAST:x.dtype y)`)
      (rf"(:)({IDENT}(?:[.|]{IDENT})*)", bygroups(Punctuation, Keyword.Type)),
      (r"\b(if|where|returns|per-source)\b", Keyword),
      (r"\b(and|or|not|in|is)\b", Operator.Word),
      (r"\b(True|False|None)\b", Keyword.Constant),
      (r"-?0x[0-9a-fA-F]+\b", Number.Hex),
      (r"-?(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|-?\d+[eE][+-]?\d+|-?\b(?:inf|nan)\b", Number.Float),
      (r"-?\d+", Number.Integer),
      (rf"\b(Ops|GroupOp)(\.)({CAP})", bygroups(Name.Builtin, Punctuation, Name.Constant)),
      (rf"\b(dtypes)(\.)({IDENT})", bygroups(Name.Builtin, Punctuation, Keyword.Type)),
      (rf"\b({CAP})(\.)({IDENT})", bygroups(Name.Builtin, Punctuation, Name.Attribute)),
      # ops: upper case (ADD, CONST), and op groups right after '(' or '|' (Binary, ALU); other capitalized names are `let` patterns
      (r"\b[A-Z][A-Z0-9_]*\b(?![a-z])", Name.Builtin),
      (rf"(?<=[(|]){CAP}", Name.Builtin),
      (CAP, Name.Constant),
      (rf"({IDENT})(@)", bygroups(Name.Variable, Operator)),
      (rf"{IDENT}(?=\()", Name.Function),
      (rf"(?<=\.){IDENT}", Name.Attribute),
      (r"_(?![A-Za-z0-9_])", Name.Builtin.Pseudo),
      (IDENT, Name.Variable),
      (r"==|!=|<=|>=|\*\*|//|[-+*/%<>=~!@|?&^]", Operator),
      (r"[()\[\],.:]", Punctuation),
    ],
    "docstring": [
      (r'"""', String.Doc, "#pop"),
      (r'[^"]+|"', String.Doc),
    ],
  }
