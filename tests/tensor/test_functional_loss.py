"""nll_loss, cross_entropy, sparse_categorical_crossentropy and the binary cross-entropies against numpy references of
torch's definitions and torch when installed, on CPU and PYTHON: hypothesis over batch and extra dims, class counts
on both sides of the 64 split, weights, ignore_index, label_smoothing, every reduction; probability targets;
targets outside the classes (documented: they count for nothing); errors.
"""
import numpy as np
import pytest
from hypothesis import strategies as st
from tensor import Tensor, dtypes
from tensor.tensor import TensorError
import functional_refs as R

REDUCTIONS = ["mean", "sum", "none"]

def _case(device, data):
  rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
  n = data.draw(st.integers(1, 6 if device == "CPU" else 3))
  c = data.draw(st.sampled_from([1, 2, 5, 70] if device == "CPU" else [1, 2, 5]))
  extra = tuple(data.draw(st.lists(st.integers(1, 3), max_size=1 if device == "CPU" else 0)))
  x = R.rand(rng, n, c, *extra, lo=-4, hi=4)
  y = rng.integers(0, c, (n, *extra))
  ignore = data.draw(st.sampled_from([-100, 0, 1]))
  if data.draw(st.booleans()): y.flat[0] = ignore  # at least one ignored target sometimes
  weight = R.rand(rng, c, lo=0.5, hi=2) if data.draw(st.booleans()) else None
  return rng, x, y, ignore, weight, data.draw(st.sampled_from(REDUCTIONS))

def _check_nll_ce(device, data):
  rng, x, y, ignore, weight, reduction = _case(device, data)
  smoothing = data.draw(st.sampled_from([0.0, 0.0, 0.1, 1.0]))
  if weight is None or (y != ignore).any():  # all targets ignored with weights: 0/0, nan in both
    logp = R.log_softmax(x.astype(np.float64), 1)
    out = Tensor(logp.astype(np.float32), device=device).nll_loss(Tensor(y.astype(np.int32), device=device), _t(weight, device), ignore, reduction)
    R.close(out, R.nll(logp, y, weight, ignore, reduction), what=f"nll {reduction}")
    if R.torch is not None:
      ref = R.torch.nn.functional.nll_loss(R.T(logp.astype(np.float32)), R.T(y), _tt(weight), ignore_index=ignore, reduction=reduction)
      R.close(out, ref, what="torch nll")
  out = Tensor(x, device=device).cross_entropy(Tensor(y.astype(np.int32), device=device), reduction, smoothing, weight=_t(weight, device),
                                               ignore_index=ignore)
  R.close(out, R.cross_entropy(x, y, weight, ignore, reduction, smoothing), what=f"ce {reduction} {smoothing}")
  if R.torch is not None:
    ref = R.torch.nn.functional.cross_entropy(R.T(x), R.T(y), _tt(weight), ignore_index=ignore, reduction=reduction, label_smoothing=smoothing)
    R.close(out, ref, what="torch ce")
  # class probabilities as the target
  p = rng.dirichlet(np.ones(x.shape[1]), (x.shape[0], *x.shape[2:])).astype(np.float32)
  p = np.moveaxis(p, -1, 1)
  out = Tensor(x, device=device).cross_entropy(Tensor(p, device=device), reduction, smoothing, weight=_t(weight, device))
  R.close(out, R.cross_entropy(x, p, weight, reduction=reduction, label_smoothing=smoothing), what="ce probabilities")
  if R.torch is not None:
    R.close(out, R.torch.nn.functional.cross_entropy(R.T(x), R.T(p), _tt(weight), reduction=reduction, label_smoothing=smoothing))

def _t(a, device): return None if a is None else Tensor(a, device=device)
def _tt(a): return None if a is None else R.T(a)

@pytest.mark.parametrize("device", R.DEVICES)
def test_nll_and_cross_entropy(device): R.run(device, lambda data: _check_nll_ce(device, data), st.data(), examples=2 * R.EXAMPLES[device])

@pytest.mark.parametrize("device", R.DEVICES)
def test_sparse_categorical_crossentropy(device):
  def check(data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    lead = tuple(data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=2)))
    c = data.draw(st.sampled_from([2, 5, 66] if device == "CPU" else [2, 5]))
    x, y = R.rand(rng, *lead, c, lo=-3, hi=3), rng.integers(0, c, lead)
    ignore = data.draw(st.sampled_from([-1, 0]))
    smoothing, reduction = data.draw(st.sampled_from([0.0, 0.2])), data.draw(st.sampled_from(REDUCTIONS))
    if ignore == 0 and not (y != 0).any(): y.flat[0] = 1
    out = Tensor(x, device=device).sparse_categorical_crossentropy(Tensor(y.astype(np.int32), device=device), ignore, smoothing, reduction)
    # classes last; ignore_index=-1 ignores nothing (tinygrad's convention)
    ref = R.cross_entropy(np.moveaxis(x, -1, 1), y, None, ignore if ignore != -1 else -12345, reduction, smoothing)
    R.close(out, ref, what=f"{ignore=} {smoothing=} {reduction}")
  R.run(device, check, st.data())

@pytest.mark.parametrize("device", R.DEVICES)
def test_binary_cross_entropies(device):
  def check(data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    shape = tuple(data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    reduction = data.draw(st.sampled_from(REDUCTIONS))
    p, y = R.rand(rng, *shape, lo=0.001, hi=0.999), rng.uniform(0, 1, shape).astype(np.float32)
    w = R.rand(rng, *shape[-1:], lo=0.5, hi=2) if data.draw(st.booleans()) else None
    out = Tensor(p, device=device).binary_crossentropy(Tensor(y, device=device), reduction, weight=_t(w, device))
    ref = -(y * np.log(p.astype(np.float64)) + (1 - y) * np.log1p(-p.astype(np.float64))) * (1 if w is None else w)
    R.close(out, _reduce(ref, reduction), what="bce")
    logits = R.rand(rng, *shape, lo=-30, hi=30)
    pw = R.rand(rng, *shape[-1:], lo=0.5, hi=3) if data.draw(st.booleans()) else None
    out = Tensor(logits, device=device).binary_crossentropy_logits(Tensor(y, device=device), reduction, _t(pw, device), _t(w, device))
    lg = logits.astype(np.float64)
    ref = ((1 - y) * lg + (1 + ((pw if pw is not None else 1) - 1) * y) * np.logaddexp(0, -lg)) * (1 if w is None else w)
    R.close(out, _reduce(ref, reduction), what="bce logits")
    if R.torch is not None:
      F = R.torch.nn.functional
      R.close(out, F.binary_cross_entropy_with_logits(R.T(logits), R.T(y), _tt(w), reduction=reduction, pos_weight=_tt(pw)))
  R.run(device, check, st.data())

def _reduce(a, reduction): return a if reduction == "none" else a.sum() if reduction == "sum" else a.mean()

@pytest.mark.parametrize("device", R.DEVICES)
def test_edges(device):
  # a probability of exactly 0 or 1: each log clamps at -100, as torch
  bce = Tensor([0.0, 1.0, 1.0], device=device).binary_crossentropy(Tensor([1.0, 0.0, 1.0], device=device), "none").numpy()
  np.testing.assert_allclose(bce, [100.0, 100.0, 0.0])
  # an unbatched (C,) input with a () target
  x = np.array([0.5, -1.0, 2.0], np.float32)
  R.close(Tensor(x, device=device).cross_entropy(Tensor(2, device=device)), -R.log_softmax(x.astype(np.float64), 0)[2])
  # a target outside the classes (and not ignore_index) counts for nothing: 0 loss, 0 in the mean's divisor
  logp = R.log_softmax(np.array([[1.0, 2.0], [0.5, 0.1]]), 1).astype(np.float32)
  out = Tensor(logp, device=device).nll_loss(Tensor([1, 7], device=device), reduction="none").numpy()
  np.testing.assert_allclose(out, [-logp[0, 1], 0.0])
  np.testing.assert_allclose(Tensor(logp, device=device).nll_loss(Tensor([1, 7], device=device)).item(), -logp[0, 1], rtol=1e-6)
  # every target ignored: the mean is 0/0
  assert np.isnan(Tensor(logp, device=device).nll_loss(Tensor([-100, -100], device=device)).item())

@pytest.mark.parametrize("bad, exc, message", [
  (lambda x, y: x.cross_entropy(x[:, :2]), RuntimeError, r"target of shape \(4, 2\) does not fit input of shape \(4, 3\): class probabilities"),
  (lambda x, y: x.cross_entropy(y[:3]), RuntimeError, r"target of shape \(3,\) does not fit input of shape \(4, 3\): expected \(4,\)"),
  (lambda x, y: x.nll_loss(y.float()), TypeError, r"class-index targets must be an integer tensor, got dtypes.float"),
  (lambda x, y: x.nll_loss(y, Tensor.ones(4)), RuntimeError, r"weight of shape \(4,\) does not fit 3 classes"),
  (lambda x, y: x.cross_entropy(y, reduction="avg"), ValueError, r"reduction='avg' is not one of 'none', 'mean', 'sum'"),
  (lambda x, y: x.cross_entropy(y, label_smoothing=1.5), ValueError, r"label_smoothing=1.5 must be in \[0, 1\]"),
  (lambda x, y: x.sparse_categorical_crossentropy(y[:2]), RuntimeError, r"target of shape \(2,\) does not fit logits of shape \(4, 3\)"),
  (lambda x, y: x.binary_crossentropy(x[:2]), RuntimeError, r"target of shape \(2, 3\) does not fit input of shape \(4, 3\)"),
  (lambda x, y: x.binary_crossentropy_logits(x.T), RuntimeError, r"target of shape \(3, 4\) does not fit input of shape \(4, 3\)"),
])
def test_errors(bad, exc, message):
  x, y = Tensor.ones(4, 3), Tensor([0, 1, 2, 1], dtype=dtypes.int32)
  with pytest.raises(exc, match=message) as e: bad(x, y)
  assert isinstance(e.value, TensorError)
