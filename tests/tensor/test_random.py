"""Random numbers (tensor/random.py): the generator is Threefry-2x32 (checked word for word against runtime.ops.threefry2x32,
itself checked against the published known answers), the same seed gives the same numbers on CPU and PYTHON, each draw
is fresh, and the distributions are right: moments and Kolmogorov-Smirnov distances (critical values at alpha = 0.001,
with fixed seeds, so a run is deterministic and a failure means a real defect). Also initializers, dropout and errors.
"""
from __future__ import annotations
import math
import numpy as np
import pytest
from tensor import Tensor, dtypes
from tensor.errors import ArgumentTypeError, ArgumentValueError, DTypeError
from tensor.random import generator, random_words, threefry2x32
from runtime.ops import Ops, threefry2x32 as threefry_ref

DEVICES = ["CPU", "PYTHON"]
N = 20000          # CPU draws for the distribution tests
KS_001 = 1.95      # KS critical value at alpha = 0.001 is 1.95 / sqrt(n)

def ks_distance(sample: np.ndarray, cdf) -> float:
  x = np.sort(sample.astype(np.float64))
  f = cdf(x)
  n = len(x)
  return float(max((np.arange(1, n + 1) / n - f).max(), (f - np.arange(n) / n).max()))

_erf = np.vectorize(math.erf)
def normal_cdf(x): return 0.5 * (1 + _erf(x / math.sqrt(2)))

# ---- the generator itself ----
def test_threefry_tensor_known_answers():
  """The Tensor-op Threefry against the published known answers (Random123's kat_vectors), on both devices."""
  kat = [((0, 0), (0, 0), (0x6b200159, 0x99ba4efe)), ((0xffffffff, 0xffffffff), (0xffffffff, 0xffffffff), (0x1cb996fc, 0xbb002be7)),
         ((0x243f6a88, 0x85a308d3), (0x13198a2e, 0x03707344), (0xc4923a9c, 0x483df7a0))]
  for device in DEVICES:
    u = lambda v: Tensor([v], device, dtypes.uint32)  # noqa: E731
    for (x0, x1), (k0, k1), (y0, y1) in kat:
      o0, o1 = threefry2x32(u(x0), u(x1), u(k0), u(k1))
      assert (o0.item(), o1.item()) == (y0, y1)

@pytest.mark.parametrize("device", DEVICES)
def test_words_are_threefry_of_the_counter(device):
  """After manual_seed(s), the words drawn are Threefry(key=s, counter=0, 1, 2, ...), low word first, draws consecutive."""
  seed = 0x1234_5678_9ABC_DEF0
  Tensor.manual_seed(seed)
  a, b = random_words(Tensor, 5, device).numpy(), random_words(Tensor, 4, device).numpy()     # 3 blocks, then 2
  want = []
  for j in range(5):
    v = threefry_ref(j, seed)
    want += [v & 0xFFFFFFFF, v >> 32]
  assert a.dtype == np.uint32 and a.tolist() == want[:5] and b.tolist() == want[6:10]

def test_same_seed_same_numbers_on_every_device():
  for make in (lambda d: Tensor.rand(3, 7, device=d), lambda d: Tensor.randn(33, device=d), lambda d: Tensor.randint(9, low=-4, high=100, device=d),
               lambda d: Tensor.rand(5, device=d, dtype=dtypes.float16), lambda d: Tensor.rand(5, device=d, dtype=dtypes.float64),
               lambda d: Tensor.uniform(6, low=-2, high=3, device=d), lambda d: Tensor.randint(4, low=0, high=2**40, dtype=dtypes.int64, device=d)):
    got = []
    for device in DEVICES:
      Tensor.manual_seed(42)
      got.append(make(device).numpy())
    np.testing.assert_array_equal(got[0], got[1])

@pytest.mark.parametrize("device", DEVICES)
def test_fresh_and_reproducible(device):
  Tensor.manual_seed(7)
  a, b = Tensor.rand(16, device=device).numpy(), Tensor.rand(16, device=device).numpy()
  assert not np.array_equal(a, b) and len(set(a.tolist())) == 16
  Tensor.manual_seed(7)
  assert np.array_equal(Tensor.rand(16, device=device).numpy(), a)
  Tensor.manual_seed(8)
  assert not np.array_equal(Tensor.rand(16, device=device).numpy(), a)
  # two draws are the halves of one: the counter advances by exactly what was drawn
  Tensor.manual_seed(7)
  assert np.array_equal(Tensor.rand(32, device=device).numpy(), np.concatenate([a, b]))

def test_lazy_draws_keep_their_numbers():
  """Draws realized in any order, or after manual_seed, keep the numbers of the state they were drawn from."""
  Tensor.manual_seed(1)
  ref = [Tensor.rand(3, device="CPU").numpy() for _ in range(3)]
  Tensor.manual_seed(1)
  lazy = [Tensor.rand(3, device="CPU") for _ in range(3)]
  Tensor.manual_seed(1)                                    # reseeds while the three are pending
  again = Tensor.rand(3, device="CPU")
  for r, t in zip(ref[::-1], lazy[::-1]): np.testing.assert_array_equal(t.numpy(), r)
  np.testing.assert_array_equal(again.numpy(), ref[0])

def test_state_lives_on_the_device():
  """A draw reads no host data: its kernel's only input is the device's state buffer, advanced by an assign (so a replay
  of the captured kernels draws fresh numbers without Python)."""
  t = Tensor.rand(10, device="CPU")
  state = generator.state(Tensor, "CPU")
  buffers = [u for u in t.uop.toposort() if u.op is Ops.BUFFER]
  assert buffers == [state.uop.src[0]] and state.uop.op is Ops.ASSIGN
  t.realize()
  assert state.uop.op is Ops.BUFFER  # realized with it

# ---- distributions ----
@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.float16, dtypes.float64])
def test_rand_uniform(dtype):
  Tensor.manual_seed(11)
  a = Tensor.rand(N // 100, 100, device="CPU", dtype=dtype)
  assert a.shape == (N // 100, 100) and a.dtype is dtype
  x = a.numpy().astype(np.float64).reshape(-1)
  assert x.min() >= 0 and x.max() < 1
  assert abs(x.mean() - 0.5) < 4 * math.sqrt(1 / 12 / N) and abs(x.var() - 1 / 12) < 0.005
  assert ks_distance(x, lambda v: v) < KS_001 / math.sqrt(N) + (2.0**-10 if dtype is dtypes.float16 else 0)
  # every mantissa bit is random: float64 values need more than float32's 24 bits
  if dtype is dtypes.float64: assert np.mean(x != x.astype(np.float32)) > 0.99

def test_randn_normal():
  Tensor.manual_seed(12)
  x = Tensor.randn(N, device="CPU").numpy().astype(np.float64)
  assert abs(x.mean()) < 4 / math.sqrt(N) and abs(x.std() - 1) < 0.03
  assert ks_distance(x, normal_cdf) < KS_001 / math.sqrt(N)
  y = Tensor.normal(N, mean=3.0, std=0.5, device="CPU").numpy().astype(np.float64)
  assert ks_distance((y - 3.0) / 0.5, normal_cdf) < KS_001 / math.sqrt(N)
  z = Tensor.randn(100, device="CPU", dtype=dtypes.float16)
  assert z.dtype is dtypes.float16 and np.isfinite(z.numpy()).all()

def test_uniform_and_randint():
  Tensor.manual_seed(13)
  u = Tensor.uniform(N, low=-3.0, high=5.0, device="CPU").numpy().astype(np.float64)
  assert u.min() >= -3 and u.max() < 5 and ks_distance((u + 3) / 8, lambda v: v) < KS_001 / math.sqrt(N)
  r = Tensor.randint(N, low=-5, high=5, device="CPU")
  assert r.dtype is dtypes.int32
  counts = np.bincount(r.numpy() + 5, minlength=10)
  assert counts.sum() == N and len(counts) == 10
  chi2 = ((counts - N / 10) ** 2 / (N / 10)).sum()
  assert chi2 < 27.9  # chi-square, 9 degrees of freedom, alpha = 0.001
  big = Tensor.randint(2000, low=-2**62, high=2**62, dtype=dtypes.int64, device="CPU").numpy()
  assert big.dtype == np.int64 and big.min() >= -2**62 and big.max() < 2**62 and (big < 0).mean() > 0.4 and len(set(big.tolist())) == 2000
  assert Tensor.randint(50, low=7, high=8, device="CPU").tolist() == [7] * 50
  u8 = Tensor.randint(500, low=250, high=256, dtype=dtypes.uint8, device="CPU").numpy()
  assert set(u8.tolist()) == {250, 251, 252, 253, 254, 255}

def test_initializers():
  Tensor.manual_seed(14)
  w = Tensor.kaiming_uniform(64, 400, device="CPU").numpy()
  bound = math.sqrt(3) * math.sqrt(2 / (1 + 0.01**2)) / math.sqrt(400)
  assert w.shape == (64, 400) and np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound
  assert abs(w.std() - bound / math.sqrt(3)) < 0.02 * bound
  k = Tensor.kaiming_normal(64, 400, a=0.0, device="CPU").numpy()
  assert abs(k.std() - math.sqrt(2 / 400)) < 0.02 * math.sqrt(2 / 400)
  g = Tensor.glorot_uniform(30, 50, device="CPU").numpy()
  assert np.abs(g).max() <= math.sqrt(6 / 80) and np.abs(g).max() > 0.95 * math.sqrt(6 / 80)
  s = Tensor.scaled_uniform(40, 25, device="CPU").numpy()
  assert np.abs(s).max() <= 1 / math.sqrt(1000) and np.abs(s).max() > 0.95 / math.sqrt(1000)
  c = Tensor.kaiming_uniform(8, 3, 3, 3, device="CPU")  # a conv weight: fan_in 27
  assert c.shape == (8, 3, 3, 3) and np.abs(c.numpy()).max() <= math.sqrt(6 / (1 + 0.01**2)) / math.sqrt(27)

def test_like_and_shapes():
  base = Tensor.zeros(3, 4, dtype=dtypes.float16, device="PYTHON")
  r = base.rand_like()
  assert (r.shape, r.dtype, r.device) == ((3, 4), dtypes.float16, "PYTHON")
  n = Tensor.zeros(2, dtype=dtypes.int32, device="PYTHON").randn_like()
  assert (n.shape, n.dtype) == ((2,), dtypes.float32)
  assert Tensor.rand((2, 3), device="PYTHON").shape == (2, 3) and Tensor.rand([4], device="PYTHON").shape == (4,)
  assert Tensor.rand(device="PYTHON").shape == () and 0 <= Tensor.rand(device="PYTHON").item() < 1
  Tensor.manual_seed(5)
  assert Tensor.rand(0, 3, device="PYTHON").shape == (0, 3) and Tensor.randn(0, device="PYTHON").tolist() == []
  first = Tensor.rand(2, device="PYTHON").numpy()          # an empty draw did not use numbers up
  Tensor.manual_seed(5)
  np.testing.assert_array_equal(Tensor.rand(2, device="PYTHON").numpy(), first)

# ---- dropout ----
def test_dropout():
  x = Tensor.ones(100, 100, device="CPU")
  assert not Tensor.training and x.dropout(0.5) is x
  Tensor.training = True
  try:
    Tensor.manual_seed(15)
    y = x.dropout(0.25).numpy()
    assert set(np.unique(y).tolist()) == {0.0, np.float32(1 / 0.75)}
    assert abs((y == 0).mean() - 0.25) < 4 * math.sqrt(0.25 * 0.75 / 10000)
    assert x.dropout(0.0) is x and x.dropout(1.0).numpy().max() == 0
    z = Tensor([math.nan, 2.0], device="PYTHON").dropout(1.0).numpy()
    assert z.tolist() == [0.0, 0.0]
  finally: Tensor.training = False

# ---- errors ----
def test_errors():
  with pytest.raises(DTypeError, match="int"): Tensor.rand(3, dtype=dtypes.int32)
  with pytest.raises(TypeError): Tensor.randn(3, dtype=dtypes.bool)
  with pytest.raises(RuntimeError): Tensor.uniform(3, dtype=dtypes.int8)  # torch raises RuntimeError here
  with pytest.raises(DTypeError, match="float"): Tensor.randint(3, dtype=dtypes.float32)
  with pytest.raises(ArgumentValueError, match="low=5 high=5"): Tensor.randint(3, low=5, high=5)
  with pytest.raises(ArgumentValueError, match="does not fit"): Tensor.randint(3, low=0, high=300, dtype=dtypes.uint8)
  with pytest.raises(ArgumentTypeError, match="2.5"): Tensor.rand(2.5)
  with pytest.raises(ArgumentValueError, match="negative"): Tensor.rand(-1, 2)
  with pytest.raises(ArgumentTypeError, match="seed"): Tensor.manual_seed("x")  # type: ignore[arg-type]
  with pytest.raises(ValueError, match="dropout p"): Tensor.ones(2).dropout(1.5)
  with pytest.raises(ValueError, match="std"): Tensor.normal(2, std=-1.0)
  with pytest.raises(ValueError, match="finite"): Tensor.uniform(2, low=math.nan)
  with pytest.raises(ArgumentValueError, match="dimension"): Tensor.kaiming_uniform()
