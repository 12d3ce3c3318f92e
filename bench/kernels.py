"""Kernel speed against torch and numpy (issue 14's `python -m bench.kernels`): bench/bench_codegen.py's workloads at 1
thread and at 2 threads (ours with THREADS=n, torch with set_num_threads(n)), one process, alternating samples. numpy runs
on one thread at every thread count (its OpenBLAS set to 1 thread when its library is the scipy-openblas of numpy's wheels:
OpenBLAS's idle threads spin, and that spin slowed the other systems' 2-thread samples 2-20x). numpy has no convolution:
its column there is im2col (a window view contracted by BLAS).
tinygrad is not in this table (it runs in its own environment: bench/bench_symbolic.py and bench/bench_jit.py compare it).

  python -m bench.kernels [--threads 1,2] [--reps 7] [--only matmul] [--json out.json] [--clock cpu|thread]

The first row of each thread count is the ceiling: the machine's memory copy bandwidth (bytes read plus written, 256 MiB
by memcpy in a C probe split over the threads; torch's copy_ beside it), the rate no memory-bound kernel can pass.

--clock cpu times each sample by the process's CPU time instead of the wall clock: on a machine shared by many (load 20
on 2 cores) a wall-clock sample is mostly time spent waiting for a core, while CPU time counts only the time it ran.
At 1 thread it gives each system's speed per core; at 2 threads it adds both threads' time, so it shows no speedup.
--clock thread times each sample by its busiest thread's CPU time (each thread's clock read before and after): at 2
threads the critical path of a run whose threads never wait for a core, what the wall clock shows on an idle machine.

With either CPU clock, OpenMP's idle threads sleep at once (OMP_WAIT_POLICY=passive, ours and torch's): by default they
spin for a while after each parallel region, and that spin, counted as CPU time, is mostly the other system's turn (one
process, alternating samples: at 2 threads both took 8 ms of CPU time for a 0.3 ms matmul 256).
"""
from __future__ import annotations
import argparse, json, os, sys, time
if any(a.startswith("--clock") and a != "--clock=wall" for a in sys.argv) and "wall" not in sys.argv:
  os.environ.setdefault("OMP_WAIT_POLICY", "passive")  # before torch and the first kernel load libgomp
import numpy as np
from runtime.dtype import dtypes
from runtime.helpers import Context
from bench import bench_codegen
from bench.bench_codegen import measure, torch, workloads

def blas_threads(n: int) -> bool:
  """Set numpy's OpenBLAS to n threads, when numpy was built with the scipy-openblas of its wheels; False when it can't."""
  import ctypes, glob
  for lib in glob.glob(os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs", "*openblas*")):
    try: getattr(ctypes.CDLL(lib), "scipy_openblas_set_num_threads64_")(n)
    except (OSError, AttributeError): continue
    return True
  return False

def cpu_sample(fn) -> float:
  t0 = time.process_time()
  fn()
  return time.process_time() - t0

def thread_clock(tid: int) -> float:
  """The CPU time of thread tid of this process (Linux's clock id of a thread: ~tid << 3 | CPUCLOCK_PERTHREAD | SCHED)."""
  try: return time.clock_gettime((~tid << 3) | 6)
  except OSError: return 0.0  # the thread ended

def thread_sample(fn) -> float:
  """The CPU time of the thread that ran longest during fn (threads started during fn count from zero; one that ended
  before fn returned is not seen: OpenMP's pools, ours and torch's, live on between regions)."""
  before = {int(t): thread_clock(int(t)) for t in os.listdir("/proc/self/task")}
  fn()
  return max(thread_clock(int(t)) - before.get(int(t), 0.0) for t in os.listdir("/proc/self/task"))

COPY_BYTES = 256 * 1024 * 1024
# memcpy of n bytes, each thread one contiguous block (glibc's memcpy streams big blocks past the cache, as a copy should)
COPY_PROBE = """#include <string.h>
void copy_probe_call(void* const* bufs, const long long* ivals, const double* fvals) {
  char* dst = (char*)bufs[0]; const char* src = (const char*)bufs[1]; long long n = ivals[0]; int threads = (int)ivals[1];
  #pragma omp parallel for schedule(static) num_threads(threads)
  for (int t = 0; t < threads; t++) {
    long long lo = n / threads * t, hi = t == threads - 1 ? n : n / threads * (t + 1);
    memcpy(dst + lo, src + lo, hi - lo);
  }
}
"""

def ceiling(threads: int, reps: int) -> dict:
  """The machine's copy bandwidth on `threads` threads (the probe's), and torch's copy_ beside it."""
  from runtime.device import Buffer
  from runtime.ops_cpu import program
  n = COPY_BYTES // 4
  probe = program(COPY_PROBE, "copy_probe")
  src = Buffer("CPU", n, dtypes.float32, np.random.default_rng(0).standard_normal(n).astype(np.float32))
  dst = Buffer("CPU", n, dtypes.float32).ensure_allocated()
  def run(): probe([dst, src], (COPY_BYTES, threads))
  ns, nd = src.as_array(), np.empty(n, np.float32)
  refs = {"numpy": lambda: np.copyto(nd, ns)}
  if torch is not None:
    ts, td = torch.from_numpy(ns), torch.empty(n)
    refs["torch"] = lambda: td.copy_(ts)
  run()
  return {"workload": "copy 256 MiB (ceiling)", "unit": "GB/s", **bench_codegen.alternate(2 * COPY_BYTES, run, refs, reps),
          "kernels": ["memcpy probe"]}

def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--threads", default="1,2")
  ap.add_argument("--reps", type=int, default=7)
  ap.add_argument("--only", default=None)
  ap.add_argument("--json", default=None)
  ap.add_argument("--clock", choices=("wall", "cpu", "thread"), default="wall")
  args = ap.parse_args()
  # measure() and ceiling() time every sample through it
  if args.clock != "wall": bench_codegen.sample = cpu_sample if args.clock == "cpu" else thread_sample
  rows = []
  print(f"{'workload':28s} {'thr':>3s} {'ours':>9s} {'(spread)':>15s} {'torch':>9s} {'ratio':>7s} {'numpy 1t':>9s} {'ratio':>7s}  kernels")
  def emit(r: dict, n: int) -> None:
    rows.append(r := {**r, "threads": n, "clock": args.clock, "numpy_blas_threads": 1 if blas else None})
    print(f"{r['workload']:28s} {n:3d} {r['ours']:9.2f} ({r['ours_min']:6.1f}-{r['ours_max']:6.1f}) {r['torch']:9.2f} "
          f"{r['ours'] / r['torch']:6.2f}x {r['numpy']:9.2f} {r['ours'] / r['numpy']:6.2f}x  {' '.join(r['kernels'])}  [{r['unit']}]")
  if not (blas := blas_threads(1)): print("(numpy's BLAS threads could not be set to 1: its default)")
  for n in (int(x) for x in args.threads.split(",")):
    if torch is not None: torch.set_num_threads(n)
    with Context(THREADS=n):
      if args.only is None or args.only in "copy ceiling": emit(ceiling(n, args.reps), n)
      for name, work, unit, t, ref in workloads(np.random.default_rng(0), args.only): emit(measure(name, work, unit, t, ref, args.reps), n)
  print("JSON " + json.dumps(rows))
  if args.json:
    with open(args.json, "w") as f: json.dump(rows, f, indent=1)

if __name__ == "__main__": main()
