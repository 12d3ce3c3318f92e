"""How many kernels the functional ops run (inputs realized first, so only the op's own kernels count, copies of host
constants included), so a fusion regression shows; values checked against numpy too. Counts when written, at the
sizes below: conv2d with bias 1; conv2d + relu + max_pool2d 1; conv_transpose2d 1; attention 3 (scores, softmax,
weights @ v: softmax fused into the second matmul would recompute its row max and sum per output column), causal
attention 3 (the mask is movement ops on a constant: no data); avg_pool2d with padding 2 (the divisor is its own
small kernel); bilinear 2x upsample 2 (one per axis); layernorm 1; cross_entropy 2. The tests assert these as upper
bounds.
"""
import numpy as np
import pytest
from tensor import Tensor, GlobalCounters
import functional_refs as R

def kernels(t: Tensor) -> int:
  GlobalCounters.reset()
  t.realize()
  return GlobalCounters.kernel_count

def inputs(*shapes, seed=0):
  rng = np.random.default_rng(seed)
  arrays = [R.rand(rng, *s) for s in shapes]
  return [Tensor(a).realize() for a in arrays], arrays

def test_conv2d():
  (x, w, b), (nx, nw, nb) = inputs((8, 16, 32, 32), (32, 16, 3, 3), (32,))
  out = x.conv2d(w, b, padding=1)
  assert kernels(out) <= 2  # the input's padded copy (a read through the padding's guards would not vectorize), the conv
  R.close(out, R.conv(nx, nw, nb, pads=1), rtol=1e-4, atol=1e-4)

def test_conv_relu_maxpool_block():
  (x, w, b), (nx, nw, nb) = inputs((8, 16, 32, 32), (32, 16, 3, 3), (32,))
  out = x.conv2d(w, b, padding=1).relu().max_pool2d()
  assert kernels(out) <= 2  # the input's padded copy, then the conv with its bias, relu and pooling
  ref = np.maximum(R.conv(nx, nw, nb, pads=1), 0)
  R.close(out, R.max_pool(ref, (2, 2), (2, 2), (0, 0), (1, 1), False)[0], rtol=1e-4, atol=1e-4)

def test_conv_transpose2d():
  (x, w), (nx, nw) = inputs((4, 16, 16, 16), (16, 8, 4, 4))
  out = x.conv_transpose2d(w, stride=2, padding=1)
  assert kernels(out) <= 1
  R.close(out, R.conv_transpose(nx, nw, stride=2, padding=1), rtol=1e-4, atol=1e-4)

@pytest.mark.parametrize("causal", [False, True])
def test_attention(causal):
  (q, k, v), (nq, nk, nv) = inputs((2, 4, 128, 64), (2, 4, 128, 64), (2, 4, 128, 64))
  out = q.scaled_dot_product_attention(k, v, is_causal=causal)
  assert kernels(out) <= 3
  R.close(out, R.sdpa(nq, nk, nv, is_causal=causal), rtol=1e-4, atol=1e-5)

def test_pools_norms_losses_resampling():
  (x, logits), (nx, nl) = inputs((8, 16, 32, 32), (64, 100))
  y = Tensor(np.random.default_rng(1).integers(0, 100, 64).astype(np.int32)).realize()
  for t, most, ref in [
    (x.avg_pool2d(3, stride=2, padding=1), 2, R.avg_pool(nx, (3, 3), (2, 2), (1, 1), False, True)),
    (x.interpolate((64, 64), mode="bilinear"), 2, R.interpolate(nx, (64, 64), "linear")),
    (x.layernorm(), 1, (nx - nx.mean(-1, keepdims=True)) / np.sqrt(nx.var(-1, keepdims=True) + 1e-5)),
    (logits.cross_entropy(y), 2, R.cross_entropy(nl, y.numpy())),
  ]:
    assert kernels(t) <= most
    R.close(t, ref, rtol=1e-4, atol=1e-5)
