"""What the CPU device's kernel cache does under each fault of issue 10, each in fresh processes with its own CACHE_DIR.

  python bench/cache_faults.py [--root DIR]

--root runs the scenarios against another checkout of the project (to compare with an older commit). Prints one line per
fault: the outcome of the process that meets it (its result, or how it died) and what it printed last on stderr.
"""
from __future__ import annotations
import argparse, os, shutil, signal, subprocess, sys, tempfile

KERNEL = "void {name}(int* restrict data0, int* restrict data1) {{ for (int i = 0; i < 4; i++) data0[i] = data1[i] + {k}; }}\n"
RUN = """
import numpy as np, sys
from runtime import ops_cpu
from runtime.device import Buffer
from runtime.dtype import dtypes
src, name = sys.argv[1], sys.argv[2]
if sys.argv[3] == "compile": print(ops_cpu.compile_c(src)); raise SystemExit
out, inp = Buffer("CPU", 4, dtypes.int32), Buffer("CPU", 4, dtypes.int32, np.arange(4, dtype=np.int32))
ops_cpu.program(src, name)([out, inp])
print(out.numpy().tolist())
"""

def run(root: str, env: dict, name: str, k: int, what: str = "run", timeout: float = 60) -> tuple[str, str]:
  try:
    r = subprocess.run([sys.executable, "-c", RUN, KERNEL.format(name=name, k=k), name, what], cwd=root, env=env, capture_output=True, text=True,
                       timeout=timeout)
  except subprocess.TimeoutExpired: return f"still running after {timeout:g} s (hangs)", ""
  err = [line for line in r.stderr.strip().splitlines() if line.strip()]
  if r.returncode < 0: return f"killed by {signal.Signals(-r.returncode).name}", err[-1] if err else ""
  if r.returncode: return "error", next((e for e in err if "Error:" in e), err[-1] if err else "")
  return r.stdout.strip().splitlines()[-1], next((e for e in err if "warning" in e.lower()), "")

def script(d: str, body: str) -> str:
  path = os.path.join(d, f"cc{len(os.listdir(d))}")
  with open(path, "w") as f: f.write(f"#!/bin/sh\nREAL={shutil.which('cc')}\n{body}\n")
  os.chmod(path, 0o755)
  return path

def scenarios(root: str, tmp: str):
  base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CC", "CACHE_DIR", "CC_TIMEOUT", "CACHE_MAX_MB")}
  def fresh(tag: str) -> tuple[dict, str]:
    d = os.path.join(tmp, tag)
    return {**base, "CACHE_DIR": d}, d
  env, d = fresh("truncated")
  path = run(root, env, "k_a", 5, "compile")[0]
  with open(path, "r+b") as f: f.truncate(os.path.getsize(path) // 2)
  yield "entry truncated to half (ELF header intact)", "[5, 6, 7, 8]", run(root, env, "k_a", 5)
  env, d = fresh("swapped")
  mine, other = run(root, env, "k_a", 5, "compile")[0], run(root, env, "k_a", 9, "compile")[0]
  shutil.copyfile(other, mine)
  yield "entry swapped for another kernel with the same symbol", "[5, 6, 7, 8]", run(root, env, "k_a", 5)
  env, d = fresh("nosymbol")
  mine, other = run(root, env, "k_a", 5, "compile")[0], run(root, env, "k_b", 5, "compile")[0]
  shutil.copyfile(other, mine)
  yield "entry swapped for a library without the symbol", "[5, 6, 7, 8]", run(root, env, "k_a", 5)
  env, d = fresh("hang")
  cc = script(tmp, 'case "$*" in *-shared*) exec sleep 120;; esac\nexec $REAL "$@"')
  yield "compiler hangs (CC_TIMEOUT=3)", "error after 3 s", run(root, {**env, "CC": cc, "CC_TIMEOUT": "3"}, "k_a", 5, timeout=20)
  env, d = fresh("deleted")
  marker = os.path.join(tmp, "deleted-once")
  cc = script(tmp, f'case "$*" in *-shared*) [ -e {marker} ] || {{ touch {marker}; rm -rf {d}; }};; esac\nexec $REAL "$@"')
  yield "cache folder deleted while compiling", "[5, 6, 7, 8]", run(root, {**env, "CC": cc}, "k_a", 5)
  env, d = fresh("full")
  cc = script(tmp, f'case "$*" in *-shared*{d}*) echo "fatal error: error writing: No space left on device" >&2; exit 1;; esac\nexec $REAL "$@"')
  yield "disk full (the compiler can't write)", "[5, 6, 7, 8] + one warning", run(root, {**env, "CC": cc, "TMPDIR": os.path.join(tmp, "t")}, "k_a", 5)
  env, d = fresh("garbage")
  cc = script(tmp, 'case "$*" in *-shared*) for a; do [ "$p" = "-o" ] && printf "" > "$a"; p=$a; done; exit 0;; esac\nexec $REAL "$@"')
  first = run(root, {**env, "CC": cc}, "k_a", 5)
  second = run(root, env, "k_a", 5)[0]
  yield "compiler writes an empty file, then a good compiler runs", "error, then [5, 6, 7, 8]", (f"{first[0]}, then {second}", first[1])
  env, d = fresh("cap")
  for k in range(12): run(root, {**env, "CACHE_MAX_MB": "0.1"}, f"k_{k}", k, "compile")
  size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
  yield "12 kernels with CACHE_MAX_MB=0.1", "folder <= 100 KiB", (f"{len(os.listdir(d))} entries, {size / 1024:.0f} KiB", "")

def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  args = ap.parse_args()
  with tempfile.TemporaryDirectory() as tmp:
    os.makedirs(os.path.join(tmp, "t"))
    for fault, want, (got, err) in scenarios(os.path.abspath(args.root), tmp):
      print(f"{fault:58s} want {want:28s} got {got}" + (f"  [{err[:160]}]" if err else ""))

if __name__ == "__main__": main()
