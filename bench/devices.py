"""Kernel times on CL next to the CPU device (issue 21): matmul 1024, softmax and conv, one process, alternating samples.
The CL times are the queue's profiling events (the kernel alone); the CPU times the wall clock around the kernel call.
pocl is OpenCL on the same CPU, not a GPU: this shows nothing is pathological, not a speed target.

  python -m bench.devices [--reps 3] [--devices CPU,CL]
"""
from __future__ import annotations
import argparse, statistics
import numpy as np
from runtime.helpers import GlobalCounters
from tensor import Tensor

def workloads(dev: str) -> dict:
  rng = np.random.default_rng(0)
  def R(*s): return Tensor(rng.standard_normal(s).astype(np.float32), device=dev).realize()
  a, b, s, img, w = R(1024, 1024), R(1024, 1024), R(4096, 1024), R(8, 32, 64, 64), R(64, 32, 3, 3)
  return {"matmul 1024": lambda: a @ b, "softmax 4096x1024": lambda: s.softmax(-1), "conv 8x32x64x64 k3 64": lambda: img.conv2d(w)}

def kernel_time(fn) -> float:
  GlobalCounters.reset()
  fn().realize()
  return GlobalCounters.time_sum_s

def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--reps", type=int, default=3)
  ap.add_argument("--devices", default="CPU,CL")
  args = ap.parse_args()
  devs = args.devices.split(",")
  loads = {d: workloads(d) for d in devs}
  for name in loads[devs[0]]:
    for d in devs: kernel_time(loads[d][name])  # compile
    times: dict[str, list[float]] = {d: [] for d in devs}
    for _ in range(args.reps):
      for d in devs: times[d].append(kernel_time(loads[d][name]))
    print(f"{name:24s} " + "  ".join(f"{d} {statistics.median(times[d]) * 1e3:9.2f} ms" for d in devs))

if __name__ == "__main__": main()
