"""Helpers for rules/spec.rules: the facts the IR's spec checks that are not one node's shape (what a constant's arg may be,
which ops a dtype has). Hand-written; imports only runtime."""
from __future__ import annotations
from runtime.dtype import DType, PtrDType, dtypes
from runtime.ops import Ops
from runtime.uop import UOp

# ALU ops with no meaning on floats, and those with meaning on floats only (exec_alu raises ValueError for the others)
NO_FLOAT = frozenset({Ops.XOR, Ops.OR, Ops.AND, Ops.SHL, Ops.SHR, Ops.THREEFRY})
FLOAT_ONLY = frozenset({Ops.FDIV, Ops.SQRT, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.RECIPROCAL})

def alu_dtype_ok(op: Ops, d: DType) -> bool:
  """op has a value on operands of dtype d (a vector: its scalar's)."""
  s = d.scalar
  if s is dtypes.void or isinstance(d, PtrDType): return False
  if dtypes.is_float(s): return op not in NO_FLOAT
  return op not in FLOAT_ONLY

def const_ok(c: UOp) -> bool:
  """A CONST's arg is a value of its dtype: a bool, an int in the dtype's range, a float (a symbolic size's CONST too)."""
  d, v = c.dtype, c.arg
  if d.count != 1: return False
  if d is dtypes.bool: return v.__class__ is bool
  if dtypes.is_int(d): return v.__class__ is int and dtypes.min(d) <= v <= dtypes.max(d)
  if dtypes.is_float(d): return v.__class__ is float
  return False

def is_shape(arg) -> bool:
  """A movement op's new shape: sizes that are ints or symbolic (nodes)."""
  return arg.__class__ is tuple and all(x.__class__ is int or x.__class__ is UOp for x in arg)

def is_var_arg(arg) -> bool:
  """A DEFINE_VAR's arg: (name, min, max)."""
  return arg.__class__ is tuple and len(arg) == 3 and arg[0].__class__ is str
