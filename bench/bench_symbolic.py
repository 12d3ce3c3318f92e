"""Symbolic simplifier benchmark: rules/symbolic.rules against tinygrad's `symbolic`, side by side in one process.

Workload: bench/expr_gen.py (seeded random index expressions, 20-60 tree nodes). Each system builds the same
expressions as its own UOps and simplifies them with `graph_rewrite(e, symbolic)`; the two alternate rep by rep so
machine noise hits both. Also: graph_rewrite's per-node overhead on a 10,000-node chain x+x+...+x with a matcher that
never fires, and with `symbolic` (which folds the chain to x*10001).

  python bench/bench_symbolic.py                  # 2,000 expressions, seed 0, both systems when tinygrad is importable
  python bench/bench_symbolic.py --no-tinygrad    # ours only
  python -m dslc stats                            # per-rule attempts, hits and time on this corpus (stats_workload)

tinygrad (pip install tinygrad==0.14.0) is optional, never a dependency: without it the bench prints our numbers alone.
Node counts are unique nodes of the DAG for both systems (tinygrad's empty STACK under each Variable is not counted).
"""
from __future__ import annotations
import argparse, gc, json, os, random, statistics, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path: sys.path.insert(0, ROOT)

from bench import expr_gen  # noqa: E402
from runtime import UOp, dtypes, graph_rewrite, Matcher  # noqa: E402
from rules.symbolic import symbolic  # noqa: E402

# ---- our UOps ----

OUR_VARS = {name: UOp.variable(name, lo, hi, dtypes.int) for name, lo, hi in expr_gen.VARS}

def build_ours(t) -> UOp:
  op = t[0]
  if op == "var": return OUR_VARS[t[1]]
  if op == "const": return UOp.const(dtypes.int, t[1])
  if op == "add": return build_ours(t[1]) + build_ours(t[2])
  if op == "mul": return build_ours(t[1]) * t[2]
  if op == "idiv": return build_ours(t[1]) // t[2]      # IDIV truncates; all values are >= 0 here, so it is floor division
  if op == "mod": return build_ours(t[1]) % t[2]
  if op == "max": return build_ours(t[1]).maximum(build_ours(t[2]))
  if op == "where":
    c = t[1]
    return (build_ours(c[1]) < build_ours(c[2])).where(build_ours(t[2]), build_ours(t[3]))
  raise ValueError(op)

def nodes_ours(u: UOp) -> int: return len(u.toposort())

def eval_ours(u: UOp, env: dict) -> int: return int(u.sym_infer(env))

def simplify_ours(e: UOp) -> UOp: return graph_rewrite(e, symbolic)

# ---- tinygrad's UOps (when importable) ----

def load_tinygrad():
  try:
    from tinygrad.uop.ops import UOp as TUOp, Ops as TOps, PatternMatcher, UPat, graph_rewrite as tgraph_rewrite
    from tinygrad.uop.symbolic import symbolic as tsymbolic
    from tinygrad.dtype import dtypes as tdtypes
    from tinygrad.uop.divandmod import fold_divmod_general
    from importlib.metadata import version
  except ImportError: return None
  tvars = {name: TUOp.variable(name, lo, hi) for name, lo, hi in expr_gen.VARS}
  def build(t):
    op = t[0]
    if op == "var": return tvars[t[1]]
    if op == "const": return TUOp.const(t[1], tdtypes.weakint)
    if op == "add": return build(t[1]) + build(t[2])
    if op == "mul": return build(t[1]) * t[2]
    if op == "idiv": return build(t[1]) // t[2]
    if op == "mod": return build(t[1]) % t[2]
    if op == "max": return build(t[1]).maximum(build(t[2]))
    if op == "where":
      c = t[1]
      return (build(c[1]) < build(c[2])).where(build(t[2]), build(t[3]))
    raise ValueError(op)
  def nodes(u) -> int: return sum(1 for x in u.toposort() if not (x.op is TOps.STACK and not x.src))
  def evaluate(u, env) -> int: return int(u.sym_infer(env)) if u.op is not TOps.CONST else int(u.arg)
  never = PatternMatcher([(UPat(TOps.NOOP, name="x"), lambda x: None)])
  def chain(n):
    x = TUOp.variable("x", 0, 100)
    y = x
    for _ in range(n): y = y + x
    return y
  return {"name": f"tinygrad {version('tinygrad')}", "build": build, "nodes": nodes, "eval": evaluate,
          "simplify": lambda e: tgraph_rewrite(e, tsymbolic), "clear": fold_divmod_general.cache_clear,
          "never": lambda c: tgraph_rewrite(c, never), "chain": chain}

def ours_system():
  never = Matcher("never", {}, [])
  def chain(n):
    x = UOp.variable("x", 0, 100, dtypes.int)
    y = x
    for _ in range(n): y = y + x
    return y
  return {"name": "ours (rules/symbolic.rules)", "build": build_ours, "nodes": nodes_ours, "eval": eval_ours, "simplify": simplify_ours,
          "clear": lambda: None, "never": lambda c: graph_rewrite(c, never), "chain": chain}

# ---- measuring ----

def quality(sys_: dict, corpus: list, checks: int = 3, seed: int = 123) -> dict:
  """Node counts and a value check of every output against expr_gen's reference evaluator (outside the timers)."""
  exprs = [sys_["build"](t) for t in corpus]
  outs = [sys_["simplify"](e) for e in exprs]
  nin = sum(sys_["nodes"](e) for e in exprs)
  nout = sum(sys_["nodes"](o) for o in outs)
  rng = random.Random(seed)
  bad = 0
  for t, o in zip(corpus, outs):
    for _ in range(checks):
      env = expr_gen.random_env(rng)
      if sys_["eval"](o, env) != expr_gen.evaluate(t, env): bad += 1
  return {"in_nodes": nin, "out_nodes": nout, "ratio": nout / nin, "evaluations": checks * len(corpus), "mismatches": bad}

def time_simplify(sys_: dict, corpus: list) -> float:
  sys_["clear"]()
  gc.collect()
  exprs = [sys_["build"](t) for t in corpus]   # fresh UOps every rep: no cached bounds, no rewrite results from earlier reps
  gc.collect()
  t0 = time.perf_counter()
  outs = [sys_["simplify"](e) for e in exprs]
  dt = time.perf_counter() - t0
  del exprs, outs
  return dt

def time_chain(sys_: dict, n: int, reps: int, kind: str = "never") -> float:
  """us per node of graph_rewrite on the n-node chain: `never` (a matcher with no rule for ADD) or `simplify`."""
  ts = []
  for _ in range(reps):
    sys_["clear"]()
    c = sys_["chain"](n)
    gc.collect()
    t0 = time.perf_counter(); r = sys_[kind](c); ts.append(time.perf_counter() - t0)
    assert kind != "never" or r is c
    del c, r
  return statistics.median(ts) / (n + 1) * 1e6

def stats_workload(n: int = 2000, seed: int = 0) -> None:
  """`python -m dslc stats` runs this under RULESTATS=1: the corpus simplified once."""
  for t in expr_gen.make_corpus(seed, n): simplify_ours(build_ours(t))

def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--n", type=int, default=2000)
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--reps", type=int, default=5)
  ap.add_argument("--chain", type=int, default=10000)
  ap.add_argument("--no-tinygrad", action="store_true")
  ap.add_argument("--json", default=None, help="append the result record to this file")
  args = ap.parse_args(argv)
  systems = [ours_system()]
  if not args.no_tinygrad and (tg := load_tinygrad()) is not None: systems.append(tg)
  gc.collect(); gc.freeze()   # both systems: module-level objects out of the collector's way (ENGINE-NOTES)
  corpus = expr_gen.make_corpus(args.seed, args.n)
  tree_nodes = sum(expr_gen.count_nodes(t) for t in corpus)
  res: dict = {"bench": "symbolic", "n": len(corpus), "seed": args.seed, "tree_nodes": tree_nodes, "python": sys.version.split()[0], "systems": {}}
  for s in systems:
    s["simplify"](s["build"](corpus[0]))   # warm-up (tinygrad compiles its matchers lazily)
    res["systems"][s["name"]] = {"quality": quality(s, corpus)}
  times: dict[str, list[float]] = {s["name"]: [] for s in systems}
  for rep in range(args.reps):   # alternate the systems rep by rep
    for s in (systems if rep % 2 == 0 else systems[::-1]): times[s["name"]].append(time_simplify(s, corpus))
  for s in systems:
    r = res["systems"][s["name"]]
    med = statistics.median(times[s["name"]])
    r["simplify_s"] = {"median": med, "min": min(times[s["name"]]), "max": max(times[s["name"]]), "reps": times[s["name"]]}
    r["exprs_per_s"] = len(corpus) / med
    r["in_nodes_per_s"] = r["quality"]["in_nodes"] / med
    r["chain_never_fires_us_per_node"] = time_chain(s, args.chain, max(3, args.reps))
    r["chain_symbolic_us_per_node"] = time_chain(s, args.chain, 3, "simplify")
  print(f"symbolic: {len(corpus)} expressions (seed {args.seed}, {tree_nodes} tree nodes), median of {args.reps} reps, python {res['python']}")
  print(f"{'system':34} {'expr/s':>9} {'in nodes/s':>11} {'out/in nodes':>13} {'mismatches':>11} {'chain us/node':>14} {'symbolic chain':>15}")
  for s in systems:
    r = res["systems"][s["name"]]
    q = r["quality"]
    print(f"{s['name']:34} {r['exprs_per_s']:9.0f} {r['in_nodes_per_s']:11.0f} {q['ratio']:13.3f} {q['mismatches']:>5}/{q['evaluations']:<5} "
          f"{r['chain_never_fires_us_per_node']:14.2f} {r['chain_symbolic_us_per_node']:15.2f}")
  if len(systems) == 2:
    a, b = (res["systems"][s["name"]] for s in systems)
    res["ratios"] = {"exprs_per_s": a["exprs_per_s"] / b["exprs_per_s"], "in_nodes_per_s": a["in_nodes_per_s"] / b["in_nodes_per_s"],
                     "node_ratio": a["quality"]["ratio"] / b["quality"]["ratio"],
                     "chain_us_per_node": a["chain_never_fires_us_per_node"] / b["chain_never_fires_us_per_node"],
                     "symbolic_chain_us_per_node": a["chain_symbolic_us_per_node"] / b["chain_symbolic_us_per_node"]}
    x = res["ratios"]
    print(f"{'ours / tinygrad':34} {x['exprs_per_s']:8.2f}x {x['in_nodes_per_s']:10.2f}x {x['node_ratio']:12.3f}x {'':11} "
          f"{x['chain_us_per_node']:13.2f}x {x['symbolic_chain_us_per_node']:14.3f}x")
  line = json.dumps(res)
  print("RESULT " + line)
  if args.json:
    with open(args.json, "a") as f: f.write(line + "\n")
  return 0

if __name__ == "__main__": sys.exit(main())
