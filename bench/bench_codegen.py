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
from tensor.engine.state import ENGINE
buffers = ENGINE.storage.buffers

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
  """(name, work, unit, our lazy tensor, references): references maps "numpy" (always) and "torch" (when importable) to a
  callable computing the same result from the same inputs."""
  n = 16 * 1024 * 1024
  def want(name): return only is None or only in name
  if want("a*b+c"):
    a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    A, B, C = (Tensor(x).realize() for x in (a, b, c))
    o = np.empty_like(a)
    refs = {"numpy": lambda: np.add(np.multiply(a, b, out=o), c, out=o)}
    if torch:
      ta, tb, tc = (torch.from_numpy(x) for x in (a, b, c))
      out = torch.empty(n)
      refs["torch"] = lambda: torch.addcmul(tc, ta, tb, out=out)
    yield "a*b+c 16M", 16 * n, "GB/s", A * B + C, refs
  if want("sum"):
    a = rng.standard_normal(n).astype(np.float32)
    refs = {"numpy": a.sum}
    if torch: refs["torch"] = torch.from_numpy(a).sum
    yield "sum 16M", 4 * n, "GB/s", Tensor(a).realize().sum(), refs
  if want("softmax"):
    s = rng.standard_normal((4096, 1024)).astype(np.float32)
    def np_softmax():
      e = np.exp(s - s.max(1, keepdims=True))
      return e / e.sum(1, keepdims=True)
    refs = {"numpy": np_softmax}
    if torch: refs["torch"] = lambda ts=torch.from_numpy(s): torch.softmax(ts, 1)
    yield "softmax 4096x1024", 8 * s.size, "GB/s", Tensor(s).realize().softmax(1), refs
  for m in (256, 512, 1024):
    if not want(f"matmul {m}"): continue
    x, w = (rng.standard_normal((m, m)).astype(np.float32) for _ in range(2))
    refs = {"numpy": lambda x=x, w=w: x @ w}
    if torch: refs["torch"] = lambda tx=torch.from_numpy(x), tw=torch.from_numpy(w): tx @ tw
    yield f"matmul {m}", 2 * m ** 3, "GFLOP/s", Tensor(x).realize() @ Tensor(w).realize(), refs
  if want("weight grad"):
    # the weight gradient of an MLP's first layer: x.T @ g, a reduction over the batch with strided loads (r_784_128_512)
    x, g = rng.standard_normal((512, 784)).astype(np.float32), rng.standard_normal((512, 128)).astype(np.float32)
    refs = {"numpy": lambda: x.T @ g}
    if torch: refs["torch"] = lambda tx=torch.from_numpy(x), tg=torch.from_numpy(g): tx.T @ tg
    yield "weight grad 784x128x512", 2 * 784 * 128 * 512, "GFLOP/s", Tensor(x).realize().T @ Tensor(g).realize(), refs
  for (bs, cin, hw, cout) in ((8, 16, 32, 32), (8, 64, 56, 64)):
    if not want(f"conv {cin}"): continue
    x, w = rng.standard_normal((bs, cin, hw, hw)).astype(np.float32), rng.standard_normal((cout, cin, 3, 3)).astype(np.float32)
    flops = 2 * bs * cout * (hw - 2) ** 2 * cin * 9
    # numpy has no convolution: its windows as a view, contracted with the filters by BLAS (im2col)
    def np_conv(x=x, w=w):
      windows = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3))  # (bs, cin, h, w, 3, 3)
      return np.tensordot(windows, w, axes=([1, 4, 5], [1, 2, 3])).transpose(0, 3, 1, 2)
    refs = {"numpy": np_conv}
    if torch: refs["torch"] = lambda tx=torch.from_numpy(x), tw=torch.from_numpy(w): torch.nn.functional.conv2d(tx, tw)
    yield f"conv {bs}x{cin}x{hw}x{hw} * {cout}", flops, "GFLOP/s", Tensor(x).realize().conv2d(Tensor(w).realize()), refs

def sample(fn) -> float:
  t0 = time.perf_counter()
  fn()
  return time.perf_counter() - t0

def alternate(work: float, run, refs: dict, reps: int) -> dict:
  """run and each reference (numpy, torch when there) sampled in turn, reps times: ours' rate in units of `work` per ns
  (median, min, max) and each reference's median ("torch", "numpy"; nan when missing)."""
  ours, theirs = [], {k: [] for k in refs}
  for _ in range(reps):
    ours.append(sample(run))
    for k, ref in refs.items(): theirs[k].append(sample(ref))
  def rate(k): return work / statistics.median(theirs[k]) / 1e9 if theirs.get(k) else float("nan")
  return {"ours": work / statistics.median(ours) / 1e9, "ours_min": work / max(ours) / 1e9, "ours_max": work / min(ours) / 1e9,
          "torch": rate("torch"), "numpy": rate("numpy")}

def measure(name: str, work: float, unit: str, t, refs: dict, reps: int) -> dict:
  """One workload, ours (compiled first, outside the samples) against its references."""
  run, names = compiled(t)
  run()
  for ref in refs.values(): ref()
  return {"workload": name, "unit": unit, **alternate(work, run, refs, reps), "kernels": names}

def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--reps", type=int, default=7)
  ap.add_argument("--only", default=None)
  ap.add_argument("--json", default=None)
  args = ap.parse_args()
  rng = np.random.default_rng(0)
  rows = []
  print(f"{'workload':28s} {'ours':>9s} {'(spread)':>15s} {'torch':>9s} {'ratio':>7s} {'numpy':>9s} {'ratio':>7s}  kernels")
  for name, work, unit, t, refs in workloads(rng, args.only):
    rows.append(r := measure(name, work, unit, t, refs, args.reps))
    print(f"{name:28s} {r['ours']:9.2f} ({r['ours_min']:6.1f}-{r['ours_max']:6.1f}) {r['torch']:9.2f} {r['ours'] / r['torch']:6.2f}x "
          f"{r['numpy']:9.2f} {r['ours'] / r['numpy']:6.2f}x  {' '.join(r['kernels'])}  [{unit}]")
  if args.json:
    with open(args.json, "w") as f: json.dump(rows, f, indent=1)

if __name__ == "__main__": main()
