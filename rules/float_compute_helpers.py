"""Helpers of rules/float_compute.rules: ALUs on float16 and bfloat16 rebuilt in float32, and the casts back to the narrow
type marked so the ALU using one reads the float32 value instead (one rounding, where the value leaves the arithmetic)."""
from __future__ import annotations
from runtime.dtype import DType, dtypes
from runtime.ops import GroupOp, Ops
from runtime.uop import UOp, uop

NARROW = (dtypes.float16, dtypes.bfloat16)
# the tag of a cast back to the narrow type made here: an ALU over it takes its float32 source (a cast the kernel's
# graph holds, `x.half()` of a float32 x, is untagged and keeps its rounding)
WIDE = "float32 compute"

def narrow(u: UOp) -> bool: return u.dtype.scalar in NARROW

def computes_narrow(u: UOp) -> bool:
  """An ALU with a float16 or bfloat16 result, or a comparison of such values."""
  return narrow(u) or (u.op in GroupOp.Comparison and narrow(u.src[0]))

def _f32(d: DType) -> DType: return dtypes.float32 if d.count == 1 else dtypes.float32.vec(d.count)

def widen(s: UOp) -> UOp:
  """A source as float32: a marked cast's float32 value, a constant as a float32 constant (exact), else a CAST."""
  if s.op is Ops.CAST and s.tag == WIDE: return s.src[0]
  if not narrow(s): return s
  if s.op is Ops.CONST and s.dtype.count == 1: return uop(Ops.CONST, dtypes.float32, (), float(s.arg))
  return uop(Ops.CAST, _f32(s.dtype), (s,))

def in_float32(u: UOp) -> UOp:
  """The ALU computed in float32 (a comparison: its bool), cast back to its narrow type with the WIDE mark."""
  f = uop(u.op, u.dtype if u.op in GroupOp.Comparison else _f32(u.dtype), tuple(widen(s) for s in u.src), u.arg)
  return f if u.op in GroupOp.Comparison else uop(Ops.CAST, u.dtype, (f,), None, WIDE)

def unmarked(u: UOp) -> UOp: return uop(Ops.CAST, u.dtype, u.src)
