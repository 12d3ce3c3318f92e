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

# ---- the standard exception each error also is (docs/tensor.md has the table) ----
from tensor.errors import (AxisError, ShapeError, TensorIndexError, DTypeError, ArgumentTypeError, ArgumentValueError,  # noqa: E402
                           ConstantOverflowError, DeviceMismatchError)

MAPPING = [  # (what, raises, the standard exceptions it must also be)
  ("broadcast", lambda: A + B, ShapeError, (RuntimeError, ValueError)),
  ("matmul", lambda: A @ A, ShapeError, (RuntimeError, ValueError)),
  ("reshape", lambda: A.reshape(4, 2), ShapeError, (RuntimeError, ValueError)),
  ("cat", lambda: A.cat(B), ShapeError, (RuntimeError, ValueError)),
  ("axis", lambda: A.sum(2), AxisError, (IndexError, ValueError)),
  ("index", lambda: A[5], TensorIndexError, (IndexError,)),
  ("list index", lambda: A[[0, 2]], TensorIndexError, (IndexError,)),
  ("too many indices", lambda: A[0, 0, 0], TensorIndexError, (IndexError,)),
  ("bitwise float", lambda: A & 1, DTypeError, (TypeError, RuntimeError)),
  ("rand int", lambda: Tensor.rand(2, dtype=dtypes.int32), DTypeError, (TypeError, RuntimeError)),
  ("size type", lambda: Tensor.zeros(2.5), ArgumentTypeError, (TypeError,)),
  ("size value", lambda: Tensor.zeros(-1), ArgumentValueError, (ValueError,)),
  ("overflow", lambda: Tensor([1]) + 2**40, ConstantOverflowError, (OverflowError,)),
  ("device", lambda: Tensor([1], device="CPU") + Tensor([1], device="PYTHON"), DeviceMismatchError, (RuntimeError,)),
]

@pytest.mark.parametrize("what,fn,exc,std", MAPPING, ids=[m[0] for m in MAPPING])
def test_error_is_the_standard_exception(what, fn, exc, std):
  with pytest.raises(exc) as info: fn()
  assert isinstance(info.value, TensorError)
  for s in std: assert isinstance(info.value, s), f"{what}: {type(info.value).__name__} is not a {s.__name__}"
  for s in std:  # and `except RuntimeError:` style code catches it
    try: fn()
    except s: pass

# ---- bad arguments refused at the API, naming the argument (issue 10) ----
@pytest.mark.parametrize("fn,exc,parts", [
  (lambda: A.reshape(-2, -3), ValueError, ("reshape", "-2")),
  (lambda: A.reshape(2.5, 2.4), TypeError, ("reshape", "2.5")),
  (lambda: A.reshape("2", 3), TypeError, ("reshape", "'2'")),
  (lambda: A.expand(-5, 3), ValueError, ("expand", "-5")),
  (lambda: A.expand(1.5, 3), TypeError, ("expand", "1.5")),
  (lambda: A.shrink(((0, 1), (0, 1), (0, 1))), ShapeError, ("shrink", "3 entries", "(2, 3)")),
  (lambda: A.shrink(((0, 1.5), (0, 1))), TypeError, ("shrink", "1.5")),
  (lambda: A.pad((1,)), ValueError, ("padding", "odd")),
  (lambda: A.pad((1, 2, 3)), ValueError, ("padding", "odd")),
  (lambda: A.pad((1, 1, 1, 1, 1, 1)), ShapeError, ("padding", "3 axes", "(2, 3)")),
  (lambda: A.pad(((1, 1), 1)), TypeError, ("padding", "mixes")),
  (lambda: A.pad(((1, 1), (0, 1.5))), TypeError, ("padding", "1.5")),
  (lambda: A.pad(3), TypeError, ("padding", "int")),
  (lambda: A.pad(((1, 1), (1, 1)), 0.0), TypeError, ("mode", "value=")),
  (lambda: A.pad(((1, 1), (1, 1)), mode="edge"), ValueError, ("mode", "'edge'")),
  (lambda: I.pad(((1, 1), (1, 1)), value=float("nan")), ValueError, ("nan", "dtypes.int")),
  (lambda: Tensor.zeros(2.5), TypeError, ("shape", "2.5")),
  (lambda: Tensor.zeros("3"), TypeError, ("shape", "'3'")),
  (lambda: Tensor.ones(2, None), TypeError, ("shape", "None")),
  (lambda: Tensor.full((2, 1.5), 0), TypeError, ("shape", "1.5")),
  (lambda: A @ [[1.0], [2.0]], TypeError, ("matmul", "list")),
  (lambda: [[1.0, 2.0]] @ A, TypeError, ("matmul", "list")),
  (lambda: A.permute(1.0, 0), TypeError, ("permute", "1.0")),
  (lambda: A.sum(axis=1.5), TypeError, ("axis", "1.5")),
  (lambda: A.max(axis="0"), TypeError, ("axis", "'0'")),
  (lambda: A.transpose(0, None), TypeError, ("axis", "None")),
  (lambda: A.flatten(1, 0), ValueError, ("start_dim", "end_dim")),
  (lambda: Tensor.arange(0, 5, 0), ValueError, ("step",)),
  (lambda: Tensor.arange("5"), TypeError, ("arange", "'5'")),
  (lambda: Tensor.arange(0, float("inf")), ValueError, ("arange", "finite")),
  (lambda: A.clip(), ValueError, ("clip", "min", "max")),
  (lambda: A.div(2, rounding_mode="round"), ValueError, ("rounding_mode", "'round'")),
  (lambda: A.split(0), ValueError, ("split", "0")),
  (lambda: A.split([1, 2]), ShapeError, ("split", "[1, 2]", "2")),
  (lambda: A.unfold(1, 4, 1), ShapeError, ("unfold", "4", "3")),
  (lambda: A.unfold(1, 2, 0), ValueError, ("step",)),
  (lambda: A.pad(((0, 0), (3, 0)), mode="reflect"), ShapeError, ("reflect", "3", "size 3")),
  (lambda: A.topk(4), ShapeError, ("topk", "k=4")),
  (lambda: A.repeat(2), ShapeError, ("repeat", "(2,)", "(2, 3)")),
  (lambda: Tensor.eye(-1), ValueError, ("eye", "-1")),
  (lambda: Tensor.linspace(0, 1, 2.5), TypeError, ("linspace", "2.5")),
  (lambda: A.diagonal(0, 1, 1), ValueError, ("diagonal", "differ")),
  (lambda: A.isclose(A, rtol=-1), ValueError, ("rtol",)),
  (lambda: A.gather(0, Tensor([[0.5]], device="PYTHON")), DTypeError, ("gather", "integer")),
  (lambda: A.gather(0, Tensor([0], device="PYTHON")), ShapeError, ("gather", "(1,)", "(2, 3)")),
  (lambda: A.scatter_reduce(0, Tensor([[0]], device="PYTHON"), A, "median"), ValueError, ("reduce", "'median'")),
  (lambda: A.masked_fill(Tensor([1, 0], device="PYTHON"), 0), DTypeError, ("mask", "bool")),
  (lambda: A[::0], ValueError, ("step", "zero")),
  (lambda: A[1:2.5], TypeError, ("slice", "2.5")),
  (lambda: A[True], TypeError, ("bool index",)),
  (lambda: A[Tensor([[True, False]], device="PYTHON")], IndexError, ("boolean index", "(1, 2)", "(2, 3)")),
  (lambda: A[[0.5]], TypeError, ("float",)),
])
def test_bad_arguments(fn, exc, parts):
  raises(exc, fn, *parts)

# ---- integer constants that don't fit their dtype: OverflowError, as numpy 2 ----
@pytest.mark.parametrize("fn,parts", [
  (lambda: Tensor(2**70), ("1180591620717411303424", "int64")),
  (lambda: Tensor([1], device="PYTHON") + 2**40, ("1099511627776", "dtypes.int")),
  (lambda: Tensor([1], device="PYTHON", dtype=dtypes.uint8) + 300, ("300", "dtypes.uint8")),
  (lambda: Tensor([1], device="PYTHON", dtype=dtypes.uint8) * -1, ("-1",)),
  (lambda: Tensor.arange(2**40, 2**40 + 3, dtype=dtypes.int32), ("1099511627776",)),
  (lambda: Tensor(1e30, dtype=dtypes.int32), ("1e+30",)),
  (lambda: Tensor([1e30], dtype=dtypes.int32), ("1000000000000000019884624838656", "dtypes.int")),
  (lambda: Tensor(300, dtype=dtypes.uint8), ("300",)),
  (lambda: Tensor([2**64]), ("int64",)),
  (lambda: Tensor.full((2,), 2**31, dtype=dtypes.int32), ("2147483648",)),
  (lambda: (I > 2).where(I, 2**40), ("1099511627776",)),
  (lambda: I.pad(((1, 1), (0, 0)), value=2**40), ("1099511627776",)),
])
def test_constants_that_overflow(fn, parts):
  raises(OverflowError, fn, *parts)

def test_wide_ints_pick_int64():
  """Ints beyond int32 make int64 where nothing fixes the dtype (lists, scalars, arange), as torch and numpy do."""
  assert Tensor(2**40, device="PYTHON").dtype is dtypes.int64 and Tensor(2**40, device="PYTHON").item() == 2**40
  assert Tensor([1, 2**40], device="PYTHON").dtype is dtypes.int64 and Tensor([1, -2**40], device="PYTHON").tolist() == [1, -2**40]
  t = Tensor.arange(2**31, 2**31 + 3, device="PYTHON")
  assert t.dtype is dtypes.int64 and t.tolist() == [2**31, 2**31 + 1, 2**31 + 2]
  assert Tensor.arange(2**40, 2**40 + 3, device="CPU").tolist() == [2**40, 2**40 + 1, 2**40 + 2]
  assert Tensor.arange(-2**31, -2**31 + 2, device="PYTHON").dtype is dtypes.int32
  assert (Tensor([True], device="PYTHON") + 2**40).dtype is dtypes.int64
  assert Tensor(2**40, dtype=dtypes.float32, device="PYTHON").item() == 2.0**40   # a float dtype takes it, rounded

def test_out_of_range_ints_still_compare():
  """A comparison with an int beyond the tensor's range is decided by value (numpy 2), not an error."""
  u = Tensor([0, 7, 255], dtype=dtypes.uint8, device="PYTHON")
  assert (u < 300).tolist() == [True] * 3 and (u > -1).tolist() == [True] * 3 and (u == -1).tolist() == [False] * 3
  assert (u != 256).tolist() == [True] * 3 and (u >= 1000).tolist() == [False] * 3 and (u <= -5).tolist() == [False] * 3

def test_limits():
  assert (dtypes.int32.min, dtypes.int32.max) == (-2**31, 2**31 - 1)
  assert (dtypes.uint8.min, dtypes.uint8.max, dtypes.int64.max, dtypes.bool.max) == (0, 255, 2**63 - 1, True)
  assert dtypes.float32.max == float("inf") and dtypes.float16.min == float("-inf")  # the same as dtypes.max/min

def test_torch_raises_the_same_standard_exceptions():
  """The standard exception of each class is the one torch raises in the same place."""
  torch = pytest.importorskip("torch")
  a, b = torch.ones(2, 3), torch.ones(4)
  for fn, std in [(lambda: a + b, RuntimeError), (lambda: a @ a, RuntimeError), (lambda: a.reshape(4, 2), RuntimeError),
                  (lambda: a.sum(2), IndexError), (lambda: a[5], IndexError), (lambda: a.int() & 1.5, RuntimeError),
                  (lambda: torch.zeros(2.5), TypeError), (lambda: torch.rand(2, dtype=torch.int32), RuntimeError)]:
    with pytest.raises(std): fn()

def test_topic_modules_define_each_method_once():
  """Tensor derives from its topic mixins: none may define a name Tensor defines itself (Tensor's would hide it) nor one
  another topic mixin defines (the first base would hide the other); a name the nn-functional mixin also defines is its
  (gelu(approximate=)), and every mixin keeps Tensor's instances free of a __dict__."""
  from tensor import Tensor
  from tensor.autograd import AutogradMixin
  from tensor.functional import FunctionalMixin
  topics = [c for c in Tensor.__mro__[1:] if c is not object and not issubclass(FunctionalMixin, c) and c is not AutogradMixin]
  assert {c.__name__ for c in topics} == {"RandomMixin", "ElementwiseMixin", "CreationMixin", "MovementMixin", "ScanMixin", "IndexingMixin"}
  own = {n for n in vars(Tensor) if not n.startswith("__")}
  seen: dict[str, str] = {}
  for c in topics:
    for n in vars(c):
      if n.startswith("__"): continue
      assert n not in own, f"{c.__name__}.{n} is hidden by Tensor's own {n}"
      assert n not in seen, f"{c.__name__}.{n} and {seen[n]}.{n}: one hides the other"
      seen[n] = c.__name__
  assert Tensor.gelu is FunctionalMixin.gelu and Tensor.rand.__func__ is vars(topics[0])["rand"].__func__  # type: ignore[attr-defined]
  assert all("__slots__" in vars(c) for c in Tensor.__mro__[1:] if c is not object) and not hasattr(Tensor([1]), "__dict__")
