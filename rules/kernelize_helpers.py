"""Helpers for rules/kernelize.rules. Hand-written; imports only runtime."""
from __future__ import annotations
from runtime.dtype import dtypes
from runtime.ops import Ops
from runtime.uop import UOp, dim_vars, unbind_dim, uop

class KernelContext:
  """The ctx of to_kernel_ast, made by the scheduler for the kernel of realize point `point`: which nodes are its inputs
  (below their RESHAPEs: a buffer, another kernel's output, another realize point), and the parameter each one became
  (DEFINE_GLOBAL i, one per buffer, numbered in the order met; params[i - 1] is the buffer of parameter i). An assign's
  kernel reads the version of its target it overwrites through its output, DEFINE_GLOBAL 0 (the same memory: the
  scheduler lets it read only the element it writes), so codegen sees a store of the old value as one (tensor/codegen/window.py)."""
  def __init__(self, point: UOp, points: set[UOp]):
    self.point, self.points, self.params, self.globals = point, points, [], {}
    if point.op is Ops.ASSIGN: self.globals[below_reshapes(point.src[0])] = uop(Ops.DEFINE_GLOBAL, point.dtype.ptr(point.size), (), 0)
  def is_input(self, x: UOp) -> bool:
    b = below_reshapes(x)
    return b is not self.point and (b in self.points or b.op is Ops.BUFFER or (b.op is Ops.ASSIGN and b.src[1].op is Ops.KERNEL))
  def param(self, x: UOp) -> UOp:
    if (b := below_reshapes(x)) not in self.globals:
      self.params.append(b)
      self.globals[b] = uop(Ops.DEFINE_GLOBAL, b.dtype.ptr(b.size), (), len(self.params))
    return self.globals[b]

def below_reshapes(u: UOp) -> UOp:
  """u below any RESHAPEs: a reshape of stored data is the same memory (the scheduler's walk uses it too)."""
  while u.op is Ops.RESHAPE: u = u.src[0]
  return u

def kernel_input(ctx: KernelContext, x: UOp) -> UOp:
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
  """The ctx of parametrize: each tensor constant of a kernel AST becomes DEFINE_VAR cvar<i> (the same constant node, the
  same parameter) and values[i] is what the kernel computed with; bound holds the bound Variables' values by name
  (x * Variable("n", 1, 64).bind(8): {"n": 8}), which the program reads as arguments."""
  def __init__(self):
    self.values: list = []
    self.bound: dict[str, int] = {}
  def param(self, c: UOp) -> UOp:
    self.values.append(c.arg)
    return uop(Ops.DEFINE_VAR, c.dtype, (), (f"{PARAM_PREFIX}{len(self.values) - 1}", dtypes.min(c.dtype), dtypes.max(c.dtype)))
  def unbind(self, d):
    """A bound Variable, or a size that is an expression of them, with its Variables unbound (one program for every value);
    their values are kept for this run."""
    for b in dim_vars(d):
      if b.op is Ops.BIND:
        name = b.src[0].arg[0]
        if param_index(b.src[0]) is not None: raise ValueError(f"the Variable name {name!r} is reserved for kernel parameters; rename it")
        self.bound[name] = b.src[1].arg
    return unbind_dim(d)

def param_index(var: UOp) -> int | None:
  """i for the parameter cvar<i>, None for any other variable."""
  name = var.arg[0]
  return int(name[len(PARAM_PREFIX):]) if name.startswith(PARAM_PREFIX) and name[len(PARAM_PREFIX):].isdigit() else None

__all__ = ["kernel_input", "dtypes", "KernelContext", "below_reshapes", "Params", "param_index"]
