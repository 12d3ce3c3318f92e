"""VIZ explorer benchmark: how long a 10,000-node graph takes to open, on the server (replay, layout, SVG) and in headless
Chromium (fetch, parse, first paint), and what recording costs graph_rewrite when VIZ is off and on.

  python bench/bench_viz.py              # 10,000 nodes; the browser part needs Debian's chromium and chromium-driver
  python bench/bench_viz.py --nodes 2000

The graph: a sum of products over many variables, simplified by rules/symbolic.rules under VIZ=1, so the recording has a
large input graph and many steps. Wall-clock numbers: compare within one run, never assert them in tests.
"""
from __future__ import annotations
import argparse, os, statistics, sys, threading, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path: sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "viz"))

from runtime import Context, UOp, dtypes, graph_rewrite  # noqa: E402
from runtime import trace  # noqa: E402
from runtime.ops import Ops  # noqa: E402
from runtime.uop import uop  # noqa: E402
from rules.symbolic import symbolic  # noqa: E402
from tensor.viz.graphs import reachable  # noqa: E402
from tensor.viz.server import Explorer, make_server  # noqa: E402

def big_graph(n_nodes: int) -> UOp:
  """A SINK of sums (x_i*3 + x_j*5 + k) whose unique node count is about n_nodes."""
  xs = [UOp.variable(f"x{i}", 0, 100, dtypes.int) for i in range(max(n_nodes // 40, 2))]
  terms, i = [], 0
  while True:
    a, b = xs[i % len(xs)], xs[(i * 7 + 1) % len(xs)]
    terms.append(a * (i % 13 + 2) + b * (i % 11 + 3) + i)
    i += 1
    if i % 50 == 0 and len((root := uop(Ops.SINK, dtypes.void, tuple(terms))).toposort()) >= n_nodes: return root

def best(f, reps: int = 5) -> float:
  out = []
  for _ in range(reps):
    t0 = time.perf_counter()
    f()
    out.append(time.perf_counter() - t0)
  return min(out)

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--nodes", type=int, default=10_000)
  args = ap.parse_args()
  root = big_graph(args.nodes)
  n = len(root.toposort())
  off = best(lambda: graph_rewrite(root, symbolic))
  trace.reset()
  with Context(VIZ=1): on = best(lambda: graph_rewrite(root, symbolic), reps=1)
  rec = trace.recording()
  rw = rec.rewrites[-1]
  print(f"graph: {n} nodes; symbolic fired {len(rw['steps'])} rules; graph_rewrite {off * 1e3:.0f} ms with VIZ off, {on * 1e3:.0f} ms recording")
  ex = Explorer(rec)
  r = len(rec.rewrites) - 1
  server_s = best(lambda: ex._step(r, 0), reps=3)
  svg_bytes = len(ex._step(r, 0)["svg"])
  last_s = best(lambda: ex._step(r, len(rw["steps"])), reps=1)
  print(f"server: input graph ({len(reachable(rec, rw['input']))} nodes) replayed, laid out and drawn in {server_s * 1e3:.0f} ms "
        f"({svg_bytes / 1e6:.1f} MB of SVG); the last step after replaying every step: {last_s * 1e3:.0f} ms")
  try: import webdriver
  except ImportError: webdriver = None
  if webdriver is None or not webdriver.available():
    print("browser: skipped (install Debian's chromium and chromium-driver)")
    return
  srv = make_server(rec, 0)
  threading.Thread(target=srv.serve_forever, daemon=True).start()
  url = f"http://127.0.0.1:{srv.server_address[1]}/"
  opens, draws = [], []
  with webdriver.Browser() as b:
    for _ in range(3):
      b.get("about:blank")
      b.get(f"{url}#r={r}&s=0")
      b.wait(f"return document.body.dataset.loaded == '{r}:0'", 60)
      # navigation start to the graph painted (two animation frames after the SVG went into the page)
      opens.append(b.run("return window.vizTiming.page_ms") / 1e3)
      draws.append(b.run("return window.vizTiming.total_ms") / 1e3)
    b.screenshot(os.path.join(webdriver.artifacts_dir(), "viz_10k.png"))
    nodes_in_dom = b.run("return document.querySelectorAll('#graph svg .n').length")
  srv.shutdown()
  print(f"browser: page opened with the {nodes_in_dom}-node graph drawn in {opens[0]:.2f} s from navigation the first time (the server "
        f"laying it out), {statistics.median(opens[1:]):.2f} s again; the graph request and draw alone {draws[0]:.2f} s / "
        f"{statistics.median(draws[1:]):.2f} s")

if __name__ == "__main__": main()
