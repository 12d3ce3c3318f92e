"""What the engine shows people (tensor/engine/realize.py and jit.py call these): DEBUG=2 kernel names coloured by axis
kind and, after a realize or a TinyJit call of several kernels, a table of the slowest with their fraction of the
machine's peak; GRAPH=1 graph files (the tensor graph of each realize, each kernel's AST) as DOT, Mermaid and SVG
(runtime/graph.py).
"""
from __future__ import annotations
import functools, os, re, sys, time
from runtime.graph import GRAPH, write_graph
from runtime.helpers import colored
from runtime.uop import UOp

# the seeds' debug colours: global blue, local light blue, reduce red, upcast yellow, unroll purple, group green
AXIS_COLORS = {"global": "blue", "local": "cyan", "reduce": "red", "upcast": "yellow", "unroll": "magenta", "group": "green"}
_NAME = re.compile(r"([A-Za-z]+)_([0-9]+(?:_[0-9]+)*)(n[0-9a-f]+)?")  # E_4_8n1c3f: kind, dims, the digest (codegen.kernel_name)

def axis_kinds(n_dims: int, n_global: int, opts: list[tuple]) -> list[str]:
  """The kind of each dimension a kernel name lists: its output dims (global, or upcast when an UPCAST opt unrolled the
  loop), then its reduce dims (reduce, or unroll when the reduction was split into interleaved lanes)."""
  kinds = ["global"] * min(n_global, n_dims) + ["reduce"] * max(n_dims - n_global, 0)
  for kind, axis, _ in opts:
    if kind == "UPCAST" and 0 <= axis < n_global: kinds[axis] = "upcast"
    elif kind == "LOCAL" and 0 <= axis < n_global: kinds[axis] = "local"
    # UNROLL and GROUP name a reduce loop by range id, not by position: the innermost reduce dim is the one split
    elif kind in ("UNROLL", "GROUP") and n_dims > n_global: kinds[-1] = kind.lower()
  return kinds

def colored_name(name: str, n_global: int, opts: list[tuple], width: int = 0) -> str:
  """`name` with each dimension coloured by its kind (plain when stdout is not a terminal), padded to `width` visible characters."""
  pad = " " * max(width - len(name), 0)
  m = _NAME.fullmatch(name)
  if m is None or not sys.stdout.isatty(): return name + pad
  dims = m.group(2).split("_")
  kinds = axis_kinds(len(dims), n_global, opts)
  return f"{m.group(1)}_" + "_".join(colored(d, AXIS_COLORS[k]) for d, k in zip(dims, kinds)) + (m.group(3) or "") + pad

# the number of GRAPH files this process wrote (they are numbered in order): a debug tool's counter, not engine state
_written = 0

def graph_out(root: UOp, name: str) -> None:
  """GRAPH=1: write `root` as NAME.dot/.mmd (and .svg with Graphviz) into GRAPH_DIR, saying where on stderr."""
  global _written
  if not GRAPH: return
  _written += 1
  paths = write_graph(root, f"{_written:03d}_{name}")
  print(f"GRAPH: {', '.join(paths)}", file=sys.stderr)

# ---- DEBUG=2: the slowest kernels of a step ----

# (name, wall seconds, the launching thread's CPU seconds, operations, bytes) of each kernel run since the last table.
# The wall clock of a kernel on a shared machine counts the time its threads waited for a core: a CNN step of 190 ms on its
# busiest thread summed 570 ms of kernels at load 4 on 2 cores. The table ranks by the CPU time of the thread that launched
# the kernel (it runs a share of an OpenMP kernel and waits at its end for the others: the kernel's critical path while it
# has a core). Other threads' clocks are no use here: read from another thread they advance by scheduler ticks (4 ms).
kernel_times: list[tuple[str, float, float, int, int]] = []
SLOWEST = 10  # rows of the table
TABLE_MIN_KERNELS = 4  # a realize of fewer kernels prints no table

def _cpu_ghz() -> float:
  try:
    with open("/proc/cpuinfo") as f: mhz = [float(line.split(":")[1]) for line in f if line.startswith("cpu MHz")]
    return max(mhz) / 1e3 if mhz else 3.0
  except (OSError, ValueError): return 3.0

@functools.cache
def peaks() -> tuple[float, float]:
  """(GFLOP/s, GB/s) this machine reaches at most on the threads kernels use: two float32 FMA pipes of the vector width per
  core at the clock /proc/cpuinfo states, and a 64 MiB copy (read plus written) timed once."""
  import numpy as np
  from runtime.threads import max_threads
  from tensor.codegen.heuristic import VECTOR_CAPS
  from tensor.codegen.target import target_for
  lanes = (target_for("CPU").caps or VECTOR_CAPS).register_bytes // 4
  flops = max_threads() * 2 * lanes * 2 * _cpu_ghz()
  a, b = np.ones(1 << 24, np.float32), np.empty(1 << 24, np.float32)
  best = min(_copy_time(a, b) for _ in range(3))
  return flops, 2 * a.nbytes / best / 1e9

def _copy_time(a, b) -> float:
  t0 = time.perf_counter()
  b[:] = a
  return time.perf_counter() - t0

def slowest_table(records: list[tuple[str, float, float, int, int]], n: int = SLOWEST) -> str:
  """The n slowest kernels of records by their launching thread's CPU time: that time, its share of the step, the wall time,
  GFLOP/s and GB/s (from the CPU time), each as a fraction of the peak (the larger of the two says what bounds it)."""
  total, wall = sum(r[2] for r in records) or 1e-9, sum(r[1] for r in records)
  flops, gbs = peaks()
  lines = [f"slowest {min(n, len(records))} of {len(records)} kernels, {total * 1e3:.2f} ms of CPU time, {wall * 1e3:.2f} ms wall "
           f"(peak {flops:.0f} GFLOP/s, {gbs:.0f} GB/s):"]
  for name, dt, cpu, ops, mem in sorted(records, key=lambda r: -r[2])[:n]:
    g, b = ops / max(cpu, 1e-9) / 1e9, mem / max(cpu, 1e-9) / 1e9
    lines.append(f"  {name:28s} {cpu * 1e3:9.3f} ms {100 * cpu / total:5.1f}% (wall {dt * 1e3:8.3f})  {g:8.1f} GFLOP/s ({100 * g / flops:3.0f}%) "
                 f"{b:7.1f} GB/s ({100 * b / gbs:3.0f}%)")
  return "\n".join(lines)

def end_of_step() -> None:
  """Print the table of the kernels run since the last one (DEBUG=2 and more) and start over."""
  if len(kernel_times) >= TABLE_MIN_KERNELS and os.environ.get("DEBUG_TABLE", "1") != "0": print(slowest_table(kernel_times))
  kernel_times.clear()
