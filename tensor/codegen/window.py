"""WINDOW: a kernel that keeps the old value of its output outside a window of its output loops loops over the window
only. An assign into a slice of a buffer, `cache[:, :, sp:sp + T] = v`, is a kernel over the whole buffer storing
`inside ? v : cache` (the scheduler writes whole buffers; the old value read through the output itself,
rules/kernelize_helpers.py); here its window's loops become loops over the window's length from where it begins, so the
kernel reads and writes T rows, not the cache. Run by tensor/codegen after rangeify and symbolic, before the opts, on
every kernel (it changes no value); the rewrite is rules/opt.rules' `window`, this module finds the window.

The window is an AND of bounds `lo <= r + e`, `r + e < hi` on output loops r, each bound free of loops and loads (sizes,
bound Variables); anything else leaves the kernel as it is.
"""
from __future__ import annotations
from runtime.dtype import dtypes
from runtime.ops import Ops
from runtime.rewrite import graph_rewrite
from runtime.uop import UOp, uop

def window(sink: UOp) -> UOp:
  """The kernel over its window only, or as it is when it has none (see the module's doc)."""
  if len(sink.src) != 1 or (st := sink.src[0]).op is not Ops.STORE or len(st.src) != 2: return sink
  idx, value = st.src
  if idx.op is not Ops.INDEX or len(idx.src) != 2 or value.op is not Ops.WHERE: return sink
  cond, _, old = value.src
  # the value elsewhere is the element's old value: a load of the very element stored (the same buffer, the same index)
  if old.op is not Ops.LOAD or (o := old.src[0]).op is not Ops.INDEX or o.src[:2] != idx.src or not all(_true(v) for v in o.src[2:]):
    return sink
  reduced = {r for u in sink.toposort() if u.op is Ops.REDUCE for r in u.src[1:]}
  bounds: dict[UOp, tuple[list[UOp], list[UOp]]] = {}
  for c in _clauses(cond):
    if (b := _bound(c)) is None or b[0] in reduced: return sink
    r, lo, hi = b
    los, his = bounds.setdefault(r, ([], []))
    (los if lo is not None else his).append(lo if lo is not None else hi)  # type: ignore[arg-type]
  if not bounds: return sink
  shift = {}
  for r, (los, his) in bounds.items():
    lo = _extreme([_const(r, 0)] + los, largest=True)
    hi = _extreme([r.src[0]] + his, largest=False)
    n = uop(Ops.ADD, r.dtype, (hi, uop(Ops.MUL, r.dtype, (lo, _const(r, -1)))))
    if n.vmin < 0: n = uop(Ops.MAX, r.dtype, (n, _const(r, 0)))
    shift[r] = uop(Ops.ADD, r.dtype, (uop(Ops.RANGE, r.dtype, (n,), r.arg), lo))
  from rules.opt import window as rules, Window
  from rules.symbolic import symbolic
  return graph_rewrite(graph_rewrite(sink, rules, Window(value, shift), bottom_up=True, name="window"), symbolic, name="symbolic")

def _true(v: UOp) -> bool: return v.op is Ops.CONST and v.arg is True

def _const(like: UOp, v: int) -> UOp: return uop(Ops.CONST, like.dtype, (), v)

def _clauses(c: UOp) -> list[UOp]:
  out, stack = [], [c]
  while stack:
    u = stack.pop()
    if u.op is Ops.AND and u.dtype.scalar is u.src[0].dtype.scalar and u.dtype.count == 1: stack.extend(u.src)
    else: out.append(u)
  return out

_BOUND_OPS = frozenset({Ops.CONST, Ops.DEFINE_VAR, Ops.ADD, Ops.MUL, Ops.MAX, Ops.NEG, Ops.IDIV, Ops.MOD, Ops.CAST})

def _invariant(e: UOp) -> bool:
  """e is the same in every iteration of every loop: constants, bound Variables and arithmetic on them."""
  return all(u.op in _BOUND_OPS for u in e.toposort())

def _split(e: UOp) -> tuple[UOp, UOp | None] | None:
  """(r, rest) with e == r + rest (rest None for 0), r a loop and rest invariant; None for any other e."""
  if e.op is Ops.RANGE: return e, None
  if e.op is not Ops.ADD: return None
  for a, b in (e.src, e.src[::-1]):
    if _invariant(b) and (s := _split(a)) is not None: return s[0], b if s[1] is None else uop(Ops.ADD, e.dtype, (s[1], b))
  return None

def _bound(c: UOp) -> tuple[UOp, UOp | None, UOp | None] | None:
  """A clause as (loop r, lo, None) for lo <= r, (r, None, hi) for r < hi; None when it is no such bound."""
  neg = c.op is Ops.CMPNE and c.src[1].op is Ops.CONST and c.src[1].arg is True
  if neg: c = c.src[0]
  if c.op is not Ops.CMPLT: return None
  a, b = c.src
  if a.dtype.count != 1 or not _is_int(a.dtype): return None
  def minus(x: UOp, rest: UOp | None) -> UOp: return x if rest is None else uop(Ops.ADD, x.dtype, (x, uop(Ops.MUL, x.dtype, (rest, _const(x, -1)))))
  def plus1(x: UOp) -> UOp: return uop(Ops.ADD, x.dtype, (x, _const(x, 1)))
  if _invariant(b) and (s := _split(a)) is not None:   # r + rest < b, or (neg) r + rest >= b
    r, rest = s
    return (r, minus(b, rest), None) if neg else (r, None, minus(b, rest))
  if _invariant(a) and (s := _split(b)) is not None:   # a < r + rest, or (neg) a >= r + rest
    r, rest = s
    return (r, None, plus1(minus(a, rest))) if neg else (r, plus1(minus(a, rest)), None)
  return None

def _is_int(dt) -> bool: return dtypes.is_int(dt) and dt is not dtypes.bool

def _extreme(xs: list[UOp], largest: bool) -> UOp:
  """The largest (or smallest) of index expressions, leaving out those range analysis shows never matter."""
  big, xs = largest, list(dict.fromkeys(xs))
  keep = [x for x in xs if not any(y is not x and (y.vmin >= x.vmax if big else y.vmax <= x.vmin) for y in xs)] or xs[:1]
  def neg(x: UOp) -> UOp: return uop(Ops.MUL, x.dtype, (x, _const(x, -1)))
  out = keep[0]
  for x in keep[1:]: out = uop(Ops.MAX, x.dtype, (out, x)) if big else neg(uop(Ops.MAX, x.dtype, (neg(out), neg(x))))  # min(a, b) = -max(-a, -b)
  return out
