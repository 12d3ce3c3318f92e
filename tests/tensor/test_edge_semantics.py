"""Edge values that gave results torch and numpy do not (issue 22 items 7, 8, 9), each from its minimal reproducer. The
expected values are written out (they are torch's); with torch installed each is also checked against torch itself."""
import numpy as np
import pytest
from tensor import Tensor, dtypes
from tensor.errors import ArgumentValueError, DTypeError

try: import torch
except ImportError: torch = None

def bits(t) -> str: return np.asarray(t).astype(np.float32).tobytes().hex()

@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_relu_of_nan_is_nan(device):
  """relu(nan) was 0; torch (and our relu6, leaky_relu, clip) give nan. -0.0 stays -0.0, and the gradient at 0 is 0."""
  vals = [float("nan"), -0.0, 0.0, -1.0, 2.0]
  x = Tensor(vals, device=device, requires_grad=True)
  y = x.relu()
  assert bits(y.numpy()) == bits([float("nan"), -0.0, 0.0, 0.0, 2.0])
  y.sum().backward()
  assert x.grad.tolist() == [1.0, 0.0, 0.0, 0.0, 1.0]  # nan passes its gradient, as torch's threshold_backward
  for f in (lambda t: t.relu6(), lambda t: t.leaky_relu(), lambda t: t.clip(0, 1), lambda t: t.half().relu().float()):
    assert np.isnan(f(Tensor([float("nan")], device=device)).item())
  if torch is not None:
    xt = torch.tensor(vals, requires_grad=True)
    xt.relu().sum().backward()
    assert bits(xt.relu().detach().numpy()) == bits(y.numpy()) and xt.grad.tolist() == x.grad.tolist()

@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_int_sums_accumulate_in_int64(device):
  """sum([2**30] * 4) of int32 was 0 (it wrapped); torch and numpy give 2**32, in int64."""
  x = Tensor([2**30] * 4, dtype=dtypes.int32, device=device)
  assert x.sum().item() == 2**32 and x.sum().dtype is dtypes.int64
  assert x.cumsum().tolist() == [2**30, 2**31, 3 * 2**30, 2**32] and x.cumsum().dtype is dtypes.int64
  assert Tensor([2**16] * 3, dtype=dtypes.int32, device=device).prod().item() == 2**48
  assert Tensor([2**16] * 3, dtype=dtypes.int32, device=device).cumprod().tolist() == [2**16, 2**32, 2**48]
  for dt in (dtypes.bool, dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32, dtypes.int64):
    t = Tensor([1, 1], dtype=dt, device=device)
    assert t.sum().dtype is t.prod().dtype is t.cumsum().dtype is t.cumprod().dtype is dtypes.int64, dt
  assert Tensor([2**63, 2**63 - 1], dtype=dtypes.uint64, device=device).sum().dtype is dtypes.uint64  # not int64, as numpy: see docs
  assert x.sum(dtype=dtypes.int32).item() == 0  # asked for: wraps, as numpy's
  if torch is not None:
    xt = torch.tensor([2**30] * 4, dtype=torch.int32)
    assert xt.sum().item() == x.sum().item() and xt.cumsum(0).tolist() == x.cumsum().tolist()

def test_contractions_of_ints_keep_their_type():
  a = np.arange(6, dtype=np.int32).reshape(2, 3)
  assert (Tensor(a) @ Tensor(a.T)).dtype is dtypes.int32
  assert Tensor.einsum("ij,kj->ik", Tensor(a), Tensor(a)).dtype is dtypes.int32
  assert Tensor(a).reshape(1, 1, 2, 3).conv2d(Tensor(np.ones((1, 1, 1, 2), np.int32))).dtype is dtypes.int32

@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_round_keeps_the_sign_of_zero(device):
  """round(-0.5) was +0.0; torch's round (C's rint) gives -0.0."""
  vals = [-0.5, -0.4, 0.5, 1.5, -1.5, 2.5, -0.0, float("nan")]
  want = [-0.0, -0.0, 0.0, 2.0, -2.0, 2.0, -0.0, float("nan")]
  assert bits(Tensor(vals, device=device).round().numpy()) == bits(want)
  assert bits(Tensor(vals, device=device).half().round().float().numpy()) == bits(want)
  if torch is not None: assert bits(torch.tensor(vals).round().numpy()) == bits(want)

@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_the_gradient_of_abs_at_zero_is_zero(device):
  """The gradient of abs at 0 was -1; torch's is sign(x) * grad = 0."""
  x = Tensor([0.0, -0.0, 1.0, -2.0], device=device, requires_grad=True)
  x.abs().sum().backward()
  assert x.grad.tolist() == [0.0, 0.0, 1.0, -1.0] and bits(x.abs().numpy()) == bits([0.0, 0.0, 1.0, 2.0])

def test_a_loaded_bfloat16_nan_keeps_its_payload_under_bitcast():
  raw = np.array([0x7FC1, 0xFFA0, 0x7F81, 0x3F80, 0x0001], np.uint16)
  for t in (Tensor(raw).bitcast(dtypes.bfloat16), Tensor(raw).bitcast(dtypes.bfloat16).realize()):
    assert t.bitcast(dtypes.uint16).tolist() == raw.tolist()
  # a float32 nan whose payload is all in the low half is still a nan in bfloat16 (not an infinity)
  f = Tensor(np.array([0x7F800001, 0xFF800001], np.uint32)).bitcast(dtypes.float32)
  assert np.isnan(f.cast(dtypes.bfloat16).float().numpy()).all()

def test_uint64_arrays_are_numpys_own_type():
  """Tensor(uint64).numpy() had dtype char Q (unsigned long long), which torch.from_numpy refuses."""
  a = Tensor(np.array([1, 2**64 - 1], np.uint64)).numpy()
  assert a.dtype == np.uint64 and a.dtype.char == np.dtype(np.uint64).char and a.dtype.num == np.dtype(np.uint64).num
  assert Tensor(np.array([1], np.dtype("Q"))).dtype is dtypes.uint64  # either spelling comes in
  if torch is not None: assert torch.from_numpy(a).tolist() == [1, 2**64 - 1]

@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_max_of_nothing_is_an_error(device):
  """max() of an empty tensor gave -inf where torch and numpy raise (there is no value to give)."""
  for f in (lambda: Tensor([], device=device).max(), lambda: Tensor([], device=device).min(), lambda: Tensor.zeros(2, 0, device=device).max(1)):
    with pytest.raises(ArgumentValueError, match="an axis of size 0 has no"): f()
  assert Tensor.zeros(0, 3, device=device).max(1).shape == (0,)  # over a non-empty axis: an empty result
  assert Tensor([], device=device).any().item() is False and Tensor([], device=device).all().item() is True
  assert Tensor.zeros(2, 0, device=device).softmax(1).shape == (2, 0)
  assert Tensor.zeros(2, 0, device=device).logsumexp(1).tolist() == [float("-inf")] * 2
  if torch is not None:
    with pytest.raises(RuntimeError): torch.tensor([]).max()

def test_subtracting_bools_is_an_error():
  """bool - bool was computed where torch and numpy raise."""
  for f in (lambda: Tensor([True]) - Tensor([False]), lambda: Tensor([True]) - True, lambda: True - Tensor([True])):
    with pytest.raises(DTypeError, match="subtracting bools"): f()
  assert (Tensor([True]) ^ Tensor([False])).tolist() == [True] and (Tensor([True]) - 1).tolist() == [0]  # numpy's bool - int is fine
