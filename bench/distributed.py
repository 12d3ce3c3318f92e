"""tensor.distributed on MPI (issue 24), in one run: all_reduce of 4 KB, 1 MB and 16 MB across 2 processes against mpi4py's
own Allreduce on numpy arrays (the same messages, alternating samples), and data-parallel MLP training (784-128-10, batch
512) with 2 processes x 1 thread against 1 process x 1 thread on the whole batch; and in one process, the same MLP step
sharded on CPU and CPU:1 (tensor/multi.py: the batch split, the model on both) against one device, alternating samples.

  python -m bench.distributed [--reps 200] [--steps 60]
  python -m bench.distributed --only allreduce|mlp|shard     # one section (shard: in-process, no MPI needed)

It starts its own `mpirun -np 2` (as root it sets Open MPI's OMPI_ALLOW_RUN_AS_ROOT pair). Needs mpirun and mpi4py.
"""
from __future__ import annotations
import argparse, os, statistics, subprocess, sys, time
import numpy as np

SIZES = {"4 KB": 4 << 10, "1 MB": 1 << 20, "16 MB": 16 << 20}

def allreduce_worker(reps: int) -> None:
  from mpi4py import MPI
  from tensor import Tensor, distributed as dist
  comm = MPI.COMM_WORLD
  for label, nbytes in SIZES.items():
    n = nbytes // 4
    a = np.full(n, dist.rank() + 1, np.float32)
    out = np.empty_like(a)
    t = Tensor(a).realize()
    ours, theirs = [], []
    k = max(5, reps if nbytes <= 1 << 20 else reps // 10)
    for i in range(k + 3):
      comm.Barrier()
      t0 = time.perf_counter()
      comm.Allreduce(a, out, MPI.SUM)
      t1 = time.perf_counter()
      comm.Barrier()
      t2 = time.perf_counter()
      r = dist.all_reduce(t).realize()
      t3 = time.perf_counter()
      if i >= 3: theirs.append(t1 - t0); ours.append(t3 - t2)
    assert float(r[0].item()) == 3.0 and out[0] == 3.0
    if dist.rank() == 0:
      m_o, m_t = statistics.median(ours), statistics.median(theirs)
      print(f"all_reduce {label:>6}: ours {m_o * 1e6:9.1f} us   mpi4py Allreduce {m_t * 1e6:9.1f} us   ours/mpi4py {m_o / m_t:5.2f}x",
            flush=True)

def mlp_worker(steps: int) -> None:
  from tensor import Tensor, TinyJit, nn, distributed as dist
  from tensor.nn.state import get_parameters
  world, rank, batch = dist.world_size(), dist.rank(), 512
  part = batch // world
  Tensor.manual_seed(0)
  rng = np.random.default_rng(0)
  X, Y = Tensor(rng.standard_normal((4096, 784)).astype(np.float32)).realize(), Tensor(rng.integers(0, 10, 4096).astype(np.int32)).realize()
  l1, l2 = nn.Linear(784, 128), nn.Linear(128, 10)
  params = get_parameters([l1, l2])
  opt = nn.optim.Adam(params, lr=1e-3)
  def loss_of(idx: Tensor) -> Tensor: return l2(l1(X[idx]).relu()).sparse_categorical_crossentropy(Y[idx])

  @TinyJit
  @Tensor.train()
  def whole() -> Tensor:
    opt.zero_grad()
    return loss_of(Tensor.randint(batch, high=4096)).backward().realize(*opt.schedule_step())

  @TinyJit
  @Tensor.train()
  def grads() -> Tensor:
    opt.zero_grad()
    return loss_of(Tensor.randint(batch, high=4096)[rank * part:(rank + 1) * part]).backward().realize(*[p.grad for p in params])

  @TinyJit
  @Tensor.train()
  def update() -> None: Tensor.realize(*opt.schedule_step())

  def step() -> None:
    if world == 1: whole()
    else:
      grads()
      dist.average_gradients(params)
      update()
  for _ in range(5): step()
  dist.barrier()
  t0 = time.perf_counter()
  for _ in range(steps): step()
  dist.barrier()
  if rank == 0: print(f"mlp {world} process(es) x 1 thread: {steps / (time.perf_counter() - t0):8.1f} steps/s", flush=True)

def shard_worker(steps: int, devices: tuple[str, ...] = ("CPU", "CPU:1")) -> None:
  """The MLP step on one device and sharded on `devices` in this process, in alternating blocks of steps: wall and
  thread-CPU medians per step."""
  from tensor import Tensor, TinyJit, nn
  from tensor.nn.state import get_parameters
  rng = np.random.default_rng(0)
  X0, Y0 = rng.standard_normal((4096, 784)).astype(np.float32), rng.integers(0, 10, 4096).astype(np.int32)
  def setup(devs: tuple[str, ...] | None):
    Tensor.manual_seed(0)
    X, Y = Tensor(X0).realize(), Tensor(Y0).realize()
    l1, l2 = nn.Linear(784, 128), nn.Linear(128, 10)
    params = get_parameters([l1, l2])
    if devs:
      for p in params: p.replace(p.to(devs))
    opt = nn.optim.Adam(params, lr=1e-3)
    @TinyJit
    @Tensor.train()
    def step() -> Tensor:
      opt.zero_grad()
      idx = Tensor.randint(512, high=4096)
      x, y = X[idx], Y[idx]
      if devs: x, y = x.shard(devs, axis=0), y.shard(devs, axis=0)
      return l2(l1(x).relu()).sparse_categorical_crossentropy(y).backward().realize(*opt.schedule_step())
    return step
  steps_of = {"one": setup(None), "sharded": setup(devices)}
  for f in steps_of.values():
    for _ in range(5): f()
  walls: dict[str, list[float]] = {k: [] for k in steps_of}
  cpus: dict[str, list[float]] = {k: [] for k in steps_of}
  block = 5
  for _ in range(max(1, steps // block)):
    for k, f in steps_of.items():
      w0, c0 = time.perf_counter(), time.thread_time()
      for _ in range(block): f()
      f().numpy()  # the queue drained: every device's work is in the sample
      walls[k].append((time.perf_counter() - w0) / (block + 1))
      cpus[k].append((time.thread_time() - c0) / (block + 1))
  med = {k: (statistics.median(walls[k]), statistics.median(cpus[k])) for k in steps_of}
  for k, (w, c) in med.items():
    where = "CPU" if k == "one" else ", ".join(devices)
    print(f"mlp in one process, {k + ':':8} {where:>10}: {w * 1e3:7.2f} ms/step wall, {c * 1e3:7.2f} ms thread CPU", flush=True)
  print(f"sharded over one device, in one process: {med['sharded'][0] / med['one'][0]:.2f}x the time per step (wall)", flush=True)

def run(np_: int, *args: str) -> str:
  env = {**os.environ, "THREADS": "1", "OMP_NUM_THREADS": "1", "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
  cmd = [sys.executable, "-m", "bench.distributed", *args]
  if np_ > 1: cmd = ["mpirun", "-np", str(np_), "--oversubscribe", "--bind-to", "core", *cmd]
  r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)
  if r.returncode != 0: raise SystemExit(f"{' '.join(cmd)} failed:\n{r.stdout}\n{r.stderr}")
  return r.stdout

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--reps", type=int, default=200)
  ap.add_argument("--steps", type=int, default=60)
  ap.add_argument("--rounds", type=int, default=3, help="rounds of the data-parallel MLP (1 process, then 2)")
  ap.add_argument("--only", choices=["allreduce", "mlp", "shard"],
                  help="one section: the all_reduce timings, the data-parallel MLP, or the in-process shards (no MPI)")
  ap.add_argument("--worker", choices=["allreduce", "mlp", "shard"], help=argparse.SUPPRESS)
  args = ap.parse_args()
  if args.worker == "allreduce": return allreduce_worker(args.reps)
  if args.worker == "mlp": return mlp_worker(args.steps)
  if args.worker == "shard": return shard_worker(args.steps)
  print(f"load: {os.getloadavg()[0]:.1f}")
  if args.only in (None, "allreduce"): print(run(2, "--worker", "allreduce", "--reps", str(args.reps)), end="")
  if args.only in (None, "mlp"):
    # 1 and 2 processes in turn, round after round: the machine's drift lands on both sides of each round's ratio
    ratios = []
    for _ in range(args.rounds):
      one, two = (run(n, "--worker", "mlp", "--steps", str(args.steps)) for n in (1, 2))
      print(one + two, end="")
      rate = [float(line.split(":")[1].split()[0]) for line in (one, two)]
      ratios.append(rate[1] / rate[0])
    print(f"data parallel speedup, 2 x 1 thread over 1 x 1 thread: {statistics.median(ratios):.2f}x (median of "
          f"{len(ratios)} rounds: {', '.join(f'{r:.2f}' for r in ratios)})")
  if args.only in (None, "shard"): print(run(1, "--worker", "shard", "--steps", str(args.steps)), end="")

if __name__ == "__main__": main()
