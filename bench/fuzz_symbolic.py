"""Soundness fuzzer for rules/symbolic.rules: random integer and boolean expressions over bounded variables, simplified, then
evaluated with C semantics (runtime exec_alu: IDIV truncates, MOD takes the dividend's sign, x//0 == 0, x%0 == x, ints wrap)
at random points inside the variables' ranges. A failure is a point where the simplified expression's value differs from
the original's, a node of either graph whose value is outside its [vmin, vmax], or a simplification that raises.

  python bench/fuzz_symbolic.py                          # 20,000 evaluations, seed 0
  python bench/fuzz_symbolic.py --evals 1000000          # the long run (a minute or two)
  python bench/fuzz_symbolic.py --seed 7 --evals 50000 --show 3

Ranges include negative values, zero and single values; divisors include 0, negatives and variables that cross 0;
a few expressions use huge ranges and constants so that int32 wraps. Each failure prints a Python line that rebuilds it.
"""
from __future__ import annotations
import argparse, os, random, sys, time, traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path: sys.path.insert(0, ROOT)

from runtime import UOp, Ops, dtypes, exec_alu  # noqa: E402
from runtime.dtype import DType  # noqa: E402
from runtime.ops import GroupOp, cast_value  # noqa: E402
from runtime.uop import uop  # noqa: E402

# ---- random expressions ----

def random_range(rng: random.Random, dtype: DType = dtypes.int) -> tuple[int, int]:
  r = rng.random()
  if dtype is dtypes.uint32: lo = rng.randint(0, 40)
  elif r < 0.05: return (rng.randint(-2**31, 2**31 - 1),) * 2 if rng.random() < 0.5 else (-2**31, 2**31 - 1)  # wrapping territory
  elif r < 0.15: lo = rng.randint(-1000, 1000); return lo, lo + rng.randint(0, 2000)  # noqa: E702
  else: lo = rng.randint(-20, 20)
  if r > 0.9: return lo, lo   # a single value
  return lo, lo + rng.randint(0, 40)

def random_const(rng: random.Random) -> int:
  r = rng.random()
  if r < 0.6: return rng.randint(-10, 16)
  if r < 0.8: return rng.choice([1, 2, 3, 4, 8, 16, 32, 64, -1, -2, -4, -8, 24, 48, 96])
  if r < 0.95: return rng.randint(-200, 200)
  return rng.choice([2**31 - 1, -2**31, 2**30, -2**30, 65536, 2**31 - 2])

class ExprGen:
  """Random DAGs: every new node may reuse an earlier node, so like terms and shared sub-expressions appear."""
  def __init__(self, rng: random.Random, n_vars: int = 3, dtype: DType = dtypes.int):
    self.rng, self.dtype = rng, dtype
    self.vars = [UOp.variable(f"v{i}", *random_range(rng, dtype), dtype) for i in range(n_vars)]
    # loop indices: RANGE(end) is in [0, end), end a constant or a positive variable (a symbolic shape)
    for i in range(rng.choice([0, 0, 1, 2])):
      ends = [v for v in self.vars if v.op is Ops.DEFINE_VAR and v.arg[1] >= 1]
      end = rng.choice(ends) if ends and rng.random() < 0.4 else UOp.const(dtype, rng.choice([1, 2, 3, 4, 7, 8, 16, 32]))
      self.vars.append(uop(Ops.RANGE, dtype, (end,), i))
    self.pool: list[UOp] = list(self.vars)
    self.bools: list[UOp] = []

  def const(self, v: int) -> UOp: return UOp.const(self.dtype, v)

  def leaf(self) -> UOp:
    r = self.rng.random()
    if r < 0.2: return self.const(random_const(self.rng))
    return self.rng.choice(self.pool)

  def boolean(self, depth: int) -> UOp:
    rng = self.rng
    r = rng.random()
    if self.bools and r < 0.15: return rng.choice(self.bools)
    if r < 0.2: return UOp.const(dtypes.bool, rng.random() < 0.5)
    if depth <= 0 or r < 0.75:
      a = self.expr(depth - 1)
      b = self.const(random_const(rng)) if rng.random() < 0.6 else self.expr(depth - 1)
      if rng.random() < 0.3: a, b = b, a
      op = rng.choice([Ops.CMPLT, Ops.CMPLT, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ])
      out = uop(op, dtypes.bool, (a, b))
    else:
      op = rng.choice([Ops.AND, Ops.OR, Ops.XOR, Ops.CMPNE, Ops.ADD, Ops.MUL, Ops.MAX])
      if op is Ops.CMPNE: out = uop(Ops.CMPNE, dtypes.bool, (self.boolean(depth - 1), UOp.const(dtypes.bool, True)))  # not
      else: out = uop(op, dtypes.bool, (self.boolean(depth - 1), self.boolean(depth - 1)))
    self.bools.append(out)
    return out

  def expr(self, depth: int) -> UOp:
    rng, d = self.rng, self.dtype
    if depth <= 0 or rng.random() < 0.15: return self.leaf()
    r = rng.random()
    x = self.expr(depth - 1)
    if r < 0.22: out = uop(Ops.ADD, d, (x, self.expr(depth - 1)))
    elif r < 0.28: out = uop(Ops.SUB, d, (x, self.expr(depth - 1)))
    elif r < 0.40: out = uop(Ops.MUL, d, (x, self.const(random_const(rng))))
    elif r < 0.43: out = uop(Ops.MUL, d, (x, self.expr(depth - 1)))
    elif r < 0.60:
      op = rng.choice([Ops.IDIV, Ops.MOD])
      c = random_const(rng)
      if rng.random() < 0.5:  # the strided-view form (a*(c*j) + b) op c
        j = rng.choice([1, 1, 2, 3, -1])
        x = uop(Ops.ADD, d, (uop(Ops.MUL, d, (x, self.const(c * j))), self.expr(depth - 1)))
      y = self.const(c) if rng.random() < 0.8 else self.expr(depth - 1)
      if y.op is not Ops.CONST and rng.random() < 0.5: x = uop(Ops.ADD, d, (uop(Ops.MUL, d, (x, y)), self.leaf()))  # (x*y + z) op y
      out = uop(op, d, (x, y))
    elif r < 0.68: out = uop(Ops.MAX, d, (x, self.expr(depth - 1)))
    elif r < 0.72: out = uop(Ops.NEG, d, (x,))
    elif r < 0.86: out = uop(Ops.WHERE, d, (self.boolean(depth - 1), x, self.expr(depth - 1)))
    elif r < 0.90: out = uop(Ops.CAST, d, (self.boolean(depth - 1),))
    elif r < 0.93 and d is dtypes.int:  # a round trip through another integer type
      out = uop(Ops.CAST, d, (uop(Ops.CAST, rng.choice([dtypes.int64, dtypes.int16, dtypes.int8, dtypes.uint8]), (x,)),))
    else: out = uop(Ops.ADD, d, (x, self.const(random_const(rng))))
    self.pool.append(out)
    return out

def random_expr(rng: random.Random) -> UOp:
  """One random expression: an integer one mostly, sometimes a boolean one or an unsigned one."""
  dtype = dtypes.uint32 if rng.random() < 0.05 else dtypes.int64 if rng.random() < 0.05 else dtypes.int
  g = ExprGen(rng, rng.randint(1, 4), dtype)
  depth = rng.randint(1, 6)
  return g.boolean(depth) if rng.random() < 0.15 else g.expr(depth)

# ---- evaluation with C semantics, every node ----

def evaluate_all(root: UOp, env: dict[str, int]) -> dict[UOp, object]:
  vals: dict[UOp, object] = {}
  for u in root.toposort():
    if u.op is Ops.CONST: v = u.arg
    elif u.op is Ops.DEFINE_VAR: v = env[u.arg[0]]
    elif u.op is Ops.RANGE: v = env[f"ridx{u.arg}"]
    elif u.op is Ops.CAST: v = cast_value(vals[u.src[0]], u.dtype)
    elif u.op in GroupOp.ALU: v = exec_alu(u.op, u.dtype, [vals[s] for s in u.src])
    else: raise ValueError(f"can't evaluate {u.op}")
    vals[u] = v
  return vals

def variables(u: UOp) -> list[UOp]:
  """The DEFINE_VARs and RANGEs of u, each RANGE after the variables its end reads."""
  return sorted((x for x in u.toposort() if x.op in (Ops.DEFINE_VAR, Ops.RANGE)), key=lambda x: x.op is Ops.RANGE)

def random_point(rng: random.Random, vs: list[UOp]) -> dict[str, int]:
  env: dict[str, int] = {}
  for v in vs:
    if v.op is Ops.RANGE:
      end = evaluate_all(v.src[0], env)[v.src[0]]
      env[f"ridx{v.arg}"] = rng.randint(0, end - 1) if end > 0 else 0
      continue
    _, lo, hi = v.arg
    r = rng.random()
    env[v.arg[0]] = lo if r < 0.1 else hi if r < 0.2 else (0 if lo <= 0 <= hi and r < 0.25 else rng.randint(lo, hi))
  return env

def to_code(u: UOp) -> str:
  """A Python expression that rebuilds u (for failure reports)."""
  names: dict[UOp, str] = {}
  lines = []
  for i, x in enumerate(u.toposort()):
    names[x] = f"n{i}"
    src = ", ".join(names[s] for s in x.src)
    lines.append(f"n{i} = uop(Ops.{x.op.name}, {x.dtype!r}, ({src}{',' if len(x.src) == 1 else ''}), {x.arg!r})")
  return "; ".join(lines)

def check(u: UOp, simplify, rng: random.Random, points: int) -> tuple[int, str | None]:
  """(evaluations done, failure description or None) for one expression at `points` random points."""
  try: s = simplify(u)
  except Exception as e:  # noqa: BLE001 - every exception of the simplifier is a finding
    return 0, f"simplify raised {type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}"
  vs = variables(u)
  for i in range(points):
    env = random_point(rng, vs)
    a, b = evaluate_all(u, env), evaluate_all(s, env)
    if a[u] != b[s]: return i, f"value: original {a[u]!r}, simplified {b[s]!r} at {env}\n  {u.render()}\n  -> {s.render()}"
    for vals, g in ((a, "original"), (b, "simplified")):
      for n, v in vals.items():
        if not (n.vmin <= v <= n.vmax):
          return i, f"bounds: {v!r} outside [{n.vmin}, {n.vmax}] for {n.render()} ({g}) at {env}\n  {u.render()}\n  -> {s.render()}"
  return points, None

def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--evals", type=int, default=20_000, help="total (expression, point) evaluations")
  ap.add_argument("--points", type=int, default=10, help="random points per expression")
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--show", type=int, default=5, help="failures to print in full")
  args = ap.parse_args(argv)
  from rules.symbolic import symbolic
  from runtime import graph_rewrite
  def simplify(u: UOp) -> UOp: return graph_rewrite(u, symbolic)
  rng = random.Random(args.seed)
  t0 = time.perf_counter()
  done, exprs, failures = 0, 0, 0
  last = t0
  while done < args.evals:
    u = random_expr(rng)
    n, fail = check(u, simplify, rng, args.points)
    done += max(n, 1)
    exprs += 1
    if fail is not None:
      failures += 1
      if failures <= args.show: print(f"FAIL #{failures} (expression {exprs}):\n  {fail}\n  rebuild: {to_code(u)}\n", flush=True)
    if time.perf_counter() - last > 10:
      last = time.perf_counter()
      print(f"  ... {done} evaluations, {exprs} expressions, {failures} failures, {last - t0:.0f} s", file=sys.stderr, flush=True)
  dt = time.perf_counter() - t0
  print(f"fuzz_symbolic: seed {args.seed}: {done} evaluations of {exprs} expressions in {dt:.1f} s: {failures} failures")
  return 1 if failures else 0

if __name__ == "__main__": sys.exit(main())
