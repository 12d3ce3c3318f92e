"""The seeds' TinyJit examples (../shared/seeds/000: the capture/replay guide and the quick reference's JIT and training
patterns; 003: the warmed-replay timing), verbatim but for the imports (API.md). The training pattern runs on a small
IDX data set written for the test (mnist() reads the folder MNIST_DIR names), with one added line flattening the images
for the seed's Linear(784, 128) model."""
import gzip, struct
import numpy as np
import pytest
from tensor import Tensor, TinyJit, Device, nn
from tensor.engine.jit import JitError

def test_observe_the_three_phases():
  python_calls = []
  @TinyJit
  def twice(x):
    python_calls.append("called")
    return (x * 2).realize()

  observed = []
  for value in (1.0, 2.0, 3.0, 4.0):
    result = twice(Tensor([value]).realize())
    observed.append(result.tolist())

  assert observed == [[2.0], [4.0], [6.0], [8.0]]
  assert len(python_calls) == 2
  print(observed)
  print("Python function calls:", len(python_calls))

def test_check_replay_values_and_reject_a_changed_shape():
  @TinyJit
  def rows(x):
    return (x.T.pad(((1, 1), (1, 1))) + 10).sum(axis=1).realize()

  snapshots = []
  for offset in (0., 1., -2., 4.):
    data = [[1.+offset, 2.+offset, 3.+offset], [4.+offset, 5.+offset, 6.+offset]]
    snapshots.append(rows(Tensor(data).realize()).tolist())
    assert snapshots[-1] == [40., 45.+2*offset, 47.+2*offset, 49.+2*offset, 40.]
  assert snapshots[0] == [40., 45., 47., 49., 40.]
  try:
    rows(Tensor([[1., 2.], [3., 4.]]).realize())
  except JitError as error:
    assert "args mismatch" in str(error)
  else:
    raise AssertionError("shape-changing replay was unexpectedly accepted")

def test_warmed_replay_timing():  # seed 003 (its indentation was lost in the text; restored)
  import time
  x = Tensor([float(i) for i in range(256)]).realize()
  @TinyJit
  def step(a):
    return (a * 2 + 1).realize()
  step(x)
  step(x)
  Device[x.device].synchronize()
  start = time.perf_counter()
  for _ in range(10):
    result = step(x)
  Device[x.device].synchronize()
  elapsed = time.perf_counter() - start
  assert result.tolist() == [float(i * 2 + 1) for i in range(256)]
  print("seconds per warmed call:", elapsed / 10)

def _idx(magic: int, dims: tuple, data: np.ndarray) -> bytes:
  return struct.pack(">I", magic) + struct.pack(f">{len(dims)}I", *dims) + data.astype(np.uint8).tobytes()

@pytest.fixture
def small_mnist(tmp_path, monkeypatch):
  """2,048 training and 64 test images of random pixels; the label is whether the image's first pixel is bright (learnable)."""
  rng = np.random.default_rng(0)
  for split, n in (("train", 2048), ("t10k", 64)):
    images = rng.integers(0, 256, (n, 28, 28))
    labels = (images[:, 0, 0] > 127).astype(np.uint8)
    (tmp_path / f"{split}-images-idx3-ubyte.gz").write_bytes(gzip.compress(_idx(0x803, (n, 28, 28), images)))
    (tmp_path / f"{split}-labels-idx1-ubyte.gz").write_bytes(gzip.compress(_idx(0x801, (n,), labels)))
  monkeypatch.setenv("MNIST_DIR", str(tmp_path))

def test_training_loop_pattern(small_mnist):
  from tensor.nn.datasets import mnist

  class Model:
    def __init__(self):
      self.l1 = nn.Linear(784, 128)
      self.l2 = nn.Linear(128, 10)
    def __call__(self, x):
      return self.l1(x).relu().sequential([self.l2])

  X_train, Y_train, X_test, Y_test = mnist()
  X_train = X_train.reshape(-1, 784).float() / 255  # added: the seed's Linear model takes flat images
  model = Model()
  optim = nn.optim.Adam(nn.state.get_parameters(model))

  @TinyJit
  @Tensor.train()
  def train_step():
    optim.zero_grad()
    samples = Tensor.randint(512, high=X_train.shape[0])
    loss = model(X_train[samples]).sparse_categorical_crossentropy(Y_train[samples]).backward()
    return loss.realize(*optim.schedule_step())

  losses = []
  for i in range(100):
    loss = train_step()
    losses.append(loss.item())
  assert train_step.captured is not None and len(train_step.captured.steps) > 10
  assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:3]), losses  # it learns: each replay is a real step on fresh samples

def test_jit_compilation_forward():
  class Model:
    def __init__(self):
      self.l1 = nn.Linear(784, 128)
      self.l2 = nn.Linear(128, 10)
    def __call__(self, x):
      return self.l1(x).relu().sequential([self.l2])
  model = Model()

  @TinyJit
  def forward(x):
    return model(x).realize()

  # First call captures, subsequent calls replay
  for _ in range(4):
    batch = Tensor.rand(8, 784).realize()
    out = forward(batch)
    ref = np.maximum(batch.numpy() @ model.l1.weight.numpy().T + model.l1.bias.numpy(), 0) @ model.l2.weight.numpy().T + model.l2.bias.numpy()
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=1e-5)
