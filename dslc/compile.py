"""The dslc driver: parse, check, emit, and verify the emitted Python compiles. Used by build.py and the CLI."""
from __future__ import annotations
import itertools, linecache, os, re, warnings
from typing import Any
from dslc.diagnostics import Diagnostic, DslError
from dslc.emit import emit_module
from dslc.emit_result import EmitError
from dslc.ir import RuleFile, Span
from dslc.parse import parse_rules
from dslc.check import check_file

def load_rules(path: str, display_path: str | None = None, source: str | None = None) -> RuleFile:
  """The checked rule IR of a .rules file; raises DslError with every diagnostic."""
  shown = display_path or path
  rf, diags = parse_rules(path, source, shown)
  if rf is None: raise DslError(diags, None)
  diags += check_file(rf)
  if diags: raise DslError(diags, rf.source)
  return rf

def compile_rules(path: str, display_path: str | None = None, source: str | None = None) -> str:
  """The generated Python module for a .rules file; raises DslError on any problem, never emits broken Python."""
  rf = load_rules(path, display_path, source)
  shown = display_path or path
  try: code = emit_module(rf, shown)
  except EmitError as e:
    span = e.rule.span if e.rule is not None else None
    raise DslError([Diagnostic(shown, span.line if span else 1, span.col if span else 1, str(e))], rf.source) from None
  try:
    with warnings.catch_warnings():
      # a SyntaxWarning in generated code is a bug in a rule (`x.arg is 1`, `1[0]`): report it, as Python would only warn
      warnings.simplefilter("error", SyntaxWarning)
      compile(code, shown.replace(".rules", ".py"), "exec")
  except (SyntaxError, SyntaxWarning, RecursionError, MemoryError) as e:
    lineno = getattr(e, "lineno", None)
    # a SyntaxWarning comes back as a SyntaxError; with a rule to blame it is that rule's (`x.arg is 1`), else the emitter's
    span = _rule_at(rf, code, lineno)
    what = "the generated code of this rule does not compile" if span else "internal error: the generated Python does not compile"
    message = f"{what}: {getattr(e, 'msg', None) or str(e) or type(e).__name__} (generated line {lineno})"
    raise DslError([Diagnostic(shown, span.line if span else 1, span.col if span else 1, message)], rf.source) from None
  return code

_counter = itertools.count(1)

def exec_module(code: str, filename: str, ns: dict[str, Any] | None = None) -> dict[str, Any]:
  """Run a generated module's code in `ns` (a new dict by default) and return it, with the text kept in linecache under
  `filename`: tracebacks show the generated lines, and a rule alone (RULESTATS, Rule.fn) is cut from them."""
  if (old := linecache.cache.get(filename)) is not None and "".join(old[2]) != code:
    filename = f"{filename} <{next(_counter)}>"  # another module's text holds this name: a name of its own, so neither is misread
  linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
  ns = {} if ns is None else ns
  exec(compile(code, filename, "exec"), ns)  # noqa: S102 - code dslc generated
  return ns

def _rule_at(rf: RuleFile, code: str, lineno: int | None) -> Span | None:
  """The rule whose generated code holds line `lineno`: the nearest rule header above it (`# rule r1a2b3c, FILE:LINE`)."""
  spans = {r.id: r.span for rs in rf.rulesets for r in rs.rules}
  lines = code.split("\n")
  for i in range(min(lineno or 0, len(lines)) - 1, -1, -1):
    if lines[i].lstrip().startswith("def "): return None  # the top of its function: not inside a rule's block
    m = re.match(r"\s*# rule (\S+), ", lines[i])
    if m and m.group(1) in spans: return spans[m.group(1)]
  return None

def rel(path: str, root: str) -> str:
  return os.path.relpath(os.path.abspath(path), root).replace(os.sep, "/")
