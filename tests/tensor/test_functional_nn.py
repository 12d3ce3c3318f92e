"""scaled_dot_product_attention, the norm functionals (layernorm, batchnorm, groupnorm, normalize), one_hot, embedding,
softmin and the activations against numpy references and torch when installed, on CPU and PYTHON: hypothesis over
shapes (sequence and feature sizes on both sides of the 64 split), masks, scales, grouped heads, axes, values across
each activation's regimes (tiny, large, +-inf) and dtypes.
"""
import math
import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from tensor import Tensor, dtypes
from tensor.tensor import TensorError
import functional_refs as R

# ---- attention ----

def _check_attention(device, data):
  rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
  batch = tuple(data.draw(st.lists(st.integers(1, 3), max_size=2)))
  big = device == "CPU"
  L, S = data.draw(st.integers(1, 70 if big else 5)), data.draw(st.integers(1, 70 if big else 5))
  E, Ev = data.draw(st.integers(1, 66 if big else 4)), data.draw(st.integers(1, 8 if big else 3))
  q, k, v = R.rand(rng, *batch, L, E), R.rand(rng, *batch, S, E), R.rand(rng, *batch, S, Ev)
  kind = data.draw(st.sampled_from(["none", "causal", "bool", "float"]))
  scale = data.draw(st.sampled_from([None, 0.25]))
  mask = None
  if kind == "bool":
    mask = rng.random((L, S)) > 0.3
    mask[:, 0] = True  # every query sees a key (a fully masked row is nan, in torch too)
  if kind == "float": mask = R.rand(rng, *batch[-1:], L, S)
  out = Tensor(q, device=device).scaled_dot_product_attention(Tensor(k, device=device), Tensor(v, device=device),
                                                               None if mask is None else Tensor(mask, device=device), is_causal=kind == "causal",
                                                               scale=scale)
  R.close(out, R.sdpa(q, k, v, mask, kind == "causal", scale), what=f"{kind} {batch} {L=} {S=} {E=}")
  if R.torch is not None:
    ref = R.torch.nn.functional.scaled_dot_product_attention(R.T(q), R.T(k), R.T(v), None if mask is None else R.T(mask),
                                                             is_causal=kind == "causal", scale=scale)
    R.close(out, ref, what="torch")

@pytest.mark.parametrize("device", R.DEVICES)
def test_attention(device): R.run(device, lambda data: _check_attention(device, data), st.data())

@pytest.mark.parametrize("device", R.DEVICES)
def test_attention_grouped_heads(device):
  rng = np.random.default_rng(9)
  q, k, v = R.rand(rng, 2, 6, 4, 8), R.rand(rng, 2, 2, 5, 8), R.rand(rng, 2, 2, 5, 3)
  out = Tensor(q, device=device).scaled_dot_product_attention(Tensor(k, device=device), Tensor(v, device=device), enable_gqa=True)
  R.close(out, R.sdpa(q, np.repeat(k, 3, axis=1), np.repeat(v, 3, axis=1)))
  if R.torch is not None: R.close(out, R.torch.nn.functional.scaled_dot_product_attention(R.T(q), R.T(k), R.T(v), enable_gqa=True))

@pytest.mark.parametrize("bad, exc, message", [
  (lambda q, k, v: q.scaled_dot_product_attention(k[..., :3], v), RuntimeError,
   r"query \(2, 4, 8\), key \(2, 5, 3\) and value \(2, 5, 6\) don't fit"),
  (lambda q, k, v: q.scaled_dot_product_attention(k, v[:, :4]), RuntimeError, r"key and value the same sequence length"),
  (lambda q, k, v: q.scaled_dot_product_attention(k, v, Tensor.ones(3, 5, dtype=dtypes.bool)), RuntimeError,
   r"attn_mask of shape \(3, 5\) does not broadcast to the scores \(2, 4, 5\)"),
  (lambda q, k, v: q.scaled_dot_product_attention(k, v, Tensor.ones(4, 5), is_causal=True), ValueError, r"give attn_mask or is_causal, not both"),
  (lambda q, k, v: q.reshape(2, 2, 2, 8).scaled_dot_product_attention(k.reshape(2, 1, 5, 8).expand(2, 3, 5, 8),
                                                                     v.reshape(2, 1, 5, 6).expand(2, 3, 5, 6), enable_gqa=True),
   RuntimeError, r"2 query heads don't split into groups"),
])
def test_attention_errors(bad, exc, message):
  with pytest.raises(exc, match=message) as e: bad(Tensor.ones(2, 4, 8), Tensor.ones(2, 5, 8), Tensor.ones(2, 5, 6))
  assert isinstance(e.value, TensorError)

# ---- norms ----

@pytest.mark.parametrize("device", R.DEVICES)
def test_norms(device):
  def check(data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    n, c = data.draw(st.integers(1, 3)), data.draw(st.sampled_from([2, 4, 6]))
    rest = tuple(data.draw(st.lists(st.integers(1, 100 if device == "CPU" else 4), min_size=1, max_size=2)))
    x = R.rand(rng, n, c, *rest, lo=-3, hi=5)
    eps = data.draw(st.sampled_from([1e-5, 1e-2]))
    axis = data.draw(st.sampled_from([-1, (1, 2), tuple(range(1, x.ndim))]))
    xd = x.astype(np.float64)
    mean, var = xd.mean(axis, keepdims=True), xd.var(axis, keepdims=True)
    R.close(Tensor(x, device=device).layernorm(axis, eps), (xd - mean) / np.sqrt(var + eps), what=f"layernorm {axis}")
    w, b, m, iv = R.rand(rng, c), R.rand(rng, c), R.rand(rng, c), R.rand(rng, c, lo=0.5, hi=2)
    sh = (1, c) + (1,) * len(rest)
    out = Tensor(x, device=device).batchnorm(Tensor(w, device=device), Tensor(b, device=device), Tensor(m, device=device), Tensor(iv, device=device))
    R.close(out, (xd - m.reshape(sh)) * w.reshape(sh) * iv.reshape(sh) + b.reshape(sh), what="batchnorm")
    groups = data.draw(st.sampled_from([g for g in (1, 2, 3, 6) if c % g == 0]))
    g = xd.reshape(n, groups, -1)
    ref = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + eps)).reshape(x.shape) * w.reshape(sh) + b.reshape(sh)
    R.close(Tensor(x, device=device).groupnorm(groups, Tensor(w, device=device), Tensor(b, device=device), eps), ref, what=f"groupnorm {groups}")
    if R.torch is not None:
      F = R.torch.nn.functional
      if x.size // (n * groups) > 1:  # torch refuses groups of one value
        R.close(Tensor(x, device=device).groupnorm(groups, Tensor(w, device=device), Tensor(b, device=device), eps),
                F.group_norm(R.T(x), groups, R.T(w), R.T(b), eps))
      R.close(out, F.batch_norm(R.T(x), R.T(m), R.T(1 / iv.astype(np.float64) ** 2 - 1e-5).float(), R.T(w), R.T(b), eps=1e-5), rtol=1e-3, atol=1e-4)
  R.run(device, check, st.data())

@pytest.mark.parametrize("device", R.DEVICES)
def test_batchnorm_axes_and_optional_params(device):
  rng = np.random.default_rng(10)
  x, m, iv = R.rand(rng, 2, 3, 4), R.rand(rng, 3, 4), R.rand(rng, 3, 4, lo=0.5, hi=2)
  out = Tensor(x, device=device).batchnorm(None, None, Tensor(m, device=device), Tensor(iv, device=device), axis=(1, 2))
  R.close(out, (x - m) * iv)
  x2 = R.rand(rng, 5, 3)  # (N, C): a Linear's output
  out = Tensor(x2, device=device).batchnorm(None, Tensor(np.ones(3, np.float32), device=device), Tensor(m[:, 0], device=device),
                                            Tensor(iv[:, 0], device=device))
  R.close(out, (x2 - m[:, 0]) * iv[:, 0] + 1)

@pytest.mark.parametrize("device", R.DEVICES)
def test_normalize_and_softmin(device):
  rng = np.random.default_rng(11)
  x = R.rand(rng, 3, 70, 2)
  xd = x.astype(np.float64)
  for p in (2.0, 1.0, 3.0, math.inf, -math.inf, 0.0):
    norm = {math.inf: np.abs(xd).max(1, keepdims=True), -math.inf: np.abs(xd).min(1, keepdims=True),
            0.0: (xd != 0).sum(1, keepdims=True)}.get(p, (np.abs(xd) ** p).sum(1, keepdims=True) ** (1 / p) if p else None)
    R.close(Tensor(x, device=device).normalize(p), xd / np.maximum(norm, 1e-12), what=f"p={p}")
    if R.torch is not None: R.close(Tensor(x, device=device).normalize(p), R.torch.nn.functional.normalize(R.T(x), p))
  R.close(Tensor(np.zeros((2, 3), np.float32), device=device).normalize(), np.zeros((2, 3)))  # eps keeps zeros zero
  e = np.exp(-xd + xd.min(0, keepdims=True))
  R.close(Tensor(x, device=device).softmin(0), e / e.sum(0, keepdims=True))

def test_norm_errors():
  x = Tensor.ones(2, 6, 3)
  with pytest.raises(ValueError, match=r"6 channels \(shape \(2, 6, 3\)\) don't split into 4 groups"): x.groupnorm(4)
  with pytest.raises(RuntimeError, match=r"weight of shape \(5,\) does not fit 6 channels"): x.groupnorm(2, Tensor.ones(5))
  with pytest.raises(RuntimeError, match=r"mean of shape \(5,\) does not fit input of shape \(2, 6, 3\) on axes \(1,\): expected \(6,\)"):
    x.batchnorm(None, None, Tensor.ones(5), Tensor.ones(6))
  with pytest.raises(RuntimeError, match=r"axis 3 is out of range for a tensor of shape \(2, 6, 3\)"): x.layernorm(3)

# ---- lookups ----

@pytest.mark.parametrize("device", R.DEVICES)
def test_one_hot_and_embedding(device):
  def check(data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    shape = tuple(data.draw(st.lists(st.integers(0, 4), max_size=2)))
    n = data.draw(st.sampled_from([1, 3, 100] if device == "CPU" else [1, 3, 5]))
    idx = rng.integers(0, n, shape).astype(np.int32)
    oh = Tensor(idx, device=device).one_hot(n)
    assert oh.dtype is dtypes.int32 and oh.shape == (*shape, n)
    np.testing.assert_array_equal(oh.numpy(), np.eye(n, dtype=np.int32)[idx])
    table = R.rand(rng, n, data.draw(st.integers(1, 5)))
    emb = Tensor(idx, device=device).embedding(Tensor(table, device=device))
    np.testing.assert_array_equal(emb.numpy(), table[idx])
    if R.torch is not None: R.close(emb, R.torch.nn.functional.embedding(R.T(idx), R.T(table)))
  R.run(device, check, st.data())
  idx = Tensor([[3, 0], [1, 3]], device=device)
  np.testing.assert_array_equal(idx.one_hot().numpy(), np.eye(4, dtype=np.int32)[[[3, 0], [1, 3]]])  # num_classes from the values
  # out of range with num_classes given: an all-zero row (one_hot) or a zero vector (embedding)
  np.testing.assert_array_equal(Tensor([5, -1, 1], device=device).one_hot(3).numpy(), [[0, 0, 0], [0, 0, 0], [0, 1, 0]])
  np.testing.assert_array_equal(Tensor([2, 9], device=device).embedding(Tensor(np.eye(3, dtype=np.float32), device=device)).numpy(),
                                [[0, 0, 1], [0, 0, 0]])

def test_lookup_errors():
  with pytest.raises(TypeError, match=r"one_hot needs an integer tensor, got dtypes.float"): Tensor([1.0]).one_hot(3)
  with pytest.raises(ValueError, match=r"class values must not be negative"): Tensor([1, -2]).one_hot()
  with pytest.raises(ValueError, match=r"num_classes=-3 must be at least 0"): Tensor([1]).one_hot(-3)
  with pytest.raises(ValueError, match=r"num_classes=-1 must be at least 0"): Tensor([1]).one_hot(-1)  # tinygrad refuses torch's -1
  with pytest.raises(TypeError, match=r"indices must be an integer tensor, got dtypes.float"): Tensor([1.0]).embedding(Tensor.ones(3, 2))
  with pytest.raises(RuntimeError, match=r"weight of shape \(3,\) must be \(num_embeddings, embedding_dim\)"): Tensor([1]).embedding(Tensor.ones(3))

# ---- activations ----

def _values(dtype):
  finite = st.floats(-30, 30, width=32) | st.floats(-2**-20, 2**-20, width=32) | st.sampled_from([0.0, -0.0, 1.702, -3.0, 3.0, 6.0, 20.0, 20.5])
  return hnp.arrays(dtype, st.integers(1, 40), elements=finite | st.sampled_from([np.inf, -np.inf]))

@pytest.mark.parametrize("name", sorted(R.ACTIVATIONS))
@pytest.mark.parametrize("device", R.DEVICES)
def test_activation(device, name):
  ours, ref = R.ACTIVATIONS[name]
  def check(x):
    with np.errstate(all="ignore"): want = ref(x.astype(np.float64))
    got = ours(Tensor(x, device=device))
    assert got.dtype is dtypes.float32
    R.close(got, want, rtol=2e-5, atol=2e-6, what=name)
    if R.torch is not None:  # at finite inputs: torch's vectorized gelu gives nan at +-inf (the limits are inf and 0)
      fin = np.isfinite(x)
      R.close(got.numpy()[fin], R.TORCH_ACTIVATIONS[name](R.torch.nn.functional, R.T(x[fin])), rtol=2e-5, atol=2e-6, what=f"torch {name}")
  R.run(device, check, _values(np.float32), examples=R.EXAMPLES[device] // 2)

@pytest.mark.parametrize("name", sorted(R.ACTIVATIONS))
def test_activation_dtypes(name):
  ours, ref = R.ACTIVATIONS[name]
  xi = np.arange(-8, 9, dtype=np.int32)
  got = ours(Tensor(xi))
  assert got.dtype is (dtypes.int32 if name == "relu6" else dtypes.float32)  # hardtanh's bounds here are floats
  R.close(got, ref(xi.astype(np.float64)), rtol=2e-5, atol=2e-6)
  for dt, np_dt, tol in [(dtypes.float16, np.float16, 5e-3), (dtypes.float64, np.float64, 1e-12)]:
    x = np.linspace(-7, 7, 29).astype(np_dt)
    got = ours(Tensor(x))
    assert got.dtype is dt
    R.close(got, ref(x.astype(np.float64)), rtol=tol if dt is dtypes.float16 else 1e-6, atol=tol if dt is dtypes.float16 else 1e-7)

def test_small_values_keep_their_precision():
  """log1p/expm1/erfc keep relative precision where log(1+x), exp(x)-1 and 1-erf(x) would lose it."""
  x = np.array([-1e-7, -1e-4, -20.0, -35.0, 30.0], np.float32)
  xd = x.astype(np.float64)
  np.testing.assert_allclose(Tensor(x).elu().numpy(), np.where(xd > 0, xd, np.expm1(xd)), rtol=1e-6)
  np.testing.assert_allclose(Tensor(x).softplus().numpy(), np.where(xd > 20, xd, np.logaddexp(0, xd)), rtol=1e-6)
  np.testing.assert_allclose(Tensor(-x).logsigmoid().numpy(), -np.logaddexp(0, xd), rtol=1e-6)
  g = np.array([-5.0, -8.0, -12.0], np.float32)
  exact = 0.5 * g * np.vectorize(math.erfc)(-g.astype(np.float64) / math.sqrt(2))
  np.testing.assert_allclose(Tensor(g).gelu(approximate="none").numpy(), exact, rtol=1e-5)

def test_activation_errors():
  with pytest.raises(ValueError, match=r"approximate='fast' must be 'none' or 'tanh'"): Tensor([1.0]).gelu("fast")
  with pytest.raises(ValueError, match=r"celu: alpha must not be zero"): Tensor([1.0]).celu(0)

# ---- keyword variants not drawn above ----

@pytest.mark.parametrize("device", R.DEVICES)
def test_keyword_variants(device):
  rng = np.random.default_rng(12)
  x = R.rand(rng, 3, 7, lo=-6, hi=6)
  xd, xt = x.astype(np.float64), Tensor(x, device=device)
  R.close(xt.hardsigmoid(alpha=0.2, beta=0.4), np.clip(0.2 * xd + 0.4, 0, 1))
  R.close(xt.selu(alpha=1.5, gamma=2.0), 2.0 * np.where(xd > 0, xd, 1.5 * np.expm1(xd)))
  R.close(xt.normalize(dim=-1, eps=0.5), xd / np.maximum(np.sqrt((xd * xd).sum(-1, keepdims=True)), 0.5))
  R.close(xt.layernorm(0, eps=0.1), (xd - xd.mean(0)) / np.sqrt(xd.var(0) + 0.1))
  # max_unpool's default output size: (i-1)*stride - 2*padding + kernel
  v, i = Tensor(R.rand(rng, 1, 2, 5, 5), device=device).max_pool2d(3, stride=2, padding=1, return_indices=True)
  out = v.max_unpool2d(i, 3, stride=2, padding=1)
  assert out.shape == (1, 2, 5, 5)
  R.close(out, R.max_unpool(v.numpy(), i.numpy(), (5, 5)))
  # attention's dropout_p drops only while training (tinygrad's rule): outside it the result is the plain one
  q = Tensor(R.rand(rng, 2, 3, 4), device=device)
  R.close(q.scaled_dot_product_attention(q, q, dropout_p=0.5), q.scaled_dot_product_attention(q, q).numpy())
  with pytest.raises(ValueError, match=r"dropout_p=1.5 must be in \[0, 1\]"): q.scaled_dot_product_attention(q, q, dropout_p=1.5)

def test_attention_dropout_while_training():
  q = Tensor(np.random.default_rng(13).uniform(-1, 1, (2, 8, 4)).astype(np.float32))
  plain = q.scaled_dot_product_attention(q, q).numpy()
  training, Tensor.training = Tensor.training, True
  try:
    np.testing.assert_array_equal(q.scaled_dot_product_attention(q, q, dropout_p=1.0).numpy(), np.zeros_like(plain))
    dropped = q.scaled_dot_product_attention(q, q, dropout_p=0.5).numpy()
  finally: Tensor.training = training
  assert np.isfinite(dropped).all() and not np.allclose(dropped, plain)
