"""The dslc driver: parse, check, emit, and verify the emitted Python compiles. Used by build.py and the CLI."""
from __future__ import annotations
import os
from dslc.diagnostics import Diagnostic, DslError
from dslc.emit import EmitError, emit_module
from dslc.ir import RuleFile
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
  try: compile(code, shown.replace(".rules", ".py"), "exec")
  except SyntaxError as e:
    message = f"internal error: the generated Python does not compile ({e.msg}, line {e.lineno})"
    raise DslError([Diagnostic(shown, 1, 1, message)], rf.source) from None
  return code

def rel(path: str, root: str) -> str:
  return os.path.relpath(os.path.abspath(path), root).replace(os.sep, "/")
