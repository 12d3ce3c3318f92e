"""Argument helpers shared by the functional ops (tensor/functional/): the errors they raise, int-or-tuple arguments,
conv and pool paddings, and the loss reductions. Nothing here builds graphs.
"""
from __future__ import annotations
import functools, operator
from typing import Any

# The errors are TensorErrors that are also the standard exception torch raises in the same place, so `except
# RuntimeError` (shapes), `except ValueError` (argument values) and `except TypeError` (argument kinds) keep working.
# They are made on first use (functools.cache: one class per standard exception).
@functools.cache
def _error_class(std: type[Exception]) -> type[Exception]:
  from tensor.errors import TensorError
  # a bad argument value is also torch's RuntimeError (tinygrad's tests catch either)
  bases = (TensorError, RuntimeError, ValueError) if std is RuntimeError else (TensorError, ValueError, RuntimeError) if std is ValueError \
    else (TensorError, std)
  return type({RuntimeError: "FunctionalShapeError", ValueError: "FunctionalValueError", TypeError: "FunctionalTypeError"}[std],
              bases, {"__module__": __name__})

def shape_error(msg: str) -> Exception:
  """Operands whose shapes don't fit: a RuntimeError (as torch) and a ValueError (as numpy)."""
  return _error_class(RuntimeError)(msg)
def value_error(msg: str) -> Exception:
  """An argument of the right kind with a value the op can't take (a mode, a reduction, a negative size)."""
  return _error_class(ValueError)(msg)
def type_error(msg: str) -> Exception:
  """An argument of the wrong kind (a float where an int goes, a float tensor of class indices)."""
  return _error_class(TypeError)(msg)

def as_int(v: Any, what: str) -> int:
  if isinstance(v, bool) or not hasattr(v, "__index__"): raise type_error(f"{what} must be an integer, got {type(v).__name__} {v!r}")
  return operator.index(v)

def int_tuple(v: Any, n: int, what: str, minimum: int | None = None) -> tuple[int, ...]:
  """An int or a sequence of n ints as n ints (kernel_size=3 -> (3, 3)), each at least `minimum`."""
  items = tuple(v) if isinstance(v, (tuple, list)) else (v,) * n
  if len(items) != n: raise value_error(f"{what} {v!r} must be an int or {n} ints (one per spatial dimension)")
  out = tuple(as_int(x, what) for x in items)
  if minimum is not None and any(x < minimum for x in out): raise value_error(f"{what} {v!r} must be at least {minimum}")
  return out

def pad_pairs(padding: Any, n: int, what: str = "padding") -> list[tuple[int, int]]:
  """Padding of n spatial dims as (before, after) per dim, from an int (every side), n ints (both sides of each dim)
  or 2n ints in torch's F.pad order (last dim first: left, right, top, bottom, ...)."""
  if isinstance(padding, (tuple, list)) and len(padding) == 2 * n and n != 0:
    flat = [as_int(p, what) for p in padding]
    return [(flat[2 * i], flat[2 * i + 1]) for i in range(n)][::-1]
  if isinstance(padding, (tuple, list)) and len(padding) not in (n, 2 * n):
    raise value_error(f"{what} {tuple(padding)!r} must be an int, {n} ints (one per spatial dim) or {2 * n} ints (before and after each)")
  return [(p, p) for p in int_tuple(padding, n, what)]

REDUCTIONS = ("none", "mean", "sum")
def check_reduction(reduction: Any) -> str:
  if reduction not in REDUCTIONS: raise value_error(f"reduction={reduction!r} is not one of {', '.join(map(repr, REDUCTIONS))}")
  return reduction
