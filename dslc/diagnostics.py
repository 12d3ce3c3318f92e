"""Diagnostics in the compiler style: `FILE:LINE:COL: error: message`, the source line, a caret under the column."""
from __future__ import annotations
import difflib
from dataclasses import dataclass

def did_you_mean(name: str, choices) -> str:
  """` (did you mean 'X'?)` for the closest of choices, or nothing when none is close."""
  close = difflib.get_close_matches(name, sorted(choices), n=1)
  if not close:
    # a case slip (`add`, `Int32`) is not "close" to difflib on short names
    close = [c for c in sorted(choices) if c.lower() == name.lower()][:1]
  return f" (did you mean '{close[0]}'?)" if close else ""

@dataclass(frozen=True)
class Diagnostic:
  file: str
  line: int
  col: int
  message: str
  severity: str = "error"
  line_text: str | None = None  # the source line, for a file that has no usable text (not UTF-8, binary)

  def format(self, source: str | None) -> str:
    out = f"{self.file}:{self.line}:{self.col}: {self.severity}: {self.message}"
    lines = source.split("\n") if source is not None else None
    text = lines[self.line - 1] if lines is not None and 1 <= self.line <= len(lines) else self.line_text
    if text is not None:
      # one character per column, so the caret stays under it: a tab as a space, a NUL as a visible symbol
      text = text.replace("\t", " ").replace("\x00", "\u2400")
      out += f"\n{text}\n{' ' * max(self.col - 1, 0)}^"
    return out

class DslError(Exception):
  """One or more diagnostics; str() is every one of them, formatted."""
  def __init__(self, diagnostics: list[Diagnostic], source: str | None = None):
    self.diagnostics = sorted(diagnostics, key=lambda d: (d.file, d.line, d.col))
    self.source = source
    super().__init__("\n".join(d.format(source) for d in self.diagnostics))
