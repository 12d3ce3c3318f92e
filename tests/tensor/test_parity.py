"""What a user porting tinygrad code meets (issue 26), each against numpy or torch: writes through views reach the stored
tensor (or raise, never vanish), zero gradients for targets with no elements or read only through folded or underivable
ops, gelu's tanh default, cummax's indices, the JIT refusing host reads during a capture, Context(TRAINING=1), the
tinygrad-named helpers (tensor/helpers.py), the smaller methods (std_mean, randperm, multinomial, shrink_to, ...), a capture's
kernel list (`CapturedJit.linear`), pad and cat by bound Variables in a JIT, `to_`, `from_blob` and `clone`'s gradient.
"""
from __future__ import annotations
import io, urllib.error, urllib.request
from contextlib import redirect_stdout
import numpy as np
import pytest
from runtime.helpers import Context
from tensor import Tensor, dtypes
from tensor.autograd import GradientError
from tensor.engine.jit import JitError
from tensor.jit import TinyJit
from tensor.errors import ShapeError
from tensor import helpers

def _stored(a) -> Tensor: return Tensor(np.asarray(a, np.float32)).contiguous().realize()

# ---- writes through views ----

VIEW_WRITES = [  # (what the user writes, the same write in numpy on the base array)
  ("t[::-1][0] = 5", lambda t: t[::-1].__setitem__(0, 5), lambda a: a[::-1].__setitem__(0, 5)),
  ("t.T[1, 0] = 5", lambda t: t.T.__setitem__((1, 0), 5), lambda a: a.T.__setitem__((1, 0), 5)),
  ("t.detach()[1, 2] = 7", lambda t: t.detach().__setitem__((1, 2), 7), lambda a: a.__setitem__((1, 2), 7)),
  ("t[1][2] = 3", lambda t: t[1].__setitem__(2, 3), lambda a: a[1].__setitem__(2, 3)),
  ("t[:, 1:][::-1, ::-1][0] = [8, 9]", lambda t: t[:, 1:][::-1, ::-1].__setitem__(0, Tensor([8.0, 9.0])),
   lambda a: a[:, 1:][::-1, ::-1].__setitem__(0, [8, 9])),
  ("t.reshape(6)[2:4] = 1", lambda t: t.reshape(6).__setitem__(slice(2, 4), 1), lambda a: a.reshape(6).__setitem__(slice(2, 4), 1)),
  ("t.flip(1).permute(1, 0)[0, 1] += 4", lambda t: t.flip(1).permute(1, 0).__setitem__((0, 1), t.flip(1).permute(1, 0)[0, 1] + 4),
   lambda a: a[:, ::-1].T.__setitem__((0, 1), a[:, ::-1].T[0, 1] + 4)),
  ("t[1:].assign(ones)", lambda t: t[1:].assign(Tensor.ones(1, 3)), lambda a: a[1:].__setitem__(slice(None), 1)),
]

@pytest.mark.parametrize("name,ours,ref", VIEW_WRITES, ids=[w[0] for w in VIEW_WRITES])
def test_write_through_a_view_reaches_the_stored_tensor(name, ours, ref):
  a = np.arange(6, dtype=np.float32).reshape(2, 3)
  t = _stored(a)
  ours(t)
  ref(a)
  np.testing.assert_array_equal(t.numpy(), a)

def test_the_view_written_through_reads_the_new_values():
  t = _stored(np.zeros((2, 3)))
  v = t[1:]
  v[0, 1] = 7
  assert v.tolist() == [[0.0, 7.0, 0.0]] and t.tolist() == [[0.0, 0.0, 0.0], [0.0, 7.0, 0.0]]

def test_a_write_into_a_view_of_an_unrealized_tensor_realizes_it_first():
  a = Tensor.arange(6).reshape(2, 3)
  a[1][0] = 50
  assert a.tolist() == [[0, 1, 2], [50, 4, 5]]
  a = Tensor.arange(6).reshape(2, 3)
  v = a[1]
  v += 7
  assert a.tolist() == [[0, 1, 2], [10, 11, 12]] and v.tolist() == [10, 11, 12]
  t = Tensor.arange(4).reshape(2, 2).contiguous()
  t[1] += 2  # tinygrad's test_setitem_inplace_operator
  assert t.tolist() == [[0, 1], [4, 5]]
  a = Tensor.arange(6).reshape(2, 3)
  a[1] = 5  # the tensor itself takes the new value (lazily)
  assert a.tolist() == [[0, 1, 2], [5, 5, 5]]
  t = _stored([1.0, 2.0, 3.0])
  with pytest.raises(ShapeError, match="expanded view"):
    t.reshape(3, 1).expand(3, 2)[0, 0] = 1

# ---- gradients ----

def test_zero_size_and_underivable_targets_get_zero_gradients():
  torch = pytest.importorskip("torch")
  rng = np.random.default_rng(0)
  for s1, s2 in [((8, 8), (8, 0)), ((0, 8), (8, 8)), ((0, 8), (8, 0)), ((3, 0), (0, 4))]:
    a, b = rng.random(s1, np.float32), rng.random(s2, np.float32)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    want = torch.autograd.grad((ta @ tb).sum(), (ta, tb))
    x, y = Tensor(a), Tensor(b)
    got = (x @ y).sum().gradient(x, y)
    for g, w in zip(got, want): np.testing.assert_array_equal(g.numpy(), w.numpy())
  x = Tensor(rng.random((2, 0, 3), np.float32))
  assert x.mean(1).sum().gradient(x)[0].shape == (2, 0, 3)
  p = Tensor(rng.random((0, 3), np.float32))
  assert p.pad(((1, 1), (0, 0))).sum().gradient(p)[0].shape == (0, 3)
  z = Tensor([1.0, 2.0])
  assert ((z > 1).float() + z.detach()).sum().gradient(z)[0].tolist() == [0.0, 0.0]
  with pytest.raises(GradientError, match="not in the graph"):
    (z * 2).sum().gradient(z, Tensor([3.0]))  # a tensor the loss does not read at all is still an error

# ---- gelu, cummax ----

def test_gelu_is_tinygrads_tanh_form_with_erf_as_an_argument():
  torch = pytest.importorskip("torch")
  x = np.linspace(-6, 6, 101, dtype=np.float32)
  F = torch.nn.functional
  np.testing.assert_allclose(Tensor(x).gelu().numpy(), F.gelu(torch.tensor(x), approximate="tanh").numpy(), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(Tensor(x).gelu(approximate="none").numpy(), F.gelu(torch.tensor(x)).numpy(), rtol=1e-5, atol=1e-6)

# ---- the JIT ----

@pytest.mark.parametrize("read", [lambda t: t.item(), lambda t: t.tolist(), lambda t: t.numpy(), lambda t: t.data()])
def test_reading_values_inside_a_capture_raises(read):
  @TinyJit
  def f(x):
    y = (x * 2).sum()
    read(y)
    return y.realize()
  f(Tensor([1.0, 2.0]))  # the first call runs plainly
  with pytest.raises(JitError, match="inside a TinyJit capture"):
    f(Tensor([3.0, 4.0]))
  # outside a capture the same reads work
  assert (Tensor([1.0, 2.0]) * 2).sum().item() == 6.0

# ---- training flag, helpers ----

def test_context_training_is_tensor_train():
  assert Tensor.training is False
  with Context(TRAINING=1):
    assert Tensor.training is True and bool(helpers.TRAINING)
    assert Tensor.ones(1000).dropout(0.5).numpy().min() == 0.0
  assert Tensor.training is False and not helpers.TRAINING
  with Tensor.train(): assert helpers.TRAINING.value == 1

def test_helpers():
  buf = io.StringIO()
  with redirect_stdout(buf), helpers.Timing("step ", on_exit=lambda ns: " done"): pass
  assert buf.getvalue().startswith("step ") and buf.getvalue().rstrip().endswith("ms done")
  model = {"layers": [{"w": 1}, {"w": 2}]}
  assert helpers.get_child(model, "layers.1.w") == 2
  assert list(helpers.trange(3, file=io.StringIO())) == [0, 1, 2]
  assert helpers.getenv("SURELY_UNSET_VARIABLE_26", 7) == 7 and helpers.DEBUG.value >= 0
  from tensor.nn.progress import trange
  assert trange is helpers.trange

def test_fetch_without_a_network_says_so(tmp_path, monkeypatch):
  monkeypatch.setenv("CACHE_DIR", str(tmp_path))
  def offline(*args, **kwargs): raise urllib.error.URLError("no network")
  monkeypatch.setattr(urllib.request, "urlopen", offline)
  with pytest.raises(helpers.FetchError, match=r"https://example\.invalid/w\.bin: could not download it \(no network\)"):
    helpers.fetch("https://example.invalid/w.bin", "w.bin")
  assert not list(tmp_path.rglob("w.bin*"))  # nothing half-written
  (tmp_path / "downloads").mkdir(exist_ok=True)
  (tmp_path / "downloads" / "w.bin").write_bytes(b"weights")  # a file put there by hand is found
  assert helpers.fetch("https://example.invalid/w.bin", "w.bin").read_bytes() == b"weights"
  assert str(helpers.fetch("/some/local/path")) == "/some/local/path"

# ---- smaller methods ----

def test_smaller_methods_against_numpy_and_torch():
  torch = pytest.importorskip("torch")
  a = np.random.default_rng(1).random((3, 4), np.float32)
  for ours, theirs in [(Tensor(a).std_mean(1), torch.std_mean(torch.tensor(a), 1)), (Tensor(a).var_mean(), torch.var_mean(torch.tensor(a)))]:
    for o, t in zip(ours, theirs): np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=1e-5)
  t = Tensor(a)
  np.testing.assert_array_equal(t.shrink_to(2, None).numpy(), a[:2])
  np.testing.assert_array_equal(t.pad_to(4, 6, value=-1).numpy(), np.pad(a, ((0, 1), (0, 2)), constant_values=-1))
  assert np.frombuffer(Tensor([1, 2, 3]).data(), dtype=np.int32).tolist() == [1, 2, 3]
  assert Tensor(a).data().shape == (3, 4) and Tensor(2.5).data()[()] == 2.5 and Tensor.zeros(2, 0).data().shape == (2, 0)
  assert Tensor([1.5], dtype=dtypes.half).data().format == "e"
  r = _stored([1.0, 2.0])
  other = r + 0
  r.replace(Tensor([5, 6]))
  assert r.tolist() == [5, 6] and r.dtype is dtypes.int32 and other.tolist() == [1.0, 2.0]
  with pytest.raises(ShapeError): r.replace(Tensor([1.0]))

def test_randperm_and_multinomial():
  Tensor.manual_seed(3)
  p = Tensor.randperm(50)
  assert p.dtype is dtypes.int32 and sorted(p.tolist()) == list(range(50))
  w = np.array([1.0, 0.0, 3.0, 6.0], np.float32)
  s = Tensor(w).multinomial(20000, replacement=True).numpy()
  assert s.dtype == np.int32 and s.shape == (20000,)
  np.testing.assert_allclose(np.bincount(s, minlength=4) / 20000, w / w.sum(), atol=0.02)
  rows = Tensor([[1.0, 2.0, 3.0, 4.0], [0.0, 0.0, 1.0, 1.0]]).multinomial(2).numpy()
  assert rows.shape == (2, 2) and all(len(set(r)) == 2 for r in rows) and set(rows[1]) == {2, 3}
  with pytest.raises(ValueError, match="at most 4"): Tensor(w).multinomial(5)
  assert Tensor(w).multinomial(1).shape == (1,)

def test_arguments_as_torch_takes_them():
  torch = pytest.importorskip("torch")
  F = torch.nn.functional
  x = np.random.default_rng(2).random((3, 3, 3, 3), np.float32)
  for pads, mode in [((-1, 2, 2, -1), "reflect"), ((3, -3, 0, -3), "replicate"), ((-1, 2, 2, -1), "circular")]:
    np.testing.assert_array_equal(Tensor(x).pad(pads, mode=mode).numpy(), F.pad(torch.tensor(x), pads, mode=mode).numpy())
  w, im = np.random.default_rng(3).random((1, 3, 2, 2), np.float32), np.random.default_rng(4).random((1, 3, 6, 6), np.float32)
  np.testing.assert_allclose(Tensor(im).conv2d(Tensor(w), padding=-1).numpy(),
                             F.conv2d(torch.tensor(im)[:, :, 1:-1, 1:-1], torch.tensor(w)).numpy(), rtol=1e-5)  # a negative padding crops
  a, b = np.ones((2, 3, 4), np.float32), np.arange(24, dtype=np.float32).reshape(2, 3, 4)
  np.testing.assert_allclose(Tensor.einsum("ij...,ij...->ij", Tensor(a), Tensor(b)).numpy(), np.einsum("ijk,ijk->ij", a, b))
  assert Tensor([1, 2, 3]).roll((1,)).tolist() == [3, 1, 2]
  t = Tensor([0, 1, 2, 3, 4])
  mask = Tensor([True, False, True, False, True])
  assert t.masked_select(mask, size=2).tolist() == [0, 2] and t.masked_select(mask, size=4, fill_value=-1).tolist() == [0, 2, 4, -1]
  assert Tensor([[1, 0], [0, 2]]).nonzero(size=3, fill_value=-1).tolist() == [[0, 0], [1, 1], [-1, -1]]
  assert Tensor(5).nonzero().shape == (1, 0) and Tensor(0).nonzero().shape == (0, 0)

def test_bad_arguments_raise_what_torch_raises():
  t = Tensor.ones(3, 4)
  for bad in [lambda: t.flip((1, 1)), lambda: t.reshape(-1, -1, 2), lambda: Tensor([1, 2]) ** -2, lambda: t.roll((1, 2)),
              lambda: t.diagonal(dim1=0, dim2=0), lambda: Tensor.linspace(1, 2, -1)]:
    with pytest.raises(RuntimeError): bad()
  with pytest.raises(TypeError): Tensor.linspace(5, 10, 3, dtype="bool")
  with pytest.raises(AttributeError): t.sum(dtype="")  # a name dtypes does not have (tinygrad's getattr raises AttributeError)

def _F():
  import torch.nn.functional as F
  return F

GRADIENTS = [  # (name, ours, torch's, inputs): values and gradients at ties, zeros and extremes where torch gives numbers
  ("abs at 0", lambda a: a.abs(), lambda a: a.abs(), [0.0, -0.0, 1.0, -2.0]),
  ("clip at its bounds", lambda a: a.clip(-0.5, 0.5), lambda a: a.clip(-0.5, 0.5), [-1.0, -0.5, 0.0, 0.5, 1.0]),
  ("logaddexp of equals", lambda a: a.logaddexp(a * 1), lambda a: a.logaddexp(a * 1), [1.0, -3.0]),
  ("sigmoid", lambda a: a.sigmoid(), lambda a: a.sigmoid(), [0.0, -0.0, 1.0, -1.0, 300.0, -300.0, 90.0, -90.0]),
  ("tanh", lambda a: a.tanh(), lambda a: a.tanh(), [0.0, 1.0, -1.0, 300.0, -300.0, 45.0, -45.0]),
  ("softplus", lambda a: a.softplus(), lambda a: _F().softplus(a), [0.0, 1e-9, 1.0, -2.0, 350.0, -350.0]),
  ("gelu", lambda a: a.gelu(), lambda a: _F().gelu(a, approximate="tanh"), [0.0, 1.0, -1.0, 300.0, -300.0]),
  ("log1p", lambda a: a.log1p(), lambda a: a.log1p(), [0.0, 1e-9, 1.0, 100.0]),
  ("expm1", lambda a: a.expm1(), lambda a: a.expm1(), [0.0, 1e-9, 1.0, -100.0, 50.0]),
  # outside the domain the value is nan and the gradient torch's formula: a number, or nan inside (-1, 1) for acosh
  ("acosh", lambda a: a.acosh(), lambda a: a.acosh(), [-300.0, -2.0, -1.0, -0.5, 0.0, 1.5, 2.0, 300.0]),
  ("atanh", lambda a: a.atanh(), lambda a: a.atanh(), [-300.0, -2.0, -0.5, -0.0, 0.5, 0.999, 2.0, 300.0]),
  ("copysign", lambda a: a.copysign(_signs(a)), lambda a: a.copysign(_signs(a)), [-1.0, -0.0, 0.0, 2.0, -3.0, 4.0]),
]

def _signs(a):  # a second operand of mixed signs, negative zeros and a nan, of a's kind
  v = [1.0, -1.0, -0.0, float("nan"), 0.0, -2.0]
  return Tensor(np.array(v, np.float32)) if isinstance(a, Tensor) else __import__("torch").tensor(v)

@pytest.mark.parametrize("name,ours,theirs,values", GRADIENTS, ids=[g[0] for g in GRADIENTS])
def test_values_and_gradients_as_torch(name, ours, theirs, values):
  torch = pytest.importorskip("torch")
  x = np.array(values, np.float32)
  t = torch.tensor(x, requires_grad=True)
  theirs(t).sum().backward()
  X = Tensor(x)
  np.testing.assert_allclose(ours(X).numpy(), theirs(torch.tensor(x)).numpy(), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(ours(X).sum().gradient(X)[0].numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-6)

def test_dtypes_as_tinygrad():
  x = Tensor(np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4))
  assert x.max_pool2d(2, return_indices=True)[1].dtype is dtypes.int32  # tinygrad's (torch's are int64)
  with pytest.raises(RuntimeError, match="cast src first"): Tensor.zeros(3).half().scatter(0, Tensor([0]), Tensor([1.0]))
  with pytest.raises(ValueError): Tensor.stack((Tensor([1, 2]), Tensor([3, 4])), Tensor([5, 6]))
  with pytest.raises(IndexError, match="out of bounds"): Tensor.ones(4, 3)[1, 3]
  with pytest.raises(IndexError, match="single ellipsis"): Tensor.ones(4, 3)[..., ...]
  with pytest.raises(IndexError): Tensor.ones(4, 3)[Tensor([1.5])]

def test_docs_parity_examples_run():
  """docs/parity.md can't rot: its python blocks run."""
  import os, re
  doc = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "docs", "parity.md")
  blocks = re.findall(r"```python\n(.*?)```", open(doc).read(), re.S)
  assert blocks
  for code in blocks: exec(compile(code, "docs/parity.md", "exec"), {})

def test_more_zero_gradients_and_error_types():
  x = Tensor(np.arange(27, dtype=np.float32).reshape(3, 3, 3))
  assert x.unfold(1, 0, 8).sum().gradient(x)[0].tolist() == np.zeros((3, 3, 3)).tolist()  # windows of nothing
  assert (x ** 0).sum().gradient(x)[0].numpy().sum() == 0.0
  with pytest.raises(IndexError): Tensor(3.14).cat(Tensor(3.14))  # no dim to join along (tinygrad's IndexError)
  with pytest.raises(NotImplementedError): x.pad((3, 0), mode="typo")  # torch's error for an unknown mode
  with pytest.raises(ValueError): x.pad((3, 0), mode="typo")

def test_exact_copysign_and_the_users_sigmoid_at_extremes():
  torch = pytest.importorskip("torch")
  v = [-1.0, -0.0, 0.0, 1.0, float("inf"), -float("inf"), float("nan")]
  a, b = np.array([x for x in v for _ in v], np.float32), np.array(v * len(v), np.float32)
  got = Tensor(a).copysign(Tensor(b)).numpy()
  want = torch.copysign(torch.tensor(a), torch.tensor(b)).numpy()
  np.testing.assert_array_equal(got, want)
  assert (np.signbit(got) == np.signbit(want)).all()                    # signed zeros and infinities exact
  def sigmoid(x): return x.exp() / (1 + x.exp())                        # tinygrad's test_sigmoid_alt_extreme: 0, not nan
  for v in (300.0, -300.0):
    x = Tensor([v])
    assert sigmoid(x)[0].gradient(x)[0].item() == 0.0
  x = Tensor([0.5, -3.0])
  t = torch.tensor([0.5, -3.0], requires_grad=True)
  (t.exp() / (1 + t.exp())).sum().backward()
  np.testing.assert_allclose(sigmoid(x).sum().gradient(x)[0].numpy(), t.grad.numpy(), rtol=1e-5)
  y = torch.tensor([1.0, 100.0], requires_grad=True)                    # a select not taken: 0, where torch's 0 * inf is nan
  torch.where(y < 50, y.exp(), 0).sum().backward()
  assert y.grad.isnan()[1]                                              # (docs/tensor.md: where we differ from torch)
  X = Tensor([1.0, 100.0])
  np.testing.assert_allclose((X < 50).where(X.exp(), 0).sum().gradient(X)[0].numpy(), [np.e, 0.0], rtol=1e-6)

def test_int_masks_wrap_scatter_reduce_and_uint8_interpolate():
  torch = pytest.importorskip("torch")
  assert (Tensor([0], dtype="int") | 0xFFFFFFFF).item() == -1            # an unsigned mask on int32 is its two's complement
  assert (Tensor([5], dtype="int") & 0xFFFFFFFE).item() == 4
  assert (Tensor([3], dtype=dtypes.int16) ^ 0xFFFF).item() == ~3
  with pytest.raises(OverflowError): Tensor([0], dtype="int") | 2 ** 32  # beyond the unsigned range: still an error
  with pytest.raises(ValueError): Tensor([1, 2]).one_hot(-1)            # tinygrad's: omit num_classes to count them
  assert Tensor([1, 2]).one_hot().tolist() == [[0, 1, 0], [0, 0, 1]]
  rng = np.random.default_rng(0)
  a = rng.uniform(-2, 2, (2, 3, 64, 64)).astype(np.float32)             # tinygrad's TestOpsUint8 image
  want = torch.nn.functional.interpolate((10 * torch.tensor(a)).relu().type(torch.uint8), size=(10, 10), mode="bilinear")
  got = Tensor.interpolate((10 * Tensor(a)).relu().cast("uint8"), size=(10, 10), mode="linear")
  assert got.dtype is dtypes.uint8
  np.testing.assert_array_equal(got.numpy(), want.numpy())

def test_jit_replays_read_tensors_in_containers_and_outputs_fed_back():
  @TinyJit
  def f(a, arr, d): return (a + arr[0] * d["w"]).realize()
  for i in range(4):  # tensors in a list or dict argument are inputs: each replay reads this call's
    got = f(Tensor([1, 1, 1]).realize(), [Tensor([i, i, i]).realize()], {"w": Tensor([2, 2, 2]).realize()})
    assert got.tolist() == [1 + 2 * i] * 3
  @TinyJit
  def g(buf, frame):
    new = buf[1:].cat(frame, dim=0)
    return new.contiguous(), new[:1].contiguous()
  buf, ref = Tensor([[0], [1], [2]]).contiguous().realize(), [0, 1, 2]
  for i in range(5):  # last call's output is this call's input: a replay must not read what it is overwriting
    buf, first = g(buf, Tensor([[10 + i]]).contiguous().realize())
    ref = ref[1:] + [10 + i]
    assert buf.numpy().ravel().tolist() == ref and first.item() == ref[0]

def test_context_default_float_and_int():
  with Context(DEFAULT_FLOAT=dtypes.half, DEFAULT_INT="int64"):  # tinygrad's switches: dtypes.default_float itself
    assert dtypes.default_float is dtypes.half and Tensor([1.5]).dtype is dtypes.half and Tensor.randn(3).dtype is dtypes.half
    assert (Tensor([1]) * 1.5).dtype is dtypes.half and Tensor([1]).dtype is dtypes.int64 and Tensor.arange(3).dtype is dtypes.int64
    np.testing.assert_allclose(Tensor([1.5, 2.25]).numpy(), np.array([1.5, 2.25], np.float16))
  assert dtypes.default_float is dtypes.float32 and Tensor([1.5]).dtype is dtypes.float32 and Tensor([1]).dtype is dtypes.int32
  with pytest.raises(ValueError, match="DEFAULT_FLOAT must be a float dtype"), Context(DEFAULT_FLOAT="int8"): pass

def test_jit_prune_runs_input_free_kernels_once():
  weights = Tensor.rand(16).realize()
  f = TinyJit(lambda x: (weights * 2).contiguous() + x, prune=True)
  for _ in range(4):
    a = Tensor.rand(16).realize()
    np.testing.assert_allclose(f(a).numpy(), weights.numpy() * 2 + a.numpy(), rtol=1e-6)
  assert len(f.captured.steps) == 1  # weights * 2 ran at the capture only; its buffer is kept out of memory planning
  n = 1 << 10
  g = TinyJit(lambda buf, new: buf[n // 2:].cat(new), prune=True)
  buf = Tensor.zeros(n, dtype="int32").contiguous().realize()
  for i in range(5):  # its output fed back as its input (tinygrad's test_intra_kernel_output_input_aliasing)
    buf = g(buf, Tensor(np.full(n // 2, i + 1, np.int32)))
    assert (buf[:n // 2].numpy() == i).all() and (buf[n // 2:].numpy() == i + 1).all()

def test_assign_from_arrays_into_lazy_tensors_and_empty_from_none():
  torch = pytest.importorskip("torch")
  from tensor.nn import LSTMCell
  layer, ref = LSTMCell(8, 4), torch.nn.LSTMCell(8, 4)
  with torch.no_grad():
    for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):  # lazy uniform weights take a numpy array whole
      getattr(layer, name).assign(getattr(ref, name).numpy())
    x = np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)
    (h, c), (th, tc) = layer(Tensor(x)), ref(torch.tensor(x))
  np.testing.assert_allclose(h.numpy(), th.numpy(), atol=1e-6)
  np.testing.assert_allclose(c.numpy(), tc.numpy(), atol=1e-6)
  t = Tensor.ones(4) + 1
  old = t * 1                                                          # a lazy reader of t's old value keeps it
  t.assign([5.0, 6.0, 7.0, 8.0])
  t += 1
  assert t.tolist() == [6, 7, 8, 9] and old.tolist() == [2, 2, 2, 2]
  assert Tensor(None).shape == (0,) and Tensor(None).numpy().size == 0  # tinygrad's empty tensor

def test_backward_accumulates_in_place_and_takes_a_gradient_of_ones_axes():
  x = Tensor([3.0])
  (x * 2)[0].backward()
  first = x.grad
  (x * 3)[0].backward()
  (x * x)[0].backward()
  assert x.grad is first and x.grad.tolist() == [2 + 3 + 6]                # torch's grad.add_, tinygrad's assign
  y = Tensor([1.0, 2.0, 3.0])
  assert (y * y).sum().gradient(y, gradient=Tensor([3.0]))[0].tolist() == [6, 12, 18]  # (1,) for a scalar loss
  with pytest.raises(GradientError, match="they must be the same"): (y * y).sum().gradient(y, gradient=Tensor([3.0, 1.0]))

def test_state_dict_extras_and_shape_arguments_as_tinygrad():
  from tensor.nn import BatchNorm
  from tensor.nn.state import load_state_dict
  layer = BatchNorm(1, track_running_stats=False)                      # a checkpoint's counter the layer does not keep
  load_state_dict(layer, {"weight": Tensor.ones(1), "bias": Tensor.ones(1), "num_batches_tracked": Tensor.ones(1)})
  for f in (Tensor.zeros, Tensor.rand, Tensor.empty):
    for bad in (((2, 2), 2, 2), ((2, 2), (2, 2)), ((128, 128), 0.0, 0.01)):
      with pytest.raises(ValueError, match="not a tuple among sizes"): f(*bad)

# ---- session 24: kernel counts of a capture, symbolic pad and cat, in-place names, from_blob ----

def test_captured_linear_lists_the_kernels_a_replay_runs():
  from runtime.helpers import GlobalCounters
  from runtime.ops import Ops
  def f(x: Tensor) -> Tensor:
    y = (x * 2).contiguous().realize()
    return (y + x).sum().realize()
  jf = TinyJit(f)
  for _ in range(3): out = jf(Tensor.rand(8, 8).realize())
  x = Tensor.rand(8, 8).realize()
  GlobalCounters.reset()
  np.testing.assert_allclose(f(x).numpy(), jf(x).numpy(), rtol=1e-6)
  linear = jf.captured.linear
  assert linear.op is Ops.SINK and len(linear.src) == len(jf.captured.steps) == 2 > 0
  assert all(c.op is Ops.KERNEL and c.src[0].op is Ops.CUSTOM for c in linear.src), out

@pytest.mark.parametrize("case", ["pad", "cat0", "cat1", "cat_two_vars"])
def test_symbolic_pad_and_cat_in_a_jit_against_numpy(case):
  from tensor import Variable
  a, b = np.random.rand(10, 10).astype(np.float32), np.random.rand(10, 10).astype(np.float32)
  ta, tb = Tensor(a).realize(), Tensor(b).realize()
  fns = {"pad": (lambda x: (x + 1).pad((None, (0, 10 - x.shape[1]))).contiguous().realize(),
                 lambda i, j: np.pad(a[:3, :i] + 1, ((0, 0), (0, 10 - i))), lambda vi, vj: (ta[:3, :vi],), None),
         "cat0": (lambda x, y: x.cat(y, dim=0).realize(), lambda i, j: np.concatenate([a[:i, :3], b[:2, :3]]),
                  lambda vi, vj: (ta[:vi, :3], tb[:2, :3]), lambda i, j: (i + 2, 3)),
         "cat1": (lambda x, y: x.cat(y, dim=1).realize(), lambda i, j: np.concatenate([a[:3, :i], b[:3, :2]], 1),
                  lambda vi, vj: (ta[:3, :vi], tb[:3, :2]), lambda i, j: (3, i + 2)),
         "cat_two_vars": (lambda x, y: x.cat(y, dim=0).realize(), lambda i, j: np.concatenate([a[:i, :3], b[:j, :3]]),
                          lambda vi, vj: (ta[:vi, :3], tb[:vj, :3]), lambda i, j: (i + j, 3))}
  fn, ref, args, cut = fns[case]
  jf = TinyJit(fn)
  for i, j in [(1, 2), (2, 4), (3, 3), (4, 2), (5, 1)]:
    out = jf(*args(Variable("i", 1, 10).bind(i), Variable("j", 1, 10).bind(j)))
    got = out.numpy() if cut is None else out[tuple(slice(0, n) for n in cut(i, j))].numpy()
    np.testing.assert_allclose(got, ref(i, j), rtol=1e-6)
  assert len(jf.captured.steps) == 1  # one kernel serves every value

def test_randn_does_not_go_through_a_replaced_rand():
  original, Tensor.rand = Tensor.rand, Tensor.zeros  # tinygrad's test_randn_isnt_inf_on_zero
  try: out = Tensor.randn(64).numpy()
  finally: Tensor.rand = original
  assert np.isfinite(out).all() and 0.5 < out.std() < 1.5

def test_to_in_place_moves_the_tensor_and_its_gradient():
  x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
  (x * x).sum().backward()
  assert x.to_("PYTHON") is x and x.device == "PYTHON" and x.grad.device == "PYTHON"
  assert x.tolist() == [1.0, 2.0, 3.0] and x.grad.tolist() == [2.0, 4.0, 6.0]

def test_helpers_temp_is_in_the_temporary_folder():
  import getpass, tempfile
  assert helpers.temp("x") == f"{tempfile.gettempdir()}/x" and helpers.temp("x", True) == f"{tempfile.gettempdir()}/x.{getpass.getuser()}"

def test_in_place_ops_on_views_of_a_pending_write_against_numpy():
  t, a = Tensor.arange(4).reshape(2, 2).contiguous(), np.arange(4).reshape(2, 2)
  t[1] += 2; a[1] += 2  # noqa: E702
  t[1] -= 1; a[1] -= 1  # noqa: E702  (tinygrad's test_setitem_consecutive_inplace_operator)
  t[0] *= 3; a[0] *= 3  # noqa: E702
  t[:, 1] -= 5; a[:, 1] -= 5  # noqa: E702
  np.testing.assert_array_equal(t.numpy(), a)
  t = Tensor.arange(4).reshape(2, 2).contiguous().realize()
  t[1] += 2
  v, t = t[1], None  # the pending write is held only by the view
  v += 10
  assert v.tolist() == [14, 15]

def test_clone_copies_the_gradient():
  a = Tensor.rand(4, 4, requires_grad=True)
  a.mul(5.0).add(5.0).mean().backward()
  b = a.clone()
  np.testing.assert_array_equal(b.grad.numpy(), np.full((4, 4), 5 / 16, np.float32))
  assert Tensor.ones(3).clone().grad is None

def test_from_blob_reads_and_writes_the_callers_memory():
  import array
  x = memoryview(bytearray(16)).cast("I")  # tinygrad's test_tensor_from_blob
  t = Tensor.from_blob(helpers.mv_address(x), (4,), dtype=dtypes.uint32, device="CPU")
  x[:] = array.array("I", [0, 1, 2, 3])
  assert (t + 1).tolist() == [1, 2, 3, 4]
  a = np.arange(6, dtype=np.float32)
  t = Tensor.from_blob(a.ctypes.data, (2, 3), dtype=dtypes.float32, device="CPU")
  np.testing.assert_array_equal((t + 1).numpy(), a.reshape(2, 3) + 1)
  a[:] = 7  # read again: the kernels read the memory as it is
  np.testing.assert_array_equal(t.sum(1).numpy(), [21, 21])
  t.assign(t * 2).realize()
  np.testing.assert_array_equal(a, np.full(6, 14, np.float32))
  del t
  import gc
  gc.collect()
  Tensor.ones(6).contiguous().realize()  # the borrowed memory is not reused for another buffer
  np.testing.assert_array_equal(a, np.full(6, 14, np.float32))

def test_jit_refuses_a_returned_number_which_a_replay_would_freeze():
  f = TinyJit(lambda x, n: ((x * 2).realize(), n * 10))
  f(Tensor([0.0]), 0)
  with pytest.raises(JitError, match="returned a int"): f(Tensor([1.0]), 1)  # the capture: a replay would give 10 forever
  g = TinyJit(lambda x: {"y": [(x * 2).realize(), None]})
  for i in range(4): assert g(Tensor([float(i)]))["y"][0].tolist() == [2.0 * i]
  assert issubclass(JitError, RuntimeError)  # a nested TinyJit is a RuntimeError in tinygrad too
