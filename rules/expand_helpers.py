"""Helpers for rules/expand.rules: lanes of values (hand-written; runtime only).

A value with lanes is UNROLL(lane0, lane1, ...) with arg ((uid, n), ...): its lane axes, in uid order; lanes are in
row-major order of the axes (the last axis varies fastest). A lane is named by its coordinates, {uid: j}. An op reading
values with different axes has the union of their axes; a value without an axis is the same in each of its lanes.
"""
from __future__ import annotations
import functools, itertools
from runtime.ops import Ops
from runtime.uop import UOp

def axes_of(xs: tuple[UOp, ...]) -> tuple:
  """The union of the lane axes of xs, in uid order."""
  return tuple(sorted({a for x in xs if x.op is Ops.UNROLL for a in x.arg}))

@functools.lru_cache(maxsize=4096)  # a kernel asks for the same few grids thousands of times (a cold CNN step: 20,000)
def grid(axes: tuple) -> tuple[dict[int, int], ...]:
  """The coordinates of every lane of `axes`, in row-major order (shared: callers read them, never change them)."""
  return tuple(dict(zip([uid for uid, _ in axes], js)) for js in itertools.product(*[range(n) for _, n in axes]))

def lane(x: UOp, at: dict[int, int]) -> UOp:
  """x at the lane with coordinates `at` (x itself when it has no lanes; its axes must be among at's)."""
  if x.op is not Ops.UNROLL: return x
  i = 0
  for uid, n in x.arg: i = i * n + at[uid]
  return x.src[i]

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

CACHE_LINE = 64  # bytes: one prefetch asks for a line

def flattened(srcs: tuple[UOp, ...]) -> tuple[UOp, ...]:
  """The sources with each UNROLL (the stores of lanes) replaced by its lanes."""
  return tuple(x for s in srcs for x in (s.src if s.op is Ops.UNROLL else (s,)))
