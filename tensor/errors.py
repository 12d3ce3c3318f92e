"""The errors Tensor ops raise, and the one argument checker every op uses for dtypes, shapes, axes, sizes and pads.

Every error is a TensorError and also the standard Python exception torch and numpy raise in the same place, so
`except RuntimeError`, `except IndexError` and `except TypeError` keep working (docs/tensor.md has the table).
Nothing here imports the rest of the tensor package (only runtime's dtypes): tensor/tensor.py and the topic modules import it.
"""
from __future__ import annotations
import math, operator
from typing import Any, Sequence
import numpy as np
from runtime.dtype import DTYPE_NAMES, DType, PtrDType, dtypes

class TensorError(Exception):
  """Root of the errors a Tensor op raises for operands or arguments it can't take."""

class ShapeError(TensorError, RuntimeError, ValueError):
  """Operand shapes that don't fit (broadcasting, matmul, reshape, cat, assign): torch's RuntimeError, numpy's ValueError."""

class AxisError(TensorError, IndexError, ValueError):
  """An axis outside the tensor's dimensions: torch's IndexError, numpy's AxisError (an IndexError and a ValueError)."""

class TensorIndexError(TensorError, IndexError):
  """An index outside its axis, or more indices than dimensions: IndexError, as torch and numpy raise."""

class DTypeError(TensorError, TypeError, RuntimeError):
  """An op that does not take this dtype (bitwise ops on floats, rand of ints): numpy's TypeError, torch's RuntimeError."""

class ArgumentTypeError(TensorError, TypeError):
  """An argument of the wrong kind (a float or a string where a size goes, a list where a Tensor goes): TypeError."""

class ArgumentValueError(TensorError, ValueError, RuntimeError):
  """An argument of the right kind with a value the op can't take (a negative size, a zero step, p outside [0, 1]):
  numpy's ValueError, torch's RuntimeError (tinygrad's tests catch either)."""

class DTypeNameError(ArgumentTypeError, AttributeError):
  """A string that names no dtype (`sum(dtype="flaot")`): TypeError, and AttributeError as tinygrad's dtypes lookup."""

class ConstantOverflowError(TensorError, OverflowError):
  """An integer constant that does not fit the dtype it would take (`Tensor([1]) + 2**40`): OverflowError, as numpy 2."""

class DeviceMismatchError(TensorError, RuntimeError):
  """Operands on different devices: RuntimeError, as torch raises."""

# ---- argument checking ----

def as_int(v: Any, what: str) -> int:
  """v as a Python int when it is an integer (int, numpy int, anything with __index__); ArgumentTypeError naming `what`
  for anything else (a float, a string, a bool, a Tensor)."""
  if isinstance(v, bool) or not hasattr(v, "__index__"):
    if type(v).__name__ == "UOp":  # a Variable where this op takes only ints: name it, not its graph
      from runtime.uop import dim_str, dim_value, dim_vars
      bound = all(x.op.name == "BIND" for x in dim_vars(v))
      raise ArgumentTypeError(f"{what} must be an integer, got the Variable {dim_str(v)}{f'={dim_value(v)}' if bound else ''}: "
                              "this op takes no symbolic sizes")
    raise ArgumentTypeError(f"{what} must be an integer, got {type(v).__name__} {v!r}")
  return operator.index(v)

def flat_args(args: Sequence) -> tuple:
  """f(2, 3) and f((2, 3)) and f([2, 3]) alike: the arguments as one tuple."""
  return tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else tuple(args)

def shape_arg(args: Sequence, what: str = "shape") -> tuple[int, ...]:
  """A shape given as sizes or one tuple/list of sizes: every size an integer >= 0."""
  if len(args) > 1 and any(isinstance(a, (tuple, list)) for a in args):  # f((2, 2), 2): ValueError, as tinygrad's argfix
    raise ArgumentValueError(f"{what} {tuple(args)!r}: give the sizes, or one tuple of them, not a tuple among sizes")
  shape = tuple(as_int(s, f"{what} {flat_args(args)!r}: each size") for s in flat_args(args))
  if any(s < 0 for s in shape): raise ArgumentValueError(f"{what} {shape} has a negative size")
  return shape

def axis_arg(a: Any, shape: tuple[int, ...], what: str = "axis", extra: int = 0) -> int:
  """One axis of a tensor of `shape` (negative counts from the end), normalized to 0..ndim-1+extra. A 0-d tensor takes
  axis 0 and -1, as torch. `extra` allows axes past the end (unsqueeze and stack insert one)."""
  a = as_int(a, what)
  n = max(len(shape) + extra, 1)
  if not -n <= a < n:
    raise AxisError(f"{what} {a} is out of range for a tensor of shape {shape} (expected {-n} to {n - 1})")
  return a + n if a < 0 else a

def axes_arg(axis: Any, shape: tuple[int, ...], what: str = "axis") -> tuple[int, ...]:
  """None (every axis), one axis or a sequence of them: sorted, without repeats."""
  if axis is None: return tuple(range(len(shape)))
  items = axis if isinstance(axis, (tuple, list)) else (axis,)
  axes = {axis_arg(a, shape, what) for a in items}
  return tuple(sorted(axes)) if shape else ()  # a 0-d tensor takes axis 0 or -1 and has nothing to reduce

def pads_arg(padding: Any, shape: tuple[int, ...], what: str = "padding", symbolic: bool = False) -> list[tuple[Any, Any]]:
  """Padding as ((before, after), ...) per axis (None for an axis, or in a pair, is 0), or a flat torch-style tuple
  (before, after) pairs for the last axis first, as long as 2 * (the axes padded): one (before, after) per axis.
  symbolic: a width may be a UOp (a bound Variable's expression), passed on as it is for the caller to check."""
  if not isinstance(padding, (tuple, list)): raise ArgumentTypeError(f"{what} must be a tuple or list, got {type(padding).__name__}")
  nd = len(shape)
  def width(v, where: str) -> int:
    if v is None: return 0
    if type(v).__name__ != "UOp": return as_int(v, f"{what} {tuple(padding)!r}: {where}")
    if symbolic: return v
    from runtime.uop import arg_str  # a Variable (pad takes no symbolic widths): the message shows it as n=2, not its graph
    return as_int(v, f"{what} {arg_str(tuple(padding))}: {where}")
  if padding and all(p is None or isinstance(p, (tuple, list)) for p in padding):
    if len(padding) != nd: raise ShapeError(f"{what} {tuple(padding)!r} has {len(padding)} pairs for a tensor of shape {shape}")
    out = []
    for i, p in enumerate(padding):
      if p is None: out.append((0, 0)); continue  # noqa: E702
      if len(p) != 2: raise ArgumentValueError(f"{what} {tuple(padding)!r}: the entry for axis {i} is not a (before, after) pair")
      out.append((width(p[0], f"axis {i}"), width(p[1], f"axis {i}")))
    return out
  if any(isinstance(p, (tuple, list)) for p in padding):
    raise ArgumentTypeError(f"{what} {tuple(padding)!r} mixes pairs and single widths")
  flat = [width(v, "each width") for v in padding]
  if len(flat) % 2: raise ArgumentValueError(f"{what} {tuple(padding)!r} has an odd number of widths: give (before, after) pairs")
  if len(flat) > 2 * nd: raise ShapeError(f"{what} {tuple(padding)!r} pads {len(flat) // 2} axes of a tensor of shape {shape}")
  pairs = [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)][::-1]  # last axis first
  return [(0, 0)] * (nd - len(pairs)) + pairs

def check_fits(value: Any, dtype, what: str = "constant") -> None:
  """A Python number becoming a constant of `dtype`: an int outside an int dtype's range, or a float outside it, raises
  ConstantOverflowError (numpy 2 does); nan or inf into an int dtype raise ArgumentValueError."""
  if isinstance(value, bool) or not dtypes.is_int(dtype): return
  v = value
  if isinstance(v, float):
    if not math.isfinite(v): raise ArgumentValueError(f"{what} {v} can't be {dtype!r}: it has no integer value")
    v = math.trunc(v)
  if isinstance(v, int) and not dtypes.min(dtype) <= v <= dtypes.max(dtype):
    raise ConstantOverflowError(f"{what} {value} is out of range for {dtype!r} [{dtypes.min(dtype)}, {dtypes.max(dtype)}]")

def to_dtype(x: Any) -> DType:
  """A tensor dtype from a DType, its name ("float32", "int") or a numpy type; TypeError for anything else."""
  if isinstance(x, DType) and not isinstance(x, PtrDType) and x.count == 1 and x is not dtypes.void: return x
  if isinstance(x, str) and isinstance(DTYPE_NAMES.get(x), DType) and DTYPE_NAMES[x] is not dtypes.void: return DTYPE_NAMES[x]
  if isinstance(x, (np.dtype, type)) and x not in (int, float, bool):
    try: return dtypes.from_numpy(x)
    except TypeError: pass
  if isinstance(x, str):  # a name dtypes does not have: AttributeError too, as tinygrad's getattr(dtypes, name) raises
    raise DTypeNameError(f"{x!r} is not a tensor dtype name: use one of dtypes (dtypes.float32, ...) or its name ('float32')")
  raise ArgumentTypeError(f"{x!r} is not a tensor dtype: use one of dtypes (dtypes.float32, dtypes.int32, ...), its name, or a numpy type")

def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
  """numpy's broadcast of several shapes; ShapeError naming them when they don't broadcast."""
  n = max((len(s) for s in shapes), default=0)
  out = [1] * n
  for s in shapes:
    for i, d in enumerate((1,) * (n - len(s)) + tuple(s)):
      if d != 1 and out[i] not in (1, d): raise ShapeError(f"shapes {', '.join(map(str, shapes))} can't broadcast together")
      if d != 1: out[i] = d
  return tuple(out)
