"""Multi-device tensors in one process (tensor/multi.py, rules/multi.rules, tensor/engine/multi.py) against numpy and the
single-device result: shard and gather, op chains fuzzed with hypothesis (elementwise with shards realigned, reductions
over and off the split axis, movement, matmul, backward), the all-reduce on both sides of its ring threshold and on 4
devices, a data-parallel training step equal to the one-device step on the whole batch, and the errors.
Devices: CPU:0..3 (each its own device with its own buffers); CL beside CPU where an OpenCL platform exists.
"""
from __future__ import annotations
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from runtime import ops_cl
from runtime.device import DeviceError
from runtime.ops import Ops
from rules import multi_helpers
from tensor import Tensor, nn
from tensor.engine.multi import lower
from tensor.engine.state import ENGINE
from tensor.errors import DeviceMismatchError
from tensor.multi import MultiDeviceError

D2, D4 = ("CPU", "CPU:1"), ("CPU", "CPU:1", "CPU:2", "CPU:3")

def rand(*shape, seed=0) -> np.ndarray: return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)

def lowered(t: Tensor) -> list:
  """The per-device graphs t's graph lowers to (nothing runs)."""
  low = lower([t.uop], ENGINE)
  assert low is not None
  return low[0]

def copies(t: Tensor) -> int:
  from runtime.dtype import dtypes
  from runtime.uop import uop
  return sum(1 for u in uop(Ops.SINK, dtypes.void, tuple(lowered(t))).toposort() if u.op is Ops.COPY)

# ---- shard, to, gather ----

def test_shard_splits_an_axis_and_to_gathers():
  a = rand(4, 6)
  s = Tensor(a).shard(D2, axis=0)
  assert s.device == D2 and s.shape == (4, 6)
  s.realize()
  assert s.uop.op is Ops.MULTI and [x.device for x in s.uop.src] == list(D2) and [x.shape for x in s.uop.src] == [(2, 6)] * 2
  np.testing.assert_array_equal(Tensor(s.uop.src[1]).numpy(), a[2:])
  np.testing.assert_array_equal(s.numpy(), a)
  g = s.to("CPU:1")
  assert g.device == "CPU:1"
  np.testing.assert_array_equal(g.numpy(), a)
  r = Tensor(a).to(D2)  # a tuple of devices: the whole tensor on each
  assert r.device == D2
  r.realize()
  assert r.uop.op is Ops.MULTI and r.uop.arg is None and all(x.shape == (4, 6) for x in r.uop.src)
  np.testing.assert_array_equal(r.numpy(), a)
  np.testing.assert_array_equal(Tensor(a, device=D2).numpy(), a)
  t = Tensor(a)
  assert t.shard_(D4, axis=0) is t and t.device == D4
  np.testing.assert_array_equal(t.numpy(), a)

def test_scalars_and_creation_on_several_devices():
  s = Tensor(rand(4, 2)).shard(D2, axis=0)
  np.testing.assert_allclose((s * 2 + 1).numpy(), rand(4, 2) * 2 + 1)
  z = Tensor.zeros(3, 2, device=D2)
  assert z.device == D2
  np.testing.assert_array_equal(z.numpy(), np.zeros((3, 2)))
  np.testing.assert_array_equal(Tensor.full((2,), 7.0, device=D2).numpy(), [7, 7])

# ---- op chains against numpy, fuzzed ----

# (name, tensor op, numpy op): each keeps the value 2-d with both sizes even, so any axis can stay split over 2 devices;
# the fuzz's first sizes are multiples of 4, so the reshape of axis 0 into (n/2, 2) keeps each device's rows its own (6
# rows over 2 devices would move one: a clear error, tested in test_errors_name_what_is_wrong)
OPS = [
  ("add_other_axis", lambda t, o: t + o, lambda a, b: a + b),
  ("mul", lambda t, o: t * o, lambda a, b: a * b),
  ("relu", lambda t, o: t.relu(), lambda a, b: np.maximum(a, 0)),
  ("exp", lambda t, o: (t * 0.1).exp(), lambda a, b: np.exp(a * np.float32(0.1))),
  ("where", lambda t, o: (t < o).where(t, o), lambda a, b: np.where(a < b, a, b)),
  ("sum0", lambda t, o: t.sum(0, keepdim=True).expand(t.shape) - t, lambda a, b: a.sum(0, keepdims=True) - a),
  ("sum1", lambda t, o: t - t.sum(1, keepdim=True), lambda a, b: a - a.sum(1, keepdims=True)),
  ("max0", lambda t, o: t - t.max(0, keepdim=True), lambda a, b: a - a.max(0, keepdims=True)),
  ("transpose", lambda t, o: t.T.contiguous().T, lambda a, b: a),
  ("reshape", lambda t, o: t.reshape(t.shape[0] // 2, 2, t.shape[1]).reshape(t.shape), lambda a, b: a),
  ("flip0", lambda t, o: t.flip(0), lambda a, b: a[::-1]),
  ("flip1", lambda t, o: t.flip(1), lambda a, b: a[:, ::-1]),
  ("matmul_square", lambda t, o: t @ o.T @ t / 8, lambda a, b: a @ b.T @ a / 8),
  ("softmax", lambda t, o: t.softmax(1), lambda a, b: (e := np.exp(a - a.max(1, keepdims=True))) / e.sum(1, keepdims=True)),
  ("pad_shrink0", lambda t, o: t.pad(((2, 0), (0, 0)))[:-2], lambda a, b: np.pad(a, ((2, 0), (0, 0)))[:-2]),
  ("slice1", lambda t, o: t[:, :2].repeat(1, t.shape[1] // 2), lambda a, b: np.tile(a[:, :2], (1, a.shape[1] // 2))),
]

@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from([(4, 6), (8, 4), (8, 2)]), st.sampled_from([None, 0, 1]), st.sampled_from([None, 0, 1]),
       st.lists(st.sampled_from(range(len(OPS))), min_size=1, max_size=3), st.sampled_from([None, 0, 1, (0, 1)]))
def test_op_chains_equal_one_device(shape, axis, other_axis, chain, reduce_axis):
  # the oracle is the same chain on one device (numpy checks the op set itself: tests/tensor)
  a, b = rand(*shape, seed=1), rand(*shape, seed=2)
  t, o = Tensor(a).shard(D2, axis), Tensor(b).shard(D2, other_axis)
  x, y = Tensor(a), Tensor(b)
  for k in chain:
    _, f, _ = OPS[k]
    t, x = f(t, o), f(x, y)
  if reduce_axis is not None: t, x = t.sum(reduce_axis), x.sum(reduce_axis)
  assert t.device == D2 and x.device == "CPU"
  np.testing.assert_allclose(t.numpy(), x.numpy(), rtol=1e-5, atol=1e-5)

def test_the_op_set_of_the_fuzz_against_numpy():
  a, b = rand(4, 6, seed=1), rand(4, 6, seed=2)
  for name, f, g in OPS:
    for axis in (None, 0, 1):
      np.testing.assert_allclose(f(Tensor(a).shard(D2, axis), Tensor(b).shard(D2, 1)).numpy(), g(a.astype(np.float64), b), rtol=1e-4,
                                 atol=1e-5, err_msg=f"{name} split on {axis}")

@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from([None, 0, 1]), st.sampled_from([None, 0, 1]), st.sampled_from([(4, 6, 2), (8, 4, 6)]))
def test_matmul_and_its_gradients_equal_one_device(xa, wa, sizes):
  m, k, n = sizes
  a, w = rand(m, k, seed=3), rand(k, n, seed=4)
  def run(devs):
    x, wt = Tensor(a), Tensor(w, requires_grad=True)
    if devs: x, wt = x.shard(devs, xa), Tensor(w).shard(devs, wa)
    wt.requires_grad = True
    out = (x @ wt).tanh()
    out.mean().backward()
    return out.numpy(), wt.grad.numpy(), wt.grad.device
  (o1, g1, d1), (o2, g2, d2) = run(None), run(D2)
  assert d2 == D2 and d1 == "CPU"
  np.testing.assert_allclose(o2, o1, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(g2, g1, rtol=1e-5, atol=1e-6)

def test_gradient_through_shard_reaches_the_one_device_tensor():
  a = rand(4, 2)
  for axis in (None, 0, 1):
    x = Tensor(a, requires_grad=True)
    (x.shard(D2, axis=axis) * x.shard(D2, axis=axis)).sum().backward()
    assert x.grad.device == "CPU"
    np.testing.assert_allclose(x.grad.numpy(), 2 * a, rtol=1e-6)

# ---- the all-reduce ----

def test_all_reduce_naive_below_the_threshold_ring_above_it():
  small = Tensor(rand(4, 8)).shard(D4, axis=0).realize().sum(0)
  assert copies(small) == 4 * 3  # every device's part to every other device
  np.testing.assert_allclose(small.numpy(), rand(4, 8).sum(0), rtol=1e-5)
  n = multi_helpers.RING_THRESHOLD  # the real threshold crossed: (4, n) split on axis 0, summed over it
  big = rand(4, n)
  t = Tensor(big).shard(D4, axis=0).realize().sum(0)
  # reduce-scatter (3 chunks in to each device) then all-gather (each reduced chunk out to 3 devices)
  assert copies(t) == 4 * 3 * 2
  t.realize()
  parts = [Tensor(s).numpy() for s in t.uop.src]
  for p in parts[1:]: np.testing.assert_array_equal(p, parts[0])  # the replicas are bit-identical
  np.testing.assert_allclose(parts[0], big.sum(0), rtol=1e-5, atol=1e-5)
  below = Tensor(rand(4, n - 1)).shard(D4, axis=0).realize().sum(0)
  assert copies(below) == 4 * 3

def test_all_reduce_of_max_and_of_two_devices_on_both_sides_of_the_threshold(monkeypatch):
  a = rand(6, 10)
  for threshold in (1, 10 ** 9):
    monkeypatch.setattr(multi_helpers, "RING_THRESHOLD", threshold)
    for devs in (D2, D4[:3]):
      s = Tensor(a).shard(devs, axis=0)
      np.testing.assert_allclose(s.max(0).numpy(), a.max(0))
      np.testing.assert_allclose(s.sum().numpy(), a.sum(), rtol=1e-5)
      np.testing.assert_allclose((s * 2).mean(0).numpy(), (a * 2).mean(0), rtol=1e-5, atol=1e-6)

# ---- data-parallel training ----

def _mlp_steps(devs, opt_cls, steps=3):
  rng = np.random.default_rng(5)
  X, Y = rng.standard_normal((32, 12)).astype(np.float32), rng.integers(0, 5, 32)
  l1, l2 = nn.Linear(12, 16), nn.Linear(16, 5)
  for layer, s in ((l1, 6), (l2, 7)):
    layer.weight.replace(Tensor(rand(*layer.weight.shape, seed=s) * 0.3))
    layer.bias.replace(Tensor(rand(*layer.bias.shape, seed=s + 10) * 0.1))
  params = [l1.weight, l1.bias, l2.weight, l2.bias]
  x, y = Tensor(X), Tensor(Y)
  if devs:
    for p in params: p.replace(p.to(devs))
    x, y = x.shard(devs, axis=0), y.shard(devs, axis=0)
  opt = opt_cls(params, lr=0.05)
  losses = []
  with Tensor.train():
    for _ in range(steps):
      opt.zero_grad()
      loss = l2(l1(x).relu()).sparse_categorical_crossentropy(y)
      loss.backward()
      opt.step()
      losses.append(loss.item())
  return losses, [p.numpy() for p in params], [p.device for p in params]

@pytest.mark.parametrize("opt_cls", [nn.optim.SGD, nn.optim.Adam])
def test_a_data_parallel_step_equals_the_one_device_step_on_the_whole_batch(opt_cls):
  (l1, p1, _), (l2, p2, devs) = _mlp_steps(None, opt_cls), _mlp_steps(D2, opt_cls)
  assert all(d == D2 for d in devs)
  np.testing.assert_allclose(l2, l1, rtol=1e-5, atol=1e-5)
  for a, b in zip(p1, p2): np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)

def test_sharded_parameters_step_and_stay_sharded():
  w0 = rand(8, 4)
  w = Tensor(w0).shard(D2, axis=0)
  w.requires_grad = True
  opt = nn.optim.SGD([w], lr=0.1)
  with Tensor.train():
    opt.zero_grad()
    (w * w).sum().backward()
    opt.step()
  assert w.uop.op is Ops.MULTI and w.uop.arg == 0
  np.testing.assert_allclose(w.numpy(), w0 - 0.1 * 2 * w0, rtol=1e-6)

@pytest.mark.parametrize("opt_cls, kw", [(nn.optim.SGD, {"momentum": 0.9}), (nn.optim.Adam, {})])
def test_optimizer_state_follows_a_split_parameter(opt_cls, kw):
  """Momentum and Adam's moments of a parameter split on an axis are split as it (each device keeps its piece), a
  replicated parameter's are whole on each device; three steps equal the one-device steps."""
  w0, r0 = rand(8, 4), rand(8, 4, seed=1)
  def steps(split: bool):
    w, r = Tensor(w0), Tensor(r0)
    if split: w, r = w.shard(D2, axis=1), r.to(D2)
    w.requires_grad = True
    opt = opt_cls([w], lr=0.01, **kw)
    with Tensor.train():
      for _ in range(3):
        opt.zero_grad()
        (w * w * r).sum().backward()
        opt.step()
    return w, opt
  (w1, _), (w2, opt) = steps(False), steps(True)
  state = opt.b if opt_cls is nn.optim.SGD else opt.m + opt.v
  assert state and all(s.uop.op is Ops.MULTI and s.uop.arg == 1 and s.uop.src[0].shape == (8, 2) for s in state)
  assert w2.uop.op is Ops.MULTI and w2.uop.arg == 1
  np.testing.assert_allclose(w2.numpy(), w1.numpy(), rtol=1e-5, atol=1e-6)

# ---- what is not supported: clear errors ----

def test_errors_name_what_is_wrong():
  with pytest.raises(MultiDeviceError, match="does not split evenly over 2 devices"): Tensor(rand(3, 2)).shard(D2, axis=0)
  with pytest.raises(MultiDeviceError, match="at least two devices"): Tensor(rand(2)).shard(("CPU",), axis=0)
  with pytest.raises(MultiDeviceError, match="must differ"): Tensor(rand(2)).shard(("CPU", "CPU"), axis=0)
  with pytest.raises(MultiDeviceError, match="several devices already"): Tensor(rand(2)).shard(D2, 0).shard(D2, 0)
  with pytest.raises(MultiDeviceError, match=r"reshape \(4, 6\) -> \(6, 4\) of a tensor split on axis 1"):
    Tensor(rand(4, 6)).shard(D2, axis=1).reshape(6, 4).realize()
  with pytest.raises(DeviceMismatchError, match=r"different devices: \('CPU', 'CPU:1'\) and \('CPU:2', 'CPU:3'\)"):
    Tensor(rand(4)).shard(D2, 0) + Tensor(rand(4)).shard(("CPU:2", "CPU:3"), 0)

def test_embeddings_split_on_the_batch_or_the_features_and_their_gradients():
  rng = np.random.default_rng(12)
  W, idx = rand(28, 20, seed=13), rng.integers(0, 28, (4, 10)).astype(np.int32)
  def run(wa, xa, devs):
    w, x = Tensor(W), Tensor(idx)
    if devs: w, x = w.shard(devs, wa), x.shard(devs, xa)
    w.requires_grad = True
    z = w[x]
    (z * z).sum().backward()
    return z.numpy(), w.grad.numpy()
  z1, g1 = run(None, None, None)
  for wa, xa in ((None, 0), (1, None), (0, None), (1, 0), (0, 1)):
    z2, g2 = run(wa, xa, D2)
    np.testing.assert_array_equal(z2, z1, err_msg=f"table split on {wa}, indices on {xa}")
    np.testing.assert_allclose(g2, g1, rtol=1e-6, err_msg=f"table split on {wa}, indices on {xa}")

def test_a_convolution_of_a_split_batch_and_its_weight_gradient():
  a, w = rand(4, 2, 6, 6, seed=8), rand(3, 2, 3, 3, seed=9)
  def run(devs):
    x, wt = Tensor(a), Tensor(w)
    if devs: x, wt = x.shard(devs, axis=0), wt.to(devs)
    wt.requires_grad = True
    out = x.conv2d(wt).relu().max_pool2d()
    out.sum().backward()
    return out.numpy(), wt.grad.numpy()
  (o1, g1), (o2, g2) = run(None), run(D2)
  np.testing.assert_allclose(o2, o1, rtol=1e-6)
  np.testing.assert_allclose(g2, g1, rtol=1e-5, atol=1e-5)

@pytest.mark.skipif(not ops_cl.available(), reason=f"no OpenCL device: {ops_cl.INSTALL}")
def test_cl_beside_cpu_and_two_cl_devices_where_there_are():
  a, w = rand(4, 6), rand(6, 3)
  s = Tensor(a).shard(("CL", "CPU"), axis=0)
  np.testing.assert_allclose((s @ Tensor(w).to(("CL", "CPU"))).sum(0).numpy(), (a @ w).sum(0), rtol=1e-5)
  try: Tensor([1.0], device="CL:1").realize()
  except DeviceError: return  # one OpenCL device here (pocl has one)
  np.testing.assert_allclose(Tensor(a).shard(("CL", "CL:1"), axis=1).sum(1).numpy(), a.sum(1), rtol=1e-5)

@pytest.mark.skipif(not ops_cl.available(), reason=f"no OpenCL device: {ops_cl.INSTALL}")
def test_two_cl_devices_from_pocl():
  """pocl makes several OpenCL devices of the CPU when POCL_DEVICES lists them (read as the platform loads: hence a
  process of its own); its device kind is `pthread` before pocl 4 and `cpu` after. Another platform shows what it has."""
  import os, subprocess, sys
  from pathlib import Path
  script = Path(__file__).with_name("two_cl_devices.py")
  outs = []
  for kinds in ("pthread pthread", "cpu cpu"):
    r = subprocess.run([sys.executable, str(script)], env={**os.environ, "POCL_DEVICES": kinds}, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    if "two CL devices ok" in r.stdout: return
    outs.append(r.stdout.strip())
  name = ops_cl._info(ops_cl.devices()[0][1], ops_cl.CL_DEVICE_NAME, str)
  if name.startswith(("pthread-", "cpu-", "basic-")): pytest.fail(f"pocl ({name}) showed one device with POCL_DEVICES set: {outs}")
  pytest.skip(f"one OpenCL device ({name}), not pocl: it does not read POCL_DEVICES")

# ---- TinyJit and assign ----

def test_tinyjit_takes_multi_device_inputs_and_replays_each_devices_kernels():
  from tensor import TinyJit
  @TinyJit
  def f(x: Tensor, w: Tensor) -> Tensor: return (x @ w).sum(0).realize()
  w = Tensor(rand(3, 2, seed=11)).to(D2)
  for i in range(4):
    a = rand(4, 3, seed=20 + i)
    out = f(Tensor(a).shard(D2, axis=0), w)
    assert out.device == D2
    np.testing.assert_allclose(out.numpy(), (a @ rand(3, 2, seed=11)).sum(0), rtol=1e-5)
  assert f.captured is not None

def test_assign_into_a_multi_device_tensor_not_in_memory_yet():
  out = Tensor.zeros(4).contiguous().realize().shard(D2, 0)  # shards still to compute
  out.assign(Tensor.ones(4).shard(D2, 0) * 3).realize()
  assert out.uop.op is Ops.MULTI and out.tolist() == [3.0] * 4

def test_writes_through_views_of_a_multi_device_tensor_reach_it():
  for axis in (None, 0, 1):
    out = Tensor.zeros(4, 4).contiguous().realize().shard(D2, axis).realize()
    out[:, 2:3].assign(Tensor.ones(4, 1).shard(D2, 0 if axis == 0 else None)).realize()
    out[1:3, 0] = 5.0
    expect = np.zeros((4, 4), np.float32)
    expect[:, 2], expect[1:3, 0] = 1, 5
    assert out.realize().uop.op is Ops.MULTI and out.uop.arg == axis
    np.testing.assert_array_equal(out.numpy(), expect, err_msg=f"split on {axis}")

def test_the_ring_context_variable_forces_or_forbids_the_reduce_scatter_form():
  from runtime.helpers import Context
  t = Tensor(rand(2, 8)).shard(D2, axis=0).realize()
  with Context(RING=2): assert copies(t.sum(0)) == 2 * 2  # 1 chunk in, 1 chunk out per device
  with Context(RING=0): assert copies(t.sum(0)) == 2
  with Context(RING=2): np.testing.assert_allclose(t.sum(0).numpy(), rand(2, 8).sum(0), rtol=1e-6)
  with Context(RING=2): assert Tensor([[1, 2], [3, 4]]).shard(D2, axis=1).sum().item() == 10

def test_random_numbers_and_dropout_on_several_devices():
  # as tinygrad: random numbers are made on one device, then laid out (the same numbers on each device, or split)
  with pytest.raises(ValueError, match="make it on one"): Tensor.rand(4, 3, device=D2)
  r = Tensor.rand(4, 3).to(D2)
  assert r.device == D2 and 0 <= r.numpy().min() and r.numpy().max() < 1
  r.realize()
  np.testing.assert_array_equal(Tensor(r.uop.src[0]).numpy(), Tensor(r.uop.src[1]).numpy())  # the same numbers on each device
  with Tensor.train(): y = Tensor.ones(8, 6).shard(D2, axis=0).dropout(0.5).numpy()
  assert set(np.unique(y)) <= {0.0, 2.0} and 0 < (y == 0).sum() < y.size

def test_shard_like_lays_a_tensor_out_as_another():
  a = rand(4, 6)
  y = Tensor.ones(4, 6).shard(D2, axis=1) * 2
  for x in (Tensor(a), Tensor(a).shard(D2, axis=0), Tensor(a).to(D2)):
    z = x.shard_like(y).realize()
    assert z.uop.op is Ops.MULTI and z.uop.arg == 1 and z.device == D2
    np.testing.assert_array_equal(z.numpy(), a)
  assert Tensor(a).shard(D2, axis=0).shard_like(Tensor.ones(2, device="CPU:1")).device == "CPU:1"

# ---- a tensor's layout as tinygrad's tests read it, and tensors made like a multi-device one ----

def test_uop_axis_is_the_split_axis_after_ops():
  x = Tensor(rand(8, 6)).shard(D2, 0)
  assert x.uop.axis == 0 and (x + 1).uop.axis == 0 and x.T.uop.axis == 1 and x.reshape(8, 3, 2).permute(2, 0, 1).uop.axis == 1
  assert Tensor(rand(8, 6)).shard(D2).uop.axis is None and Tensor(rand(8, 6)).uop.axis is None
  assert (x + Tensor(rand(8, 6)).shard(D2)).uop.axis == 0  # a replicated operand follows the split one

@pytest.mark.parametrize("axis", [None, 0, 1])
def test_tensors_made_like_a_multi_device_one_are_laid_out_as_it(axis):
  x = Tensor(rand(4, 6)).shard(D2, axis)
  for t in (x.full_like(3.0), x.zeros_like(), x.const_like(7), x.rand_like(), x.randn_like()):
    assert t.device == D2 and t.uop.axis == axis and t.shape == (4, 6)
  np.testing.assert_array_equal(x.full_like(3.0).numpy(), np.full((4, 6), 3.0, np.float32))
  r = x.rand_like().numpy()
  assert ((r >= 0) & (r < 1)).all() and len(np.unique(r)) == r.size
  out = x.contiguous().realize()
  out.assign(out.const_like(7)).realize()
  np.testing.assert_array_equal(out.numpy(), np.full((4, 6), 7, np.float32))
  assert x.full_like(1.0, device="CPU:2").device == "CPU:2"  # one device named: made there

def test_random_tensors_on_several_devices_are_made_on_one_and_sharded():
  with pytest.raises(ValueError, match="make it on one and .shard"): Tensor.rand(8, device=D2)
  with pytest.raises(DeviceMismatchError, match="can't be made on"): Tensor(rand(4, 4)).shard(D2, 1).rand_like(device=("CPU:2", "CPU:3"))

def test_a_tensor_of_a_multi_device_graph_node_takes_a_dtype():
  x = Tensor([1, 2], dtype="int32").shard(D2, 0)
  assert Tensor(x.uop).device == D2 and Tensor(x.uop).numpy().tolist() == [1, 2]
  y = Tensor(x.uop, dtype="float32")
  assert y.dtype.name == "float" and y.numpy().tolist() == [1.0, 2.0]
