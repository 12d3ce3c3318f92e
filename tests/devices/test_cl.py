"""The CL device (runtime/ops_cl.py, OpenCL C from tensor/renderer/gpu.py) against numpy and the CPU device: buffers and
transfers, the launch grid, integer semantics identical on CPU, PYTHON and CL, a training step equal to CPU's, TinyJit
capturing and replaying, a lazy graph crossing devices, allocation errors, device-event kernel times. Runs for real on
pocl (OpenCL on the CPU); without an OpenCL platform every test skips with the one line saying what to install.
"""
import numpy as np
import pytest
from runtime import ops_cl
from runtime.device import AllocationError, Buffer, Device
from runtime.dtype import dtypes
from tensor import Tensor, TinyJit
from tensor.nn import Linear, optim
from tensor.nn.state import safe_load, safe_save

pytestmark = pytest.mark.skipif(not ops_cl.available(), reason=f"no OpenCL device: {ops_cl.INSTALL}")

def test_buffers_hold_device_memory_and_copy_through_the_host_only_when_asked():
  b = Buffer("CL", 5, dtypes.int32, np.arange(5, dtype=np.int32))
  assert not b.allocator.host and b._array is None
  assert b.numpy().tolist() == [0, 1, 2, 3, 4]
  with pytest.raises(Exception, match="device memory"): b.as_array()

def test_transfers_both_ways_and_between_devices():
  x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
  t = Tensor(x, device="CL")
  assert t.device == "CL"
  back = (t * 2).to("CPU")
  assert back.device == "CPU"
  np.testing.assert_array_equal(back.numpy(), x * 2)
  np.testing.assert_array_equal((back.to("CL") + t).to("PYTHON").numpy(), x * 3)
  # a strided view is made contiguous before it moves
  np.testing.assert_array_equal(t.permute(2, 0, 1).to("CPU").numpy(), x.transpose(2, 0, 1))

def test_a_lazy_graph_crossing_devices():
  a, b = np.random.default_rng(0).standard_normal((2, 7, 9)).astype(np.float32)
  ta, tb = Tensor(a, device="CL"), Tensor(b, device="CPU")
  out = ((ta.exp() + 1).to("CPU") * tb).sum(1).to("CL").relu()
  np.testing.assert_allclose(out.numpy(), np.maximum(((np.exp(a) + 1) * b).sum(1), 0), rtol=1e-5, atol=1e-5)

@pytest.mark.parametrize("shape", [(1,), (33,), (17, 65), (3, 5, 7, 9)])
def test_elementwise_and_reductions_on_the_grid(shape):
  x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
  t = Tensor(x, device="CL")
  np.testing.assert_allclose((t * 3 - 1).numpy(), x * 3 - 1)
  np.testing.assert_allclose(t.sum(-1).numpy(), x.sum(-1), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(t.max().numpy(), x.max())
  e = np.exp(x - x.max(-1, keepdims=True))
  np.testing.assert_allclose(t.softmax(-1).numpy(), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)

@pytest.mark.parametrize("n, k, m", [(1, 1, 1), (7, 13, 5), (64, 64, 64), (65, 31, 130)])
def test_matmul_against_numpy_and_cpu(n, k, m):
  rng = np.random.default_rng(2)
  a, b = rng.standard_normal((n, k)).astype(np.float32), rng.standard_normal((k, m)).astype(np.float32)
  cl = (Tensor(a, device="CL") @ Tensor(b, device="CL")).numpy()
  np.testing.assert_allclose(cl, a @ b, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(cl, (Tensor(a, device="CPU") @ Tensor(b, device="CPU")).numpy(), rtol=1e-5, atol=1e-5)

INT_DTYPES = [dtypes.int8, dtypes.uint8, dtypes.int32, dtypes.uint32, dtypes.int64]

@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_integer_semantics_are_identical_on_cpu_python_and_cl(dtype):
  """//, %, overflow and shifts (in and out of range) give the same bits on every device."""
  info = np.iinfo(dtypes.to_numpy(dtype))
  a = np.array([info.min, info.min + 1, -7 if info.min else 7, -1 if info.min else 1, 0, 1, 7, 100 % (info.max + 1), info.max],
               dtype=dtypes.to_numpy(dtype))
  b = np.array([-1 if info.min else 1, 3, 2, 0, 5, 0, -3 if info.min else 3, 7, 1], dtype=dtypes.to_numpy(dtype))
  s = np.array([0, 1, 3, bits := 8 * a.itemsize, bits + 1, 2, bits - 1, 5, 4], dtype=dtypes.to_numpy(dtype))
  outs = {}
  for dev in ("CPU", "PYTHON", "CL"):
    ta, tb, ts = Tensor(a, device=dev), Tensor(b, device=dev), Tensor(s, device=dev)
    outs[dev] = [r.numpy() for r in (ta // tb, ta % tb, ta + tb * 77, ta * tb, ta << ts, ta >> ts, ta * 3 + info.max)]
  for x, y, z in zip(outs["CPU"], outs["PYTHON"], outs["CL"]):
    np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(x, z)

def _train(device: str) -> list[np.ndarray]:
  rng = np.random.default_rng(3)
  l1, l2 = Linear(12, 16), Linear(16, 3)
  for m in (l1, l2):
    m.weight = Tensor(rng.standard_normal(m.weight.shape).astype(np.float32) * 0.3, device=device, requires_grad=True)
    m.bias = Tensor(rng.standard_normal(m.bias.shape).astype(np.float32) * 0.3, device=device, requires_grad=True)
  params = [l1.weight, l1.bias, l2.weight, l2.bias]
  x, y = Tensor(rng.standard_normal((8, 12)).astype(np.float32), device=device), Tensor(rng.integers(0, 3, 8), device=device)
  opt = optim.Adam(params, lr=0.01)
  with Tensor.train():
    for _ in range(2):
      opt.zero_grad()
      loss = l2(l1(x).relu()).sparse_categorical_crossentropy(y)
      loss.backward()
      opt.step()
  return [loss.numpy()] + [p.numpy() for p in params]

@pytest.mark.parametrize("src,dst", [(dtypes.float16, dtypes.int16), (dtypes.float16, dtypes.uint16), (dtypes.int16, dtypes.float16),
                                     (dtypes.bfloat16, dtypes.uint16), (dtypes.uint16, dtypes.bfloat16)])
def test_16_bit_float_bitcasts_keep_their_bits(src, dst):
  # a half or bfloat16 value is held as a float in the kernel: its bits are the 16-bit value's, not the float's
  # finite values and infinities (a nan's payload need not survive a float)
  bits = np.array([0, 1, 0x3C00, 0x8001, 0x7BFF, 0xC000, 0x3555, 0x4049, 0xBF80, 0xFC00 if dtypes.float16 in (src, dst) else 0x7F7F], np.uint16)
  if src is dtypes.bfloat16: t = Tensor(bits, device="CL").bitcast(dtypes.bfloat16) + 0  # a bfloat16 value computed in the kernel
  elif src is dtypes.float16: t = Tensor(bits.view(np.float16), device="CL") + 0
  else: t = Tensor(bits.view(np.int16), device="CL")
  got = (t.bitcast(dst) if dst is not dtypes.bfloat16 else t.bitcast(dst).bitcast(dtypes.uint16)).numpy()
  assert got.view(np.uint16).tolist() == bits.tolist()

@pytest.mark.parametrize("dst", [dtypes.int16, dtypes.uint16])
def test_a_half_nan_loaded_and_bitcast_keeps_its_bits(dst):
  # quiet NaNs of either sign and several payloads, read from a half buffer (numpy's view keeps them; pocl's vstore_half
  # turned 0x7E00 into 0x7FFF). Signalling NaNs are quieted by any float that holds them, so they are not asked for.
  bits = np.array([0x7E00, 0xFE00, 0x7F55, 0xFFFF, 0x7E01, 0xFFC0], np.uint16)
  got = Tensor(bits.view(np.float16), device="CL").bitcast(dst).numpy()
  assert got.view(np.uint16).tolist() == bits.tolist()

def test_a_training_step_on_cl_equals_cpu():
  prev = Device.DEFAULT
  try:
    Device.DEFAULT = "CL"
    cl = _train("CL")
    Device.DEFAULT = "CPU"
    cpu = _train("CPU")
  finally: Device.DEFAULT = prev
  for a, b in zip(cl, cpu): np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)

def test_tinyjit_captures_and_replays_on_cl():
  w = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4), device="CL")
  @TinyJit
  def f(x: Tensor) -> Tensor: return ((x @ w) + 1).relu()
  for i in range(4):
    x = np.full((2, 3), i - 1, dtype=np.float32)
    np.testing.assert_array_equal(f(Tensor(x, device="CL")).numpy(), np.maximum(x @ np.arange(12, dtype=np.float32).reshape(3, 4) + 1, 0))
  assert f.captured is not None

def test_a_captured_jit_pickles_with_its_device_weights():
  import pickle
  w = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4), device="CL").realize()
  @TinyJit
  def f(x: Tensor) -> Tensor: return (x @ w) * 2
  for i in range(3): f(Tensor(np.full((2, 3), i, dtype=np.float32), device="CL"))
  g = pickle.loads(pickle.dumps(f))
  x = np.arange(6, dtype=np.float32).reshape(2, 3)
  np.testing.assert_array_equal(g(Tensor(x, device="CL")).numpy(), (x @ np.arange(12, dtype=np.float32).reshape(3, 4)) * 2)

def test_beam_searches_on_cl():
  from runtime.helpers import Context
  a = np.random.default_rng(2).standard_normal((64, 48)).astype(np.float32)
  with Context(NOOPT=0, BEAM=2): out = (Tensor(a, device="CL") @ Tensor(a.T.copy(), device="CL")).numpy()
  np.testing.assert_allclose(out, a @ a.T, rtol=1e-4, atol=1e-4)

def test_an_allocation_the_device_refuses_is_a_clear_error_and_others_survive():
  keep = Tensor([1.0, 2.0], device="CL").realize()
  with pytest.raises(AllocationError, match="CL: could not allocate"): Buffer("CL", 1 << 61, dtypes.float32).ensure_allocated()
  assert keep.tolist() == [1.0, 2.0]

def test_kernel_times_come_from_device_events():
  from runtime.helpers import GlobalCounters
  t = Tensor(np.ones(1000, dtype=np.float32), device="CL").realize()
  GlobalCounters.reset()
  (t * 2).realize()
  assert 0 < GlobalCounters.time_sum_s < 1

def test_outer_loops_are_the_launch_grid():
  from tensor.codegen import program, target_for
  from tensor.codegen.grid import grid_loops
  t = Tensor.empty(64, 32, device="CL")
  ast = [k for k in (t + 1).sum(1).kernelize().uop.toposort() if k.op.name == "KERNEL"][-1].arg.ast
  p = program(ast, target_for("CL"))
  assert p.src.startswith("// launch global=") and "get_global_id(0)" in p.src and "__kernel void" in p.src
  assert len(grid_loops(p.uops)) == 1

def test_weights_load_into_device_memory_and_save_from_it(tmp_path):
  w = np.random.default_rng(1).standard_normal((33, 17)).astype(np.float32)
  safe_save({"w": Tensor(w, device="CL") * 2}, tmp_path / "a.safetensors")
  back = safe_load(tmp_path / "a.safetensors", device="CL")["w"]
  assert back.device == "CL"
  np.testing.assert_array_equal((back + 1).numpy(), w * 2 + 1)

def test_profile_traces_show_the_transfers_and_debug_4_prints_the_opencl_source(capsys):
  from runtime import profile
  from runtime.helpers import Context
  x = np.arange(300, dtype=np.float32)
  a = Tensor(x, device="CPU").realize()
  n = len(profile.events)
  with Context(PROFILE=1, DEBUG=4): out = (a.to("CL") * 3).to("CPU").numpy()
  np.testing.assert_array_equal(out, x * 3)
  spans = [e for e in profile.events[n:] if e["cat"] in ("copy", "kernel")]
  del profile.events[n:]
  # host -> CL, the kernel on CL, CL -> host: each transfer a copy span of the device it writes to
  assert [(e["cat"], e["args"]["device"]) for e in spans] == [("copy", "CL"), ("kernel", "CL"), ("copy", "CPU")]
  assert "__kernel void" in capsys.readouterr().out

@pytest.mark.parametrize("size, mode", [((29,), "linear"), ((10, 31), "bilinear")])
def test_interpolation_prefetches_its_bool_mask_and_agrees_with_cpu(size, mode):
  """Its kernel reads a bool buffer in a prefetched loop (OpenCL's prefetch is not overloaded for bool: it failed to build)."""
  x = np.random.default_rng(3).standard_normal((2, 3, 64) if len(size) == 1 else (2, 3, 12, 20)).astype(np.float32)
  got = Tensor(x, device="CL").interpolate(size, mode=mode).numpy()
  np.testing.assert_allclose(got, Tensor(x, device="CPU").interpolate(size, mode=mode).numpy(), rtol=1e-5, atol=1e-6)
