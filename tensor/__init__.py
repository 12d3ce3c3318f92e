"""tensor: the framework users import. Tensor, its dtypes and devices, the engine (schedule, realize) and codegen.

  from tensor import Tensor, dtypes, Device
  (Tensor([1, 2, 3]) * 2).tolist()   # [2, 4, 6]
"""
from runtime.dtype import dtypes
from runtime.device import Device
from runtime.helpers import Context, GlobalCounters, getenv
from runtime.uop import UOp
from tensor.tensor import Tensor, TensorError
from tensor.jit import TinyJit

Variable = UOp.variable

__all__ = ["Tensor", "TensorError", "dtypes", "Device", "Context", "GlobalCounters", "getenv", "Variable", "TinyJit"]
