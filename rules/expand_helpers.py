"""Helpers for rules/expand.rules: lanes of values (hand-written; runtime only).

A value with lanes is UNROLL(lane0, lane1, ...) with arg ((uid, n), ...): its lane axes, in uid order; lanes are in
row-major order of the axes (the last axis varies fastest). An op reading values with different axes has the union of
their axes; a value without an axis is the same in each of its lanes.
"""
from __future__ import annotations
from runtime.dtype import dtypes
from runtime.ops import Ops
from runtime.uop import UOp, uop

def has_lanes(u: UOp) -> bool: return any(s.op is Ops.UNROLL for s in u.src)

def _size(axes: tuple) -> int:
  n = 1
  for _, k in axes: n *= k
  return n

def lane(s: UOp, axes: tuple, k: int) -> UOp:
  """Lane k (of the lanes of `axes`) of s: s itself when it has no lanes; its axes must be among `axes`."""
  if s.op is not Ops.UNROLL: return s
  coords: dict[int, int] = {}
  for uid, n in reversed(axes): k, coords[uid] = divmod(k, n)
  i = 0
  for uid, n in s.arg: i = i * n + coords[uid]
  return s.src[i]

def per_lane(u: UOp) -> UOp:
  """u once per lane of the union of its sources' lane axes."""
  axes = tuple(sorted({a for s in u.src if s.op is Ops.UNROLL for a in s.arg}))
  return uop(Ops.UNROLL, u.dtype, tuple(uop(u.op, u.dtype, tuple(lane(s, axes, k) for s in u.src), u.arg, u.tag) for k in range(_size(axes))), axes)

def contracted(c: UOp, x: UOp) -> UOp:
  """CONTRACT(x) over lane axis c.arg: the lanes of that axis as one vector (per lane of x's other axes)."""
  n = c.dtype.count
  axes = x.arg if x.op is Ops.UNROLL else ()
  rest = tuple(a for a in axes if a[0] != c.arg)
  full = tuple(sorted(rest + ((c.arg, n),)))  # every lane of x, the contracted axis included
  pos = [a[0] for a in full].index(c.arg)
  vecs = []
  for k in range(_size(rest)):
    # the lanes of the contracted axis at lane k of the others: insert its coordinate at its place in `full`
    coords, kk = [], k
    for _, m in reversed(rest): kk, j = divmod(kk, m); coords.insert(0, j)  # noqa: E702
    flat = lambda j: _flat(full, coords[:pos] + [j] + coords[pos:])  # noqa: E731
    vecs.append(uop(Ops.VECTORIZE, c.dtype, tuple(lane(x, full, flat(j)) for j in range(n))))
  return uop(Ops.UNROLL, c.dtype, tuple(vecs), rest) if rest else vecs[0]

def _flat(axes: tuple, coords: list[int]) -> int:
  i = 0
  for (_, n), j in zip(axes, coords): i = i * n + j
  return i

def split_offset(i: UOp) -> tuple[tuple[UOp, ...], int]:
  """An index as (its terms without constants, in a fixed order; the sum of its constant terms)."""
  terms, const, stack = [], 0, [i]
  while stack:
    t = stack.pop()
    if t.op is Ops.ADD: stack.extend(t.src)
    elif t.op is Ops.CONST: const += t.arg
    else: terms.append(t)
  return tuple(sorted(terms, key=id)), const

def consecutive(idxs: list[UOp]) -> bool:
  """Whether these indices are i, i+1, i+2, ... (as symbolic left them: the same terms, constants one apart)."""
  first = split_offset(idxs[0])
  return all(split_offset(i) == (first[0], first[1] + k) for k, i in enumerate(idxs))

def store_lanes(s: UOp) -> UOp:
  """A store of lanes: per run of the innermost lane axis, one store of a vector when it writes consecutive elements,
  else one store per lane. The stores come back as UNROLL(stores...) for the SINK to take in (flattened)."""
  idx, val = s.src
  axes = tuple(sorted({a for x in (idx, val) if x.op is Ops.UNROLL for a in x.arg}))
  run = axes[-1][1]
  stores: list[UOp] = []
  for g in range(0, _size(axes), run):
    idxs, vals = [lane(idx, axes, k) for k in range(g, g + run)], [lane(val, axes, k) for k in range(g, g + run)]
    if run > 1 and all(len(i.src) == 2 and i.src[0] is idxs[0].src[0] for i in idxs) and consecutive([i.src[1] for i in idxs]):
      stores.append(uop(Ops.STORE, dtypes.void, (idxs[0], uop(Ops.VECTORIZE, val.dtype.vec(run), tuple(vals)))))
    else: stores += [uop(Ops.STORE, dtypes.void, (i, v)) for i, v in zip(idxs, vals)]
  return uop(Ops.UNROLL, dtypes.void, tuple(stores), axes)

CACHE_LINE = 64  # bytes: one prefetch asks for a line

def prefetch_lanes(c: UOp) -> UOp:
  """A prefetch of lanes: per run of the innermost lane axis, one prefetch per cache line when the lanes read consecutive
  elements, else one per lane. They come back as UNROLL(prefetches...) for the SINK to take in (flattened)."""
  idx = c.src[0]
  axes, run = idx.arg, idx.arg[-1][1]
  step = max(1, CACHE_LINE // idx.src[0].dtype.base.itemsize)
  out: list[UOp] = []
  for g in range(0, len(idx.src), run):
    lanes = idx.src[g:g + run]
    whole = run > 1 and all(i.src[0] is lanes[0].src[0] for i in lanes) and consecutive([i.src[1] for i in lanes])
    out += [c.replace(src=(i,)) for k, i in enumerate(lanes) if not whole or k % step == 0]
  return uop(Ops.UNROLL, dtypes.void, tuple(out), axes)

def flattened(srcs: tuple[UOp, ...]) -> UOp:
  return uop(Ops.SINK, dtypes.void, tuple(x for s in srcs for x in (s.src if s.op is Ops.UNROLL else (s,))))
