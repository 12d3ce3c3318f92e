"""Train the digits network data-parallel on two devices in one process, in the style of tinygrad's
beautiful_mnist_multigpu: a copy of the model on every device, each batch split between them (Tensor.shard), the gradient
reductions over the batch are all-reduces between the devices, Adam steps every copy alike. Prints the held-out accuracy.

  python examples/beautiful_mnist_multi.py                          # CPU and CPU:1: ... test accuracy: 98.x%
  python examples/beautiful_mnist_multi.py --devices CPU,CPU:1,CPU:2,CPU:3 --steps 200
  python examples/beautiful_mnist_multi.py --devices CL,CPU         # any devices, of any kinds (docs/devices.md)
"""
from __future__ import annotations
import argparse
from tensor import Tensor, TinyJit, nn
from tensor.nn.datasets import digits
from tensor.nn.progress import trange

class Model:
  """(N, 1, 8, 8) images -> 16 channels of 3x3 features -> max-pooled (N, 16, 4, 4) -> 10 class scores (examples/train_digits.py's)."""
  def __init__(self):
    self.layers = [nn.Conv2d(1, 16, 3, padding=1), Tensor.relu, Tensor.max_pool2d, lambda x: x.flatten(1), nn.Linear(16 * 4 * 4, 10)]
  def __call__(self, x: Tensor) -> Tensor: return x.sequential(self.layers)

def train(devices: tuple[str, ...], steps: int = 300, batch: int = 128, lr: float = 3e-3, seed: int = 0, show: bool = True) -> float:
  """Train on `devices` from a fixed seed and return the held-out accuracy (0..1)."""
  Tensor.manual_seed(seed)
  X_train, Y_train, X_test, Y_test = digits()
  X_train, X_test = (X_train.float() / 8 - 1).realize(), (X_test.float() / 8 - 1)
  # the test set split on its batch axis where its 355 images divide evenly among the devices (shards are equal), else whole on each
  split = 0 if X_test.shape[0] % len(devices) == 0 else None
  X_test, Y_test = X_test.shard(devices, axis=split), Y_test.shard(devices, axis=split)
  model = Model()
  for p in nn.state.get_parameters(model): p.replace(p.to(devices))  # a copy of the model on every device
  optim = nn.optim.Adam(nn.state.get_parameters(model), lr=lr)

  @TinyJit
  @Tensor.train()
  def train_step() -> Tensor:
    optim.zero_grad()
    samples = Tensor.randint(batch, high=X_train.shape[0])
    x, y = X_train[samples].shard(devices, axis=0), Y_train[samples].shard(devices, axis=0)  # each device its part of the batch
    loss = model(x).sparse_categorical_crossentropy(y).backward()
    return loss.realize(*optim.schedule_step())

  @TinyJit
  def accuracy() -> Tensor: return (model(X_test).argmax(axis=1) == Y_test).mean() * 100

  running = None
  for i in (t := trange(steps, disable=not show)):
    loss = train_step().item()
    running = loss if running is None else 0.9 * running + 0.1 * loss
    if i % 10 == 9: t.set_description(f"loss {running:.3f}")
  return accuracy().item() / 100

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--devices", default="CPU,CPU:1", help="comma-separated devices (default CPU,CPU:1)")
  ap.add_argument("--steps", type=int, default=300, help="training steps (default 300)")
  ap.add_argument("--batch", type=int, default=128, help="images per step, split among the devices (default 128)")
  ap.add_argument("--seed", type=int, default=0, help="random seed for the initial weights and the batches (default 0)")
  args = ap.parse_args()
  devices = tuple(d.strip() for d in args.devices.split(","))
  acc = train(devices, args.steps, args.batch, seed=args.seed)
  print(f"test accuracy: {100 * acc:.1f}% ({len(devices)} devices: {', '.join(devices)})")

if __name__ == "__main__": main()
