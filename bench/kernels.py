"""Kernel speed against torch (issue 14's `python -m bench.kernels`): bench/bench_codegen.py's workloads at 1 thread and
at 2 threads (ours with THREADS=n, torch with set_num_threads(n)), one process, alternating samples.

  python -m bench.kernels [--threads 1,2] [--reps 7] [--only matmul] [--json out.json]
"""
from __future__ import annotations
import argparse, json
import numpy as np
from runtime.helpers import Context
from bench.bench_codegen import measure, torch, workloads

def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--threads", default="1,2")
  ap.add_argument("--reps", type=int, default=7)
  ap.add_argument("--only", default=None)
  ap.add_argument("--json", default=None)
  args = ap.parse_args()
  rows = []
  print(f"{'workload':28s} {'thr':>3s} {'ours':>9s} {'(spread)':>15s} {'torch':>9s} {'ratio':>7s}  kernels")
  for n in (int(x) for x in args.threads.split(",")):
    if torch is not None: torch.set_num_threads(n)
    with Context(THREADS=n):
      for name, work, unit, t, ref in workloads(np.random.default_rng(0), args.only):
        rows.append(r := {**measure(name, work, unit, t, ref, args.reps), "threads": n})
        print(f"{name:28s} {n:3d} {r['ours']:9.2f} ({r['ours_min']:6.1f}-{r['ours_max']:6.1f}) {r['torch']:9.2f} {r['ours'] / r['torch']:6.2f}x  "
              f"{' '.join(r['kernels'])}  [{unit}]")
  if args.json:
    with open(args.json, "w") as f: json.dump(rows, f, indent=1)

if __name__ == "__main__": main()
