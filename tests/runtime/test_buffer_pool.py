"""Freed buffers are reused for the next buffer of their size and dtype (runtime/device.py: small ones, and large ones within a
budget of their own), never while a view of their memory is alive elsewhere."""
import numpy as np
from runtime.device import Buffer
from runtime.dtype import dtypes
from tensor import Tensor

def test_a_freed_buffer_is_reused_and_a_viewed_one_is_not():
  b = Buffer("CPU", 16, dtypes.float32).ensure_allocated()
  ptr = b.ptr
  del b
  c = Buffer("CPU", 16, dtypes.float32).ensure_allocated()
  assert c.ptr == ptr  # reused
  view = c.as_array()
  view[:] = 7
  del c
  for _ in range(3):
    d = Buffer("CPU", 16, dtypes.float32).ensure_allocated()
    assert d.ptr != ptr  # the view keeps it out of the pool
    d.as_array()[:] = -1
  np.testing.assert_array_equal(view, np.full(16, 7, np.float32))
  sub = d.as_array()[2:5]  # a view of a slice holds the raw block
  del d
  e = Buffer("CPU", 16, dtypes.float32).ensure_allocated()
  e.as_array()[:] = 3
  np.testing.assert_array_equal(sub, np.full(3, -1, np.float32))

def test_eager_results_stay_right_through_reuse():
  a = Tensor(np.arange(16, dtype=np.float32)).realize()
  kept = [(a + i).realize() for i in range(5)]
  for i in range(50): (a * 2 + i).realize()
  for i, t in enumerate(kept): np.testing.assert_array_equal(t.numpy(), np.arange(16, dtype=np.float32) + i)
  n = (a + 1).numpy()
  for _ in range(5): (a + 100).realize()
  np.testing.assert_array_equal(n, np.arange(16, dtype=np.float32) + 1)

def test_large_buffers_are_reused_within_their_own_budget():
  from runtime import device
  big = 1 << 20  # floats: 4 MB, past POOL_BYTES
  b = Buffer("CPU", big, dtypes.float32).ensure_allocated()
  ptr = b.ptr
  del b
  c = Buffer("CPU", big, dtypes.float32).ensure_allocated()
  assert c.ptr == ptr  # reused: no new memory to fault in
  del c
  # more large buffers than the budget: the ones past it are let go, and small buffers still pool beside them
  held = [Buffer("CPU", big + k, dtypes.float32).ensure_allocated() for k in range(device.POOL_LARGE_BUFFERS + 4)]
  del held
  assert device._pooled[1] <= device.POOL_LARGE_BUFFERS and device._pooled_large_bytes[0] <= device.POOL_LARGE_BYTES
  s = Buffer("CPU", 16, dtypes.float32).ensure_allocated()
  ptr = s.ptr
  del s
  assert Buffer("CPU", 16, dtypes.float32).ensure_allocated().ptr == ptr
