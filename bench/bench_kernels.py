"""Kernel speed on the BENCH.md workloads, ours against numpy (and torch when it is importable), in one process.

  python bench/bench_kernels.py [--reps 5] [--json out.json]

Inside the timers: ours, realizing a fresh lazy expression over realized inputs (the compiled kernel is cached after
the first call, which is not timed); numpy, the same computation with preallocated outputs where numpy allows it.
Prints GB/s or GFLOP/s per system and our ratio to numpy.
"""
from __future__ import annotations
import argparse, json, os, statistics, sys, time
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np
from tensor import Tensor

def timeit(fn, reps: int) -> float:
  fn()  # warm up: compile, caches
  ts = []
  for _ in range(reps):
    t0 = time.perf_counter()
    fn()
    ts.append(time.perf_counter() - t0)
  return statistics.median(ts)

def workloads(rng):
  n = 16 * 1024 * 1024
  a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
  A, B, C = (Tensor(x).realize() for x in (a, b, c))
  out = np.empty_like(a)
  s = rng.standard_normal((4096, 1024)).astype(np.float32)
  S = Tensor(s).realize()
  def np_softmax():
    e = np.exp(s - s.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)
  yield "a*b+c 16M f32", 16 * n, "GB/s", lambda: (A * B + C).realize(), lambda: np.add(np.multiply(a, b, out=out), c, out=out)
  yield "sum 16M f32", 4 * n, "GB/s", lambda: A.sum().realize(), lambda: a.sum()
  yield "softmax (4096,1024)", 8 * s.size, "GB/s", lambda: S.softmax(1).realize(), np_softmax
  for m in (256, 512, 1024):
    x, w = (rng.standard_normal((m, m)).astype(np.float32) for _ in range(2))
    X, W = Tensor(x).realize(), Tensor(w).realize()
    yield f"matmul {m}", 2 * m ** 3, "GFLOP/s", (lambda X=X, W=W: (X @ W).realize()), (lambda x=x, w=w: x @ w)

def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--reps", type=int, default=5)
  ap.add_argument("--json", default=None)
  args = ap.parse_args()
  rng = np.random.default_rng(0)
  rows = []
  print(f"{'workload':22s} {'ours':>10s} {'numpy':>10s} {'ours/numpy':>11s}")
  for name, work, unit, ours, ref in workloads(rng):
    t_ours, t_np = timeit(ours, args.reps), timeit(ref, args.reps)
    r_ours, r_np = work / t_ours / 1e9, work / t_np / 1e9
    rows.append({"workload": name, "unit": unit, "ours": r_ours, "numpy": r_np})
    print(f"{name:22s} {r_ours:7.1f} {unit[:2]:2s} {r_np:7.1f} {unit[:2]:2s} {r_ours / r_np:10.2f}x")
  if args.json:
    with open(args.json, "w") as f: json.dump(rows, f, indent=1)

if __name__ == "__main__": main()
