"""Kernel speed against torch (issue 14's `python -m bench.kernels`): bench/bench_codegen.py's workloads at 1 thread and
at 2 threads (ours with THREADS=n, torch with set_num_threads(n)), one process, alternating samples.

  python -m bench.kernels [--threads 1,2] [--reps 7] [--only matmul] [--json out.json] [--clock cpu]

--clock cpu times each sample by the process's CPU time instead of the wall clock: on a machine shared by many (load 20
on 2 cores) a wall-clock sample is mostly time spent waiting for a core, while CPU time counts only the time it ran.
At 1 thread it gives each system's speed per core; at 2 threads it adds both threads' time, so it shows no speedup.
"""
from __future__ import annotations
import argparse, json, time
import numpy as np
from runtime.helpers import Context
from bench import bench_codegen
from bench.bench_codegen import measure, torch, workloads

def cpu_sample(fn) -> float:
  t0 = time.process_time()
  fn()
  return time.process_time() - t0

def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--threads", default="1,2")
  ap.add_argument("--reps", type=int, default=7)
  ap.add_argument("--only", default=None)
  ap.add_argument("--json", default=None)
  ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
  args = ap.parse_args()
  if args.clock == "cpu": bench_codegen.sample = cpu_sample  # measure() times every sample through it
  rows = []
  print(f"{'workload':28s} {'thr':>3s} {'ours':>9s} {'(spread)':>15s} {'torch':>9s} {'ratio':>7s}  kernels")
  for n in (int(x) for x in args.threads.split(",")):
    if torch is not None: torch.set_num_threads(n)
    with Context(THREADS=n):
      for name, work, unit, t, ref in workloads(np.random.default_rng(0), args.only):
        rows.append(r := {**measure(name, work, unit, t, ref, args.reps), "threads": n, "clock": args.clock})
        print(f"{name:28s} {n:3d} {r['ours']:9.2f} ({r['ours_min']:6.1f}-{r['ours_max']:6.1f}) {r['torch']:9.2f} {r['ours'] / r['torch']:6.2f}x  "
              f"{' '.join(r['kernels'])}  [{unit}]")
  if args.json:
    with open(args.json, "w") as f: json.dump(rows, f, indent=1)

if __name__ == "__main__": main()
