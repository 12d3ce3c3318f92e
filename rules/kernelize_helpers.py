"""Helpers for rules/kernelize.rules. Hand-written; imports only runtime."""
from __future__ import annotations
from runtime.dtype import dtypes
from runtime.ops import Ops
from runtime.uop import UOp, uop

def kernel_input(ctx, x: UOp) -> UOp:
  """The parameter standing for input x: DEFINE_GLOBAL i (a pointer to a 1-D buffer), reshaped to x's shape."""
  g = ctx.param(x)
  return g if x.shape == g.shape else uop(Ops.RESHAPE, g.dtype.base, (g,), x.shape)

def along_axes(c: UOp, axes: tuple) -> bool:
  """Whether the broadcast c = EXPAND(src) holds one value along every axis in `axes` (src is 1 there)."""
  src = c.src[0].shape
  return src is not None and len(src) == len(c.shape) and all(src[a] == 1 for a in axes)

def reduced_factor(c: UOp, u: UOp) -> UOp:
  """The broadcast c = EXPAND(src) as a factor of u = REDUCE_AXIS(... * c): src expanded to u's shape."""
  src = c.src[0]
  return src if src.shape == u.shape else uop(Ops.EXPAND, c.dtype, (src,), u.shape)

PARAM_PREFIX = "cvar"

class Params:
  """The context of the parametrize rule set: each tensor constant of a kernel AST becomes DEFINE_VAR cvar<i> (the same
  constant node, the same parameter), and values[i] is what the kernel computed with."""
  def __init__(self):
    self.values: list = []
    self.bound: dict[str, int] = {}  # the bound Variables (x * Variable("n", 1, 64).bind(8)): name -> value
  def unbind(self, b: UOp) -> UOp:
    """A bound Variable is its variable in the kernel (one program for every value); its value is kept for this run."""
    v = b.src[0]
    if param_index(v) is not None: raise ValueError(f"the Variable name {v.arg[0]!r} is reserved for kernel parameters; rename it")
    self.bound[v.arg[0]] = b.src[1].arg
    return v
  def has_bound_size(self, u: UOp) -> bool:
    """A movement op with a symbolic size: reshape/expand sizes, or a shrink/pad pair (begin, end) that is an expression."""
    for d in u.arg:  # plain loops: this runs on every movement op of every kernel parametrized
      if d.__class__ is tuple:
        for x in d:
          if x.__class__ is UOp and _has_bind(x): return True
      elif d.__class__ is UOp and _has_bind(d): return True
    return False
  def unbind_size(self, d):
    """A size (an int, a bound Variable or an int expression of them) with its Variables unbound (values kept for this run)."""
    if d.__class__ is not UOp: return d
    if d.op is Ops.BIND: return self.unbind(d)
    binds = [b for b in d.toposort(gate=lambda x: x.op is not Ops.BIND) if b.op is Ops.BIND]
    return d.substitute({b: self.unbind(b) for b in binds}) if binds else d
  def unbind_sizes(self, u: UOp) -> UOp:
    """A movement op whose sizes hold bound Variables, with the Variables unbound (their values kept for this run)."""
    return u.replace(arg=tuple(tuple(self.unbind_size(x) for x in d) if d.__class__ is tuple else self.unbind_size(d) for d in u.arg))
  def param(self, c: UOp) -> UOp:
    lo, hi = (dtypes.min(c.dtype), dtypes.max(c.dtype))
    self.values.append(c.arg)
    return uop(Ops.DEFINE_VAR, c.dtype, (), (f"{PARAM_PREFIX}{len(self.values) - 1}", lo, hi))

def _has_bind(d: UOp) -> bool:
  return d.op is Ops.BIND or (d.op is not Ops.DEFINE_VAR and any(x.op is Ops.BIND for x in d.toposort(gate=lambda x: x.op is not Ops.BIND)))

def param_index(var: UOp) -> int | None:
  """i for the parameter cvar<i>, None for any other variable."""
  name = var.arg[0]
  return int(name[len(PARAM_PREFIX):]) if name.startswith(PARAM_PREFIX) and name[len(PARAM_PREFIX):].isdigit() else None

__all__ = ["kernel_input", "dtypes", "Params", "param_index"]
