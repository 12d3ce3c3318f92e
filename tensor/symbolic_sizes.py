"""Symbolic sizes at the Tensor frontend: where a size goes (reshape, expand, shrink, slices, Tensor.empty/zeros/ones/full),
a bound Variable (`Variable("n", 1, 64).bind(8)`) or an int expression of bound Variables (`2*n`, `n+1`, `n*m`) may go.
The expression is simplified by rules/symbolic.rules, so equal sizes are one node and shapes compare by identity. Kernels
read each Variable's value as an argument: one compiled program, and one TinyJit capture, serves every value.

A symbolic size is checked at the bound values (the result must make sense now), and over the Variables' whole ranges
where a shape could go negative. A shrink whose end could pass its axis for another value (a KV cache's
x[:, sp:sp+32]) is accepted, and a TinyJit capture checks the end at each replay's values (a replay runs no Python).
Nothing here imports tensor.tensor: tensor.py and the topic modules import it.
"""
from __future__ import annotations
import math
from typing import Any, Sequence
from runtime.dtype import dtypes
from runtime.ops import Ops
from runtime.uop import UOp, arg_str, dim_value, dim_vars, is_symbolic, shape_str
from tensor.errors import ArgumentTypeError, ArgumentValueError, ShapeError, as_int, flat_args

def var_names(d: Any) -> str:
  """The Variables of a size for messages: 'n' or 'n, m'."""
  return ", ".join(sorted({v.unbind_name() for v in dim_vars(d)}))

_NONE = object()

def size_arg(s: Any, what: str, given: Any = _NONE) -> Any:
  """A size: an int, or an int expression of bound Variables (simplified; an int when it simplifies to a constant).
  An unbound Variable has no value to check or run with: ArgumentTypeError naming it. Messages start with `what`, followed
  by `given` (the whole argument, formatted only for a message) and ": each size" when given is given."""
  if s.__class__ is int: return s
  if given is not _NONE: what = f"{what} {arg_str(given)}: each size"
  if s.__class__ is not UOp: return as_int(s, what)
  if s.op is Ops.BIND and dtypes.is_int(s.dtype): return s
  if not dtypes.is_int(s.dtype):
    raise ArgumentTypeError(f"{what} must be an integer or an int expression of bound Variables, got {s.op} {s.render()}")
  unbound = sorted({v.arg[0] for v in dim_vars(s) if v.op is Ops.DEFINE_VAR})
  if unbound:
    raise ArgumentTypeError(f"{what} must be an integer or a bound Variable, got the unbound Variable {', '.join(map(repr, unbound))}"
                            f"{'' if s.op is Ops.DEFINE_VAR else ' in ' + s.render()}: bind it first (Variable({unbound[0]!r}, lo, hi).bind(value))")
  values: dict[str, int] = {}
  for b in dim_vars(s):
    if values.setdefault(b.unbind_name(), b.src[1].arg) != b.src[1].arg:
      raise ArgumentValueError(f"{what}: the Variable {b.unbind_name()!r} is bound to two values ({values[b.unbind_name()]} and "
                               f"{b.src[1].arg}) in {s.render()}")
  s = s.simplify()
  return s.arg if s.op is Ops.CONST else s

def shape_arg(args: Sequence, what: str = "shape") -> tuple:
  """A shape given as sizes or one tuple/list of sizes: each an int >= 0 or a symbolic size (>= 0 for every value)."""
  if len(args) > 1 and any(isinstance(a, (tuple, list)) for a in args):  # f((2, 2), 2): ValueError, as tinygrad's argfix
    raise ArgumentValueError(f"{what} {tuple(args)!r}: give the sizes, or one tuple of them, not a tuple among sizes")
  given = flat_args(args)
  shape = tuple(s if s.__class__ is int else size_arg(s, what, given) for s in given)
  for s in shape:
    if (s < 0) if s.__class__ is int else s.vmin < 0:
      raise ArgumentValueError(f"{what} {shape_str(shape)} has a size that is (or can be) negative")
  return shape

def always_le(a: Any, b: Any) -> bool:
  """a <= b for every value of their Variables (sound: False when range analysis can't tell)."""
  if a.__class__ is int and b.__class__ is int: return a <= b
  return (b - a if b.__class__ is UOp else -1 * a + b).simplify().vmin >= 0

def numel(sizes) -> Any:
  """The product of sizes: an int, or the expression (simplified) when a size is symbolic."""
  if not any(is_symbolic(d) for d in sizes): return math.prod(sizes)
  out: Any = 1
  for d in sizes: out = d if out.__class__ is int and out == 1 else out * d
  return out.simplify() if out.__class__ is UOp else out

def check_shrink(pairs: tuple, shape: tuple, arg: Any) -> None:
  """0 <= begin <= end <= size on every axis at the bound values. Where some other value of a Variable would break it
  (x.shrink(((sp, sp + 32),)) with sp up to the size), the shrink is accepted for this value, and a TinyJit capture
  records the condition as a guard that each replay checks with that call's values (a replay runs no Python here)."""
  for axis, ((b, e), d) in enumerate(zip(pairs, shape)):
    if not 0 <= dim_value(b) <= dim_value(e) <= dim_value(d):
      raise ShapeError(f"shrink {arg_str(tuple(arg))} does not fit shape {shape_str(shape)}: axis {axis} keeps [{dim_value(b)}, {dim_value(e)}) "
                       f"of {dim_value(d)}")
    if is_symbolic(b) or is_symbolic(e) or is_symbolic(d):
      for lo, hi, what in ((0, b, "begin"), (b, e, "end - begin"), (e, d, "")):
        if always_le(lo, hi): continue
        names = ", ".join(sorted({v.unbind_name() for x in (lo, hi) for v in dim_vars(x)}))
        if what:  # a size or begin that could be negative: the shape itself would make no sense
          raise ShapeError(f"shrink {arg_str(tuple(arg))} of shape {shape_str(shape)}: on axis {axis} {what} can be negative for some value of "
                           f"the Variable{'s' if ',' in names else ''} {names}: narrow the Variable's range")
        guard((hi - lo if hi.__class__ is UOp else -1 * lo + hi), f"shrink {arg_str(tuple(arg))} of shape {shape_str(shape)}: on axis "
               f"{axis} the end is past the axis size")

def guard(expr: UOp, message: str) -> None:
  """expr >= 0 must hold at every TinyJit replay of the capture under way (if any): the capture checks it with each call's values."""
  from tensor.engine.state import ENGINE
  for rec in ENGINE.capturing: rec.guards.append((expr, message))
