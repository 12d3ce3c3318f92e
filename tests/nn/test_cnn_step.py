"""One training step of the seeds' CNN (examples/beautiful_mnist.py) as kernels, and BatchNorm's gradients against torch.

The kernel counts pin what issue 27 built: each BatchNorm's batch statistics computed once and shared by the forward and
backward passes (per layer: mean and variance forward; the sums of dy and dy * (x - mean) backward; the conv bias's
gradient), max-pooling's backward one kernel per layer, and convolution gradients as GEMMs (no window sums of the
gradient). A change that adds kernels to the step fails here and says which."""
import re
import numpy as np
import pytest
from tensor import Tensor, TinyJit, nn

def _step_kernels(bs: int) -> list[str]:
  import importlib.util, os
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  spec = importlib.util.spec_from_file_location("beautiful_mnist", os.path.join(root, "examples", "beautiful_mnist.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  Tensor.manual_seed(0)
  model = module.Model()
  optim = nn.optim.Adam(nn.state.get_parameters(model), lr=1e-3)
  @TinyJit
  @Tensor.train()
  def step(x: Tensor, y: Tensor) -> Tensor:
    optim.zero_grad()
    loss = model(x).sparse_categorical_crossentropy(y).backward()
    return loss.realize(*optim.schedule_step())
  x, y = Tensor.rand(bs, 1, 28, 28).realize(), Tensor.randint(bs, high=10).realize()
  losses = [step(x, y).item() for _ in range(3)]
  assert losses[2] < losses[0]
  return [s.name for s in step.captured.steps]

def test_cnn_training_step_kernels():
  names = _step_kernels(16)
  def count(pattern: str) -> int: return sum(1 for n in names if re.fullmatch(pattern + r"(n[0-9a-f]{4})?", n))
  # per-channel sums over batch x pixels: 5 per BatchNorm (mean, variance, sum(dy), sum(dy * (x - mean)), the conv bias)
  assert count(r"r_32_16_20_20") == 5 and count(r"r_64_16_6_6") == 5, names
  # max-pool: the pooled values (channels-last after the first conv block, as its GEMM output), and one kernel of the
  # input's gradient, channels-last (its windows' counts of maxima fused in)
  assert count(r"r_16_10_10_32_2_2") == 1 and count(r"r_16_20_20_32_2_2") == 1, names
  assert count(r"r_16_64_3_3_2_2") == 1 and count(r"r_16_6_6_64_2_2") == 1, names
  # BatchNorm's 1/sqrt(var + eps): a kernel of 32 and of 64 values, not a square root per element of every kernel reading it
  assert count(r"E_32") >= 1 and count(r"E_64") >= 1, names
  # the second conv's input gradient: one GEMM over 5x5 taps of 32 channels (a transposed conv), no window sum
  assert count(r"r_16_24_24_32_5_5_32") == 1, names
  assert len(names) <= 118, (len(names), names)

@pytest.mark.parametrize("training", [True, False])
def test_batchnorm_gradients_match_torch(training):
  torch = pytest.importorskip("torch", reason="needs torch (pip install torch) for the reference gradients")
  rng = np.random.default_rng(0)
  x = rng.uniform(-2, 3, (8, 16, 10, 10)).astype(np.float32)
  g = rng.uniform(-1, 1, x.shape).astype(np.float32)
  ours, theirs = nn.BatchNorm2d(16), torch.nn.BatchNorm2d(16)
  w, b = rng.uniform(0.5, 1.5, 16).astype(np.float32), rng.uniform(-1, 1, 16).astype(np.float32)
  ours.weight, ours.bias = Tensor(w, requires_grad=True), Tensor(b, requires_grad=True)
  with torch.no_grad(): theirs.weight.copy_(torch.tensor(w)); theirs.bias.copy_(torch.tensor(b))
  if not training:  # eval: the running statistics, moved away from (0, 1)
    ours.running_mean.assign(Tensor(x.mean((0, 2, 3)))).realize(); ours.running_var.assign(Tensor(x.var((0, 2, 3)) + 0.5)).realize()
    with torch.no_grad(): theirs.running_mean.copy_(torch.tensor(x.mean((0, 2, 3)))); theirs.running_var.copy_(torch.tensor(x.var((0, 2, 3)) + 0.5))
    theirs.eval()
  xt, tx = Tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
  prev, Tensor.training = Tensor.training, training
  try: (ours(xt) * Tensor(g)).sum().backward()
  finally: Tensor.training = prev
  (theirs(tx) * torch.tensor(g)).sum().backward()
  for name, a, r in (("x", xt, tx), ("weight", ours.weight, theirs.weight), ("bias", ours.bias, theirs.bias)):
    np.testing.assert_allclose(a.grad.numpy(), r.grad.numpy(), rtol=1e-3, atol=1e-4, err_msg=f"d{name}")
  if training:
    np.testing.assert_allclose(ours.running_mean.numpy(), theirs.running_mean.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours.running_var.numpy(), theirs.running_var.numpy(), rtol=1e-5, atol=1e-6)
