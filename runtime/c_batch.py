"""One C translation unit from many kernels the C renderer wrote (tensor/renderer/cstyle.py), so the CPU device compiles a
cold step's dozens of kernels with one compiler run (runtime/ops_cpu.py `programs`): the compiler's start, about 40 ms a
run here, is paid once instead of once per kernel.

A rendered kernel is a preamble (includes, vector typedefs, static inline helpers) followed by its functions, which start
at the first line beginning `void `. Each preamble item starts a line with `#include`, `typedef` or `static inline`; the
lines after it up to the next item are its own (a helper's `#if` branches). The unit keeps each distinct item once, in order
of first use, then every kernel's functions. A source of any other shape is not merged (None): it compiles alone.
"""
from __future__ import annotations

_ITEM_STARTS = ("#include", "typedef", "static inline")

def split(src: str) -> tuple[list[str], str] | None:
  """(the preamble's items, the functions) of a rendered kernel, or None when it is not in the renderer's shape."""
  lines = src.splitlines()
  first = next((i for i, line in enumerate(lines) if line.startswith("void ")), None)
  if first is None: return None
  items: list[list[str]] = []
  for line in lines[:first]:
    if line.startswith(_ITEM_STARTS): items.append([line])
    elif items: items[-1].append(line)
    elif line.strip(): return None  # text before any item: not ours
  return ["\n".join(item) for item in items], "\n".join(lines[first:])

def merge(sources: list[str]) -> str | None:
  """One translation unit defining every kernel of `sources` (their names must differ), or None when one can't be split.
  Two items defining one name differently make the compiler fail: the caller then compiles each source alone."""
  seen: dict[str, None] = {}
  bodies = []
  for src in sources:
    if (parts := split(src)) is None: return None
    items, body = parts
    seen.update(dict.fromkeys(items))
    bodies.append(body)
  return "\n".join([*seen, *bodies]) + "\n"

__all__ = ["split", "merge"]
