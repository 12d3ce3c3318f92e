# Copied from /work/shared/bench/expr_gen.py (the shared symbolic workload, identical since 2026-11-29 anchor runs).
# Do not edit here: change the shared copy and copy it again, so both systems keep simplifying the same corpus.
"""Reproducible generator of random integer index expressions (no tinygrad dependency).

An expression is a JSON-friendly nested list ("spec"), so any implementation can rebuild
exactly the same trees:

  ["var", name]                    a bounded integer Variable (bounds in VARS below)
  ["const", k]                     integer constant, k >= 0
  ["add", x, y]                    x + y
  ["mul", x, k]                    x * k          (k: positive int)
  ["idiv", x, k]                   x // k         (k: positive int)
  ["mod", x, k]                    x % k          (k: positive int)
  ["max", x, y]                    max(x, y)
  ["where", ["lt", p, q], x, y]    x if p < q else y

Every variable has a lower bound >= 0 and every constant is >= 0, so every sub-expression
is >= 0: floor and C-style truncating division/modulo agree on every value these
expressions can take (tinygrad 0.14 calls them FLOORDIV/FLOORMOD vs CDIV/CMOD; older
tinygrad calls them IDIV/MOD).

Tree node count counts every list above as one node, including the constant operand of
mul/idiv/mod (a CONST node in a UOp graph) and the "lt" node. Each expression's size is
drawn uniformly from [min_nodes, max_nodes] and the tree has exactly that many tree nodes.
About half of the idiv/mod nodes get the structured form (A*(k*j) + B) // k (or % k),
as produced by strided-view index arithmetic, so that there is something to simplify.

Usage: python expr_gen.py [--seed 0] [--n 2000] [--min 20] [--max 60] [--out corpus.json]
"""
from __future__ import annotations
import argparse, json, random

# name, min, max  (all lower bounds >= 0)
VARS = [("a", 0, 10), ("b", 0, 20), ("c", 0, 7), ("d", 1, 32), ("e", 0, 255), ("f", 0, 3)]
DIVISORS = [1, 2, 3, 4, 5, 6, 7, 8, 16, 32]
MULTIPLIERS = [1, 2, 3, 4, 5, 8, 16, 32]
OP_WEIGHTS = {"add": 3.0, "mul": 2.0, "idiv": 1.5, "mod": 1.5, "max": 1.0, "where": 1.0}

def ok(n: int) -> bool: return n >= 1 and n not in (2, 4)   # no tree has exactly 2 or 4 nodes

def _leaf(rng: random.Random):
  if rng.random() < 0.75: return ["var", rng.choice(VARS)[0]]
  return ["const", rng.randint(0, 16)]

def _split(rng: random.Random, n: int, parts: int) -> list[int]:
  """Random composition of n into `parts` sizes that are all ok(); caller guarantees one exists."""
  while True:
    cuts = sorted(rng.sample(range(1, n), parts - 1))
    sizes = [b - a for a, b in zip([0] + cuts, cuts + [n])]
    if all(ok(s) for s in sizes): return sizes

def _binary_ok(m: int) -> bool: return m in (2, 4) or m >= 6          # m = sum of the 2 child sizes
def _where_ok(m: int) -> bool: return m in (4, 6) or m >= 8           # m = sum of the 4 child sizes

def gen(rng: random.Random, n: int):
  """Return a tree with exactly n tree nodes."""
  assert ok(n), n
  if n == 1: return _leaf(rng)
  avail = []
  if _binary_ok(n - 1): avail += ["add", "max"]
  if ok(n - 2): avail += ["mul", "idiv", "mod"]
  if n - 2 >= 4 and _where_ok(n - 2): avail.append("where")
  op = rng.choices(avail, [OP_WEIGHTS[o] for o in avail])[0]
  if op in ("add", "max"):
    a, b = _split(rng, n - 1, 2)
    return [op, gen(rng, a), gen(rng, b)]
  if op == "where":
    p, q, x, y = (gen(rng, s) for s in _split(rng, n - 2, 4))
    return ["where", ["lt", p, q], x, y]
  if op == "mul": return ["mul", gen(rng, n - 2), rng.choice(MULTIPLIERS)]
  k = rng.choice(DIVISORS)
  # structured form: op(add(mul(A, k*j), B), k) has 5 + |A| + |B| nodes
  if rng.random() < 0.5 and n - 5 >= 2 and _binary_ok(n - 5):
    j = rng.choice([1, 1, 2, 4])
    a, b = _split(rng, n - 5, 2)
    return [op, ["add", ["mul", gen(rng, a), k * j], gen(rng, b)], k]
  return [op, gen(rng, n - 2), k]

def count_nodes(t) -> int:
  op = t[0]
  if op in ("var", "const"): return 1
  if op in ("mul", "idiv", "mod"): return 2 + count_nodes(t[1])
  if op in ("add", "max", "lt"): return 1 + count_nodes(t[1]) + count_nodes(t[2])
  if op == "where": return 1 + count_nodes(t[1]) + count_nodes(t[2]) + count_nodes(t[3])
  raise ValueError(op)

def evaluate(t, env: dict[str, int]) -> int:
  op = t[0]
  if op == "var": return env[t[1]]
  if op == "const": return t[1]
  if op == "add": return evaluate(t[1], env) + evaluate(t[2], env)
  if op == "mul": return evaluate(t[1], env) * t[2]
  if op == "idiv": return evaluate(t[1], env) // t[2]
  if op == "mod": return evaluate(t[1], env) % t[2]
  if op == "max": return max(evaluate(t[1], env), evaluate(t[2], env))
  if op == "lt": return int(evaluate(t[1], env) < evaluate(t[2], env))
  if op == "where": return evaluate(t[2], env) if evaluate(t[1], env) else evaluate(t[3], env)
  raise ValueError(op)

def make_corpus(seed: int = 0, n: int = 2000, min_nodes: int = 20, max_nodes: int = 60) -> list:
  rng = random.Random(seed)
  out = []
  while len(out) < n:
    size = rng.randint(min_nodes, max_nodes)
    if not ok(size): continue
    out.append(gen(rng, size))
  return out

def random_env(rng: random.Random) -> dict[str, int]:
  return {name: rng.randint(lo, hi) for name, lo, hi in VARS}

if __name__ == "__main__":
  ap = argparse.ArgumentParser()
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--n", type=int, default=2000)
  ap.add_argument("--min", type=int, default=20)
  ap.add_argument("--max", type=int, default=60)
  ap.add_argument("--out", default=None)
  args = ap.parse_args()
  corpus = make_corpus(args.seed, args.n, args.min, args.max)
  sizes = [count_nodes(t) for t in corpus]
  print(f"{len(corpus)} expressions, tree nodes: total {sum(sizes)}, min {min(sizes)}, max {max(sizes)}, mean {sum(sizes)/len(sizes):.1f}")
  if args.out:
    with open(args.out, "w") as f: json.dump({"seed": args.seed, "vars": VARS, "exprs": corpus}, f, separators=(",", ":"))
