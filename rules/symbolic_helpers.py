"""Helpers for rules/symbolic.rules: actions too long for one expression. Hand-written; imports only runtime."""
from __future__ import annotations
from runtime.ops import exec_alu
from runtime.uop import UOp

def fold_alu(u: UOp) -> UOp | None:
  """u's value when every source is a constant; None when the op has no value on u's dtype (say, a float shift)."""
  try: return u.const_like(exec_alu(u.op, u.dtype, [s.arg for s in u.src]))
  except (ValueError, TypeError, OverflowError): return None
