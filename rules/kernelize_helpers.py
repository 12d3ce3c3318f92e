"""Helpers for rules/kernelize.rules. Hand-written; imports only runtime."""
from __future__ import annotations
from runtime.dtype import dtypes
from runtime.ops import Ops
from runtime.uop import UOp, uop

def kernel_input(ctx, x: UOp) -> UOp:
  """The parameter standing for input x: DEFINE_GLOBAL i (a pointer to a 1-D buffer), reshaped to x's shape."""
  g = ctx.param(x)
  return g if x.shape == g.shape else uop(Ops.RESHAPE, g.dtype.base, (g,), x.shape)

__all__ = ["kernel_input", "dtypes"]
