"""The tensors an object holds, found by attribute, list index and dict key: what tensor.nn.state's get_state_dict names and
get_parameters lists, and what TinyJit (tensor/jit.py) realizes and replays of a function's return value. Frontend layer.
"""
from __future__ import annotations
from typing import Any
from tensor.tensor import Tensor

def get_state_dict(obj: Any, prefix: str = "") -> dict[str, Tensor]:
  """The tensors reachable from obj by attribute, list index and dict key, named by their path: {"l1.weight": ...}."""
  out: dict[str, Tensor] = {}
  _collect(obj, prefix, out, set())
  return out

def _collect(obj: Any, prefix: str, out: dict[str, Tensor], seen: set[int]) -> None:
  if isinstance(obj, Tensor):
    out[prefix.strip(".")] = obj
    return
  if isinstance(obj, (str, bytes, int, float, bool, type(None))) or id(obj) in seen: return
  seen.add(id(obj))  # an object graph with a cycle (a layer pointing back at its model) is walked once
  if hasattr(obj, "_asdict"): obj = obj._asdict()  # namedtuple
  elif hasattr(obj, "__dict__") and not isinstance(obj, type): obj = vars(obj)
  if isinstance(obj, (list, tuple)):
    for i, x in enumerate(obj): _collect(x, f"{prefix}{i}.", out, seen)
  elif isinstance(obj, dict):
    for k, v in obj.items(): _collect(v, f"{prefix}{k}.", out, seen)

def get_parameters(obj: Any) -> list[Tensor]:
  """Every tensor reachable from obj, each once (a weight tied to two layers counts once), in state-dict order."""
  seen: dict[int, Tensor] = {}
  for t in get_state_dict(obj).values(): seen.setdefault(id(t), t)
  return list(seen.values())

__all__ = ["get_state_dict", "get_parameters"]
