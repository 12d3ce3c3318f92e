"""tensor: the framework users import. Tensor, its dtypes and devices, TinyJit; below them the engine (tensor/engine:
schedule, realize), codegen (tensor/codegen) and the renderers (tensor/renderer). ARCHITECTURE.md has the layers.

  from tensor import Tensor, dtypes, Device
  (Tensor([1, 2, 3]) * 2).tolist()   # [2, 4, 6]

Tensor, TensorError and TinyJit load on first use, so importing a lower layer (`import tensor.engine.realize`) does not
load the frontend: the engine imports nothing above it, and can be imported and tested alone.
"""
from typing import TYPE_CHECKING, Any
from runtime.dtype import dtypes
from runtime.device import Device
from runtime.helpers import Context, GlobalCounters, getenv
from runtime.uop import UOp

if TYPE_CHECKING:
  from tensor.errors import TensorError
  from tensor.jit import TinyJit
  from tensor.tensor import Tensor

Variable = UOp.variable

def __getattr__(name: str) -> Any:
  """The frontend's names, imported on first use and kept in this module from then on."""
  if name == "Tensor": from tensor.tensor import Tensor as value
  elif name == "TensorError": from tensor.errors import TensorError as value
  elif name == "TinyJit": from tensor.jit import TinyJit as value
  else: raise AttributeError(f"module 'tensor' has no attribute {name!r}")
  globals()[name] = value
  return value

__all__ = ["Tensor", "TensorError", "dtypes", "Device", "Context", "GlobalCounters", "getenv", "Variable", "TinyJit"]
