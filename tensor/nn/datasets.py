"""Datasets as tensors: digits() (shipped with the package: runs anywhere) and mnist() (read from files you download once).

  X_train, Y_train, X_test, Y_test = digits()          # (1442, 1, 8, 8) uint8 in 0..16 and (1442,) uint8 labels, then the test split
  X_train, Y_train, X_test, Y_test = mnist()           # (60000, 1, 28, 28) uint8 in 0..255 ...; mnist(fashion=True) for Fashion-MNIST

Where mnist() looks, in order: $MNIST_DIR (or $FASHION_MNIST_DIR for fashion=True), the cache folder
$XDG_CACHE_HOME/rulegrad/datasets/mnist (or .../fashion-mnist; XDG_CACHE_HOME defaults to ~/.cache), and for Fashion-MNIST
Debian's /usr/share/datasets/fashion-mnist (`apt-get install dataset-fashion-mnist`). Each folder holds the four IDX files
(train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz; gzipped or not).
"""
from __future__ import annotations
import gzip, os, pathlib, struct
import numpy as np
from runtime.dtype import dtypes
from tensor.tensor import Tensor

class DatasetError(ValueError):
  """A dataset file that is not what it should be (wrong magic number, sizes that don't match)."""

MNIST_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
DEBIAN_FASHION_DIR = pathlib.Path("/usr/share/datasets/fashion-mnist")  # from `apt-get install dataset-fashion-mnist`
_IMAGES, _LABELS = 0x00000803, 0x00000801  # IDX magic: two zero bytes, type 0x08 (unsigned byte), the number of dimensions

def _cache_root() -> pathlib.Path:
  return pathlib.Path(os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache") / "rulegrad" / "datasets"

def mnist_dirs(fashion: bool = False) -> list[pathlib.Path]:
  """The folders mnist() searches, in order."""
  env = os.environ.get("FASHION_MNIST_DIR" if fashion else "MNIST_DIR")
  dirs = [pathlib.Path(env)] if env else []
  dirs.append(_cache_root() / ("fashion-mnist" if fashion else "mnist"))
  if fashion: dirs.append(DEBIAN_FASHION_DIR)
  return dirs

def _find(fashion: bool) -> list[pathlib.Path]:
  for d in mnist_dirs(fashion):
    found = [next((p for p in (d / f"{n}.gz", d / n) if p.is_file()), None) for n in MNIST_FILES]
    if all(found): return found  # type: ignore[return-value]
  name, var = ("Fashion-MNIST", "FASHION_MNIST_DIR") if fashion else ("MNIST", "MNIST_DIR")
  how = ("`apt-get install dataset-fashion-mnist` (Debian), or download them from github.com/zalandoresearch/fashion-mnist" if fashion
         else "download them (e.g. from the mirrors listed at github.com/cvdfoundation/mnist)")
  raise FileNotFoundError(f"the {name} files ({', '.join(n + '.gz' for n in MNIST_FILES)}) are in none of "
                          f"{', '.join(str(d) for d in mnist_dirs(fashion))}: {how}, and put them in one of those folders or set {var} to theirs")

def read_idx(path: str | os.PathLike, magic: int) -> np.ndarray:
  """An IDX file (gzipped when its name ends in .gz) of unsigned bytes as an array, after checking its magic number and
  that its data is exactly as long as its dimensions say."""
  raw = gzip.open(path).read() if str(path).endswith(".gz") else pathlib.Path(path).read_bytes()
  if len(raw) < 4: raise DatasetError(f"{path}: {len(raw)} bytes is too short for an IDX file")
  (got,) = struct.unpack(">I", raw[:4])
  if got != magic: raise DatasetError(f"{path}: IDX magic number {got:#010x}, expected {magic:#010x}")
  ndim = magic & 0xFF
  if len(raw) < 4 + 4 * ndim: raise DatasetError(f"{path}: the file ends inside its {ndim} dimensions")
  dims = struct.unpack(f">{ndim}I", raw[4:4 + 4 * ndim])
  data = np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim)
  if data.size != (need := int(np.prod(dims))): raise DatasetError(f"{path}: dimensions {dims} need {need} bytes of data, the file has {data.size}")
  return data.reshape(dims)

def _pair(images: pathlib.Path, labels: pathlib.Path, side: int) -> tuple[np.ndarray, np.ndarray]:
  x, y = read_idx(images, _IMAGES), read_idx(labels, _LABELS)
  if x.shape[1:] != (side, side): raise DatasetError(f"{images}: images of {x.shape[1:]} pixels, expected ({side}, {side})")
  if len(x) != len(y): raise DatasetError(f"{images} holds {len(x)} images but {labels} holds {len(y)} labels")
  if y.size and y.max() > 9: raise DatasetError(f"{labels}: label {int(y.max())} is not a digit class 0-9")
  return x.reshape(-1, 1, side, side), y

def mnist(device: str | None = None, fashion: bool = False) -> tuple[Tensor, Tensor, Tensor, Tensor]:
  """(X_train, Y_train, X_test, Y_test) of MNIST, or Fashion-MNIST: images (N, 1, 28, 28) uint8, labels (N,) uint8."""
  tr_x, tr_y, te_x, te_y = _find(fashion)
  (xa, ya), (xb, yb) = _pair(tr_x, tr_y, 28), _pair(te_x, te_y, 28)
  return tuple(Tensor(a, device=device, dtype=dtypes.uint8) for a in (xa, ya, xb, yb))  # type: ignore[return-value]

DIGITS_FILE = pathlib.Path(__file__).parent / "data" / "digits.csv.gz"

def digits(device: str | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
  """(X_train, Y_train, X_test, Y_test) of the UCI optical recognition of handwritten digits set (1,797 images of 8x8
  pixels in 0..16; tensor/nn/data/README.md gives its source and licence): images (N, 1, 8, 8) uint8, labels (N,) uint8.
  The held-out split is fixed and stratified: of each digit's images, in file order, every fifth (the 5th, 10th, ...) is a
  test image: 355 test images, 1,442 train."""
  table = np.loadtxt(gzip.open(DIGITS_FILE, "rt"), delimiter=",", dtype=np.uint8)  # 64 pixels then the label, per row
  x, y = table[:, :64].reshape(-1, 1, 8, 8), table[:, 64]
  test = np.zeros(len(y), bool)
  for c in range(10): test[np.flatnonzero(y == c)[4::5]] = True
  return tuple(Tensor(np.ascontiguousarray(a), device=device, dtype=dtypes.uint8)  # type: ignore[return-value]
               for a in (x[~test], y[~test], x[test], y[test]))
