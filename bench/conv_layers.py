"""Per-layer convolution speed (issue 27): for each conv of a model, its forward pass, input gradient and weight gradient,
ours against torch.nn.functional.conv2d and its autograd (torch.nn.grad.conv2d_input / conv2d_weight), at 1 and 2
threads, one process, alternating samples (bench_codegen.alternate), the kernels compiled before the timer.

  python -m bench.conv_layers [--model cnn|resnet18] [--threads 1,2] [--reps 7] [--clock wall|cpu|thread] [--json out.json]

`cnn` is examples/beautiful_mnist.py's four convs at batch 128; `resnet18` the distinct convs of ResNet-18 at batch 8,
224x224. Rates are GFLOP/s (2 flops per multiply-add, the same count for all three passes); `ratio` is ours / torch.
"""
from __future__ import annotations
import argparse, json, os, sys
if any(a.startswith("--clock") for a in sys.argv) and "wall" not in sys.argv: os.environ.setdefault("OMP_WAIT_POLICY", "passive")
import numpy as np
from runtime.helpers import Context
from bench import bench_codegen
from bench.bench_codegen import compiled, torch
from bench.kernels import cpu_sample, thread_sample
from tensor import Tensor

# (name, batch, cin, cout, spatial, kernel, stride, padding)
MODELS = {
  "cnn": [("conv1 1->32 5x5", 128, 1, 32, 28, 5, 1, 0), ("conv2 32->32 5x5", 128, 32, 32, 24, 5, 1, 0),
          ("conv3 32->64 3x3", 128, 32, 64, 10, 3, 1, 0), ("conv4 64->64 3x3", 128, 64, 64, 8, 3, 1, 0)],
  "resnet18": [("conv1 3->64 7x7/2", 8, 3, 64, 224, 7, 2, 3), ("layer1 64 3x3", 8, 64, 64, 56, 3, 1, 1),
               ("layer2 64->128 3x3/2", 8, 64, 128, 56, 3, 2, 1), ("layer2 128 3x3", 8, 128, 128, 28, 3, 1, 1),
               ("layer2 down 1x1/2", 8, 64, 128, 56, 1, 2, 0), ("layer3 128->256 3x3/2", 8, 128, 256, 28, 3, 2, 1),
               ("layer3 256 3x3", 8, 256, 256, 14, 3, 1, 1), ("layer4 256->512 3x3/2", 8, 256, 512, 14, 3, 2, 1),
               ("layer4 512 3x3", 8, 512, 512, 7, 3, 1, 1)],
}

def cases(model: str, rng, computed: bool = False):
  """(layer, pass, flops, our lazy tensor, torch callable) for every conv of the model and each of its three passes."""
  for name, bs, cin, cout, hw, k, s, p in MODELS[model]:
    x = rng.standard_normal((bs, cin, hw, hw)).astype(np.float32)
    w = (rng.standard_normal((cout, cin, k, k)) / np.sqrt(cin * k * k)).astype(np.float32)
    out = (hw + 2 * p - k) // s + 1
    g = rng.standard_normal((bs, cout, out, out)).astype(np.float32)
    flops = 2 * bs * cout * out * out * cin * k * k
    X, W, G = (Tensor(a).realize() for a in (x, w, g))
    def inp(t): return t * 1 if computed else t  # an input still to compute, as in a network (the GEMM copies it channels-last)
    tx, tw, tg = (torch.from_numpy(a) for a in (x, w, g)) if torch else (None,) * 3
    F = torch.nn.functional if torch else None
    xg = Tensor(X.uop)
    wg = Tensor(W.uop)
    yield name, "forward", flops, inp(X).conv2d(W, stride=s, padding=p), \
      (lambda: F.conv2d(tx, tw, stride=s, padding=p)) if torch else None
    yield name, "input grad", flops, inp(xg).conv2d(W, stride=s, padding=p).gradient(xg, gradient=G)[0], \
      (lambda: torch.nn.grad.conv2d_input(tx.shape, tw, tg, stride=s, padding=p)) if torch else None
    yield name, "weight grad", flops, inp(X).conv2d(wg, stride=s, padding=p).gradient(wg, gradient=G)[0], \
      (lambda: torch.nn.grad.conv2d_weight(tx, tw.shape, tg, stride=s, padding=p)) if torch else None

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--model", default="cnn", choices=tuple(MODELS))
  ap.add_argument("--threads", default="1,2")
  ap.add_argument("--reps", type=int, default=7)
  ap.add_argument("--only", default=None, help="layers whose name contains this")
  ap.add_argument("--clock", choices=("wall", "cpu", "thread"), default="wall")
  ap.add_argument("--passes", default="forward,input grad,weight grad", help="comma-separated passes to time")
  ap.add_argument("--computed", action="store_true", help="the input computed (x * 1), as in a network, instead of a realized buffer")
  ap.add_argument("--json", default=None)
  args = ap.parse_args()
  if args.clock != "wall": bench_codegen.sample = cpu_sample if args.clock == "cpu" else thread_sample
  rows = []
  print(f"{'layer':24s} {'pass':12s} {'thr':>3s} {'ours':>8s} {'torch':>8s} {'ratio':>6s}  kernels  [GFLOP/s, {args.clock} clock]")
  for n in (int(t) for t in args.threads.split(",")):
    if torch is not None: torch.set_num_threads(n)
    with Context(THREADS=n):
      for layer, kind, flops, t, ref in cases(args.model, np.random.default_rng(0), args.computed):
        if (args.only and args.only not in layer) or kind not in args.passes.split(","): continue
        run, names = compiled(t)
        run()
        if ref: ref()
        r = bench_codegen.alternate(flops, run, {"torch": ref} if ref else {}, args.reps)
        rows.append(dict(r, layer=layer, kind=kind, threads=n, kernels=names, clock=args.clock))
        print(f"{layer:24s} {kind:12s} {n:3d} {r['ours']:8.1f} {r['torch']:8.1f} {r['ours'] / r['torch']:5.2f}x  {' '.join(names)}", flush=True)
  if args.json:
    with open(args.json, "w") as f: json.dump(rows, f, indent=1)

if __name__ == "__main__": main()
