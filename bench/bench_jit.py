"""TinyJit replay against eager execution: a chain of N small dependent kernels, ours and (when a tinygrad venv is there)
tinygrad's, measured in one run. The method of ../shared/bench/anchors/bench_jit.py:

  python bench/bench_jit.py [--ops 100] [--size 16] [--clock wall|cpu] [--tinygrad-python /tmp/tg-venv/bin/python] [--json out.json]

Chain step: x = x * 1.0001 + 0.5 on a float32 vector of `size` elements, kept from fusing either by .contiguous() on each
step with one realize at the end (one schedule of N kernels) or by .realize() on each step (N schedules of one kernel).
Timed by the wall clock, or with `--clock cpu` by the process's CPU time (time.process_time: on a loaded machine it leaves
out the time other processes take the cores), median of 7 samples after warm-up; a sample repeats the call to last about 0.2 s, reported per call):
  eager:  fn(x) + synchronize                  (graph building, scheduling, launches)
  replay: TinyJit(fn)(x) + synchronize         (the input check and the replay of the captured kernels)
Each is measured with the N-step chain and a 1-step chain: per-kernel cost = (t(N) - t(1)) / (N - 1), fixed cost per call
the rest; also t(N) / N, the whole call per kernel. tinygrad runs in its own interpreter (a subprocess: `--lib tinygrad`,
importing none of ours, DEV=CPU); its CPU device compiles with clang (`apt-get install clang`); numpy is the same chain on
arrays, for scale. Prints a table, then the derived figures as one JSON line (and every sample to --json).
Goals (issue 12): replay at most 0.2 us per kernel; eager at most 50 us per op (issue 13 owns eager speed).
"""

from __future__ import annotations
import argparse, json, math, os, statistics, subprocess, sys, time

CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
CLOCK = ["wall"]  # set from --clock

def timeit(fn, warmup: int = 3, reps: int = 7, target_s: float = 0.2) -> float:
  """Median seconds per call of fn(), by the clock --clock names."""
  clock = CLOCKS[CLOCK[0]]
  t = 0.0
  for _ in range(warmup):
    t0 = time.perf_counter()
    fn()
    t = time.perf_counter() - t0
  inner = max(1, min(2000, math.ceil(target_s / t))) if t > 0 else 1
  ts = []
  for _ in range(reps):
    t0 = clock()
    for _ in range(inner): fn()
    ts.append((clock() - t0) / inner)
  return statistics.median(ts)

def chains(Tensor):
  def contiguous(x, n):
    for _ in range(n): x = (x * 1.0001 + 0.5).contiguous()
    return x.realize()
  def realize(x, n):
    for _ in range(n): x = (x * 1.0001 + 0.5).realize()
    return x
  return {"contiguous": contiguous, "realize": realize}

def measure(lib: str, n_ops: int, size: int) -> list[dict]:
  """Rows of (lib, chain, mode, ops, seconds per call) for this process's library."""
  import numpy as np
  if lib == "numpy":
    x0 = np.random.default_rng(0).random(size, dtype=np.float32)
    def chain(n):
      x = x0
      for _ in range(n): x = x * np.float32(1.0001) + np.float32(0.5)
      return x
    return [{"lib": lib, "chain": "arrays", "mode": "eager", "ops": n, "s": timeit(lambda n=n: chain(n))} for n in (n_ops, 1)]
  if lib == "ours":
    from tensor import Tensor, TinyJit, Device
  else:
    from tinygrad import Tensor, TinyJit, Device  # type: ignore[no-redef]
  dev = Device[Device.DEFAULT]
  x0 = Tensor.rand(size).realize()
  def expected(n: int):
    v = x0.numpy()
    for _ in range(n): v = v * np.float32(1.0001) + np.float32(0.5)
    return v
  want = {n: expected(n) for n in (n_ops, 1)}
  rows = []
  for name, fn in chains(Tensor).items():
    for n in (n_ops, 1):
      def eager(fn=fn, n=n):
        fn(x0, n)
        dev.synchronize()
      jit = TinyJit(lambda x, fn=fn, n=n: fn(x, n))
      def replay(jit=jit):
        jit(x0)
        dev.synchronize()
      rows.append({"lib": lib, "chain": name, "mode": "eager", "ops": n, "s": timeit(eager, warmup=2, target_s=0.3)})
      rows.append({"lib": lib, "chain": name, "mode": "replay", "ops": n, "s": timeit(replay)})
      got = jit(x0).numpy()
      if not np.allclose(got, want[n], rtol=1e-5): raise SystemExit(f"{lib} {name} {n}: the replay computed {got[:4]}, expected {want[n][:4]}")
  return rows

def derived(rows: list[dict], n_ops: int) -> list[dict]:
  """Per-kernel slope and fixed cost per call, for each (lib, chain, mode)."""
  t = {(r["lib"], r["chain"], r["mode"], r["ops"]): r["s"] for r in rows}
  out = []
  for (lib, chain, mode, ops), s in t.items():
    if ops != n_ops or (lib, chain, mode, 1) not in t: continue
    s1 = t[(lib, chain, mode, 1)]
    slope = (s - s1) / (n_ops - 1)
    out.append({"lib": lib, "chain": chain, "mode": mode, "us_per_kernel_slope": slope * 1e6, "us_fixed_per_call": (s1 - slope) * 1e6,
                "us_per_kernel_whole_call": s / n_ops * 1e6})
  return out

def tinygrad_rows(python: str, n_ops: int, size: int) -> list[dict]:
  """tinygrad's rows, measured in its own interpreter with this run's clock."""
  if not os.path.exists(python):
    print(f"(tinygrad: no interpreter at {python}; make one: python -m venv /tmp/tg-venv && /tmp/tg-venv/bin/pip install tinygrad==0.14.0)")
    return []
  env = {**os.environ, "DEV": "CPU"}
  env.pop("PYTHONPATH", None)
  r = subprocess.run([python, os.path.abspath(__file__), "--lib", "tinygrad", "--ops", str(n_ops), "--size", str(size), "--clock", CLOCK[0]], env=env,
                     capture_output=True, text=True, cwd="/tmp", timeout=1800)
  if r.returncode != 0:
    last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode
    print(f"(tinygrad failed: {last}; its CPU device needs clang)")
    return []
  return [json.loads(line[7:]) for line in r.stdout.splitlines() if line.startswith("RESULT ")]

def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--ops", type=int, default=100)
  ap.add_argument("--size", type=int, default=16)
  ap.add_argument("--lib", default=None, choices=["ours", "tinygrad", "numpy"], help="measure only this library and print RESULT lines")
  ap.add_argument("--tinygrad-python", default=os.environ.get("TINYGRAD_PYTHON", "/tmp/tg-venv/bin/python"))
  ap.add_argument("--clock", default="wall", choices=sorted(CLOCKS), help="wall clock, or this process's CPU time")
  ap.add_argument("--json", default=None)
  args = ap.parse_args()
  CLOCK[0] = args.clock
  if args.lib is not None:
    if args.lib == "ours": sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for row in measure(args.lib, args.ops, args.size): print("RESULT " + json.dumps(row), flush=True)
    return
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  rows = measure("ours", args.ops, args.size) + tinygrad_rows(args.tinygrad_python, args.ops, args.size) + measure("numpy", args.ops, args.size)
  print(f"chain of {args.ops} dependent kernels on {args.size} float32 (x = x * 1.0001 + 0.5); seconds are medians per call ({args.clock} clock)")
  print(f"{'lib':9s} {'chain':11s} {'mode':7s} {'us/call (' + str(args.ops) + ')':>14s} {'us/call (1)':>12s} {'us/kernel slope':>16s} "
        f"{'fixed us/call':>14s} {'us/kernel whole':>16s}")
  t = {(r["lib"], r["chain"], r["mode"], r["ops"]): r["s"] for r in rows}
  for d in derived(rows, args.ops):
    k = (d["lib"], d["chain"], d["mode"])
    print(f"{d['lib']:9s} {d['chain']:11s} {d['mode']:7s} {t[(*k, args.ops)] * 1e6:14.2f} {t[(*k, 1)] * 1e6:12.2f} "
          f"{d['us_per_kernel_slope']:16.3f} {d['us_fixed_per_call']:14.2f} {d['us_per_kernel_whole_call']:16.3f}")
  d = derived(rows, args.ops)
  ours = {(x["chain"], x["mode"]): x for x in d if x["lib"] == "ours"}
  worst_replay = max(x["us_per_kernel_whole_call"] for (c, m), x in ours.items() if m == "replay")
  worst_eager = max(x["us_per_kernel_slope"] for (c, m), x in ours.items() if m == "eager")
  print(f"goals: replay <= 0.2 us/kernel: {worst_replay:.3f} (whole call / kernels, worst chain) "
        f"{'met' if worst_replay <= 0.2 else 'NOT met'}; eager <= 50 us/op: {worst_eager:.1f} {'met' if worst_eager <= 50 else 'NOT met'}")
  print("JSON " + json.dumps({"ops": args.ops, "size": args.size, "derived": d}))
  if args.json:
    with open(args.json, "w") as f: json.dump({"rows": rows, "derived": d}, f, indent=1)

if __name__ == "__main__": main()
