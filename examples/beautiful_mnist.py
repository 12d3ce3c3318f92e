"""The seeds' MNIST trainer: a CNN of four convolutions and two batch norms, trained with a TinyJit'd, Tensor.train()'d
step on random batches, with Adam, reporting the test accuracy as it goes. Reads MNIST (or Fashion-MNIST) with mnist():
see tensor/nn/datasets.py for where it looks (Fashion-MNIST: `apt-get install dataset-fashion-mnist` on Debian).

  python examples/beautiful_mnist.py                     # 70 steps of 512 images on MNIST
  python examples/beautiful_mnist.py --fashion --steps 200
"""
from __future__ import annotations
import argparse, sys
from typing import Callable
from tensor import Tensor, TinyJit, nn
from tensor.nn.datasets import mnist
from tensor.nn.progress import trange

class Model:
  """(N, 1, 28, 28) -> conv 5x5 -> (N, 32, 24, 24) -> conv 5x5 -> (N, 32, 20, 20) -> pool -> (N, 32, 10, 10)
  -> conv 3x3 -> (N, 64, 8, 8) -> conv 3x3 -> (N, 64, 6, 6) -> pool -> (N, 64, 3, 3) -> linear -> (N, 10)."""
  def __init__(self):
    self.layers: list[Callable[[Tensor], Tensor]] = [
      nn.Conv2d(1, 32, 5), Tensor.relu,
      nn.Conv2d(32, 32, 5), Tensor.relu,
      nn.BatchNorm(32), Tensor.max_pool2d,
      nn.Conv2d(32, 64, 3), Tensor.relu,
      nn.Conv2d(64, 64, 3), Tensor.relu,
      nn.BatchNorm(64), Tensor.max_pool2d,
      lambda x: x.flatten(1), nn.Linear(576, 10)]
  def __call__(self, x: Tensor) -> Tensor: return x.sequential(self.layers)

def pixels(x: Tensor) -> Tensor: return x.float() / 255  # uint8 images -> floats in 0..1 (kept as bytes until a batch is picked)

class Trainer:
  """The model, its optimizer and the two captured functions: a training step and the accuracy on a chunk of test images."""
  def __init__(self, X_train: Tensor, Y_train: Tensor, model: Callable[[Tensor], Tensor], batch: int = 512, lr: float = 1e-3):
    self.X_train, self.Y_train, self.batch, self.model = X_train, Y_train, batch, model
    self.optim = nn.optim.Adam(nn.state.get_parameters(self.model), lr=lr)
    self.train_step = TinyJit(Tensor.train()(self._train_step))
    self.correct = TinyJit(self._correct)

  def _train_step(self) -> Tensor:
    self.optim.zero_grad()
    samples = Tensor.randint(self.batch, high=self.X_train.shape[0])
    loss = self.model(pixels(self.X_train[samples])).sparse_categorical_crossentropy(self.Y_train[samples]).backward()
    return loss.realize(*self.optim.schedule_step())

  def _correct(self, x: Tensor, y: Tensor) -> Tensor: return (self.model(pixels(x)).argmax(axis=1) == y).sum()

  def accuracy(self, X_test: Tensor, Y_test: Tensor, chunk: int = 1000) -> float:
    """Percent of the test images classified right, a chunk at a time (the whole set at once would need GBs of activations)."""
    n = X_test.shape[0] - X_test.shape[0] % chunk  # whole chunks only: one captured shape
    if n == 0: raise ValueError(f"the test set has {X_test.shape[0]} images, fewer than one chunk of {chunk}")
    right = sum(self.correct(X_test[i:i + chunk].contiguous().realize(), Y_test[i:i + chunk].contiguous().realize()).item()
                for i in range(0, n, chunk))
    return 100 * right / n

def train(X_train: Tensor, Y_train: Tensor, X_test: Tensor, Y_test: Tensor, steps: int = 70, batch: int = 512, eval_every: int = 10,
          seed: int = 0, show: bool = True, model: Callable[[], Callable[[Tensor], Tensor]] = Model, chunk: int = 1000) -> float:
  """Train a new model(), from a fixed seed; returns the final test accuracy in percent (on whole chunks of the test set)."""
  Tensor.manual_seed(seed)
  trainer = Trainer(X_train, Y_train, model(), batch)
  test_acc = float("nan")
  for i in (t := trange(steps, disable=not show)):
    loss = trainer.train_step()
    if i % eval_every == eval_every - 1 or i == steps - 1: test_acc = trainer.accuracy(X_test, Y_test, chunk)
    t.set_description(f"loss: {loss.item():6.2f} test_accuracy: {test_acc:5.2f}%")
  return test_acc

def main(argv: list[str] | None = None) -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--steps", type=int, default=70, help="training steps (default 70)")
  ap.add_argument("--batch", type=int, default=512, help="images per step (default 512)")
  ap.add_argument("--eval-every", type=int, default=10, help="steps between test accuracy measurements (default 10)")
  ap.add_argument("--fashion", action="store_true", help="Fashion-MNIST instead of MNIST")
  ap.add_argument("--seed", type=int, default=0)
  args = ap.parse_args(argv)
  if args.steps < 1: ap.error(f"--steps must be at least 1, got {args.steps}")
  try:
    X_train, Y_train, X_test, Y_test = mnist(fashion=args.fashion)
  except FileNotFoundError as e:
    sys.exit(f"beautiful_mnist: no data: {e}")
  acc = train(X_train, Y_train, X_test, Y_test, args.steps, args.batch, args.eval_every, args.seed)
  print(f"test accuracy: {acc:.2f}%")

if __name__ == "__main__": main()
