"""Realize from several threads at once (issue 10: `Set changed size during iteration` in apply_becomes): threads realizing
distinct graphs over shared inputs, the same lazy tensors, and graphs that build on each other's results, checked
against numpy. Scheduling and the update of live tensors hold one lock (the engine's lock, engine.lock).
"""
import sys, threading
import numpy as np
from tensor import Tensor

def run_threads(n: int, fn) -> list:
  """fn(i) in n threads started together; the results, re-raising the first exception."""
  out: list = [None] * n
  errors: list = []
  start = threading.Barrier(n)
  def work(i: int):
    try:
      start.wait()
      out[i] = fn(i)
    except BaseException as e: errors.append(e)
  ts = [threading.Thread(target=work, args=(i,)) for i in range(n)]
  interval = sys.getswitchinterval()
  sys.setswitchinterval(1e-5)  # switch threads often, so races show up in a short test
  try:
    for t in ts: t.start()
    for t in ts: t.join()
  finally: sys.setswitchinterval(interval)
  if errors: raise errors[0]
  return out

A = np.random.default_rng(0).uniform(-1, 1, (16, 64)).astype(np.float32)

def test_distinct_graphs_over_a_shared_input():
  shared = Tensor(A).realize()
  def work(i: int):
    got = []
    for j in range(15):
      x = Tensor(np.full((16, 64), i, np.float32))
      # new lazy tensors in every step, so each realize schedules while other threads create tensors and realize
      y = ((shared * (j + 1) + x).relu().sum(1) - shared.max(1)).realize()
      got.append(np.allclose(y.numpy(), np.maximum(A * (j + 1) + i, 0).sum(1) - A.max(1), rtol=1e-5, atol=1e-4))
    return all(got)
  assert all(run_threads(6, work))

def test_the_same_lazy_tensors_realized_by_every_thread():
  for _ in range(5):
    base = Tensor(A).realize()
    lazy = [(base * k).sum(0) + k for k in range(4)]
    outs = run_threads(6, lambda i: [t.numpy() for t in lazy[i % 4:] + lazy[:i % 4]])
    for i, got in enumerate(outs):
      for k, g in zip(list(range(4))[i % 4:] + list(range(4))[:i % 4], got):
        np.testing.assert_allclose(g, (A * k).sum(0) + k, rtol=1e-5, atol=1e-4)

def test_assigns_from_threads_each_apply_once():
  # each thread increments its own counter (two threads assigning to one buffer would race in the user's code, as numpy would)
  counters = [Tensor(np.zeros(8, np.float32)).realize() for _ in range(6)]
  def work(i: int):
    for _ in range(20): counters[i].assign(counters[i] + 1).realize()
  run_threads(6, work)
  for c in counters: np.testing.assert_array_equal(c.numpy(), np.full(8, 20, np.float32))

def test_many_small_realizes_while_other_threads_make_tensors():
  def work(i: int):
    ok = True
    for j in range(200):
      t = Tensor([float(i), float(j)]) * 2 + 1
      ok &= t.tolist() == [2.0 * i + 1, 2.0 * j + 1]
    return ok
  assert all(run_threads(6, work))
