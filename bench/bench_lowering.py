"""Cold lowering time: the kernels of fusion-style graphs (elementwise chains, broadcasts, reductions, softmax, layernorm,
matmul, conv, every movement op, gather, half arithmetic), each lowered once in a fresh process, as a cold realize does:
rangeify (the rule pass alone), rangeify then symbolic (rangeify_simplified), and the whole get_program (opts, lower,
linearize, render). CPU time of this thread, summed over the kernels; a round is one process.

  python -m bench.bench_lowering [--rounds 7] [--root DIR]

--root DIR times the same kernels with another checkout too (its own process per round, the two alternating), to compare
a change with the commit before it. Prints per stage the median over rounds with the spread, the sum of each kernel's
fastest round, and the ratios.
"""
from __future__ import annotations
import argparse, json, os, statistics, subprocess, sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

def graphs():
  """Tensors whose kernels are the workload (inputs realized, so each graph's own kernels remain): each graph at three sizes."""
  return [g for rows, cols in ((64, 32), (48, 40), (40, 24)) for g in _graphs(rows, cols)]

def _graphs(rows: int, cols: int):
  import numpy as np
  from runtime.dtype import dtypes
  from tensor import Tensor
  rng = np.random.default_rng(0)
  def t(*shape, dtype=np.float32): return Tensor(rng.standard_normal(shape).astype(dtype)).realize()
  a, b, c = t(rows, cols), t(rows, cols), t(cols)
  x4, w = t(2, 8, rows // 4, rows // 4), t(16, 8, 3, 3)
  h = t(rows, cols).cast(dtypes.float16).realize()
  idx = Tensor(rng.integers(0, rows, (10, cols))).realize()
  return [a * b + c, (a - b).relu() * 2 + 1, a.sum(1), a.max(0), a.sum(), a.softmax(1), a.softmax(0), a.log_softmax(1),
          (a - a.mean(1, keepdim=True)) / (a.var(1, keepdim=True) + 1e-5).sqrt(), a @ b.T, (a @ b.T + 1).relu(), a.T @ b,
          x4.conv2d(w), x4.conv2d(w, padding=1).relu(), x4.max_pool2d(),
          a.reshape(rows // 8, 8, cols).permute(2, 0, 1) + 1, a.reshape(rows // 8, 8, cols).sum(1), a.pad(((1, 2), (3, 0))) * 2,
          a.shrink(((4, rows - 4), (1, cols - 1))) + 1,
          a.flip(0) + a, a.reshape(rows, 1, cols).expand(rows, 4, cols) * 3, a.gather(0, idx), a.cumsum(1),
          h * h + h, (h.sum(1) * 2).exp2(), a.argmax(1), Tensor.cat(a, b, dim=1) * 2, a.reshape(rows * cols).reshape(cols, rows).T + 1]

def round_once() -> dict:
  import time
  from runtime.ops import Ops
  from tensor.codegen import CodegenContext, index_dtype, rangeify, rangeify_simplified
  from tensor.engine.realize import get_program, schedule_of
  asts = []
  for g in graphs():
    g.kernelize()
    root = g.uop.src[0] if g.uop.op is Ops.RESHAPE else g.uop
    asts += [k.arg.ast for k in schedule_of([root]) if k.arg.ast.op is Ops.SINK]
  asts = list(dict.fromkeys(asts))
  out: dict = {"kernels": len(asts), "rangeify": [], "rangeify+symbolic": [], "get_program": []}
  for ast in asts:
    # each stage on a kernel it has not seen: rangeify alone first (its nodes are then warm for the next stage, as in the
    # compile path, where rangeify_simplified starts with rangeify too)
    t0 = time.thread_time()
    rangeify(ast, CodegenContext(index=index_dtype(ast)))
    t1 = time.thread_time()
    rangeify_simplified(ast)
    t2 = time.thread_time()
    get_program(ast, "CPU", "k")
    t3 = time.thread_time()
    out["rangeify"].append(t1 - t0)
    out["rangeify+symbolic"].append(t2 - t1)
    out["get_program"].append(t3 - t2)
  return out

def run(root: str) -> dict:
  env = {**os.environ, "PYTHONPATH": root, "PROGRAM_DISK_CACHE": "0"}
  p = subprocess.run([sys.executable, "-c", "import json, bench.bench_lowering as b; print(json.dumps(b.round_once()))"], cwd=root, env=env,
                     capture_output=True, text=True, check=True)
  return json.loads(p.stdout.strip().split("\n")[-1])

def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--rounds", type=int, default=7)
  ap.add_argument("--root", default=None, help="another checkout to compare with (this bench file is copied into it)")
  args = ap.parse_args()
  roots = {"this": HERE}
  if args.root:
    other = os.path.abspath(args.root)
    os.makedirs(os.path.join(other, "bench"), exist_ok=True)
    with open(__file__) as src, open(os.path.join(other, "bench", "bench_lowering.py"), "w") as dst: dst.write(src.read())
    roots = {"root": other, "this": HERE}
  samples: dict[str, list[dict]] = {k: [] for k in roots}
  for i in range(args.rounds):
    for name, root in (roots.items() if i % 2 == 0 else reversed(list(roots.items()))): samples[name].append(run(root))
  stages = ["rangeify", "rangeify+symbolic", "get_program"]
  print(f"{samples['this'][0]['kernels']} kernels, {args.rounds} rounds; CPU ms summed over the kernels: the median round (min-max), and "
        "the sum of each kernel's fastest round (steadier on a loaded machine); this/root: the ratio of both")
  for stage in stages:
    row, best = [], {}
    for name in roots:
      v = [sum(s[stage]) * 1e3 for s in samples[name]]
      best[name] = sum(min(s[stage][k] for s in samples[name]) for k in range(len(samples[name][0][stage]))) * 1e3
      row.append(f"{name} {statistics.median(v):8.1f} ({min(v):.1f}-{max(v):.1f}) best {best[name]:.1f}")
    if args.root:
      med = statistics.median(sum(s[stage]) for s in samples["this"]) / statistics.median(sum(s[stage]) for s in samples["root"])
      row.append(f"this/root {med:.3f}, best {best['this'] / best['root']:.3f}")
    print(f"{stage:18s} " + "   ".join(row))

if __name__ == "__main__": main()
