"""tensor/nn layers: forward passes against numpy (and torch where installed), train/eval behaviour, initial values,
and errors. Sizes cross the optimizer's thresholds: reductions of 64+ elements, short (upcast) output loops."""
import math
import numpy as np
from runtime.ops import Ops
import pytest
from tensor import Tensor, dtypes, nn
from tensor.nn.state import get_parameters, get_state_dict


@pytest.fixture
def training():
  old, Tensor.training = Tensor.training, True
  yield
  Tensor.training = old

def rnd(*shape, seed=0, scale=1.0, shift=0.0):
  return (np.random.default_rng(seed).standard_normal(shape) * scale + shift).astype(np.float32)

def close(a, b, tol=1e-5): np.testing.assert_allclose(a, b, rtol=tol, atol=tol)

# ---- Linear ----

def test_linear_forward_and_init():
  lin = nn.Linear(70, 3)  # a 70-long reduction (split), 3 outputs (upcast)
  assert lin.weight.shape == (3, 70) and lin.bias.shape == (3,)
  x = rnd(130, 70)
  close(lin(Tensor(x)).numpy(), x @ lin.weight.numpy().T + lin.bias.numpy(), 1e-4)
  big = nn.Linear(400, 300)
  w, bound = big.weight.numpy(), 1 / math.sqrt(400)
  assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound and abs(w.mean()) < 0.01 * bound * 10
  assert np.abs(big.bias.numpy()).max() <= bound
  assert nn.Linear(4, 2, bias=False).bias is None
  assert list(get_state_dict(lin)) == ["weight", "bias"]
  with pytest.raises(ValueError, match=r"Linear\(70, 3\) got an input of shape \(2, 5\)"): lin(Tensor(rnd(2, 5)))

def test_sequential_model_of_plain_classes():
  class Model:
    def __init__(self): self.l1, self.l2 = nn.Linear(64, 16), nn.Linear(16, 10)
    def __call__(self, x): return self.l1(x).relu().sequential([self.l2])
  m = Model()
  x = rnd(5, 64)
  want = np.maximum(x @ m.l1.weight.numpy().T + m.l1.bias.numpy(), 0) @ m.l2.weight.numpy().T + m.l2.bias.numpy()
  close(m(Tensor(x)).numpy(), want, 1e-4)
  assert len(get_parameters(m)) == 4

# ---- normalization ----

def np_norm(x, axes, eps):
  return (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + eps)

def test_batchnorm_training_uses_batch_stats_and_tracks_running_ones(training):
  bn = nn.BatchNorm2d(3, momentum=0.2)
  bn.weight, bn.bias = Tensor([1.0, 2.0, 0.5]), Tensor([0.0, -1.0, 3.0])
  xs = [rnd(8, 3, 5, 5, seed=s, scale=2, shift=1) for s in range(2)]  # 200 values per channel
  rm, rv = np.zeros(3), np.ones(3)
  for x in xs:
    out = bn(Tensor(x)).numpy()
    close(out, np_norm(x, (0, 2, 3), 1e-5) * np.array([1, 2, 0.5])[:, None, None] + np.array([0, -1, 3])[:, None, None], 1e-4)
    rm = 0.8 * rm + 0.2 * x.mean((0, 2, 3))
    rv = 0.8 * rv + 0.2 * x.var((0, 2, 3), ddof=1)
  close(bn.running_mean.numpy(), rm, 1e-5)
  close(bn.running_var.numpy(), rv, 1e-5)
  assert bn.num_batches_tracked.item() == 2 and bn.num_batches_tracked.dtype is dtypes.int64
  assert set(get_state_dict(bn)) == {"weight", "bias", "running_mean", "running_var", "num_batches_tracked"}
  assert bn.running_mean.requires_grad is False

def test_batchnorm_eval_uses_running_stats():
  bn = nn.BatchNorm(4)
  bn.running_mean.assign(Tensor([1.0, 2.0, 3.0, 4.0])).realize()
  bn.running_var.assign(Tensor([4.0, 1.0, 0.25, 1.0])).realize()
  x = rnd(6, 4)
  close(bn(Tensor(x)).numpy(), (x - [1, 2, 3, 4]) / np.sqrt(np.array([4, 1, 0.25, 1]) + 1e-5), 1e-5)
  assert bn.num_batches_tracked.item() == 0  # eval leaves the statistics alone

def test_batchnorm_without_running_stats_or_affine(training):
  bn = nn.BatchNorm(3, affine=False, track_running_stats=False)
  assert get_state_dict(bn) == {}
  x = rnd(4, 3, 70)
  close(bn(Tensor(x)).numpy(), np_norm(x, (0, 2), 1e-5), 1e-4)
  Tensor.training = False  # still the batch's statistics: there are no others
  close(bn(Tensor(x)).numpy(), np_norm(x, (0, 2), 1e-5), 1e-4)

def test_batchnorm_cumulative_average_when_momentum_is_none(training):
  bn = nn.BatchNorm(2, momentum=None)
  xs = [rnd(10, 2, seed=s) for s in range(3)]
  for x in xs: bn(Tensor(x)).realize()
  close(bn.running_mean.numpy(), np.mean([x.mean(0) for x in xs], 0), 1e-5)
  close(bn.running_var.numpy(), np.mean([x.var(0, ddof=1) for x in xs], 0), 1e-5)

def test_batchnorm_matches_torch(training):
  torch = pytest.importorskip("torch")
  ours, theirs = nn.BatchNorm2d(5), torch.nn.BatchNorm2d(5)
  for s in range(3):
    x = rnd(4, 5, 6, 6, seed=s, scale=3, shift=-2)
    close(ours(Tensor(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(), 1e-4)
  close(ours.running_mean.numpy(), theirs.running_mean.numpy(), 1e-5)
  close(ours.running_var.numpy(), theirs.running_var.numpy(), 1e-5)
  Tensor.training = False
  theirs.eval()
  x = rnd(2, 5, 3, 3, seed=9)
  close(ours(Tensor(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(), 1e-4)

def test_batchnorm_errors(training):
  with pytest.raises(ValueError, match=r"BatchNorm\(3\) needs inputs \(N, 3, \.\.\.\), got shape \(2, 4\)"): nn.BatchNorm(3)(Tensor(rnd(2, 4)))
  with pytest.raises(ValueError, match="more than one value per channel"): nn.BatchNorm(3)(Tensor(rnd(1, 3)))

def test_layernorm():
  ln = nn.LayerNorm(70)
  ln.weight, ln.bias = Tensor(rnd(70, seed=1)), Tensor(rnd(70, seed=2))
  x = rnd(4, 5, 70, scale=3, shift=2)
  close(ln(Tensor(x)).numpy(), np_norm(x, -1, 1e-5) * ln.weight.numpy() + ln.bias.numpy(), 1e-4)
  ln2 = nn.LayerNorm((5, 6), elementwise_affine=False)
  x = rnd(3, 5, 6)
  close(ln2(Tensor(x)).numpy(), np_norm(x, (-2, -1), 1e-5), 1e-4)
  assert ln2.weight is None and get_state_dict(ln2) == {}
  with pytest.raises(ValueError, match=r"LayerNorm\(70,\) got an input of shape \(2, 7\)"): ln(Tensor(rnd(2, 7)))
  ln2d = nn.LayerNorm2d(3)
  x = rnd(2, 3, 4, 4)
  close(ln2d(Tensor(x)).numpy(), np_norm(x, 1, 1e-5), 1e-4)

def test_rmsnorm():
  rms = nn.RMSNorm(70)
  rms.weight = Tensor(rnd(70, seed=3))
  x = rnd(3, 70)
  close(rms(Tensor(x)).numpy(), x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * rms.weight.numpy(), 1e-4)
  h = nn.RMSNorm(8, elementwise_affine=False)(Tensor(x[:, :8]).half())
  assert h.dtype is dtypes.float16
  close(h.numpy().astype(np.float32), x[:, :8] / np.sqrt((x[:, :8] ** 2).mean(-1, keepdims=True) + 1e-6), 2e-3)

def test_groupnorm_and_instancenorm():
  gn = nn.GroupNorm(3, 6)
  gn.weight, gn.bias = Tensor(rnd(6, seed=4)), Tensor(rnd(6, seed=5))
  x = rnd(2, 6, 5, 5, scale=2, shift=1)
  want = np_norm(x.reshape(2, 3, -1), -1, 1e-5).reshape(x.shape) * gn.weight.numpy()[:, None, None] + gn.bias.numpy()[:, None, None]
  close(gn(Tensor(x)).numpy(), want, 1e-4)
  inorm = nn.InstanceNorm(6, affine=False)
  close(inorm(Tensor(x)).numpy(), np_norm(x, (2, 3), 1e-5), 1e-4)
  with pytest.raises(ValueError, match=r"num_channels \(6\) must be divisible by num_groups \(4\)"): nn.GroupNorm(4, 6)
  with pytest.raises(ValueError, match=r"GroupNorm\(3, 6\) needs inputs"): gn(Tensor(rnd(2, 5, 3)))
  with pytest.raises(ValueError, match=r"InstanceNorm\(6\) needs inputs"): inorm(Tensor(rnd(2, 6)))

def test_groupnorm_matches_torch():
  torch = pytest.importorskip("torch")
  ours, theirs = nn.GroupNorm(4, 8), torch.nn.GroupNorm(4, 8)
  with torch.no_grad(): theirs.weight.copy_(torch.tensor(rnd(8, seed=6))); theirs.bias.copy_(torch.tensor(rnd(8, seed=7)))
  ours.weight, ours.bias = Tensor(rnd(8, seed=6)), Tensor(rnd(8, seed=7))
  x = rnd(3, 8, 10)
  close(ours(Tensor(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(), 1e-4)

# ---- Embedding, LSTMCell, Dropout ----

def test_embedding():
  emb = nn.Embedding(70, 5)
  w = emb.weight.numpy()
  bound = math.sqrt(6 / 75)
  assert w.shape == (70, 5) and np.abs(w).max() <= bound
  idx = np.array([[0, 69, 3], [3, 3, 10]], np.int32)
  close(emb(Tensor(idx)).numpy(), w[idx], 1e-6)
  assert emb(Tensor([70, -1])).tolist() == [[0.0] * 5] * 2  # out of range: zeros
  with pytest.raises(TypeError, match="indices must be integers, got dtype float"): emb(Tensor([1.0]))

def test_embedding_is_a_gather():
  # issue 27: a load of each row picked (a GATHER node), not a one-hot sum over the vocabulary (32 x 768 x 50257 multiply-adds
  # per GPT-2 lookup); its gradient adds g's rows into the rows picked
  from tensor import GlobalCounters
  emb = nn.Embedding(50257, 16)
  emb.weight.realize()
  idx = Tensor(np.array([[5, 50256, 5]], np.int32)).realize()
  assert emb(idx).uop.op is Ops.GATHER
  GlobalCounters.reset()
  out = emb(idx).realize()
  assert GlobalCounters.global_ops < 1000, GlobalCounters.global_ops
  w = emb.weight.numpy()
  close(out.numpy(), w[[[5, 50256, 5]]], 0)
  g, = (emb(idx) * Tensor(np.arange(48, dtype=np.float32).reshape(1, 3, 16))).sum().gradient(emb.weight)
  want = np.zeros_like(w)
  want[5] = np.arange(16) + np.arange(32, 48)
  want[50256] = np.arange(16, 32)
  close(g.numpy(), want, 0)

def np_sigmoid(x): return 1 / (1 + np.exp(-x))

def test_lstmcell_matches_the_equations():
  cell = nn.LSTMCell(70, 4)
  x, h, c = rnd(3, 70), rnd(3, 4, seed=1), rnd(3, 4, seed=2)
  W, U = cell.weight_ih.numpy(), cell.weight_hh.numpy()
  gates = x @ W.T + h @ U.T + cell.bias_ih.numpy() + cell.bias_hh.numpy()
  i, f, g, o = np.split(gates, 4, axis=1)
  c2 = np_sigmoid(f) * c + np_sigmoid(i) * np.tanh(g)
  h2 = np_sigmoid(o) * np.tanh(c2)
  oh, oc = cell(Tensor(x), (Tensor(h), Tensor(c)))
  close(oh.numpy(), h2, 1e-4)
  close(oc.numpy(), c2, 1e-4)
  zh, zc = cell(Tensor(x))  # no state: zeros
  assert zh.shape == (3, 4) and zc.shape == (3, 4)
  assert nn.LSTMCell(3, 2, bias=False).bias_ih is None

def test_lstmcell_matches_torch():
  torch = pytest.importorskip("torch")
  ours, theirs = nn.LSTMCell(6, 5), torch.nn.LSTMCell(6, 5)
  with torch.no_grad():
    for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"): getattr(theirs, name).copy_(torch.tensor(getattr(ours, name).numpy()))
  x, h, c = rnd(2, 6), rnd(2, 5, seed=1), rnd(2, 5, seed=2)
  th, tc = theirs(torch.tensor(x), (torch.tensor(h), torch.tensor(c)))
  oh, oc = ours(Tensor(x), (Tensor(h), Tensor(c)))
  close(oh.numpy(), th.detach().numpy(), 1e-5)
  close(oc.numpy(), tc.detach().numpy(), 1e-5)

def test_dropout_is_identity_in_eval():
  x = Tensor(rnd(4, 4))
  assert nn.Dropout(0.5)(x) is x
  with pytest.raises(ValueError, match=r"must be in \[0, 1\], got 1.5"): nn.Dropout(1.5)

def test_dropout_in_training(training):
  out = nn.Dropout(0.25)(Tensor.ones(100, 100)).numpy()
  kept = out != 0
  assert 0.7 < kept.mean() < 0.8 and np.allclose(out[kept], 1 / 0.75)

# ---- convolutions: construction here, forward passes once Tensor.conv2d lands ----

def test_conv_construction_and_init():
  c = nn.Conv2d(6, 8, 3, groups=2)
  assert c.weight.shape == (8, 3, 3, 3) and c.bias.shape == (8,)
  bound = 1 / math.sqrt(3 * 9)
  assert np.abs(c.weight.numpy()).max() <= bound and np.abs(c.bias.numpy()).max() <= bound
  assert nn.Conv1d(2, 4, 5).weight.shape == (4, 2, 5)
  t = nn.ConvTranspose2d(4, 6, (2, 3), groups=2)
  assert t.weight.shape == (4, 3, 2, 3) and t.bias.shape == (6,)
  assert np.abs(t.weight.numpy()).max() <= 1 / math.sqrt(3 * 6)
  assert nn.Conv2d(1, 1, 3, bias=False).bias is None
  assert nn.Conv2d(1, 1, (3, 5), padding="same", dilation=(1, 2)).padding == (4, 4, 1, 1)
  assert nn.Conv2d(1, 1, 4, padding="same").padding == (1, 2, 1, 2)
  assert nn.Conv2d(1, 1, 3, padding="valid").padding == 0
  with pytest.raises(ValueError, match="divisible by groups"): nn.Conv2d(5, 4, 3, groups=2)
  with pytest.raises(ValueError, match="'same' and 'valid'"): nn.Conv2d(1, 1, 3, padding="full")
  with pytest.raises(ValueError, match="needs stride 1"): nn.Conv2d(1, 1, 3, stride=2, padding="same")

def test_conv2d_matches_torch():
  torch = pytest.importorskip("torch")
  for kw in ({}, {"stride": 2, "padding": 1}, {"padding": "same", "dilation": 2}, {"groups": 2}):
    ours = nn.Conv2d(4, 6, 3, **kw)
    theirs = torch.nn.Conv2d(4, 6, 3, **kw)
    with torch.no_grad(): theirs.weight.copy_(torch.tensor(ours.weight.numpy())); theirs.bias.copy_(torch.tensor(ours.bias.numpy()))
    x = rnd(2, 4, 9, 9)
    close(ours(Tensor(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(), 1e-4)

def test_conv1d_matches_torch():
  torch = pytest.importorskip("torch")
  ours, theirs = nn.Conv1d(3, 5, 4, padding="same"), torch.nn.Conv1d(3, 5, 4, padding="same")
  with torch.no_grad(): theirs.weight.copy_(torch.tensor(ours.weight.numpy())); theirs.bias.copy_(torch.tensor(ours.bias.numpy()))
  x = rnd(2, 3, 70)
  close(ours(Tensor(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(), 1e-4)

def test_conv_transpose2d_matches_torch():
  torch = pytest.importorskip("torch")
  ours = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)
  theirs = torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)
  with torch.no_grad(): theirs.weight.copy_(torch.tensor(ours.weight.numpy())); theirs.bias.copy_(torch.tensor(ours.bias.numpy()))
  x = rnd(2, 4, 5, 5)
  close(ours(Tensor(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(), 1e-4)
