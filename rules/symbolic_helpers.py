"""Helpers for rules/symbolic.rules: the actions that look at a whole sum (any number of terms), too long for one rule.

Hand-written; imports only runtime. A sum is read as terms `coef * base` plus a constant (`split_sum`); every helper
computes on those lists with Python integers and builds its result once, in the canonical form the rules keep (a
left-leaning chain of ADDs, `x*c` with the constant on the right, the constant term last). No helper runs a nested
graph_rewrite except `given_valid`, which only runs where a condition bounds a term of its branch.
Integer semantics are C's (runtime/ops.py): IDIV truncates, MOD takes the dividend's sign, and results wrap. A helper
that reasons about the exact value of a sum first checks that no node of it can have wrapped (`exact`).
"""
from __future__ import annotations
import math
from runtime.dtype import DType, dtypes
from runtime.ops import GroupOp, Ops, exec_alu
from runtime.uop import UOp, uop

ADD, MUL, IDIV, MOD, CONST, CMPLT, CMPNE, AND = Ops.ADD, Ops.MUL, Ops.IDIV, Ops.MOD, Ops.CONST, Ops.CMPLT, Ops.CMPNE, Ops.AND

# the value range of each integer dtype: a node whose range is all of it may have wrapped (range analysis gives up so)
# (lower case: upper-case names in a .rules guard are ops)
int_min: dict[DType, int] = {d: dtypes.min(d) for d in dtypes.all() if dtypes.is_int(d)}
int_max: dict[DType, int] = {d: dtypes.max(d) for d in dtypes.all() if dtypes.is_int(d)}
FULL: dict[DType, tuple[int, int]] = {d: (int_min[d], int_max[d]) for d in int_min}

def fold_alu(u: UOp) -> UOp | None:
  """u's value when every source is a constant; None when the op has no value on u's dtype (say, a float shift)."""
  try: return u.const_like(exec_alu(u.op, u.dtype, [s.arg for s in u.src]))
  except (ValueError, TypeError, OverflowError): return None

def exact(u: UOp) -> bool:
  """No ADD or MUL on the way to u wrapped: range analysis gives a wrapped node (and everything above it) its whole dtype.
  Never for vectors (their bounds are the whole dtype's) and non-integers."""
  full = FULL.get(u.dtype)
  return full is not None and u.bounds != full

# ---- sums as term lists ----

def split_sum(u: UOp) -> tuple[list[tuple[UOp, int]], int]:
  """u as ([(base, coef), ...], const): the terms of its ADD chain in order, `x*c` read as (x, c)."""
  terms: list[tuple[UOp, int]] = []
  k = 0
  stack = [u]
  while stack:
    x = stack.pop()
    op = x.op
    if op is ADD:
      stack.append(x.src[1])
      stack.append(x.src[0])
    elif op is CONST: k += x.arg
    elif op is MUL and x.src[1].op is CONST: terms.append((x.src[0], x.src[1].arg))
    else: terms.append((x, 1))
  return terms, k

def _term(d: DType, base: UOp, coef: int) -> UOp:
  return base if coef == 1 else uop(MUL, d, (base, UOp.const(d, coef)))

def build_sum(d: DType, terms, k: int) -> UOp:
  """The canonical chain ((t0 + t1) + ...) + k of the terms with a nonzero coefficient."""
  out = None
  for base, coef in terms:
    if coef == 0: continue
    t = _term(d, base, coef)
    out = t if out is None else uop(ADD, d, (out, t))
  if out is None: return UOp.const(d, k)
  return out if k == 0 else uop(ADD, d, (out, UOp.const(d, k)))

def _range(terms, k: int) -> tuple[int, int]:
  lo = hi = k
  for base, coef in terms:
    a, b = coef * base.vmin, coef * base.vmax
    if a > b: a, b = b, a
    lo += a
    hi += b
  return lo, hi

# ---- like terms ----

def _base(t: UOp) -> tuple[UOp, int]:
  return (t.src[0], t.src[1].arg) if t.op is MUL and t.src[1].op is CONST else (t, 1)

def _merge(terms: list, base: UOp, coef: int, like: bool = True) -> bool:
  """Add coef*base into terms in place when it meets a term: the same base (like=True), or the other half of a div/mod split."""
  for i, (b, f) in enumerate(terms):
    if like and b is base:
      terms[i] = (b, f + coef)
      return True
  # (a % c)*m and (a // c)*(c*m) are a*m: C's a == (a//c)*c + a%c holds for every a and c
  if base.op is MOD or base.op is IDIV:
    a, c = base.src
    other = IDIV if base.op is MOD else MOD
    for i, (b, f) in enumerate(terms):
      if b.op is other and b.src[0] is a and b.src[1] is c and c.op is CONST:
        fm, fd = (coef, f) if base.op is MOD else (f, coef)
        if fd == fm * c.arg:
          terms[i] = (a, fm)
          return True
  return False

def _split_tail(x: UOp, limit: int = 64) -> tuple[list[tuple[UOp, int]], int, bool]:
  """split_sum of a left-leaning chain, but only its last `limit` terms: what lies below them stays one opaque first
  term (coefficient 1), so adding terms one by one to a chain of n terms costs O(n), not O(n^2)."""
  rev: list[tuple[UOp, int]] = []
  k = 0
  cur = x
  while cur.op is ADD and len(rev) < limit:
    t = cur.src[1]
    if t.op is CONST: k += t.arg
    else: rev.append(_base(t))
    cur = cur.src[0]
  opaque = cur.op is ADD
  if opaque: rev.append((cur, 1))
  elif cur.op is CONST: k += cur.arg
  else: rev.append(_base(cur))
  rev.reverse()
  return rev, k, opaque

def add_term(x: UOp, y: UOp) -> UOp | None:
  """x + y where the sum x already holds a term of y's base: the coefficients add (x*3 + b + x*5 -> x*8 + b);
  or y completes a split of a term: a%c*m + ... + (a//c)*(c*m) -> a*m + ... . A multiple of a sum in x is
  distributed only when that lets y complete a split inside it: (x*2 + a//2)*2 + a%2 -> x*4 + a.
  Only the last 64 terms of a chain are searched (a longer sum stays correct, and linear to build)."""
  d = x.dtype
  terms, k, opaque = _split_tail(x)
  base, coef = _base(y)
  if _merge(terms, base, coef): return build_sum(d, terms, k)
  for i, (b, f) in enumerate(terms):
    if b.op is ADD and (i > 0 or not opaque):  # not the opaque rest of a long chain
      inner, ik = split_sum(b)
      expanded = [(ib, g * f) for ib, g in inner]
      if _merge(expanded, base, coef, like=False): return build_sum(d, terms[:i] + expanded + terms[i + 1:], k + ik * f)
  return None

# ---- division and remainder by a positive constant ----

def _congruent(terms, k: int, c: int):
  """x == c*q + r with q linear and r in one period for every value: (q_terms, q_const, r_terms, r_const), or None.
  Each coefficient f splits as f == c*(f-r)/c + r with the smallest |r|, so the remainder's range stays small."""
  for small in (True, False):
    rs = []
    for _, f in terms:
      r = f % c
      if small and 2 * r > c: r -= c
      rs.append(r)
    rem = [(b, r) for (b, _), r in zip(terms, rs) if r]
    lo, hi = _range(rem, k % c)
    if lo // c == hi // c:
      q0 = lo // c
      quo = [(b, (f - r) // c) for (b, f), r in zip(terms, rs) if f != r]
      return quo, k // c + q0, rem, k % c - q0 * c
    if not any(2 * (f % c) > c for _, f in terms): break  # the second choice would be the same
  return None

def _fits(d: DType, lo: int, hi: int) -> bool: return int_min[d] <= lo and hi <= int_max[d]

# the ops of pure index math: evaluating them has no effect but their value (a LOAD reads memory, whether used or not)
PURE_OPS = frozenset(GroupOp.ALU | {Ops.CONST, Ops.VCONST, Ops.DEFINE_VAR, Ops.RANGE, Ops.SPECIAL, Ops.CAST, Ops.BITCAST, Ops.BIND,
                                    Ops.VECTORIZE, Ops.GEP})

def _small_graph(x: UOp, limit: int, pure: bool = False) -> set[UOp] | None:
  """Every node of x's graph, or None when it has more than `limit` (a bounded walk: cost O(limit), not O(graph)),
  or, with pure, when a node is not pure index math."""
  if pure and x.op not in PURE_OPS: return None
  seen = {x}
  stack = [x]
  while stack:
    for s in stack.pop().src:
      if s not in seen:
        if len(seen) >= limit or (pure and s.op not in PURE_OPS): return None
        seen.add(s)
        stack.append(s)
  return seen

def _factors(terms, c: int) -> list[int]:
  return sorted({abs(f) for _, f in terms if 1 < abs(f) < c and c % abs(f) == 0})

def _linear(d: DType, is_div: bool, terms, k: int, c: int) -> UOp | None:
  # x == c*q + r with q linear and r in one period: x // c == q, x % c == r
  if (r := _congruent(terms, k, c)) is None: return None
  quo, qk, rem, rk = r
  return build_sum(d, quo, qk) if is_div else build_sum(d, rem, rk)

def _by_factor(d: DType, is_div: bool, terms, k: int, c: int) -> UOp | None:
  # x == f*q + r with f | c and 0 <= r < f for every value: x // c == q // (c/f), x % c == (q % (c/f))*f + r
  for f in _factors(terms, c):
    if (r := _congruent(terms, k, f)) is None: continue
    quo, qk, rem, rk = r
    q = build_sum(d, quo, qk)
    if is_div: return uop(IDIV, d, (q, UOp.const(d, c // f)))
    return build_sum(d, [(uop(MOD, d, (q, UOp.const(d, c // f))), f)] + rem, rk)
  return None

def _mod_reduce(d: DType, terms, k: int, c: int) -> UOp | None:
  # (a % m)*f is a*f modulo c when c | m*f and a >= 0; every coefficient and the constant reduce mod c
  new = [(b.src[0], f) if b.op is MOD and b.src[1].op is CONST and (m := b.src[1].arg) > 0 and (m * f) % c == 0 and b.src[0].vmin >= 0
         else (b, f) for b, f in terms]
  rest = [(b, f % c) for b, f in new if f % c]
  if rest == terms and k % c == k: return None
  lo, hi = _range(rest, k % c)
  if lo < 0 or not _fits(d, lo, hi): return None
  return uop(MOD, d, (build_sum(d, rest, k % c), UOp.const(d, c)))

def _div_split(d: DType, terms, k: int, c: int) -> UOp | None:
  # terms whose coefficient c divides, and the constant's multiple of c, leave: x//c == q + (r + k%c)//c + k//c when
  # r + k%c >= 0; a coefficient c+1 splits too (a*(c+1) == a*c + a), which saves its MUL
  quo = [(b, f // c) for b, f in terms if f % c == 0 or f == c + 1]
  if not quo and not k // c: return None
  rest = [(b, 1 if f == c + 1 else f) for b, f in terms if f % c != 0]
  lo, hi = _range(rest, k % c)
  if lo < 0 or not _fits(d, lo, hi): return None
  return build_sum(d, quo + [(uop(IDIV, d, (build_sum(d, rest, k % c), UOp.const(d, c))), 1)], k // c)

def _div_nest(u: UOp, x: UOp, terms, c: int) -> UOp | None:
  # x // c == (x // f) // (c/f) for a factor f of c that a coefficient has, when x // f simplifies; the smallest result,
  # kept when it is no bigger than u
  best = None
  for f in _factors(terms, c):
    if (inner := fold_divmod(uop(IDIV, u.dtype, (x, UOp.const(u.dtype, f))), x, f)) is None: continue
    cand = uop(IDIV, u.dtype, (inner, UOp.const(u.dtype, c // f)))
    if (g := _small_graph(cand, 256)) is not None and (best is None or len(g) < best[0]): best = (len(g), cand)
  if best is not None and (g := _small_graph(u, 256)) is not None and best[0] <= len(g): return best[1]
  return None

def _common_factor(d: DType, is_div: bool, terms, k: int, c: int) -> UOp | None:
  # g = gcd(c, every coefficient): (g*t + k) // c == (t + k//g) // (c/g), (g*t + k) % c == ((t + k//g) % (c/g))*g + k%g
  g = math.gcd(c, *(f for _, f in terms))
  if g <= 1 or not terms: return None
  t = [(b, f // g) for b, f in terms]
  lo, hi = _range(t, k // g)
  if lo < 0 or not _fits(d, lo, hi): return None
  inner = build_sum(d, t, k // g)
  if is_div: return uop(IDIV, d, (inner, UOp.const(d, c // g)))
  return build_sum(d, [(uop(MOD, d, (inner, UOp.const(d, c // g))), g)], k % g)

# One helper per rule of the "division and remainder of a sum" section: u is IDIV or MOD of x by the constant c > 0,
# x >= 0 and exact (the rules check), so truncation is floor division. Each reads the sum once and computes on terms.

def divmod_linear(u: UOp, x: UOp, c: int) -> UOp | None:
  terms, k = split_sum(x)
  return _linear(u.dtype, u.op is IDIV, terms, k, c)

def divmod_factor(u: UOp, x: UOp, c: int) -> UOp | None:
  terms, k = split_sum(x)
  return _by_factor(u.dtype, u.op is IDIV, terms, k, c)

def mod_reduce(u: UOp, x: UOp, c: int) -> UOp | None:
  terms, k = split_sum(x)
  return _mod_reduce(u.dtype, terms, k, c)

def div_split(u: UOp, x: UOp, c: int) -> UOp | None:
  terms, k = split_sum(x)
  return _div_split(u.dtype, terms, k, c)

def div_nest(u: UOp, x: UOp, c: int) -> UOp | None:
  terms, _ = split_sum(x)
  return _div_nest(u, x, terms, c)

def divmod_common_factor(u: UOp, x: UOp, c: int) -> UOp | None:
  terms, k = split_sum(x)
  return _common_factor(u.dtype, u.op is IDIV, terms, k, c)

def fold_divmod(u: UOp, x: UOp, c: int) -> UOp | None:
  """Every stage above in rule order, for x // f inside div_nest (a helper call, not a nested graph_rewrite)."""
  d, is_div = u.dtype, u.op is IDIV
  terms, k = split_sum(x)
  if (r := _linear(d, is_div, terms, k, c)) is not None: return r
  if (r := _by_factor(d, is_div, terms, k, c)) is not None: return r
  if (r := _mod_reduce(d, terms, k, c) if not is_div else _div_split(d, terms, k, c)) is not None: return r
  if is_div and (r := _div_nest(u, x, terms, c)) is not None: return r
  return _common_factor(d, is_div, terms, k, c)

# ---- comparisons ----

def lt_fold(x: UOp, c: int) -> UOp | None:
  """sum < c where the terms with coefficient 1 stay in [0, g) and g divides c and every other coefficient:
  (g*t + r < c) == (t < c/g)."""
  terms, k = split_sum(x)
  if k: return None
  ones = [(b, f) for b, f in terms if f == 1]
  many = [(b, f) for b, f in terms if f != 1]
  if not many or not ones: return None
  g = math.gcd(c, *(f for _, f in many))
  if g <= 1: return None
  lo, hi = _range(ones, 0)
  if lo < 0 or hi >= g: return None
  return uop(CMPLT, dtypes.bool, (build_sum(x.dtype, [(b, f // g) for b, f in many], 0), UOp.const(x.dtype, c // g)))

# ---- simplification under a condition known to hold ----

def _clauses(v: UOp, negate: bool):
  """Bounds (node, lo, hi) on integer nodes that `v` (or `not v`) implies: x < c, c < x, and ANDs of them."""
  if v.op is CMPNE and v.src[1].op is CONST and v.src[1].arg is True: return _clauses(v.src[0], not negate)
  if v.op is AND and not negate: return _clauses(v.src[0], False) + _clauses(v.src[1], False)
  if v.op is not CMPLT or not dtypes.is_int(v.src[0].dtype): return []
  a, b = v.src
  if b.op is CONST:  # a < b  (not: b <= a)
    return [(a, b.arg, a.vmax)] if negate else [(a, a.vmin, b.arg - 1)]
  if a.op is CONST:  # a < b  (not: b <= a)
    return [(b, b.vmin, a.arg)] if negate else [(b, a.arg + 1, b.vmax)]
  return []

VALID_LIMIT = 256  # given_valid leaves bigger expressions alone: nested conditions would cost O(n^2) otherwise

def given_valid(v: UOp, x: UOp, negate: bool = False) -> UOp | None:
  """x simplified knowing `v` holds (`v` fails, with negate): every node `v` bounds is replaced by a variable with the
  tighter range, x is simplified (a nested graph_rewrite), and the nodes come back. None when that changes nothing,
  when x has more than VALID_LIMIT nodes, or when x is not pure index math: a LOAD inside x runs whether `v` holds or
  not, so the guard of its INDEX must not be simplified knowing `v` (it would read outside its buffer)."""
  from runtime.rewrite import graph_rewrite
  from rules.symbolic import symbolic
  bounds: dict[UOp, tuple[int, int]] = {}
  for n, lo, hi in _clauses(v, negate):
    if n.op is CONST: continue
    plo, phi = bounds.get(n, (n.vmin, n.vmax))
    bounds[n] = (max(lo, plo), min(hi, phi))
  subs: dict[UOp, UOp] = {}
  graph: set[UOp] | None = None
  for i, (n, (lo, hi)) in enumerate(bounds.items()):
    if (lo == n.vmin and hi == n.vmax) or lo > hi: continue  # nothing new, or x is never used (other rules fold v)
    if graph is None and (graph := _small_graph(x, VALID_LIMIT, pure=True)) is None: return None
    if n not in graph: continue
    subs[n] = uop(Ops.DEFINE_VAR, n.dtype, (), (f"_valid{i}", lo, hi), ("valid", n))
  if not subs: return None
  y = graph_rewrite(x.substitute(subs), symbolic)
  back = {var: n for n, var in subs.items()}
  y = y.substitute(back)
  if y is x: return None
  return graph_rewrite(y, symbolic)

def where_given(c: UOp, x: UOp, y: UOp) -> UOp | None:
  """c ? x : y with x simplified knowing c holds and y knowing it fails; None when neither changes."""
  a, b = given_valid(c, x), given_valid(c, y, True)
  if a is None and b is None: return None
  return uop(Ops.WHERE, x.dtype, (c, x if a is None else a, y if b is None else b))

def index_given(u: UOp, i: UOp, v: UOp) -> UOp | None:
  """INDEX(buf, i, valid) with i simplified knowing valid holds: a guarded load never uses i when valid fails."""
  if (j := given_valid(v, i)) is None: return None
  return uop(Ops.INDEX, u.dtype, (u.src[0], j, v) + u.src[3:], u.arg)

def and_given(a: UOp, b: UOp) -> UOp | None:
  """a & b with b simplified knowing a holds (where a fails, the AND is False whatever b is)."""
  if (c := given_valid(a, b)) is None: return None
  return uop(AND, dtypes.bool, (a, c))
