"""Renderers: a linear kernel program (tensor/codegen's output) -> the program a device compiles. One per target language:
cstyle.py writes C for the CPU device; the PYTHON device interprets the UOp list itself (UOpRenderer). Below codegen in the
layers: a renderer knows its language and what the machine's vectors give it (caps), not the cost of a kernel; which loops
run on several threads is codegen's decision (its cost model), handed to render().
"""
from __future__ import annotations
from typing import Any
from rules.vectorize_helpers import VectorCaps
from runtime.uop import UOp

class Renderer:
  """A target language. `caps`: the vector ops and widths it renders (None: scalars only); `threads`: whether it can run a
  loop on several threads (the loops render() is given in `parallel`, with their thread counts); `group_max`: see below."""
  threads: bool = False
  group_max: int = 0  # the most work-items of a GROUP (a reduction shared by a work-group through its memory); 0: no GROUP
  local_tiles: bool = False  # the heuristic tiles matmuls through a group's memory (LOCAL): a GPU's (an OpenCL CPU device: no)
  @property
  def caps(self) -> VectorCaps | None: return None
  def render(self, name: str, uops: list[UOp], parallel: dict[UOp, int] | None = None) -> Any: raise NotImplementedError

class UOpRenderer(Renderer):
  """The PYTHON device's: the program is the linear UOp list itself (runtime/ops_python.py interprets it)."""
  def render(self, name: str, uops: list[UOp], parallel: dict[UOp, int] | None = None) -> Any: return uops

__all__ = ["Renderer", "UOpRenderer"]
