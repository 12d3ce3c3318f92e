"""Kahn's algorithm with priorities, the one dependency sort of the engine: the scheduler orders kernels with it
(tensor/engine/schedule.py) and the linearizer orders the items of each loop body (tensor/codegen/linearize.py)."""
from __future__ import annotations
import heapq
from typing import Any, Callable, Hashable, Iterable, TypeVar

T = TypeVar("T", bound=Hashable)

def dependency_order(deps: dict[T, Iterable[T]], priority: Callable[[T], Any]) -> list[T]:
  """The keys of deps, each after every key it depends on (deps[x]: the keys x waits for); among the ready ones, the
  smallest priority first (priorities must differ, so the order is deterministic). Keys on a cycle are left out: a result
  shorter than deps means there is one."""
  users: dict[T, list[T]] = {x: [] for x in deps}
  indeg: dict[T, int] = {}
  for x, ds in deps.items():
    n = 0
    for d in ds:
      users[d].append(x)
      n += 1
    indeg[x] = n
  heap = [(priority(x), i, x) for i, (x, n) in enumerate(indeg.items()) if n == 0]
  heapq.heapify(heap)
  seq = {x: i for i, x in enumerate(indeg)}
  order: list[T] = []
  while heap:
    _, _, x = heapq.heappop(heap)
    order.append(x)
    for u in users[x]:
      indeg[u] -= 1
      if indeg[u] == 0: heapq.heappush(heap, (priority(u), seq[u], u))
  return order

__all__ = ["dependency_order"]
