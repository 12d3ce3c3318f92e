"""Op chains (tensor/engine/schedule_cache.py): a tensor made by a chain of number ops on a realized buffer (`x * 1.0001 +
0.5`) carries the interned form of its graph, so realize looks its schedule up by the form's key instead of walking the
graph. That key must be the walk's key for the same graph (fuzzed), a trace must never be used once the tensor's graph
changed, and every distinct graph must stay distinct (numbers, their classes and signs, ops, operand order, dtypes)."""
from __future__ import annotations
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from runtime.dtype import dtypes
from tensor import Tensor
from tensor.engine.schedule import MAX_KERNEL_DEPTH, lookup
from tensor.engine.schedule_cache import chain_shape, roots_shape
from tensor.engine.state import ENGINE
from tensor.tensor import chain_of

RNG = np.random.default_rng(5)
OPS = {"add": (lambda t, c: t + c, lambda a, c: a + c), "radd": (lambda t, c: c + t, lambda a, c: c + a),
       "sub": (lambda t, c: t - c, lambda a, c: a - c), "rsub": (lambda t, c: c - t, lambda a, c: c - a),
       "mul": (lambda t, c: t * c, lambda a, c: a * c), "max": (lambda t, c: t.maximum(c), lambda a, c: np.maximum(a, c))}

def chain_key(t: Tensor):
  trace = t._trace
  assert trace is not None and trace[0] is t.uop
  return chain_shape(trace[1], trace[0], trace[2], (MAX_KERNEL_DEPTH,))

@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(sorted(OPS)), st.sampled_from([1, 2, -3, 0.5, 1.0, 2.0, -0.25, 7.5])), min_size=1, max_size=5),
       st.sampled_from([dtypes.float32, dtypes.int32]))
def test_a_chains_key_is_the_walks_key_and_its_values_are_right(steps, dtype):
  a = RNG.integers(-9, 9, 16).astype(dtypes.to_numpy(dtype))
  for _ in range(3):  # the first realize walks and teaches the chain its key; the others look it up by it
    t, want = Tensor(a, dtype=dtype).realize(), a
    for name, c in steps:
      t, want = OPS[name][0](t, c), OPS[name][1](want, np.float32(c) if isinstance(c, float) else want.dtype.type(c))
    shape = chain_key(t)
    if shape is not None: assert shape.key == roots_shape((t.uop,), (MAX_KERNEL_DEPTH,)).key
    np.testing.assert_allclose(t.realize().numpy(), want, rtol=1e-6)

def test_a_chain_is_looked_up_without_a_walk_once_known():
  x = Tensor(RNG.standard_normal(16).astype(np.float32)).realize()
  for _ in range(2): (x * 1.0001 + 0.5).realize()
  y = x * 1.0001 + 0.5
  assert chain_key(y) is not None
  found = lookup([y.uop], ENGINE, chain_of(y))
  assert found.recipe is not None and found.shape.topo is None  # found by the chain's key, no walk
  np.testing.assert_allclose(y.realize().numpy(), x.numpy() * np.float32(1.0001) + np.float32(0.5), rtol=1e-6)

def test_a_trace_is_ignored_once_the_graph_changed():
  x = Tensor(np.arange(8, dtype=np.float32)).realize()
  for _ in range(3): ((x + 1) * 2).realize()
  y = x + 1
  z = y * 2
  y.realize()  # z now reads y's buffer: its graph is another one, and the trace of the old one is gone
  assert z._trace is None or z._trace[0] is not z.uop
  assert chain_of(z) is None and lookup([z.uop], ENGINE, chain_of(z)).shape.key == roots_shape((z.uop,), (MAX_KERNEL_DEPTH,)).key
  np.testing.assert_array_equal(z.realize().numpy(), (np.arange(8) + 1) * 2)

def test_graphs_that_differ_stay_apart():
  x = Tensor(np.array([1.0, -2.0, 3.0, -4.0], dtype=np.float32)).realize()
  xi = Tensor(np.array([1, -2, 3, -4], dtype=np.int32)).realize()
  cases = [(lambda: x * 0.0, [0.0, -0.0, 0.0, -0.0]), (lambda: x * -0.0, [-0.0, 0.0, -0.0, 0.0]),  # signed zeros: two constants
           (lambda: x - 2, [-1, -4, 1, -6]), (lambda: 2 - x, [1, 4, -1, 6]),  # operand order
           (lambda: xi * 2, [2, -4, 6, -8]), (lambda: xi * 2.0, [2.0, -4.0, 6.0, -8.0]),  # an int and a float number
           (lambda: xi + True, [2, -1, 4, -3]), (lambda: x + 1 + 1, [3, 0, 5, -2]), (lambda: x + 2, [3, 0, 5, -2])]
  for _ in range(3):
    for make, want in cases:
      out = make().realize()
      got = out.numpy()
      np.testing.assert_array_equal(got, np.array(want, dtype=got.dtype))
      np.testing.assert_array_equal(np.signbit(got), np.signbit(np.array(want, dtype=np.float64)))
      if make is cases[5][0]: assert out.dtype is dtypes.float32

@pytest.mark.optimized
def test_a_chains_prepared_launches_follow_the_cache_and_the_variant():
  from runtime.helpers import Context
  from tensor.engine import prepared
  x = Tensor(np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32)).realize()  # 4 elements: the optimizer unrolls the loop
  seen: list = []
  orig, orig_single = prepared.Call.__call__, prepared.Prepared.run_single
  def spy(self, *args):
    seen.append(self)
    orig(self, *args)
  def spy_single(self, *args):  # the Call it runs inline (Prepared.call)
    if self.call is not None: seen.append(self.call)
    return orig_single(self, *args)
  prepared.Call.__call__, prepared.Prepared.run_single = spy, spy_single
  try:
    for _ in range(4): (x * 3 + 2).realize()  # walked, found by the chain, then run straight from it
    assert seen and seen[-1].runner.program.opts
    ENGINE.schedules.clear()  # what the chain kept is stale now (the counts start again): the next realize schedules again
    np.testing.assert_array_equal((x * 3 + 2).realize().numpy(), [5, 8, 11, 14])
    assert (ENGINE.schedules.hits, ENGINE.schedules.misses) == (0, 1)
    for _ in range(3): (x * 3 + 2).realize()
    with Context(NOOPT=1):
      seen.clear()
      np.testing.assert_array_equal((x * 3 + 2).realize().numpy(), [5, 8, 11, 14])
      assert [c.runner.program.opts for c in seen] == [[]]  # not the optimized program the chain ran before
  finally: prepared.Call.__call__, prepared.Prepared.run_single = orig, orig_single

def test_a_realized_result_keeps_no_operand_alive():
  # a trace names the graph it was made for: once the tensor is realized (or assigned) it must let that graph go, or the
  # operand's memory lives as long as the result
  import gc, weakref
  from tensor.engine.state import ENGINE
  buffers = ENGINE.storage.buffers
  for _ in range(3):
    x = Tensor(RNG.standard_normal(4096).astype(np.float32)).realize()
    memory = weakref.ref(buffers[x.uop])
    y = (x * 2 + 1).realize()
    del x
    gc.collect()
    assert memory() is None  # x's buffer is gone: y holds no trace of x's graph
    z = y * 3
    z.assign(y * 4)  # z's graph is another one now
    assert z._trace is None

def test_a_traced_tensor_pickles_and_copies_without_its_trace():
  # the trace's chain keeps prepared launches (compiled programs): not picklable, and not the tensor's state
  import copy, pickle
  x = Tensor(np.arange(4, dtype=np.float32)).realize()
  for _ in range(4): (x * 5).realize()  # the chain of x * 5 keeps its prepared launches now
  y = x * 5
  assert y._trace is not None
  for other in (pickle.loads(pickle.dumps(y)), copy.copy(y), copy.deepcopy(y)):
    assert other._trace is None and other.uop.op is y.uop.op and other.shape == y.shape
