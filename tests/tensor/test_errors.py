"""Errors a user can cause with Tensor ops: mismatched shapes, bad axes, bad dtypes and bad arguments raise TensorError
(TypeError for values of the wrong kind) whose message names the operands: both shapes, or the bad axis and the shape.
Nothing runs: every check happens while the lazy graph is built.
"""
import numpy as np
import pytest
from tensor import Tensor, TensorError, dtypes
from runtime.device import DeviceError

A = Tensor.ones(2, 3, device="PYTHON")
B = Tensor.ones(4, device="PYTHON")
I = Tensor([[1, 2, 3], [4, 5, 6]], device="PYTHON")

def raises(exc, fn, *parts: str) -> str:
  """fn() raises exc and its message contains every one of parts."""
  with pytest.raises(exc) as info: fn()
  msg = str(info.value)
  for p in parts: assert p in msg, f"{p!r} not in the message {msg!r}"
  return msg

# ---- shapes that don't fit ----
@pytest.mark.parametrize("op", ["add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "maximum", "minimum", "lt", "eq", "ne", "ge"])
def test_binary_shapes_dont_broadcast(op):
  fn = {"maximum": lambda a, b: a.maximum(b), "minimum": lambda a, b: a.minimum(b)}.get(op) or \
    (lambda a, b: getattr(a, f"__{op}__")(b))
  raises(TensorError, lambda: fn(A, B), "(2, 3)", "(4,)", "broadcast")
  raises(TensorError, lambda: fn(B, A), "(4,)", "(2, 3)", "broadcast")

def test_bitwise_shapes_dont_broadcast():
  raises(TensorError, lambda: I & Tensor([1, 2], device="PYTHON"), "(2, 3)", "(2,)")
  raises(TensorError, lambda: I << Tensor([[1], [2], [3]], device="PYTHON"), "(2, 3)", "(3, 1)")

def test_where_shapes():
  cond = Tensor([True, False, True], device="PYTHON")
  raises(TensorError, lambda: cond.where(A, B), "(2, 3)", "(4,)")
  raises(TensorError, lambda: Tensor([True, False], device="PYTHON").where(A, 0), "(2,)", "(2, 3)")

def test_matmul_shapes():
  raises(TensorError, lambda: A @ Tensor.ones(4, 2, device="PYTHON"), "(2, 3)", "(4, 2)")
  raises(TensorError, lambda: A @ B, "(2, 3)", "(4,)")
  raises(TensorError, lambda: Tensor(1.0, device="PYTHON") @ A, "()", "(2, 3)")

def test_assign_shape_and_dtype():
  t = Tensor.zeros(2, 3, device="PYTHON").contiguous().realize()
  raises(TensorError, lambda: t.assign(B), "(4,)", "(2, 3)")
  raises(TensorError, lambda: t.assign(I), "dtypes.int", "dtypes.float")

def test_movement_shapes():
  raises(TensorError, lambda: A.reshape(4, 2), "(2, 3)", "(4, 2)")
  raises(TensorError, lambda: A.reshape(-1, 4), "(2, 3)", "(-1, 4)")
  raises(TensorError, lambda: A.reshape(-1, -1), "(-1, -1)")
  raises(TensorError, lambda: A.expand(2, 4), "(2, 3)", "(2, 4)")
  raises(TensorError, lambda: A.expand(3), "(2, 3)", "(3,)")
  raises(TensorError, lambda: A.pad(((1, 1),)), "((1, 1),)", "(2, 3)")
  raises(TensorError, lambda: A.shrink(((0, 3), (0, 1))), "((0, 3), (0, 1))", "(2, 3)")
  raises(TensorError, lambda: A.shrink(((1, 0), (0, 1))), "(2, 3)")
  raises(TensorError, lambda: A.permute(0, 0), "(0, 0)", "(2, 3)")
  raises(TensorError, lambda: A.permute(1), "(1,)", "(2, 3)")

# ---- bad axes ----
@pytest.mark.parametrize("axis", [2, -3, 7])
@pytest.mark.parametrize("op", ["sum", "prod", "max", "min", "mean", "argmax", "argmin"])
def test_reduce_bad_axis(op, axis):
  raises(TensorError, lambda: getattr(A, op)(axis), f"axis {axis}", "(2, 3)")

def test_reduce_bad_axis_in_tuple():
  raises(TensorError, lambda: A.sum((0, 5)), "axis 5", "(2, 3)")
  raises(TensorError, lambda: A.max((-1, -4), keepdim=True), "axis -4", "(2, 3)")

def test_movement_bad_axis():
  raises(TensorError, lambda: A.permute(0, 2), "axis 2", "(2, 3)")
  raises(TensorError, lambda: A.transpose(0, 2), "axis 2", "(2, 3)")
  raises(TensorError, lambda: A.transpose(-3, 0), "axis -3", "(2, 3)")
  raises(TensorError, lambda: A.flip(2), "axis 2", "(2, 3)")
  raises(TensorError, lambda: A.squeeze(-3), "axis -3", "(2, 3)")
  raises(TensorError, lambda: A.unsqueeze(4), "axis 4", "(2, 3)")
  raises(TensorError, lambda: A.unsqueeze(-4), "axis -4", "(2, 3)")
  raises(TensorError, lambda: A.flatten(3), "axis 3", "(2, 3)")
  raises(TensorError, lambda: A.size(2), "axis 2", "(2, 3)")
  raises(TensorError, lambda: Tensor(1.0, device="PYTHON").sum(1), "axis 1", "()")

def test_argmax_of_empty_axis():
  raises(TensorError, lambda: Tensor.zeros(0, 3, device="PYTHON").argmax(0), "axis 0", "(0, 3)", "empty")
  raises(TensorError, lambda: Tensor.zeros(0, 3, device="PYTHON").argmin(), "size 0")

def test_getitem_bad_index():
  raises(TensorError, lambda: A[2], "index 2", "axis 0", "(2, 3)")
  raises(TensorError, lambda: A[:, -4], "index -4", "axis 1", "(2, 3)")
  raises(TensorError, lambda: A[0, 0, 0], "3", "2 dimensions")
  raises(TensorError, lambda: A[..., ...], "...")
  raises(TensorError, lambda: A[::0], "step", "(2, 3)")
  raises(TensorError, lambda: A["x"], "'x'")
  raises(TensorError, lambda: A[1.5], "1.5")

# ---- bad dtypes ----
@pytest.mark.parametrize("op", ["__and__", "__or__", "__xor__", "__lshift__", "__rshift__"])
def test_bitwise_on_floats(op):
  raises(TensorError, lambda: getattr(A, op)(1), "dtypes.float", "(2, 3)", "int 1")
  raises(TensorError, lambda: getattr(I, op)(A), "dtypes.int (2, 3)", "dtypes.float (2, 3)")
  raises(TensorError, lambda: getattr(I, op)(1.5), "dtypes.int (2, 3)", "float 1.5")

def test_bitwise_not_on_floats():
  raises(TensorError, lambda: ~A, "dtypes.float", "(2, 3)")

def test_bitcast_size():
  raises(TensorError, lambda: A.bitcast(dtypes.int8), repr(dtypes.float32), repr(dtypes.int8))
  raises(TensorError, lambda: I.bitcast(dtypes.float64), repr(dtypes.int32), repr(dtypes.float64))

@pytest.mark.parametrize("bad", ["float33", int, float, object, 3, dtypes.float32.ptr(), dtypes.float32.vec(4), dtypes.void])
def test_not_a_dtype(bad):
  for fn in (lambda: Tensor([1], dtype=bad), lambda: A.cast(bad), lambda: Tensor.zeros(2, dtype=bad), lambda: Tensor.full(2, 1, dtype=bad),
             lambda: Tensor.arange(3, dtype=bad), lambda: Tensor.empty(2, dtype=bad), lambda: A.sum(dtype=bad), lambda: A.bitcast(bad)):
    raises(TypeError, fn, repr(bad), "not a tensor dtype")

def test_dtype_spellings():
  """A dtype's name or numpy type is accepted where a dtype is."""
  assert Tensor([1], dtype="float16", device="PYTHON").dtype is dtypes.float16
  assert A.cast(np.int8).dtype is dtypes.int8
  assert A.cast(np.dtype("uint8")).dtype is dtypes.uint8
  assert Tensor.zeros(2, dtype="int").dtype is dtypes.int32

def test_data_of_the_wrong_kind():
  raises(TypeError, lambda: Tensor("abc"), "str")
  raises(TypeError, lambda: Tensor({1: 2}), "dict")
  raises(TypeError, lambda: Tensor(np.array([1j])), "complex128")
  raises(TypeError, lambda: Tensor(np.array([object()])), "object")
  raises(TensorError, lambda: Tensor([[1, 2], [3]]), "list")
  raises(TypeError, lambda: A + "x", "str")
  raises(TypeError, lambda: A * [1, 2], "list")
  raises(TypeError, lambda: A + A.uop, "UOp")

def test_other_arguments():
  raises(TensorError, lambda: Tensor.zeros(-1, 2), "(-1, 2)")
  raises(TensorError, lambda: Tensor.full(-2, 1), "(-2,)")
  raises(TensorError, lambda: Tensor.arange(0, 5, 0), "step")
  raises(TensorError, lambda: A.item(), "(2, 3)")
  raises(TensorError, lambda: bool(A), "6 elements")
  raises(TypeError, lambda: len(Tensor(1)), "0-d")
  raises(DeviceError, lambda: Tensor([1], device="NOPE"), "'NOPE'", "CPU", "PYTHON")
  raises(TensorError, lambda: Tensor([1], device="CPU") + Tensor([1], device="PYTHON"), "CPU", "PYTHON", "(1,)")

def test_errors_leave_the_graph_alone():
  """A failed op changes nothing: the operands still compute."""
  t = Tensor([1, 2, 3], device="PYTHON")
  with pytest.raises(TensorError): t + Tensor([1, 2], device="PYTHON")
  with pytest.raises(TensorError): t.sum(3)
  assert (t * 2).tolist() == [2, 4, 6]
