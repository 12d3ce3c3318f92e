"""The schedule cache (tensor/engine/schedule_cache.py): a graph of the same structure as one scheduled before reuses its
schedule with its own buffers, gives what a fresh schedule gives (fuzzed over random graphs), and any change to the graph
(an op, a constant, a shape, a dtype, which inputs are the same buffer) misses."""
from __future__ import annotations
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from runtime.dtype import dtypes
from runtime.ops import Ops
from runtime.uop import UOp, uop
from tensor import Tensor
from tensor.engine import schedule
from tensor.engine.realize import schedule_of
from tensor.engine.schedule_cache import graph_shape
from tensor.engine.state import ENGINE, Engine

RNG = np.random.default_rng(1)

def rand(*shape) -> np.ndarray: return RNG.standard_normal(shape).astype(np.float32)

def sink_of(*ts: Tensor) -> UOp: return uop(Ops.SINK, dtypes.void, tuple(t.uop for t in ts))

def hits_misses() -> tuple[int, int]: return ENGINE.schedules.hits, ENGINE.schedules.misses

def realize_counting(t: Tensor) -> tuple[int, int]:
  """(hits, misses) of the schedule cache while t is realized."""
  h, m = hits_misses()
  t.realize()
  h2, m2 = hits_misses()
  return h2 - h, m2 - m

def test_the_same_op_on_other_buffers_hits_and_computes_with_them():
  a, b = rand(16), rand(16)
  A, B = Tensor(a).realize(), Tensor(b).realize()
  realize_counting(A * 3 + 1)  # scheduled (or found) once
  out = B * 3 + 1
  assert realize_counting(out) == (1, 0)
  np.testing.assert_allclose(out.numpy(), b * 3 + 1, rtol=1e-6)
  # the result is a new buffer: the first result is untouched
  again = A * 3 + 1
  assert realize_counting(again) == (1, 0)
  np.testing.assert_allclose(again.numpy(), a * 3 + 1, rtol=1e-6)

@pytest.mark.parametrize("change", ["constant", "op", "shape", "dtype", "same buffer twice", "reduce axis", "contiguous"])
def test_anything_changing_the_graph_misses(change):
  a, b = rand(4, 8), rand(4, 8)
  A, B = Tensor(a).realize(), Tensor(b).realize()
  base = lambda x, y: ((x + y) * 2.5).sum(1)  # noqa: E731
  realize_counting(base(A, B))
  assert realize_counting(base(B, A))[0] == 1  # the inputs swapped: same structure
  changed = {
    "constant": (lambda: ((A + B) * 2.25).sum(1), ((a + b) * 2.25).sum(1)),
    "op": (lambda: ((A - B) * 2.5).sum(1), ((a - b) * 2.5).sum(1)),
    "shape": (lambda: ((A.reshape(8, 4) + B.reshape(8, 4)) * 2.5).sum(1), ((a.reshape(8, 4) + b.reshape(8, 4)) * 2.5).sum(1)),
    "dtype": (lambda: ((A.cast(dtypes.float16) + B.cast(dtypes.float16)) * 2.5).sum(1).cast(dtypes.float32),
              ((a.astype(np.float16) + b.astype(np.float16)) * np.float16(2.5)).sum(1, dtype=np.float32)),
    "same buffer twice": (lambda: ((A + A) * 2.5).sum(1), ((a + a) * 2.5).sum(1)),
    "reduce axis": (lambda: ((A + B) * 2.5).sum(0), ((a + b) * 2.5).sum(0)),
    "contiguous": (lambda: ((A + B).contiguous() * 2.5).sum(1), ((a + b) * 2.5).sum(1)),
  }
  make, want = changed[change]
  out = make()
  hit, miss = realize_counting(out)
  # the first time in this process it is a miss; it may have been scheduled by an earlier test, so look at the keys instead
  assert miss == 1 or hit == 1
  np.testing.assert_allclose(out.numpy(), want, rtol=1e-2 if change == "dtype" else 1e-5, atol=1e-2 if change == "dtype" else 1e-5)
  assert graph_shape(sink_of(make())).key != graph_shape(sink_of(base(A, B))).key

def test_a_realize_chain_reuses_one_schedule():
  x0 = rand(16)
  x, want = Tensor(x0).realize(), x0.astype(np.float64)
  h0, m0 = hits_misses()
  for _ in range(50):
    x = (x * 1.0001 + 0.5).realize()
    want = (want * np.float32(1.0001)).astype(np.float32) + np.float32(0.5)
  h1, m1 = hits_misses()
  assert m1 - m0 <= 1 and h1 - h0 >= 49
  np.testing.assert_allclose(x.numpy(), want, rtol=1e-5)

def test_assign_in_a_loop_uses_the_cache_and_stays_right():
  w0 = rand(8)
  w = Tensor(w0).realize()
  want = w0.copy()
  h0, _ = hits_misses()
  for i in range(10):
    w.assign(w * 0.5 + 1).realize()
    want = want * np.float32(0.5) + np.float32(1)
  assert hits_misses()[0] - h0 >= 8
  np.testing.assert_allclose(w.numpy(), want, rtol=1e-6)

def test_a_pending_reader_of_an_assigned_buffer_is_never_cached():
  # the reader must be scheduled with the assign (and before it): the schedule depends on more than the graph realized
  a0 = rand(8)
  for _ in range(3):
    a = Tensor(a0).realize()
    old = a * 2  # reads a's old values, not realized yet
    h, m = hits_misses()
    a.assign(a + 1).realize()
    assert hits_misses() == (h, m)
    np.testing.assert_allclose(old.numpy(), a0 * 2, rtol=1e-6)
    np.testing.assert_allclose(a.numpy(), a0 + 1, rtol=1e-6)

def test_tensors_made_from_numbers_are_slots_not_constants():
  # Tensor.ones(n) has a UNIQUE of its own each time: the same program with new ones hits
  A = Tensor(rand(4)).realize()
  realize_counting(A + Tensor.ones(4))
  out = A + Tensor.ones(4)
  assert realize_counting(out) == (1, 0)
  np.testing.assert_allclose(out.numpy(), A.numpy() + 1, rtol=1e-6)

def test_the_cache_can_be_turned_off(monkeypatch):
  monkeypatch.setattr(schedule, "SCHEDULE_CACHE", 0)
  A = Tensor(rand(4)).realize()
  h, m = hits_misses()
  for _ in range(3): (A + 7).realize()
  assert hits_misses() == (h, m)

# ---- fuzz: random graphs, cached against fresh ----

UNARY = {"neg": (lambda t: -t, lambda a: -a), "relu": (lambda t: t.relu(), lambda a: np.maximum(a, 0)),
         "exp2": (lambda t: (t * 0.25).exp2(), lambda a: np.exp2(a * np.float32(0.25)))}
BINARY = {"add": (lambda x, y: x + y, lambda a, b: a + b), "mul": (lambda x, y: x * y, lambda a, b: a * b),
          "max": (lambda x, y: x.maximum(y), lambda a, b: np.maximum(a, b))}

@st.composite
def programs(draw):
  """A random program over 3 inputs of shape (4, 4): each step makes a node from earlier ones."""
  steps = []
  for i in range(draw(st.integers(1, 6))):
    n = 3 + i  # nodes so far
    kind = draw(st.sampled_from(["unary", "binary", "sum", "transpose", "contiguous", "realize"]))
    if kind == "unary": steps.append((kind, draw(st.sampled_from(sorted(UNARY))), draw(st.integers(0, n - 1))))
    elif kind == "binary": steps.append((kind, draw(st.sampled_from(sorted(BINARY))), draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))))
    elif kind == "sum": steps.append((kind, draw(st.integers(0, 1)), draw(st.integers(0, n - 1))))
    else: steps.append((kind, None, draw(st.integers(0, n - 1))))
  return steps

def run_program(steps, xs: list):
  """The program on tensors (xs Tensors) or on numpy arrays: the last node."""
  tensor = isinstance(xs[0], Tensor)
  nodes = list(xs)
  for kind, what, *args in steps:
    src = [nodes[i] for i in args]
    if kind == "unary": out = UNARY[what][0 if tensor else 1](src[0])
    elif kind == "binary": out = BINARY[what][0 if tensor else 1](*src)
    elif kind == "sum": out = src[0].sum(what, keepdim=True).expand(4, 4) if tensor else np.broadcast_to(src[0].sum(what, keepdims=True), (4, 4))
    elif kind == "transpose": out = src[0].T
    elif kind == "contiguous": out = src[0].contiguous() if tensor else src[0]
    else: out = src[0].realize() if tensor else src[0]
    nodes.append(out)
  return nodes[-1] + 0.0 if tensor else nodes[-1]

def kernel_asts(t: Tensor) -> list:
  _, becomes = schedule.kernelize_map([t.uop])
  return [k.arg.ast for k in schedule_of([becomes.get(t.uop, t.uop)])]

@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_fuzz_cached_schedule_matches_a_fresh_one(steps):
  arrays = [[rand(4, 4) for _ in range(3)] for _ in range(2)]
  for xs in arrays:  # the second run has the first's structure: a hit
    ts = [Tensor(a).realize() for a in xs]
    out = run_program(steps, ts)
    fresh = schedule.SCHEDULE_CACHE
    try:
      schedule.SCHEDULE_CACHE = 0
      want_asts = kernel_asts(out)
    finally: schedule.SCHEDULE_CACHE = fresh
    got_asts = kernel_asts(out)  # from the cache after the first pass
    assert got_asts == want_asts
    assert realize_counting(out) == (1, 0)  # kernel_asts scheduled this very graph
    np.testing.assert_allclose(out.numpy(), run_program(steps, xs), rtol=1e-4, atol=1e-4)

def test_an_engine_of_its_own_starts_empty():
  # the engine's state is one object: another engine shares no cache with the process's
  from tensor.tensor import realize
  mine = Engine(storage=ENGINE.storage)
  A = Tensor(rand(4)).realize()
  (A * 9).realize()
  out = A * 9
  realize([out], mine)
  assert (mine.schedules.hits, mine.schedules.misses) == (0, 1) and len(mine.programs) == 1
  np.testing.assert_allclose(out.numpy(), A.numpy() * 9, rtol=1e-6)
