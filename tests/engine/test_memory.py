"""Memory planning (tensor/engine/memory.py): the intermediates of one realize share storage by lifetime; buffers live
tensors hold are never reused; results stay right."""
from __future__ import annotations
import numpy as np
import pytest
import tensor.engine.realize as realize_mod
from tensor.engine import prepared
from runtime.helpers import Context
from tensor import GlobalCounters, Tensor, dtypes
from tensor.engine.memory import plan_memory
from tensor.engine.state import ENGINE

def peak_during(fn) -> int:
  """The largest GlobalCounters.mem_used seen after any kernel ran inside fn(), minus the value before (kernels run by
  run_kernel, or by a schedule-cache hit's prepared launches)."""
  base, peak = GlobalCounters.mem_used, [GlobalCounters.mem_used]
  orig, orig_call, orig_single = realize_mod.run_kernel, prepared.Call.__call__, prepared.Prepared.run_single
  def spy(k, *engine):
    orig(k, *engine)
    peak.append(GlobalCounters.mem_used)
  def spy_call(self, *args):
    orig_call(self, *args)
    peak.append(GlobalCounters.mem_used)
  def spy_single(self, *args):  # its one kernel run inline (Prepared.call)
    out = orig_single(self, *args)
    peak.append(GlobalCounters.mem_used)
    return out
  realize_mod.run_kernel, prepared.Call.__call__, prepared.Prepared.run_single = spy, spy_call, spy_single
  try: fn()
  finally: realize_mod.run_kernel, prepared.Call.__call__, prepared.Prepared.run_single = orig, orig_call, orig_single
  return max(peak) - base

def chain(x: Tensor, n: int) -> Tensor:
  for _ in range(n): x = (x * 2 + 1).contiguous()
  return x

def chain_ref(a: np.ndarray, n: int) -> np.ndarray:
  for _ in range(n): a = a * np.float32(2) + np.float32(1)
  return a

@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_contiguous_chain_reuses_two_blocks(device):
  a = np.linspace(-1, 1, 256, dtype=np.float32)
  x = Tensor(a, device=device).realize()
  y = chain(x, 20)
  used = peak_during(y.realize)
  plan = ENGINE.last_plan
  assert plan.n_buffers == 19 and len(plan.blocks) == 2  # ping-pong: each step reads one block and writes the other
  assert plan.planned_bytes == 2 * 1024 and plan.unplanned_bytes == 19 * 1024
  assert used <= 3 * 1024  # the two blocks and the output
  np.testing.assert_allclose(y.numpy(), chain_ref(a, 20), rtol=1e-6)

def test_planner_lowers_the_peak():
  a = np.ones(4096, np.float32)
  with Context(NO_MEMORY_PLANNER=1):
    y = chain(Tensor(a).realize(), 12)
    unplanned = peak_during(y.realize)
    np.testing.assert_allclose(y.numpy(), chain_ref(a, 12))
  y = chain(Tensor(a).realize(), 12)
  planned = peak_during(y.realize)
  np.testing.assert_allclose(y.numpy(), chain_ref(a, 12))
  assert unplanned == 12 * 4 * 4096 and planned == 3 * 4 * 4096

def test_buffers_live_tensors_hold_are_not_reused():
  a = np.arange(64, dtype=np.float32)
  x = Tensor(a).realize()
  steps = [x]
  for _ in range(8): steps.append((steps[-1] + 1).contiguous())
  steps[-1].realize()
  # every step is held by a live tensor: nothing was planned, every value is its own
  assert ENGINE.last_plan.n_buffers == 0
  for i, t in enumerate(steps): np.testing.assert_array_equal(t.numpy(), a + i)

def test_pending_tensor_keeps_the_buffer_it_reads():
  a = np.arange(32, dtype=np.float32)
  x = Tensor(a).realize()
  h = (x + 1).contiguous()
  later = h * 10  # not realized: reads h's buffer afterwards
  out = chain(h, 6)
  out.realize()
  del h
  np.testing.assert_array_equal(out.numpy(), chain_ref(a + 1, 6))
  np.testing.assert_array_equal(later.numpy(), (a + 1) * 10)

def test_reduce_expand_chain_of_different_sizes():
  a = np.random.default_rng(1).standard_normal((16, 24)).astype(np.float32)
  z, ref = Tensor(a).realize(), a
  for _ in range(5):
    z = (z - z.sum(0, keepdim=True)).contiguous().T
    ref = (ref - ref.sum(0, keepdims=True)).T
  z.realize()
  plan = ENGINE.last_plan
  assert plan.n_buffers >= 8 and len(plan.blocks) <= 3 and plan.planned_bytes < plan.unplanned_bytes / 2
  np.testing.assert_allclose(z.numpy(), ref, rtol=1e-4, atol=1e-3)

def test_blocks_are_shared_across_dtypes():
  a = np.arange(100, dtype=np.float32)
  x = Tensor(a).realize()
  y = x
  for _ in range(4): y = ((y + 1).contiguous().cast(dtypes.int32) * 3).contiguous().cast(dtypes.float32)
  y.realize()
  assert len(ENGINE.last_plan.blocks) <= 3 and ENGINE.last_plan.n_buffers >= 6
  ref = a
  for _ in range(4): ref = ((ref + 1).astype(np.int32) * 3).astype(np.float32)
  np.testing.assert_array_equal(y.numpy(), ref)

def test_plan_memory_lifetimes():
  # steps: kernel i writes b[i] and reads b[i-1]; b2 also reads b0: b0 lives to step 2, so b1 and b2 can't take its block
  b = [object() for _ in range(5)]
  steps = [[b[0]], [b[1], b[0]], [b[2], b[1], b[0]], [b[3], b[2]], [b[4], b[3]]]
  plan = plan_memory(steps, set(b[:4]), lambda _: "CPU", lambda _: 16)
  assert plan.placement[b[0]] != plan.placement[b[1]] != plan.placement[b[2]] != plan.placement[b[0]]
  assert plan.placement[b[3]] in (plan.placement[b[0]], plan.placement[b[1]])
  assert len(plan.blocks) == 3

def test_plan_memory_grows_a_free_block():
  b = [object() for _ in range(3)]
  sizes = {b[0]: 8, b[1]: 8, b[2]: 32}
  steps = [[b[0]], [b[1], b[0]], [b[2], b[1]]]
  plan = plan_memory(steps, set(b), lambda _: "CPU", sizes.__getitem__)
  assert len(plan.blocks) == 2 and plan.placement[b[2]] == plan.placement[b[0]] and max(plan.blocks) == 32
