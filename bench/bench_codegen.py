"""Kernel speed of the generated C against torch (and numpy) at one thread, in one process: the codegen's own bench until
bench/kernels.py measures the same. Times the compiled kernels alone (scheduled and compiled once, outside the timer).

  python -m bench.bench_codegen [--reps 7] [--only matmul] [--json out.json]

Samples alternate between the systems; medians are printed with the spread (min-max) of ours.
"""
from __future__ import annotations
import argparse, json, os, statistics, time
os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np
from runtime.ops import Ops
from tensor import Tensor
from tensor.engine.realize import get_runner, kernel_buffers, schedule_of
from tensor.tensor import buffers

try:
  import torch
  torch.set_num_threads(1)
except ImportError: torch = None

def compiled(t: Tensor):
  """A callable running the kernels that compute t (compiled now), and the program names."""
  t.kernelize()
  root = t.uop.src[0] if t.uop.op is Ops.RESHAPE else t.uop
  sched = schedule_of([root])
  steps = []
  for k in sched:
    bufs = [buffers[b] for b in kernel_buffers(k)]
    for b in bufs: b.ensure_allocated()
    steps.append((get_runner(k.arg.ast, bufs[0].device), bufs))
  def run():
    for r, b in steps: r(b)
  return run, [r.name for r, _ in steps]

def workloads(rng, only: str | None):
  n = 16 * 1024 * 1024
  def want(name): return only is None or only in name
  if want("a*b+c"):
    a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    A, B, C = (Tensor(x).realize() for x in (a, b, c))
    ta, tb, tc = (torch.from_numpy(x) for x in (a, b, c)) if torch else (None,) * 3
    out = torch.empty(n) if torch else None
    yield "a*b+c 16M", 16 * n, "GB/s", A * B + C, (lambda: torch.addcmul(tc, ta, tb, out=out)) if torch else None
  if want("sum"):
    a = rng.standard_normal(n).astype(np.float32)
    ta = torch.from_numpy(a) if torch else None
    yield "sum 16M", 4 * n, "GB/s", Tensor(a).realize().sum(), (lambda: ta.sum()) if torch else None
  if want("softmax"):
    s = rng.standard_normal((4096, 1024)).astype(np.float32)
    ts = torch.from_numpy(s) if torch else None
    yield "softmax 4096x1024", 8 * s.size, "GB/s", Tensor(s).realize().softmax(1), (lambda: torch.softmax(ts, 1)) if torch else None
  for m in (256, 512, 1024):
    if not want(f"matmul {m}"): continue
    x, w = (rng.standard_normal((m, m)).astype(np.float32) for _ in range(2))
    tx, tw = (torch.from_numpy(v) for v in (x, w)) if torch else (None, None)
    yield f"matmul {m}", 2 * m ** 3, "GFLOP/s", Tensor(x).realize() @ Tensor(w).realize(), (lambda tx=tx, tw=tw: tx @ tw) if torch else None
  if want("weight grad"):
    # the weight gradient of an MLP's first layer: x.T @ g, a reduction over the batch with strided loads (r_784_128_512)
    x, g = rng.standard_normal((512, 784)).astype(np.float32), rng.standard_normal((512, 128)).astype(np.float32)
    tx, tg = (torch.from_numpy(v) for v in (x, g)) if torch else (None, None)
    yield "weight grad 784x128x512", 2 * 784 * 128 * 512, "GFLOP/s", Tensor(x).realize().T @ Tensor(g).realize(), \
      (lambda: tx.T @ tg) if torch else None
  for (bs, cin, hw, cout) in ((8, 16, 32, 32), (8, 64, 56, 64)):
    if not want(f"conv {cin}"): continue
    x, w = rng.standard_normal((bs, cin, hw, hw)).astype(np.float32), rng.standard_normal((cout, cin, 3, 3)).astype(np.float32)
    tx, tw = (torch.from_numpy(v) for v in (x, w)) if torch else (None, None)
    flops = 2 * bs * cout * (hw - 2) ** 2 * cin * 9
    yield f"conv {bs}x{cin}x{hw}x{hw} * {cout}", flops, "GFLOP/s", Tensor(x).realize().conv2d(Tensor(w).realize()), \
      (lambda tx=tx, tw=tw: torch.nn.functional.conv2d(tx, tw)) if torch else None

def sample(fn) -> float:
  t0 = time.perf_counter()
  fn()
  return time.perf_counter() - t0

def measure(name: str, work: float, unit: str, t, ref, reps: int) -> dict:
  """One workload, ours and torch's (ref, when there is one) sampled alternately: rates in units of `work` per ns, ours' spread."""
  run, names = compiled(t)
  run()
  if ref is not None: ref()
  ours, theirs = [], []
  for _ in range(reps):
    ours.append(sample(run))
    if ref is not None: theirs.append(sample(ref))
  r_t = work / statistics.median(theirs) / 1e9 if theirs else float("nan")
  return {"workload": name, "unit": unit, "ours": work / statistics.median(ours) / 1e9, "ours_min": work / max(ours) / 1e9,
          "ours_max": work / min(ours) / 1e9, "torch": r_t, "kernels": names}

def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--reps", type=int, default=7)
  ap.add_argument("--only", default=None)
  ap.add_argument("--json", default=None)
  args = ap.parse_args()
  rng = np.random.default_rng(0)
  rows = []
  print(f"{'workload':28s} {'ours':>9s} {'(spread)':>15s} {'torch':>9s} {'ratio':>7s}  kernels")
  for name, work, unit, t, ref in workloads(rng, args.only):
    rows.append(r := measure(name, work, unit, t, ref, args.reps))
    print(f"{name:28s} {r['ours']:9.2f} ({r['ours_min']:6.1f}-{r['ours_max']:6.1f}) {r['torch']:9.2f} {r['ours'] / r['torch']:6.2f}x  "
          f"{' '.join(r['kernels'])}  [{unit}]")
  if args.json:
    with open(args.json, "w") as f: json.dump(rows, f, indent=1)

if __name__ == "__main__": main()
