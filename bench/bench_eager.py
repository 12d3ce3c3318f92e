"""Eager speed: microseconds per tiny op on cached kernels, ours and tinygrad 0.14 in the same run.

  python bench/bench_eager.py [--reps 7] [--clock wall|cpu] [--json out.json] [--tinygrad-python /tmp/tg-venv/bin/python]

Two workloads on 16 float32s, each timed after a warm-up (kernels compiled and every cache filled, so the timer sees the
eager path alone: graph building, scheduling, launching):
  add1:  `(a + 1).realize()` on a realized tensor a                       -> us per op
  chain: `x = (x * 1.0001 + 0.5).realize()` 100 times, one after another  -> us per realize
tinygrad runs in its own process (this file, `--lib tinygrad`, under the Python of a venv holding tinygrad 0.14:
`--tinygrad-python`, default $TINYGRAD_PYTHON or /tmp/tg-venv/bin/python; skipped when it is missing), and synchronizes
its CPU device inside the timer. Medians of --reps samples; each sample repeats the call enough to last ~0.2 s. `--clock cpu`
times by the process's CPU time (time.process_time) instead of the wall clock: on a loaded machine it leaves out the time
other processes take the cores; the spread (min-max of the samples) is printed beside each median.
"""
from __future__ import annotations
import argparse, json, os, statistics, subprocess, sys, time

N, CHAIN = 16, 100

CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}

def sample(fn, reps: int, clock=time.perf_counter, target_s: float = 0.2) -> list[float]:
  """Seconds per call of fn in each of reps samples (after two warm-up calls), by `clock`."""
  fn(); fn()
  t0 = time.perf_counter()
  fn()
  inner = max(1, int(target_s / max(time.perf_counter() - t0, 1e-7)))
  out = []
  for _ in range(reps):
    t0 = clock()
    for _ in range(inner): fn()
    out.append((clock() - t0) / inner)
  return out

def workloads(Tensor, sync):
  import numpy as np
  a = Tensor(np.arange(N, dtype=np.float32)).realize()
  sync()
  def add1():
    (a + 1).realize()
    sync()
  def chain():
    x = a
    for _ in range(CHAIN): x = (x * 1.0001 + 0.5).realize()
    sync()
  return {"add1": (add1, 1), "chain": (chain, CHAIN)}

def measure(lib: str, reps: int, clock: str = "wall") -> dict:
  """{workload: [us per op of each sample]}."""
  if lib == "tinygrad":
    from tinygrad import Device, Tensor
    sync = Device[Device.DEFAULT].synchronize
  else:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from tensor import Tensor
    def sync(): pass
  return {name: [s / n * 1e6 for s in sample(fn, reps, CLOCKS[clock])] for name, (fn, n) in workloads(Tensor, sync).items()}

def tinygrad_run(python: str, reps: int, clock: str) -> dict | None:
  if not os.path.exists(python): return None
  env = {**os.environ, "DEV": "CPU"}
  env.pop("PYTHONPATH", None)
  r = subprocess.run([python, os.path.abspath(__file__), "--lib", "tinygrad", "--reps", str(reps), "--clock", clock], capture_output=True,
                     text=True, env=env, cwd="/tmp")
  if r.returncode != 0:
    print(f"tinygrad run failed:\n{r.stderr[-2000:]}", file=sys.stderr)
    return None
  return json.loads(r.stdout.strip().splitlines()[-1])

def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--reps", type=int, default=7)
  ap.add_argument("--clock", default="wall", choices=sorted(CLOCKS), help="wall clock, or this process's CPU time")
  ap.add_argument("--json", default=None)
  ap.add_argument("--lib", default="ours", choices=["ours", "tinygrad"])
  ap.add_argument("--tinygrad-python", default=os.environ.get("TINYGRAD_PYTHON", "/tmp/tg-venv/bin/python"))
  args = ap.parse_args()
  if args.lib == "tinygrad":
    print(json.dumps(measure("tinygrad", args.reps, args.clock)))
    return
  res = {"ours": measure("ours", args.reps, args.clock)}
  if (tg := tinygrad_run(args.tinygrad_python, args.reps, args.clock)) is not None: res["tinygrad"] = tg
  print(f"{args.clock} clock, median (min-max) of {args.reps} samples")
  print(f"{'workload':28s} " + " ".join(f"{k:>24s}" for k in res))
  for name, what in (("add1", "(a+1).realize() us/op"), ("chain", "chain of 100 us/realize")):
    print(f"{what:28s} " + " ".join(f"{statistics.median(r[name]):10.1f} ({min(r[name]):5.1f}-{max(r[name]):6.1f})" for r in res.values()))
  if args.json:
    with open(args.json, "w") as f: json.dump(res, f, indent=1)

if __name__ == "__main__": main()
