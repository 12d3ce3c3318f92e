"""Diagnostics in the compiler style: `FILE:LINE:COL: error: message`, the source line, a caret under the column."""
from __future__ import annotations
from dataclasses import dataclass

@dataclass(frozen=True)
class Diagnostic:
  file: str
  line: int
  col: int
  message: str
  severity: str = "error"

  def format(self, source: str | None) -> str:
    out = f"{self.file}:{self.line}:{self.col}: {self.severity}: {self.message}"
    if source is not None:
      lines = source.split("\n")
      if 1 <= self.line <= len(lines):
        text = lines[self.line - 1].replace("\t", " ")
        out += f"\n{text}\n{' ' * max(self.col - 1, 0)}^"
    return out

class DslError(Exception):
  """One or more diagnostics; str() is every one of them, formatted."""
  def __init__(self, diagnostics: list[Diagnostic], source: str | None = None):
    self.diagnostics = sorted(diagnostics, key=lambda d: (d.file, d.line, d.col))
    self.source = source
    super().__init__("\n".join(d.format(source) for d in self.diagnostics))
