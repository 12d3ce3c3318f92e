"""The eager path (tensor/tensor.py Tensor.realize -> tensor/engine/realize.py run_chain -> prepared.Prepared.run_single): a
tensor made by number ops on a realized buffer, whose form ran before, is realized by the prepared launches its op chain
kept, into a spare output nothing uses any more (Storage.spare) or a buffer from the host free list, and pointed at it
without a look at the other live tensors when nothing else holds its node. Each test warms a form first (so the fast path
is the one that runs), then checks values against numpy and that nothing else that held or read the node went stale."""
from __future__ import annotations
import numpy as np
import pytest
import tensor.tensor as tensor_module
from runtime.device import Buffer, Device, HOST
from runtime.dtype import dtypes
from runtime.helpers import Context, GlobalCounters
from tensor import Tensor, TinyJit
from tensor.engine.state import ENGINE

RNG = np.random.default_rng(27)

def warm(make, times: int = 3) -> None:
  for _ in range(times): make().realize()

@pytest.fixture
def rewires(monkeypatch):
  """How many times realize went through rewire (the look at every live tensor)."""
  calls = [0]
  real = tensor_module.rewire
  def counting(becomes):
    calls[0] += 1
    return real(becomes)
  monkeypatch.setattr(tensor_module, "rewire", counting)
  return calls

def test_the_fast_path_runs_one_kernel_and_skips_rewire(rewires):
  a = Tensor(np.arange(16, dtype=np.float32)).realize()
  warm(lambda: a + 1)
  rewires[0], k0, hits = 0, GlobalCounters.kernel_count, ENGINE.schedules.hits
  for i in range(5):
    y = (a + 1).realize()
    assert y.is_realized()
    np.testing.assert_array_equal(y.numpy(), np.arange(16, dtype=np.float32) + 1)
  assert rewires[0] == 0 and GlobalCounters.kernel_count - k0 == 5 and ENGINE.schedules.hits - hits == 5

@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_one_op_on_other_shapes_dtypes_and_devices_in_a_row(device):
  cases = [(np.float32, 16), (np.float32, 17), (np.int32, 16), (np.float16, 16), (np.float32, 1), (np.int64, 5), (np.float32, 16)]
  tensors = [Tensor((RNG.standard_normal(n) * 10).astype(dt), device=device).realize() for dt, n in cases]
  for _ in range(3):  # every form warmed, then the same op on each in turn: each must use its own prepared launches
    for t, (dt, n) in zip(tensors, cases):
      got = (t * 3 + 1).realize()
      assert got.dtype is t.dtype and got.shape == (n,) and got.device == device
      want = t.numpy() * dt(3) + dt(1)
      np.testing.assert_allclose(got.numpy(), want, rtol=1e-3 if dt is np.float16 else 1e-6)

def test_forms_that_look_alike_stay_apart():
  x = Tensor(np.array([1.5, -2.0, 3.0, -4.25], dtype=np.float32)).realize()
  xi = Tensor(np.array([1, -2, 3, -4], dtype=np.int32)).realize()
  xn = x.numpy()
  forms = [(lambda: x + 1, xn + 1), (lambda: 1 + x, 1 + xn), (lambda: x - 1, xn - 1), (lambda: 1 - x, 1 - xn), (lambda: x * 1, xn),
           (lambda: x + 2, xn + 2), (lambda: x * -0.0, xn * np.float32(-0.0)), (lambda: x * 0.0, xn * np.float32(0.0)),
           (lambda: xi + 1, xi.numpy() + 1), (lambda: xi * 2 + 1, xi.numpy() * 2 + 1), (lambda: x * 2 + 1, xn * 2 + 1),
           (lambda: (x + 1) * 2, (xn + 1) * 2), (lambda: x / 4, xn / 4)]
  for _ in range(4):  # alternating, so each realize follows another form's
    for make, want in forms:
      got = make().realize().numpy()
      assert got.dtype == want.dtype
      np.testing.assert_array_equal(got, want)
      np.testing.assert_array_equal(np.signbit(got), np.signbit(want))  # -0.0 and 0.0 are two constants

def test_another_tensor_on_the_same_node_is_realized_too(rewires):
  a = Tensor(np.arange(8, dtype=np.float32)).realize()
  warm(lambda: a + 5)
  rewires[0] = 0
  b, c = a + 5, a + 5
  assert b.uop is c.uop  # hash-consed: one node for both
  b.realize()
  assert c.is_realized() and c.uop is b.uop and rewires[0] == 1
  np.testing.assert_array_equal(c.numpy(), np.arange(8) + 5)

def test_a_pending_tensor_reading_the_node_reads_the_buffer_after():
  a = Tensor(np.arange(8, dtype=np.float32)).realize()
  warm(lambda: a * 2)
  y = a * 2
  z = y - 3  # pending: its graph reads y's node
  y.realize()
  assert y.is_realized() and y.uop in z.uop.toposort()  # z's graph points at y's buffer now (rewire)
  kernels = GlobalCounters.kernel_count
  np.testing.assert_array_equal(z.numpy(), np.arange(8) * 2 - 3)
  assert GlobalCounters.kernel_count - kernels == 1  # z reads y's buffer: y is not computed again
  np.testing.assert_array_equal(y.numpy(), np.arange(8) * 2)

def test_a_node_held_by_the_user_goes_the_full_way_and_stays_right(rewires):
  a = Tensor(np.arange(8, dtype=np.float32)).realize()
  warm(lambda: a + 7)
  rewires[0] = 0
  y = a + 7
  held = y.uop  # a reference the refcount check can't account for: the full rewire runs
  y.realize()
  assert rewires[0] == 1 and y.is_realized() and held is not y.uop
  np.testing.assert_array_equal(y.numpy(), np.arange(8) + 7)

def test_a_freed_buffer_reused_while_a_view_still_reads_it():
  a = Tensor(np.arange(16, dtype=np.float32)).realize()
  warm(lambda: a + 1)
  y = (a + 1).realize()
  views = [y[3:9], y.reshape(4, 4).T, y.reshape(4, 4)[1]]  # pending views: they read y's buffer
  del y
  for i in range(10): (a + 100 + i).realize()  # results freed at once: the free list hands their memory on
  for _ in range(10): (a + 1).realize()
  base = np.arange(16, dtype=np.float32) + 1
  np.testing.assert_array_equal(views[0].numpy(), base[3:9])
  np.testing.assert_array_equal(views[1].numpy(), base.reshape(4, 4).T)
  np.testing.assert_array_equal(views[2].numpy(), base.reshape(4, 4)[1])

def test_numpy_results_are_not_recycled_under_the_reader():
  a = Tensor(np.arange(16, dtype=np.float32)).realize()
  warm(lambda: a + 1)
  outs = [(a + i).realize().numpy() for i in range(20)]  # each tensor freed once read
  for i, o in enumerate(outs): np.testing.assert_array_equal(o, np.arange(16) + i)

def test_a_recycled_buffer_is_not_handed_out_twice():
  a = Tensor(np.arange(16, dtype=np.float32)).realize()
  warm(lambda: a + 1)
  kept = [(a + i).realize() for i in range(12)]
  ptrs = [Tensor_buffer(t)._ptr for t in kept]
  assert len(set(ptrs)) == len(ptrs)
  for i, t in enumerate(kept): np.testing.assert_array_equal(t.numpy(), np.arange(16) + i)

def Tensor_buffer(t: Tensor) -> Buffer:
  return ENGINE.storage.buffers[t.uop]

def test_realize_after_assign_reads_the_new_values():
  x = Tensor(np.arange(16, dtype=np.float32)).realize()
  warm(lambda: x + 1)
  x.assign(Tensor(np.full(16, 5.0, dtype=np.float32))).realize()
  np.testing.assert_array_equal((x + 1).realize().numpy(), np.full(16, 6.0))
  x.assign(x * 2).realize()
  np.testing.assert_array_equal((x + 1).realize().numpy(), np.full(16, 11.0))
  y = (x + 1).realize()
  y.assign(y + 1).realize()  # assign into an eager result
  np.testing.assert_array_equal(y.numpy(), np.full(16, 12.0))
  np.testing.assert_array_equal((y + 1).realize().numpy(), np.full(16, 13.0))

def test_a_chain_of_realizes_matches_numpy():
  x = Tensor(np.arange(16, dtype=np.float32)).realize()
  want = np.arange(16, dtype=np.float32)
  for _ in range(50):
    x = (x * 1.0001 + 0.5).realize()
    want = want * np.float32(1.0001) + np.float32(0.5)
  np.testing.assert_allclose(x.numpy(), want, rtol=1e-6)

def test_an_unallocated_input_is_allocated_before_the_call():
  x = Tensor(np.arange(16, dtype=np.float32)).realize()
  warm(lambda: x + 1)
  e = Tensor.empty(16)  # a buffer not allocated yet
  e.assign(Tensor(np.ones(16, dtype=np.float32))).realize()
  np.testing.assert_array_equal((e + 1).realize().numpy(), np.full(16, 2.0))
  f = Tensor.empty(16)
  assert not Tensor_buffer(f).is_allocated()
  assert (f + 1).realize().shape == (16,)  # its values are undefined; the call must not read address 0

def test_debug_and_capture_still_see_every_kernel(capsys):
  a = Tensor(np.arange(16, dtype=np.float32)).realize()
  warm(lambda: a + 1)
  with Context(DEBUG=2): (a + 1).realize()
  assert "***" in capsys.readouterr().out  # DEBUG=2 prints the kernel: the eager path is not taken
  @TinyJit
  def step(t: Tensor) -> Tensor: return (t + 1).realize()
  for i in range(4):
    t = Tensor(np.full(16, float(i), dtype=np.float32)).realize()
    np.testing.assert_array_equal(step(t).numpy(), np.full(16, i + 1.0))

def test_buffer_fresh_is_a_buffer_like_any():
  b = Buffer.fresh("CPU", 16, dtypes.float32, 64, Device.allocator("CPU"))
  assert b.allocator is HOST and b.is_allocated() and b._ptr != 0 and b.nbytes == 64 and b.base is None
  b.copyin(np.arange(16, dtype=np.float32))
  np.testing.assert_array_equal(b.numpy(), np.arange(16))
  del b
  c = Buffer.fresh("CPU", 16, dtypes.float32, 64, HOST)  # the freed memory, from the free list
  d = Buffer.fresh("CPU", 16, dtypes.float32, 64, HOST)
  assert c._ptr != d._ptr and c._ptr and d._ptr
  c.copyin(np.ones(16, dtype=np.float32)), d.copyin(np.zeros(16, dtype=np.float32))
  np.testing.assert_array_equal(c.numpy(), np.ones(16))

def fast(monkeypatch) -> list:
  """The Prepared.run_single calls made while the test runs (each one an eager realize that took the fast path)."""
  from tensor.engine import prepared
  seen, orig = [], prepared.Prepared.run_single
  def spy(self, *args):
    seen.append(self)
    return orig(self, *args)
  monkeypatch.setattr(prepared.Prepared, "run_single", spy)
  return seen

def test_the_fast_path_counts_what_the_full_path_counts(monkeypatch):
  # kernel count, flops, bytes and kernel time, as a realize through the schedule (SCHEDULE_CACHE off) adds them
  from tensor.engine import schedule
  a = Tensor(np.arange(16, dtype=np.float32)).realize()
  warm(lambda: a * 3 + 1)
  seen = fast(monkeypatch)
  def counted(n: int = 4) -> tuple:
    before = (GlobalCounters.kernel_count, GlobalCounters.global_ops, GlobalCounters.global_mem, GlobalCounters.time_sum_s)
    for _ in range(n): np.testing.assert_array_equal((a * 3 + 1).realize().numpy(), np.arange(16) * 3 + 1)
    return (GlobalCounters.kernel_count - before[0], GlobalCounters.global_ops - before[1], GlobalCounters.global_mem - before[2],
            GlobalCounters.time_sum_s - before[3])
  quick = counted()
  assert len(seen) == 4
  monkeypatch.setattr(schedule, "SCHEDULE_CACHE", 0)
  full = counted()
  assert len(seen) == 4  # none of these took the fast path
  assert quick[:3] == full[:3] == (4, full[1], full[2]) and full[1] > 0 and full[2] > 0 and quick[3] > 0

@pytest.mark.parametrize("how", ["context", "value", "same value"])
def test_a_flag_set_between_two_realizes_sends_the_next_the_full_way(monkeypatch, capsys, how):
  # the prepared launches a chain kept hold while no flag was set since (helpers.FLAG_CHANGES): DEBUG set any way is seen
  from runtime.helpers import DEBUG
  a = Tensor(np.arange(16, dtype=np.float32)).realize()
  warm(lambda: a + 3)
  seen = fast(monkeypatch)
  (a + 3).realize()
  assert len(seen) == 1
  if how == "context":
    with Context(DEBUG=2): (a + 3).realize()
  elif how == "value":
    DEBUG.value = 2
    try: (a + 3).realize()
    finally: DEBUG.value = 0
  else:
    DEBUG.value = DEBUG.value  # unchanged, and still a set: the next realize checks the flags again
    (a + 3).realize()
  assert len(seen) == 1 and (how == "same value" or "***" in capsys.readouterr().out)
  for _ in range(3): np.testing.assert_array_equal((a + 3).realize().numpy(), np.arange(16) + 3)
  # the full path kept them again: the fast path is back after one realize (Context's exit and DEBUG.value = 0 are sets too)
  assert len(seen) == (4 if how == "same value" else 3)

def test_a_variant_flag_changes_the_program_the_fast_path_runs(monkeypatch):
  from tensor.engine import prepared
  from runtime.helpers import NOOPT
  a = Tensor(np.arange(64, dtype=np.float32)).realize()
  warm(lambda: a * 2 + 1)
  seen = fast(monkeypatch)
  (a * 2 + 1).realize()
  NOOPT.value = 1
  try:
    warm(lambda: a * 2 + 1)
    np.testing.assert_array_equal((a * 2 + 1).realize().numpy(), np.arange(64) * 2 + 1)
  finally: NOOPT.value = 0
  assert len(seen) >= 2 and seen[0] is not seen[-1] and seen[-1].variant[0] is True and seen[0].variant[0] is False
  assert all(isinstance(p, prepared.Prepared) for p in seen)

def test_an_eager_output_node_is_the_node_uop_makes():
  # buffer_node makes the output's UNIQUE and BUFFER without a lookup: they must be the hash-consed nodes all the same
  from runtime.ops import Ops
  from runtime.uop import buffer_node, uop
  a = Tensor(np.arange(16, dtype=np.float32)).realize()
  warm(lambda: a + 1)
  y = (a + 1).realize()
  u = y.uop
  assert u.op is Ops.BUFFER and u.shape == (16,) and u.device == "CPU" and u.src[0].op is Ops.UNIQUE
  assert uop(Ops.BUFFER, u.dtype, (uop(Ops.UNIQUE, dtypes.void, (), u.src[0].arg), u.src[1]), u.arg) is u
  # an id some node has already (made by hand): the node made for it is that one's
  by_hand = uop(Ops.UNIQUE, dtypes.void, (), 10**12)
  b = buffer_node(dtypes.float32, u.src[1], 4, 10**12, "CPU")
  assert b.src[0] is by_hand and b is uop(Ops.BUFFER, dtypes.float32, (by_hand, u.src[1]), 4) and b.shape == (4,) and b.device == "CPU"
  c = buffer_node(dtypes.float32, u.src[1], 4, 10**12 + 1, "CPU")
  assert c is not b and c is uop(Ops.BUFFER, dtypes.float32, (uop(Ops.UNIQUE, dtypes.void, (), 10**12 + 1), u.src[1]), 4)

def test_two_storages_never_share_a_unique_id():
  from tensor.engine.storage import Storage
  s = Storage()
  ours, theirs = ENGINE.storage.new_unique(), s.new_unique()
  assert ours is not theirs and ours.arg != theirs.arg
  b1, b2 = ENGINE.storage.new_buffer(dtypes.float32, 4, "CPU"), s.new_buffer(dtypes.float32, 4, "CPU")
  assert b1 is not b2 and b1 in ENGINE.storage.buffers and b2 not in ENGINE.storage.buffers and b2 in s.buffers

def test_the_buffer_table_forgets_a_dead_node_and_iterates_a_snapshot():
  import gc
  table = ENGINE.storage.buffers
  a = Tensor(np.arange(16, dtype=np.float32)).realize()
  n = len(table.data)
  kept = [ENGINE.storage.new_buffer(dtypes.float32, 16, "CPU") for i in range(6)]
  assert len(table.data) == n + 6 and all(u in table for u in kept)
  for k in table.keys():  # nodes dying while the table is walked: no "changed size during iteration"
    del kept[:]
  del k
  gc.collect()
  assert len(table.data) == n
  assert all(v is table[k] for k, v in table.items())
  with pytest.raises(TypeError, match="never deleted by hand"): del table[a.uop]
  with pytest.raises(TypeError, match="never deleted by hand"): table.pop(a.uop)
  assert a.uop in table

def test_a_dead_tensor_leaves_the_live_set():
  from tensor.tensor import live_tensors
  a = Tensor(np.arange(16, dtype=np.float32)).realize()
  n = len(ENGINE.storage.live)
  ts = [a + i for i in range(5)]
  assert len(ENGINE.storage.live) == n + 5 and all(any(t is x for x in live_tensors()) for t in ts)
  del ts
  assert len(ENGINE.storage.live) == n

# ---- spare outputs (Storage.spare): an eager output nobody uses any more is the next one of its kind ----

def spares_warm() -> Tensor:
  """A tensor whose forms a + i (i < 8) take the fast path."""
  a = Tensor(np.arange(16, dtype=np.float32)).realize()
  for i in range(8): warm(lambda: a + i)
  return a

def test_a_dead_output_is_the_next_one_and_a_live_one_is_not(monkeypatch):
  a = spares_warm()
  seen = fast(monkeypatch)
  y = (a + 1).realize()
  ids = (id(y.uop), id(Tensor_buffer(y)))  # no reference kept: one would keep them in use
  del y
  z = (a + 2).realize()  # another form, the same kind: y's node and memory again
  assert (id(z.uop), id(Tensor_buffer(z))) == ids and len(seen) == 2
  np.testing.assert_array_equal(z.numpy(), np.arange(16) + 2)
  w = (a + 3).realize()  # z lives: not its node
  assert w.uop is not z.uop and Tensor_buffer(w) is not Tensor_buffer(z)
  np.testing.assert_array_equal(z.numpy(), np.arange(16) + 2)
  np.testing.assert_array_equal(w.numpy(), np.arange(16) + 3)

def make_hold(how: str, y: Tensor):
  """Something that keeps y's node or memory in use once y is gone, and a check that its values are still y's."""
  import weakref
  want = y.numpy()
  if how == "node": held = y.uop; return held, lambda: np.testing.assert_array_equal(Tensor(held).numpy(), want)  # noqa: E702
  if how == "unique": return y.uop.src[0], lambda: None
  if how == "buffer":
    held = Tensor_buffer(y)
    return held, lambda: np.testing.assert_array_equal(held.numpy(), want)
  if how == "array":
    held = Tensor_buffer(y).as_array()
    return held, lambda: np.testing.assert_array_equal(held, want)
  if how == "array view":
    held = Tensor_buffer(y).as_array()[2:9]
    return held, lambda: np.testing.assert_array_equal(held, want[2:9])
  if how == "pending graph":
    held = y * 2
    return held, lambda: np.testing.assert_array_equal(held.numpy(), want * 2)
  if how == "weak set": held = weakref.WeakSet([y.uop]); return held, lambda: None  # noqa: E702
  if how == "weak buffer": held = weakref.ref(Tensor_buffer(y)); return held, lambda: None  # noqa: E702
  raise ValueError(how)

@pytest.mark.parametrize("how", ["node", "unique", "buffer", "array", "array view", "pending graph", "weak set", "weak buffer"])
def test_an_output_something_still_uses_is_not_reused(how):
  a = spares_warm()
  y = (a + 1).realize()
  node, buf, unique = y.uop, Tensor_buffer(y), y.uop.src[0]
  held, check = make_hold(how, y)
  ids = (id(node), id(buf))
  del y, node, buf, unique
  outs = [(a + i).realize() for i in range(2, 8)]  # more than the spares of the kind, each on the fast path
  for i, o in zip(range(2, 8), outs): np.testing.assert_array_equal(o.numpy(), np.arange(16) + i)
  assert all((id(o.uop), id(Tensor_buffer(o))) != ids for o in outs) or how in ("weak set", "weak buffer")
  if how == "weak set": assert not any(o.uop in held for o in outs)
  if how == "weak buffer": assert all(Tensor_buffer(o) is not held() for o in outs)
  check()
  del outs
  check()

def test_a_spare_of_one_kind_is_not_another_kind():
  a = spares_warm()
  b = Tensor(np.arange(16, dtype=np.int32)).realize()
  c = Tensor(np.arange(17, dtype=np.float32)).realize()
  d = Tensor(np.arange(16, dtype=np.float32), device="PYTHON").realize()
  for _ in range(3):
    for t in (a, b, c, d): (t + 1).realize()  # each kind warmed, its outputs dead
  for _ in range(3):
    outs = [(t + 1).realize() for t in (a, b, c, d)]
    assert [(o.dtype, o.shape, o.device) for o in outs] == [(t.dtype, t.shape, t.device) for t in (a, b, c, d)]
    assert len({id(Tensor_buffer(o)) for o in outs}) == 4
    for o, t in zip(outs, (a, b, c, d)): np.testing.assert_array_equal(o.numpy(), t.numpy() + 1)

def test_a_large_output_is_no_spare():
  big = Tensor(np.arange(20000, dtype=np.float32)).realize()  # 80 KB: above the free list's small buffers
  warm(lambda: big + 1)
  y = (big + 1).realize()
  node = id(y.uop)
  del y
  z = (big + 1).realize()
  assert all(node != id(u) for u, _ in sum(ENGINE.storage.spares.values(), []))
  np.testing.assert_array_equal(z.numpy(), np.arange(20000) + 1)

def test_the_spares_are_bounded():
  from tensor.engine import storage
  s = ENGINE.storage
  tensors = [Tensor(np.arange(n, dtype=np.float32)).realize() for n in range(1, 80)]  # 79 kinds
  for _ in range(3):
    for t in tensors: (t + 1).realize()
  kept = [(t + 1).realize() for t in tensors for _ in range(6)]
  assert all(len(r) <= storage.SPARES_PER_KIND for r in s.spares.values()) and sum(map(len, s.spares.values())) <= storage.SPARES
  for i, t in enumerate(kept): np.testing.assert_array_equal(t.numpy(), np.arange(i // 6 + 1) + 1)

def test_a_reused_output_under_a_capture_and_an_assign():
  a = spares_warm()
  y = (a + 1).realize()
  del y
  y = (a + 5).realize()
  y.assign(y * 2).realize()  # an assign into a reused output
  np.testing.assert_array_equal(y.numpy(), (np.arange(16) + 5) * 2)
  del y
  @TinyJit
  def step(t: Tensor) -> Tensor: return (t + 1).realize()
  for i in range(6):
    t = (a + i).realize()  # a spare, perhaps the memory an earlier call's input had
    np.testing.assert_array_equal(step(t).numpy(), np.arange(16) + i + 1)  # (a jitted function's outputs share one buffer)
