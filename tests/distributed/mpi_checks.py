"""Run by tests/distributed/test_mpi.py under `mpirun -np N`: each check is a function of this file, named on the command
line; a rank that finds a wrong value raises (and, through tensor.distributed's exception hook, stops the job)."""
import sys
import numpy as np
from tensor import Tensor, distributed as dist

def collectives() -> None:
  r, n = dist.rank(), dist.world_size()
  x = np.arange(12, dtype=np.float32).reshape(3, 4) * (r + 1)
  total = sum(np.arange(12, dtype=np.float32).reshape(3, 4) * (k + 1) for k in range(n))
  np.testing.assert_array_equal(dist.all_reduce(Tensor(x), "sum").numpy(), total)
  np.testing.assert_allclose(dist.all_reduce(Tensor(x), "mean").numpy(), total / n, rtol=1e-6)
  np.testing.assert_array_equal(dist.all_reduce(Tensor(x) - 100 * r, "max").numpy(), np.max([x * 0 + np.arange(12).reshape(3, 4) * (k + 1) - 100 * k
                                                                                        for k in range(n)], axis=0))
  # a lazy input (computed first), integers, half (through float32), bool, a strided view, an empty tensor
  np.testing.assert_array_equal(dist.all_reduce((Tensor(x) * 2).permute(1, 0)).numpy(), (total * 2).T)
  np.testing.assert_array_equal(dist.all_reduce(Tensor(np.array([r, -r, 7], np.int64))).numpy(), [sum(range(n)), -sum(range(n)), 7 * n])
  assert dist.all_reduce(Tensor(np.array([r], np.int32)), "mean").dtype.name.startswith("float")
  np.testing.assert_array_equal(dist.all_reduce(Tensor(x.astype(np.float16))).numpy(), total.astype(np.float16))
  assert dist.all_reduce(Tensor(np.array([r == 0, False])), "max").numpy().tolist() == [True, False]
  assert dist.all_reduce(Tensor(np.zeros((0, 3), np.float32))).shape == (0, 3)
  for root in range(n):
    got = dist.broadcast(Tensor(np.full(5, r, np.int32)), root=root).numpy()
    assert got.tolist() == [root] * 5, (root, got)
  # results held together: each is its own memory, not the block MPI received into (tensor/distributed.py's staging)
  held = [dist.all_reduce(Tensor(np.full(1000, r + k, np.float32))) for k in range(3)]
  held += [dist.broadcast(Tensor(np.full(1000, r + k, np.int32)), root=0) for k in range(2)]
  assert [float(h.numpy()[0]) for h in held] == [sum(range(n)) + n * k for k in range(3)] + [0.0, 1.0], [h.numpy()[0] for h in held]
  # 16 MB
  big = np.full(4 << 20, r + 1, np.float32)
  assert (dist.all_reduce(Tensor(big)).numpy() == n * (n + 1) / 2).all()
  dist.barrier()
  if r == 0: print(f"collectives ok on {n} ranks")

def mismatch() -> None:
  try: dist.all_reduce(Tensor(np.zeros(3 + dist.rank(), np.float32)))
  except dist.DistributedError as e:
    print(f"rank {dist.rank()}: {e}")
    return
  raise AssertionError("no error for different shapes")

def dies() -> None:
  if dist.rank() == 1: raise SystemExit(3)  # leaves without a word; rank 0 waits in its collective
  dist.all_reduce(Tensor(np.ones(4, np.float32)))

def crashes() -> None:
  if dist.rank() == 1: raise ValueError("rank 1 fails")
  dist.all_reduce(Tensor(np.ones(4, np.float32)))

def train(out_dir: str) -> None:
  # examples/train_digits.py's training, a few steps: each rank's weights saved, to compare with one process's
  import pathlib
  sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples"))
  from train_digits import train_model
  from tensor.nn.state import get_parameters
  model, _ = train_model(steps=12, batch=64, show=False)
  np.savez(f"{out_dir}/rank{dist.rank()}-of-{dist.world_size()}.npz", *[p.numpy() for p in get_parameters(model)])

def shards() -> None:
  # MPI ranks combined with devices in each process (tensor/multi.py): collectives of split and replicated tensors, and a
  # data-parallel SGD step (each rank its half of the batch, split again over CPU and CPU:1) equal to one device's on the
  # whole batch, which each rank computes itself
  from tensor import nn
  devs, rank, world = ("CPU", "CPU:1"), dist.rank(), dist.world_size()
  x = np.arange(8, dtype=np.float32).reshape(4, 2) + rank
  s = dist.all_reduce(Tensor(x).shard(devs, axis=0))
  assert s.device == devs and np.array_equal(s.numpy(), sum(np.arange(8, dtype=np.float32).reshape(4, 2) + r for r in range(world)))
  assert np.array_equal(dist.broadcast(Tensor(x).to(devs), root=1).numpy(), x - rank + 1)
  rng = np.random.default_rng(0)
  X, Y, W0 = rng.standard_normal((16, 6)).astype(np.float32), rng.integers(0, 3, 16), rng.standard_normal((6, 3)).astype(np.float32)
  def step(w: Tensor, xs: Tensor, ys: Tensor, mpi: bool) -> np.ndarray:
    w.requires_grad = True
    opt = nn.optim.SGD([w], lr=0.5)
    with Tensor.train():
      opt.zero_grad()
      (xs @ w).sparse_categorical_crossentropy(ys).backward()
      if mpi: dist.average_gradients([w])
      opt.step()
    return w.numpy()
  part = 16 // world
  mine = slice(rank * part, (rank + 1) * part)
  for axis in (None, 1):  # the weight whole on each device, or split on its output axis (3 does not divide: 6x4 instead)
    w0 = W0 if axis is None else np.concatenate([W0, W0[:, :1]], 1)
    ys = Y if axis is None else Y % 4
    ref = step(Tensor(w0), Tensor(X), Tensor(ys), False)
    got = step(Tensor(w0).shard(devs, axis), Tensor(X[mine]).shard(devs, axis=0), Tensor(ys[mine]).shard(devs, axis=0), True)
    assert np.allclose(got, ref, rtol=1e-5, atol=1e-6), (axis, np.abs(got - ref).max())
  if rank == 0: print(f"shards ok on {world} ranks", flush=True)

if __name__ == "__main__": globals()[sys.argv[1]](*sys.argv[2:])
