"""Tensor constants are not part of the schedule cache's key for good: after two graphs that differ only in their constant
values, one launcher serves every value (`t * float(i)` in a loop hits), each kernel compiled once with its constants as
parameters. The values must stay right: fuzzed against numpy over programs and values."""
from __future__ import annotations
import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st
from tensor import Tensor
from tensor.engine.schedule_cache import Launcher
from tensor.engine.state import ENGINE

RNG = np.random.default_rng(7)
A = RNG.standard_normal(64).astype(np.float32)
M = RNG.standard_normal((8, 8)).astype(np.float32)
I = RNG.integers(-50, 50, 64).astype(np.int32)

# each program: (tensor fn, numpy fn) of two constants
PROGRAMS = {
  "axpb": (lambda t, c, d: t * c + d, lambda x, c, d: x * np.float32(c) + np.float32(d)),
  "sum_scale": (lambda t, c, d: (t.reshape(8, 8) * c).sum(1) + d, lambda x, c, d: (x.reshape(8, 8) * np.float32(c)).sum(1) + np.float32(d)),
  "where": (lambda t, c, d: (t < c).where(t, d), lambda x, c, d: np.where(x < np.float32(c), x, np.float32(d))),
  "max_sub": (lambda t, c, d: (t - c).maximum(d) * c, lambda x, c, d: np.maximum(x - np.float32(c), np.float32(d)) * np.float32(c)),
}

def numbers(): return st.floats(-100, 100, allow_nan=False, width=32).filter(lambda v: v not in (0.0, 1.0))

def test_a_constant_in_a_loop_hits_with_one_program_and_right_values():
  a = Tensor(A).realize()
  for i in range(2, 6): (a * float(i) + 0.5).realize()  # two samples teach the form, the rest hit
  h, m, n_programs = ENGINE.schedules.hits, ENGINE.schedules.misses, len(ENGINE.programs)
  for i in range(6, 30):
    out = (a * float(i) + 0.5).realize()
    np.testing.assert_allclose(out.numpy(), A * np.float32(i) + np.float32(0.5), rtol=1e-6)
  assert (ENGINE.schedules.hits - h, ENGINE.schedules.misses - m) == (24, 0)
  assert len(ENGINE.programs) == n_programs  # the parametrized kernel serves every value
  assert any(f.__class__ is Launcher for f in ENGINE.schedules.forms.values())

@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(PROGRAMS)), st.lists(st.tuples(numbers(), numbers()), min_size=3, max_size=6))
def test_values_stay_right_whatever_the_constants(name, values):
  fn, ref = PROGRAMS[name]
  a = Tensor(A).realize()
  for c, d in values:
    out = fn(a, c, d).realize()
    np.testing.assert_allclose(out.numpy(), ref(A, c, d), rtol=1e-5, atol=1e-4)

def test_integer_constants_and_a_repeated_constant():
  t = Tensor(I).realize()
  for k in range(3, 12):
    out = (t * k + (k + 1)).realize()  # two distinct constants
    np.testing.assert_array_equal(out.numpy(), I * k + (k + 1))
    same = (t * k + k).realize()  # one constant used twice: another form
    np.testing.assert_array_equal(same.numpy(), I * k + k)

def test_a_matrix_graph_with_several_kernels():
  m = Tensor(M).realize()
  for k in (1.5, 2.5, 3.5, -4.25, 7.0):
    out = ((m * k).softmax(1) * (k + 1)).realize()
    x = M * np.float32(k)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(out.numpy(), e / e.sum(1, keepdims=True) * np.float32(k + 1), rtol=1e-5, atol=1e-6)

def test_a_number_broadcast_to_two_shapes_keeps_its_link():
  # the walk takes a broadcast number (x + c) as one entry: the same number broadcast to two shapes must stay one constant,
  # so `x*c + y*c` and `x*c + y*d` are two keys, and every value comes out right through hits and launchers
  x, y = Tensor(M).realize(), Tensor(A[:8]).realize()
  z = Tensor(A[:4]).realize()
  # (2, 3, 2) and (2, 3, 3) have the same distinct values: only the link of e to c or to d tells them apart
  for c, d, e in [(2.0, 2.0, 2.0), (3.0, 5.0, 6.0), (2.0, 3.0, 2.0), (2.0, 3.0, 3.0), (4.0, 4.0, 1.5), (2.0, 3.0, 2.0), (2.0, 3.0, 3.0)]:
    out = (x * c + (y * d).reshape(1, 8) + (z * e).sum()).realize()
    ref = M * np.float32(c) + A[:8].reshape(1, 8) * np.float32(d) + (A[:4] * np.float32(e)).sum()
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5)

def test_the_same_number_node_in_another_graph_is_no_stale_hit():
  a = Tensor(A).realize()
  for _ in range(3): np.testing.assert_allclose((a + 1).realize().numpy(), A + 1, rtol=1e-6)
  h = ENGINE.schedules.hits
  np.testing.assert_allclose((a - 1).realize().numpy(), A - 1, rtol=1e-6)  # the broadcast 1 again, under another op
  np.testing.assert_allclose((a.reshape(8, 8) + 1).realize().numpy(), A.reshape(8, 8) + 1, rtol=1e-6)  # another shape
  np.testing.assert_allclose((1 + a + a).realize().numpy(), 1 + A + A, rtol=1e-6)
  ai = Tensor(I).realize()
  np.testing.assert_array_equal((ai + 1).realize().numpy(), I + 1)  # another dtype
  for _ in range(2): np.testing.assert_allclose((a + 1).realize().numpy(), A + 1, rtol=1e-6)
  assert ENGINE.schedules.hits >= h + 2
