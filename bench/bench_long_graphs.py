"""Cost of long graphs (issue 10): building and realizing chains of lazy ops, many-input kernels, varying scalars.

  python bench/bench_long_graphs.py [--root DIR] [--timeout 300] [--only NAME]

Each workload runs in a fresh process (with a time limit) so one that is quadratic or hangs does not stop the others;
--root runs them on another checkout (to compare with an older commit). Prints seconds to build the lazy graph and to
realize it, whether the values are right, and for the scalar loop the number of kernels compiled.
"""
from __future__ import annotations
import argparse, json, os, subprocess, sys

WORKLOADS = {
  "t = t + 1, 100,000 times": """
t = Tensor([0.0, 1.0])
for i in range(100_000): t = t + 1
built()
ok(t.tolist() == [100000.0, 100001.0])""",
  "t = t * 1.0001 + 0.5, 10,000 times": """
t = Tensor([1.0, 2.0])
for i in range(10_000): t = t * 1.0001 + 0.5
built()
want = np.array([1.0, 2.0], np.float32)
for i in range(10_000): want = want * np.float32(1.0001) + np.float32(0.5)
ok(np.allclose(t.numpy(), want, rtol=1e-3))""",
  "t = t * 1.0001 + 0.5, 1,000 times": """
t = Tensor([1.0, 2.0])
for i in range(1_000): t = t * 1.0001 + 0.5
built()
want = np.array([1.0, 2.0], np.float32)
for i in range(1_000): want = want * np.float32(1.0001) + np.float32(0.5)
ok(np.allclose(t.numpy(), want, rtol=1e-4))""",
  "sum of 20,000 one-element inputs (realized together)": """
xs = [Tensor([i]) for i in range(20_000)]
Tensor.realize(*xs)
t0 = time.perf_counter()
s = xs[0]
for x in xs[1:]: s = s + x
built()
ok(s.item() == sum(range(20_000)))""",
  "sum of 20,000 one-element inputs (each realized alone)": """
xs = [Tensor([i]).realize() for i in range(20_000)]
print("INPUTS", time.perf_counter() - t0)
t0 = time.perf_counter()
s = xs[0]
for x in xs[1:]: s = s + x
built()
ok(s.item() == sum(range(20_000)))""",
  "t * float(i) + 1 for 500 values of i (kernels compiled)": """
t = Tensor(np.arange(4, dtype=np.float32)).realize()
res = [(t * float(i) + 1).numpy() for i in range(500)]
built()
ok(all(np.array_equal(r, np.arange(4, dtype=np.float32) * np.float32(i) + 1) for i, r in enumerate(res)))
compiled()""",
  "render() of a 100,000-deep chain (peak MB)": """
from runtime import UOp
x = UOp.variable("x", 0, 10)
for i in range(100_000): x = x + 1
built()
s = x.render()
ok(s.count("+") == 100_000)
import resource
print("PEAK", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)""",
}

PRELUDE = """
import time, sys, numpy as np
from tensor import Tensor
import runtime.ops_cpu as ops_cpu
t0 = time.perf_counter()
_n = [0]
_compile = ops_cpu.compile_c
def _count(*a, **k):
  _n[0] += 1
  return _compile(*a, **k)
ops_cpu.compile_c = _count
def built():
  global t1
  t1 = time.perf_counter()
  print("BUILD", t1 - t0)
def ok(v):
  print("REALIZE", time.perf_counter() - t1)
  print("OK", bool(v))
def compiled(): print("COMPILED", _n[0])
"""

def run(root: str, code: str, timeout: float) -> dict:
  try:
    r = subprocess.run([sys.executable, "-c", PRELUDE + code], cwd=root, capture_output=True, text=True, timeout=timeout,
                       env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
  except subprocess.TimeoutExpired: return {"error": f"not done in {timeout:g} s"}
  out = {}
  for line in r.stdout.splitlines():
    k, _, v = line.partition(" ")
    if k in ("BUILD", "REALIZE", "PEAK", "INPUTS"): out[k.lower()] = float(v)
    elif k == "OK": out["ok"] = v == "True"
    elif k == "COMPILED": out["compiled"] = int(v)
  if r.returncode: out["error"] = (r.stderr.strip().splitlines() or ["?"])[-1][:200]
  return out

def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  ap.add_argument("--timeout", type=float, default=300)
  ap.add_argument("--only", default=None, help="run the workloads whose name contains this")
  ap.add_argument("--json", default=None)
  args = ap.parse_args()
  rows = {}
  for name, code in WORKLOADS.items():
    if args.only and args.only not in name: continue
    rows[name] = res = run(os.path.abspath(args.root), code, args.timeout)
    cols = [f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in res.items()]
    print(f"{name:58s} " + "  ".join(cols), flush=True)
  if args.json:
    with open(args.json, "w") as f: json.dump(rows, f, indent=1)

if __name__ == "__main__": main()
