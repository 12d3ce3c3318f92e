"""How much generating matchers buys: the same rules as (1) a .rules file compiled by dslc, (2) Python UPats through
the same emitter (PatternMatcher), and (3) a straightforward interpreted UPat matcher (kept only here, as the
baseline), all driven by the same graph_rewrite on the same expressions (bench/expr_gen.py, seed 0).

  python bench/bench_matchers.py [--n 2000] [--reps 5] [--json out.json]

Prints expressions/s per matcher (median of reps, fresh UOps every rep) and the ratios, and checks that all three
give the very same output UOps.
"""
from __future__ import annotations
import argparse, gc, itertools, json, os, statistics, sys, time
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench import expr_gen
from bench.bench_symbolic import build_ours as build
from runtime import Ops, UOp, exec_alu, graph_rewrite
from runtime.rewrite import Matcher, Rule
from dslc import PatternMatcher, UPat
from dslc.compile import compile_rules

RULES = """
ruleset bench "A dozen symbolic rules, written the .rules way."
(ADD a@(CONST) b@(CONST)) -> (CONST [exec_alu(Ops.ADD, a.dtype, (a.arg, b.arg))])
(MUL a@(CONST) b@(CONST)) -> (CONST [exec_alu(Ops.MUL, a.dtype, (a.arg, b.arg))])
(ADD x 0) -> x
(MUL x 1) -> x
(MUL x 0) -> 0
(IDIV x 1) -> x
(MOD x 1) -> 0
(ADD (ADD x c1@(CONST)) c2@(CONST)) -> (ADD x (ADD c1 c2))
(MUL (MUL x c1@(CONST)) c2@(CONST)) -> (MUL x (MUL c1 c2))
(MAX x x) -> x
(CMPLT x x) -> False
(WHERE (CONST [True]) x _) -> x
(WHERE (CONST [False]) _ y) -> y
"""

def _fold(op):
  return lambda a, b: a.const_like(exec_alu(op, a.dtype, (a.arg, b.arg)))

def upat_rules():
  x, c1, c2 = UPat.var("x"), UPat(Ops.CONST, name="c1"), UPat(Ops.CONST, name="c2")
  return [
    (UPat(Ops.ADD, src=[UPat(Ops.CONST, name="a"), UPat(Ops.CONST, name="b")]), _fold(Ops.ADD)),
    (UPat(Ops.MUL, src=[UPat(Ops.CONST, name="a"), UPat(Ops.CONST, name="b")]), _fold(Ops.MUL)),
    (UPat(Ops.ADD, src=[x, UPat(Ops.CONST, arg=0)]), lambda x: x),
    (UPat(Ops.MUL, src=[x, UPat(Ops.CONST, arg=1)]), lambda x: x),
    (UPat(Ops.MUL, src=[x, UPat(Ops.CONST, arg=0, name="z")]), lambda x, z: x.const_like(0)),
    (UPat(Ops.IDIV, src=(x, UPat(Ops.CONST, arg=1))), lambda x: x),
    (UPat(Ops.MOD, src=(x, UPat(Ops.CONST, arg=1))), lambda x: x.const_like(0)),
    (UPat(Ops.ADD, src=[UPat(Ops.ADD, src=[x, c1]), c2]), lambda x, c1, c2: x + (c1 + c2)),
    (UPat(Ops.MUL, src=[UPat(Ops.MUL, src=[x, c1]), c2]), lambda x, c1, c2: x * (c1 * c2)),
    (UPat(Ops.MAX, src=[x, x]), lambda x: x),
    (UPat(Ops.CMPLT, src=(x, x), name="u"), lambda u, x: u.const_like(False)),
    (UPat(Ops.WHERE, src=(UPat(Ops.CONST, arg=True), x, UPat.var())), lambda x: x),
    (UPat(Ops.WHERE, src=(UPat(Ops.CONST, arg=False), UPat.var(), UPat.var("y"))), lambda y: y),
  ]

# ---- the interpreted baseline: match UPat trees recursively, as an unoptimised UPat matcher would ----

def _match(p: UPat, u: UOp, store: dict) -> list[dict]:
  if p.op is not None and u.op not in p.op: return []
  if p.dtype is not None and u.dtype not in p.dtype: return []
  if p.arg is not None and u.arg != p.arg: return []
  if p.name is not None:
    if p.name in store and store[p.name] is not u: return []
    store = {**store, p.name: u}
  if p.src is None: return [store]
  orders = itertools.permutations(p.src) if p.src_kind == "any_order" else [p.src]
  out = []
  for order in orders:
    if len(order) != len(u.src): continue
    stores = [store]
    for sp, su in zip(order, u.src): stores = [s2 for s in stores for s2 in _match(sp, su, s)]
    out += stores
  return out

def interpreted(rules) -> Matcher:
  import inspect
  per_op: dict = {}
  objs = []
  for i, (pat, fn) in enumerate(rules):
    params = list(inspect.signature(fn).parameters)
    r = Rule(f"i{i}", "bench", i, pat.text(), tuple(pat.op))
    objs.append(r)
    for op in pat.op: per_op.setdefault(op, []).append((r, pat, fn, params))
  def make(entries):
    def run(u, ctx):
      for r, pat, fn, params in entries:
        for store in _match(pat, u, {}):
          out = fn(**{k: store[k] for k in params})
          if out is not None: return (r, out)
      return None
    return run
  return Matcher("interpreted", {op: make(es) for op, es in per_op.items()}, objs)

def generated() -> Matcher:
  ns: dict = {}
  exec(compile(compile_rules("bench.rules", "bench/bench.rules", source=RULES), "bench.rules", "exec"), ns)
  return ns["bench"]

def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--n", type=int, default=2000)
  ap.add_argument("--reps", type=int, default=5)
  ap.add_argument("--json", default=None)
  args = ap.parse_args()
  corpus = expr_gen.make_corpus(0, args.n)
  matchers = {"generated (.rules)": generated(), "UPat front end": PatternMatcher(upat_rules(), name="upat"),
              "interpreted UPat": interpreted(upat_rules())}
  gc.freeze()
  # same results from all three
  exprs = [build(t) for t in corpus]
  outs = {k: [graph_rewrite(e, m) for e in exprs] for k, m in matchers.items()}
  ref = outs["generated (.rules)"]
  same = {k: sum(a is b for a, b in zip(v, ref)) for k, v in outs.items()}
  del exprs, outs, ref
  times: dict[str, list[float]] = {k: [] for k in matchers}
  for _ in range(args.reps):
    for k, m in matchers.items():  # alternate, so machine noise hits every matcher alike
      gc.collect()
      exprs = [build(t) for t in corpus]
      t0 = time.perf_counter()
      for e in exprs: graph_rewrite(e, m)
      times[k].append(time.perf_counter() - t0)
      del exprs
  med = {k: statistics.median(v) for k, v in times.items()}
  base = med["interpreted UPat"]
  print(f"{len(corpus)} expressions (bench/expr_gen.py seed 0), {args.reps} reps, median")
  print(f"{'matcher':22s} {'expr/s':>10s} {'vs interpreted':>15s} {'vs generated':>13s} {'same output':>12s}")
  for k in matchers:
    print(f"{k:22s} {len(corpus) / med[k]:10.0f} {base / med[k]:14.2f}x {med['generated (.rules)'] / med[k]:12.2f}x {same[k]:7d}/{len(corpus)}")
  if args.json:
    with open(args.json, "w") as f: json.dump({"n": len(corpus), "median_s": med, "same": same}, f, indent=1)

if __name__ == "__main__": main()
