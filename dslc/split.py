"""Cuts .rules text into items (a rule, a `ruleset` line, a `for ... {` header, a `}`), first phase of dslc.

An item ends at a newline outside brackets, unless the next line continues it (it starts with `if`, `->`, `and`,
`or`, `where`) or the line can't end an item (it ends with `->`, `and`, an operator, ...). A line that starts a new item at
column 1 also ends an unbalanced one, so a missing ')' is reported at the bracket that was never closed and the parse
goes on with the next rule.
"""
from __future__ import annotations
import re
from dataclasses import dataclass

CONTINUATIONS = ("if", "->", "and", "or", "where")
STARTERS = ("(", "ruleset", "for", "let", "from", "}", "#")
# the end of a line that can't be the end of an item: an arrow, a keyword or an operator waiting for its operand
NEEDS_MORE = re.compile(r"(->|[-+*/%<>=|,@:]|(?<![A-Za-z0-9_])(if|and|or|not|in|is))\s*$")
# brackets nested deeper than this are an error: the parser and checks recurse, and the generated code nests an `if` per level
MAX_DEPTH = 48

@dataclass
class Item:
  text: str            # the item's source, with earlier lines blanked so Lark's positions are the file's
  line: int            # first line (1-based)
  unclosed: tuple[int, int, str] | None  # (line, col, bracket) of a bracket never closed, if any
  stray: tuple[int, int, str] | None     # (line, col, bracket) of a closing bracket with no opener, if any
  stray_opener: tuple[int, int, str] | None = None  # the bracket still open when `stray` came, if any: it does not match
  too_deep: tuple[int, int] | None = None  # (line, col) of the first bracket nested deeper than MAX_DEPTH

def _starts_item(line: str) -> bool:
  return any(line.startswith(s) for s in STARTERS) or line[:1].isalpha()

def split_items(text: str) -> list[Item]:
  lines = text.split("\n")
  items: list[Item] = []
  i = 0
  while i < len(lines):
    stripped = lines[i].strip()
    if not stripped or stripped.startswith("#"):
      i += 1
      continue
    start = i
    stack: list[tuple[int, int, str]] = []
    stray = stray_opener = too_deep = None
    in_string: str | None = None
    while True:
      line = lines[i]
      j = 0
      while j < len(line):
        ch = line[j]
        if in_string is not None:
          if line.startswith(in_string, j):
            j += len(in_string)
            in_string = None
            continue
          j += 1
          continue
        if ch == "#": break
        if line.startswith('"""', j): in_string = '"""'; j += 3; continue  # noqa: E702
        if ch in "\"'": in_string = ch
        elif ch in "([{":
          # a `{` closing a `for` header opens a block, not a bracket
          if ch == "{" and not stack and lines[start].lstrip().startswith("for "): break
          stack.append((i + 1, j + 1, ch))
          if len(stack) > MAX_DEPTH: too_deep = too_deep or (i + 1, j + 1)
        elif ch in ")]}":
          if stack and stack[-1][2] == "([{"[")]}".index(ch)]: stack.pop()
          elif stack or ch != "}":
            if stray is None: stray, stray_opener = (i + 1, j + 1, ch), (stack[-1] if stack else None)
        j += 1
      if in_string in ("'", '"'): in_string = None  # a one-line string never spans lines
      code = line[:j]  # the line without its comment
      i += 1
      if i >= len(lines): break
      nxt = lines[i].strip()
      if in_string is not None: continue
      if stack:
        # still inside brackets: the item goes on, unless the next line plainly starts a new item
        if nxt and not lines[i][:1].isspace() and _starts_item(lines[i]) and not nxt.startswith(("->", "if ")): break
        continue
      # skip blank and comment lines to see whether the item continues
      k = i
      while k < len(lines) and (not lines[k].strip() or lines[k].strip().startswith("#")): k += 1
      if k < len(lines) and lines[k].strip().split(" ", 1)[0] in CONTINUATIONS or k < len(lines) and lines[k].strip().startswith("->"):
        i = k
        continue
      # a line that ends in `->`, `and`, an operator, ... can't end an item: the next line goes on with it, unless that
      # one plainly starts another item (then the error is the missing part, on this line)
      if k < len(lines) and NEEDS_MORE.search(code) and not lines[k].lstrip().startswith(("ruleset ", "for ", "let ", "from ", "}")):
        i = k
        continue
      break
    body = "\n".join(lines[start:i])
    items.append(Item("\n" * start + body, start + 1, stack[-1] if stack else None, stray, stray_opener, too_deep))
  return items
