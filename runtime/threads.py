"""Threads inside CPU kernels: how many a kernel may use, and when it should stay on one. The renderer asks
`threads_for(...)` while it writes a kernel, moves its outermost loop into a function of its own (`loop_bound_hint` inside
it) and calls that from a `parallel_region(n, ...)` (`parallel_pragma(n)` on the loop itself when it can't);
runtime/ops_cpu.py builds a source holding `#pragma omp` with -fopenmp (where the compiler has OpenMP; elsewhere the
pragma is ignored: serial).

THREADS=n caps the threads of every kernel (default 0: the cores this process may run on); `Context(THREADS=1)` for a block.
"""
from __future__ import annotations
import os
from runtime.helpers import ContextVar

THREADS = ContextVar("THREADS", 0)

# The cost model, measured on the 2-core machine kind of ../shared/BENCH.md (docs/performance.md has the probes):
# a parallel region with its threads awake costs ~0.5 us; a thread that slept (idle past libgomp's spin) takes longer to
# wake, and on a shared machine the other core is often busy. REGION_NS is what a region costs on average there.
REGION_NS = 20_000
# one core's throughput: float ops per ns (16-lane AVX-512 at ~3 GHz, half used on real kernels) and bytes per ns of memory
# traffic (13.6 GB/s copy with one thread, 22 with two: memory-bound kernels gain 1.6x from the second core, not 2x)
OPS_PER_NS = 24.0
BYTES_PER_NS = 13.6
BYTES_PER_NS_ALL = 22.0
# a kernel goes parallel only when the model says it saves at least this share of its serial time
MIN_GAIN = 0.2

def cores() -> int:
  """The cores this process may run on (its affinity mask, else os.cpu_count())."""
  try: return max(1, len(os.sched_getaffinity(0)))
  except (AttributeError, OSError): return max(1, os.cpu_count() or 1)

def max_threads() -> int:
  """THREADS when set (>= 1), else the core count."""
  n = int(THREADS)
  if n < 0: raise ValueError(f"THREADS={n}: the number of threads must be 0 (all cores) or more")
  return n if n >= 1 else cores()

def serial_ns(ops: int, mem_bytes: int) -> float:
  """The modelled time of a kernel on one thread: compute and memory traffic overlap, the slower one counts."""
  return max(ops / OPS_PER_NS, mem_bytes / BYTES_PER_NS)

def parallel_ns(ops: int, mem_bytes: int, n: int) -> float:
  """The modelled time on n threads: the work split n ways, memory bandwidth shared, plus the cost of the region."""
  if n <= 1: return serial_ns(ops, mem_bytes)
  bandwidth = BYTES_PER_NS + (BYTES_PER_NS_ALL - BYTES_PER_NS) * min(1.0, (n - 1) / max(1, cores() - 1))
  return max(ops / (OPS_PER_NS * n), mem_bytes / bandwidth) + REGION_NS

def threads_for(ops: int, mem_bytes: int = 0, iterations: int | None = None) -> int:
  """How many threads a kernel should use: `ops` ALU operations and `mem_bytes` of loads and stores in all (estimates, as
  tensor/codegen/cost.estimate counts them), its outermost parallel loop running `iterations` times (None: enough). 1 means
  render no pragma. Never more than max_threads() nor than the loop has iterations; 1 unless the model saves MIN_GAIN."""
  n = max_threads()
  if iterations is not None: n = min(n, max(1, iterations))
  if n <= 1: return 1
  t1 = serial_ns(ops, mem_bytes)
  best = min(range(2, n + 1), key=lambda k: parallel_ns(ops, mem_bytes, k))
  return best if parallel_ns(ops, mem_bytes, best) <= (1 - MIN_GAIN) * t1 else 1

def parallel_pragma(threads: int, collapse: int = 1, private: tuple[str, ...] = ()) -> str:
  """The line to put right above a kernel's outermost `for` (or the outer `collapse` loops, perfectly nested) so it runs
  on `threads` threads; "" for one thread. Static schedule: each thread gets one contiguous block of iterations, and each
  output is computed by one thread in the serial order, so results are bit for bit those of one thread. `private`: the
  values computed before the loop that it only reads, copied into each thread (firstprivate): shared, they would be
  read through a pointer gcc can't tell apart from the kernel's stores, and reloaded from memory after each one."""
  if threads <= 1: return ""
  return (f"#pragma omp parallel for schedule(static) num_threads({threads})" + (f" collapse({collapse})" if collapse > 1 else "") +
          (f" firstprivate({', '.join(private)})" if private else ""))

def parallel_region(threads: int, bound: str, ctype: str, call: str) -> list[str]:
  """The lines (unindented) running `call` (C text reading `part_lo` and `part_hi`) on `threads` threads, each with one
  contiguous block [part_lo, part_hi) of a loop's `bound` iterations, split as `parallel_pragma`'s static schedule splits
  them (the first bound % threads blocks one longer). The C renderer puts a parallel loop in a function of its own
  (restrict pointers, a plain loop from lo to hi) and calls it here: a loop under `#pragma omp parallel for` is moved by gcc
  into a function reading the kernel's pointers from a struct, where its inner loops may compile worse (ResNet's 3x3 conv,
  a 4x64 register tile, loaded each weight vector once per row: 25% more CPU time per thread than on one thread). Without
  OpenMP the pragma is ignored and the one thread runs every iteration."""
  return [f"#pragma omp parallel num_threads({threads})", "{", "  int part_t = 0, part_nt = 1;", "#ifdef _OPENMP",
          "  extern int omp_get_thread_num(void), omp_get_num_threads(void);",
          "  part_t = omp_get_thread_num(); part_nt = omp_get_num_threads();", "#endif",
          f"  {ctype} part_n = {bound}, part_q = part_n / part_nt, part_r = part_n % part_nt;",
          f"  {ctype} part_lo = part_t * part_q + (part_t < part_r ? part_t : part_r), part_hi = part_lo + part_q + (part_t < part_r);",
          f"  {call};", "}"]

def loop_bound_hint(counter: str, bound: str) -> str:
  """The first line of a parallel loop's body: that its counter stays in [0, bound). OpenMP moves the loop into a function
  of its own whose counter runs between bounds computed at run time, so gcc no longer knows that `ridx0*1024 + ridx1`
  can't wrap (-fwrapv) and finds the inner loops' addresses not affine: they stay scalar (softmax on 2 threads took 4x the
  CPU time of 1). The hint gives the range back."""
  return f"if ({counter} < 0 || {counter} >= {bound}) __builtin_unreachable();"
