"""tensor/nn/datasets.py: the shipped digits set and its split, the IDX reader's checks, where mnist() looks and what it
says when the files are absent, and (when Debian's dataset-fashion-mnist is installed) the real Fashion-MNIST files."""
import gzip, hashlib, pathlib, struct
import numpy as np
import pytest
from tensor import dtypes
from tensor.nn import datasets
from tensor.nn.datasets import DatasetError, digits, mnist, read_idx

def test_digits_shapes_split_and_values():
  xtr, ytr, xte, yte = digits()
  assert xtr.shape == (1442, 1, 8, 8) and ytr.shape == (1442,) and xte.shape == (355, 1, 8, 8) and yte.shape == (355,)
  assert all(t.dtype is dtypes.uint8 for t in (xtr, ytr, xte, yte))
  x, y = np.concatenate([xtr.numpy(), xte.numpy()]), np.concatenate([ytr.numpy(), yte.numpy()])
  assert x.min() == 0 and x.max() == 16 and sorted(set(y.tolist())) == list(range(10))
  assert np.bincount(yte.numpy()).min() >= 34  # stratified: every digit is in the test split about equally
  # the split is fixed: the same call gives the same tensors, and no image is in both halves
  assert np.array_equal(digits()[3].numpy(), yte.numpy())
  train_rows = {r.tobytes() + bytes([l]) for r, l in zip(xtr.numpy().reshape(-1, 64), ytr.numpy())}
  assert sum(r.tobytes() + bytes([l]) in train_rows for r, l in zip(xte.numpy().reshape(-1, 64), yte.numpy())) == 0

def test_digits_file_is_the_credited_one():
  data = datasets.DIGITS_FILE.read_bytes()
  readme = (datasets.DIGITS_FILE.parent / "README.md").read_text()
  assert hashlib.sha256(data).hexdigest() in readme and "CC BY 4.0" in readme
  assert len(gzip.decompress(data).splitlines()) == 1797

def _idx(magic, dims, data=None):
  body = bytes(data if data is not None else np.zeros(int(np.prod(dims)), np.uint8))
  return struct.pack(">I", magic) + struct.pack(f">{len(dims)}I", *dims) + body

def _write_set(folder, n_train=3, n_test=2, side=28, gz=True):
  folder.mkdir(parents=True, exist_ok=True)
  rng = np.random.default_rng(0)
  files = {}
  for split, n in (("train", n_train), ("t10k", n_test)):
    files[f"{split}-images-idx3-ubyte"] = _idx(0x803, (n, side, side), rng.integers(0, 256, n * side * side, dtype=np.uint8))
    files[f"{split}-labels-idx1-ubyte"] = _idx(0x801, (n,), rng.integers(0, 10, n, dtype=np.uint8))
  for name, raw in files.items():
    if gz: (folder / f"{name}.gz").write_bytes(gzip.compress(raw))
    else: (folder / name).write_bytes(raw)
  return files

@pytest.fixture
def no_env(monkeypatch, tmp_path):
  for var in ("MNIST_DIR", "FASHION_MNIST_DIR"): monkeypatch.delenv(var, raising=False)
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
  return tmp_path

def test_mnist_reads_from_mnist_dir(no_env, monkeypatch):
  files = _write_set(no_env / "m", gz=False)
  monkeypatch.setenv("MNIST_DIR", str(no_env / "m"))
  xtr, ytr, xte, yte = mnist()
  assert xtr.shape == (3, 1, 28, 28) and ytr.shape == (3,) and xte.shape == (2, 1, 28, 28) and yte.dtype is dtypes.uint8
  assert xtr.numpy().tobytes() == files["train-images-idx3-ubyte"][16:] and yte.numpy().tobytes() == files["t10k-labels-idx1-ubyte"][8:]

def test_mnist_reads_from_the_cache_folder(no_env):
  _write_set(no_env / "cache" / "rulegrad" / "datasets" / "fashion-mnist", n_train=4)
  assert datasets.mnist_dirs(fashion=True)[0] == no_env / "cache" / "rulegrad" / "datasets" / "fashion-mnist"
  assert mnist(fashion=True)[0].shape == (4, 1, 28, 28)

def test_mnist_absent_says_where_it_looked_and_how_to_get_the_files(no_env, monkeypatch):
  with pytest.raises(FileNotFoundError, match=r"MNIST files .* are in none of .*datasets/mnist: .*set MNIST_DIR to theirs"): mnist()
  monkeypatch.setattr(datasets, "DEBIAN_FASHION_DIR", no_env / "not-installed")
  monkeypatch.setenv("FASHION_MNIST_DIR", str(no_env / "nowhere"))
  with pytest.raises(FileNotFoundError, match=r"none of .*nowhere, .*fashion-mnist, .*not-installed: `apt-get install dataset-fashion-mnist`"):
    mnist(fashion=True)

def test_idx_checks(tmp_path):
  p = tmp_path / "x.idx"
  p.write_bytes(_idx(0x803, (2, 3, 3)))
  assert read_idx(p, 0x803).shape == (2, 3, 3)
  for raw, msg in [(b"\0\0", "too short"), (_idx(0x801, (2,)), "magic number 0x00000801, expected 0x00000803"),
                   (struct.pack(">I", 0x803) + b"\0\0\0\2", "ends inside its 3 dimensions"),
                   (_idx(0x803, (2, 3, 3))[:-1], "need 18 bytes of data, the file has 17"), (_idx(0x803, (2, 3, 3)) + b"\0", "the file has 19")]:
    p.write_bytes(raw)
    with pytest.raises(DatasetError, match=msg): read_idx(p, 0x803)

def test_mnist_checks_sizes(no_env, monkeypatch):
  monkeypatch.setenv("MNIST_DIR", str(no_env / "s"))
  _write_set(no_env / "s", side=27)
  with pytest.raises(DatasetError, match=r"images of \(27, 27\) pixels, expected \(28, 28\)"): mnist()
  _write_set(no_env / "s")
  (no_env / "s" / "train-labels-idx1-ubyte.gz").write_bytes(gzip.compress(_idx(0x801, (5,))))
  with pytest.raises(DatasetError, match="holds 3 images but .* holds 5 labels"): mnist()
  (no_env / "s" / "train-labels-idx1-ubyte.gz").write_bytes(gzip.compress(_idx(0x801, (3,), [1, 2, 12])))
  with pytest.raises(DatasetError, match="label 12 is not a digit class"): mnist()

DEBIAN = pathlib.Path("/usr/share/datasets/fashion-mnist")

@pytest.mark.skipif(not (DEBIAN / "train-images-idx3-ubyte.gz").exists(), reason="Debian's dataset-fashion-mnist is not installed")
def test_fashion_mnist_from_debian(no_env):
  xtr, ytr, xte, yte = mnist(fashion=True)
  assert xtr.shape == (60000, 1, 28, 28) and ytr.shape == (60000,) and xte.shape == (10000, 1, 28, 28) and yte.shape == (10000,)
  assert np.bincount(yte.numpy()).tolist() == [1000] * 10 and xte.numpy().max() == 255
