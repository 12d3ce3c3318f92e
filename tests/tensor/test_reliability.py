"""Regression tests of issue 10's engine half, case by case: reductions of reductions past the optimizer's split threshold
(the linearizer ordered loops by RANGE id, and a split reduction's new loop has a larger id than the reductions inside it).
Values against numpy; each case also checks the optimizer really split a reduction, so it can't pass by not optimizing.
"""
import numpy as np
import pytest
from tensor import Tensor, Context, dtypes
from runtime import Ops
from tensor.codegen import lower_kernel

def opts_of(t: Tensor) -> list[tuple]:
  """The optimizations applied to each kernel computing t (kernelizes t; nothing runs)."""
  t.kernelize()
  return [o for u in t.uop.toposort() if u.op is Ops.KERNEL and u.arg.ast.op is Ops.SINK for o in lower_kernel(u.arg.ast, opt=True)[1]]

def data(*shape, seed=0) -> np.ndarray: return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)
def softmax(a, axis=-1):
  e = np.exp(a - a.max(axis, keepdims=True))
  return e / e.sum(axis, keepdims=True)

a64, w1, w2 = data(64, 64), data(64, 65, seed=1), data(65, 130, seed=2)
CASES = {
  # the first case: a column sum (5 long) inside a max over 64 columns, split into 16 lanes
  "sum0_max0": (lambda x: x.sum(0).max(0), lambda x: x.sum(0).max(0), np.ones((5, 64), np.float32)),
  "sum0_max0_63": (lambda x: x.sum(0).max(0), lambda x: x.sum(0).max(0), np.ones((5, 63), np.float32)),
  "matmul_sum": (lambda x: (x @ x).sum(), lambda x: (x @ x).sum(), a64),
  "matmul_max1": (lambda x: (x @ x).max(1), lambda x: (x @ x).max(1), a64),
  "T_mean1_mean0": (lambda x: x.T.mean(1).mean(0), lambda x: x.T.mean(1).mean(0), data(130, 64)),
  "mean0_sum0": (lambda x: x.mean(0).sum(0), lambda x: x.mean(0).sum(0), data(65, 128)),
  "softmax_matmul_matmul_mean1": (lambda x: (x.softmax(1) @ Tensor(w1) @ Tensor(w2)).mean(1),
                                  lambda x: (softmax(x, 1) @ w1 @ w2).mean(1), a64),
  "max_of_sums_of_max": (lambda x: x.max(1).reshape(8, 16).sum(1).max(0), lambda x: x.max(1).reshape(8, 16).sum(1).max(0), data(128, 64)),
}

@pytest.mark.parametrize("name", list(CASES))
def test_reduction_of_a_reduction(name):
  ours, theirs, x = CASES[name]
  with Context(NOOPT=0):
    out = ours(Tensor(x))
    if name != "sum0_max0_63": assert any(o[0] == "UNROLL" for o in opts_of(out)), "the case no longer crosses the split threshold"
    np.testing.assert_allclose(out.numpy(), theirs(x.astype(np.float64)), rtol=1e-5, atol=1e-4)

# ---- sizes past 2**31: index math in int64 where a size reaches it ----

def c_source(t: Tensor) -> str:
  from tensor.engine.realize import get_program
  t.kernelize()
  ks = [u for u in t.uop.toposort() if u.op is Ops.KERNEL and u.arg.ast.op is Ops.SINK]
  return "\n".join(get_program(k.arg.ast, "CPU").src for k in ks)

def test_small_kernels_keep_int32_loop_counters():
  src = c_source(Tensor(np.ones((64, 130), np.float32)).sum(1))
  assert "for (int ridx" in src and "long long ridx" not in src

def test_a_size_past_int32_gets_int64_index_math():
  src = c_source(Tensor.ones(2**31 + 16, dtype=dtypes.uint8) + 1)
  # on threads the loop is a function of its own running [lo, hi) (tensor/renderer/cstyle.outline), the bound the region's
  assert "for (long long ridx0 = 0; ridx0 < 2147483664ll; ridx0++)" in src or \
    "for (long long ridx0 = lo; ridx0 < hi; ridx0++)" in src and "long long part_n = 2147483664ll," in src

def test_index_math_that_may_overflow_int32_is_widened(monkeypatch):
  # sizes below the threshold, but an index that still passes 2**31: range analysis catches it and the kernel is redone in int64
  import tensor.codegen as codegen
  monkeypatch.setattr(codegen, "INT32_INDEX_LIMIT", 2**62)
  src = c_source(Tensor.ones(2**31 + 16, dtype=dtypes.uint8) + 1)
  assert "long long ridx0" in src

def memory_available() -> int:
  try:
    with open("/proc/meminfo") as f: return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
  except (OSError, StopIteration): return 0

@pytest.mark.skipif(memory_available() < 8 * 2**30, reason="needs 8 GiB of free memory for two 2 GiB buffers and their copies")
def test_a_uint8_tensor_past_2_31_elements():
  # the case segfaulted: the C loop counter was an int running to 2147483664
  n = 2**31 + 16
  x = (Tensor.ones(n, dtype=dtypes.uint8) + 1).realize()
  mem = x._buffer()[0].as_array()
  assert mem.shape == (n,) and mem[-17:].tolist() == [2] * 17 and int(mem.min()) == int(mem.max()) == 2
  assert x[n - 3:].tolist() == [2, 2, 2]
  assert x.sum(dtype=dtypes.int64).item() == 2 * n  # the largest tensor summed here: 2**31 + 16 elements, exactly

def test_a_reduction_of_a_value_that_does_not_use_the_loop_folds():
  # Tensor.ones(10**12).sum() hung (10**12 iterations of an int counter that wrapped): n equal terms sum to n * x, no loop
  assert Tensor.ones(10**12).sum().item() == float(np.float32(1e12))
  assert "for (" not in c_source(Tensor.ones(10**12).sum())
  assert Tensor.ones(10**12, dtype=dtypes.int32).sum().item() == 10**12  # ints add up in int64, as torch
  assert Tensor.ones(10**12, dtype=dtypes.int32).sum(dtype=dtypes.int32).item() == (10**12 + 2**31) % 2**32 - 2**31  # wraps as the loop would
  np.testing.assert_array_equal(Tensor.ones(3, 10**10).sum(1).numpy(), np.full(3, 1e10, np.float32))
  np.testing.assert_array_equal(Tensor.full((3, 10**10), -2.5).max(1).numpy(), np.full(3, -2.5, np.float32))
  # a value loaded per output element, broadcast over a long reduced axis: one multiply per output
  v = np.array([1.5, -2.0, 0.0, np.inf], np.float32)
  t = Tensor(v).reshape(4, 1).expand(4, 10**9)
  np.testing.assert_array_equal(t.sum(1).numpy(), v * np.float32(1e9))
  np.testing.assert_array_equal(t.max(1).numpy(), v)
  # only the unused loop goes: a reduction over (rows it uses, columns it does not)
  a = np.arange(12, dtype=np.float32).reshape(3, 4)
  np.testing.assert_array_equal(Tensor(a).reshape(3, 4, 1).expand(3, 4, 5).sum((1, 2)).numpy(), a.sum(1) * 5)
  np.testing.assert_array_equal(Tensor.ones(0, 5).sum(0).numpy(), np.zeros(5, np.float32))

def test_a_folded_loop_of_one_upcast_lane_is_not_run_by_the_others():
  # avg_pool2d(count_include_pad=False) counts each window's valid taps: three lanes (upcast) of one reduction over
  # (ridx1, ridx2); the middle lane does not use ridx1, so its loop folds to x2, but it shared ridx2 with the lanes that
  # run it inside ridx1: its count came out x4 (0.75 instead of 1.5)
  x = np.arange(1, 3, dtype=np.float32).reshape(1, 1, 2, 1)
  out = Tensor(x).avg_pool2d((2, 2), stride=(1, 2), padding=(1, 1), count_include_pad=False)
  np.testing.assert_array_equal(out.numpy().ravel(), [1.0, 1.5, 2.0])
  valid = Tensor.ones(2, 1).pad(((1, 1), (1, 0)))  # (4, 2): which taps of a window hold data
  windows = Tensor.stack(*[valid[i:i + 2] for i in range(3)])  # (3, 2, 2): lane i reads rows i, i+1
  np.testing.assert_array_equal(windows.sum((1, 2)).numpy(), [1.0, 2.0, 1.0])

# ---- long graphs ----

def test_ten_thousand_chained_multiply_adds():
  # building took 139 s (UOp.device walked the chain on every op); realizing raised "over 10001 nested rewrites"
  t = Tensor([1.0, 2.0])
  for _ in range(10_000): t = t * 1.0001 + 0.5
  want = np.array([1.0, 2.0], np.float32)
  for _ in range(10_000): want = want * np.float32(1.0001) + np.float32(0.5)
  np.testing.assert_allclose(t.numpy(), want, rtol=1e-4)

def test_a_hundred_thousand_chained_adds():
  # did not finish in 300 s; one kernel of 100,000 dependent adds also crashed gcc 12: cut into kernels of bounded depth
  t = Tensor([0.0, 1.0])
  for _ in range(100_000): t = t + 1
  assert t.tolist() == [100_000.0, 100_001.0]

# ---- scalars that vary between calls ----

@pytest.fixture
def compiles(monkeypatch):
  """The sources compiled for the CPU while the test runs (from empty in-memory program tables)."""
  from runtime import ops_cpu
  from runtime.helpers import LRU
  from tensor.engine.state import ENGINE
  monkeypatch.setattr(ENGINE, "programs", LRU(64))
  monkeypatch.setattr(ENGINE, "templates", LRU(64))
  seen, real = [], ops_cpu.compile_c
  def spy(src, *a, **k):
    seen.append(src)
    return real(src, *a, **k)
  monkeypatch.setattr(ops_cpu, "compile_c", spy)
  return seen

def test_a_scalar_that_varies_is_a_kernel_argument(compiles):
  # t * float(i) + 1 for 500 values compiled 500 kernels: the second value of a kind compiles it with parameters, once
  t = Tensor(np.arange(4, dtype=np.float32) + 0.25).realize()
  for i in range(2, 60):
    np.testing.assert_array_equal((t * float(i) + 1.5).numpy(), (np.arange(4, dtype=np.float32) + 0.25) * np.float32(i) + np.float32(1.5))
  assert len(compiles) == 2 and "+7" not in compiles[1] and "fvals[0]" in compiles[1] and "fvals[1]" in compiles[1]

@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
@pytest.mark.parametrize("dtype, values", [(dtypes.int32, [3, -7, 2**31 - 1]), (dtypes.uint64, [2**64 - 1, 5, 2**63]),
                                           (dtypes.float16, [0.5, 65504.0, -1.5]), (dtypes.int8, [-128, 127, 3])])
def test_parameters_of_every_kind_keep_their_values(device, dtype, values):
  x = np.array([1, 2, 3], dtypes.to_numpy(dtype))
  t = Tensor(x, device=device).realize()
  for v in values:
    with np.errstate(over="ignore"): want = x + np.array(v).astype(x.dtype)
    np.testing.assert_array_equal((t + v).numpy(), want)

def test_the_first_kernel_of_a_kind_keeps_its_constants(compiles):
  # the seeds: `Tensor([1, 2, 3, 4]) + 3 + 4` is one kernel adding the folded 7
  base = np.array([5, 6, 7, 8], np.int32) * 1000 + 11
  assert (Tensor(base) + 3 + 4).tolist() == (base + 7).tolist()
  assert "+7)" in compiles[-1] and "ivals[0]" not in compiles[-1].split("_call")[0]
  assert (Tensor(base) + 5 + 6).tolist() == (base + 11).tolist()
  assert "ivals[0]" in compiles[-1] and "ivals[1]" in compiles[-1]

def test_program_tables_are_bounded(monkeypatch):
  from runtime.helpers import LRU
  from tensor.engine.state import ENGINE
  monkeypatch.setattr(ENGINE, "programs", LRU(8))
  monkeypatch.setattr(ENGINE, "templates", LRU(8))
  t = Tensor(np.arange(5, dtype=np.float32)).realize()
  for n in range(1, 30): assert (t.reshape(5, 1).expand(5, n).sum(1)).tolist() == (np.arange(5) * n).tolist()
  assert len(ENGINE.programs) <= 8 and len(ENGINE.templates) <= 8

# ---- devices agree ----

def test_bool_floordiv_and_mod_on_cpu_as_on_python():
  # the C renderer had no rule for IDIV and MOD on bools
  from runtime.ops import exec_alu
  a, b = np.array([True, False, True, False]), np.array([True, True, False, False])
  for dev in ("CPU", "PYTHON"):
    A, B = Tensor(a, device=dev), Tensor(b, device=dev)
    assert (A // B).tolist() == [True, False, False, False] and (A % B).tolist() == [False] * 4  # numpy's values, as bools
    for op in (Ops.IDIV, Ops.MOD):  # the ops themselves: exec_alu's x//0 == 0 and x%0 == x
      assert A._alu(op, B).tolist() == [exec_alu(op, dtypes.bool, [x, y]) for x, y in zip(a.tolist(), b.tolist())]

def test_bfloat16_kernels_render_to_c():
  # bfloat16 was a NotImplementedError on the CPU: it computes in double and rounds each result, as the PYTHON device does
  a = np.array([1.5, -2.25, 3e10, 0.1, np.nan, -0.0, 7.0, 1e-40], np.float32)
  b = np.array([0.3, 4.0, 1e-3, -5.5, 1.0, 2.0, 0.0, 3.0], np.float32)
  outs = {}
  for dev in ("CPU", "PYTHON"):
    A, B = Tensor(a, device=dev, dtype=dtypes.bfloat16), Tensor(b, device=dev, dtype=dtypes.bfloat16)
    ts = [A + B, A * B - A, A / B, (A * B).exp2(), A.sqrt(), A.maximum(B), A // B, A % B, A.sum(), A < B, A.sin(), (A * 3).cast(dtypes.int32),
          A.cast(dtypes.float16), B.bitcast(dtypes.int16), Tensor(np.array([16256, -16512], np.int16), device=dev).bitcast(dtypes.bfloat16)]
    with np.errstate(all="ignore"): outs[dev] = [t.numpy() for t in ts]
  for c, p in zip(outs["CPU"], outs["PYTHON"]): np.testing.assert_array_equal(c, p)
  np.testing.assert_array_equal(outs["CPU"][0][:2], [1.796875, 1.75])  # 1.5 + 0.30078125 rounded to bfloat16

def test_twenty_thousand_one_element_inputs_summed():
  # one kernel per 512 dependent adds, each reading 513 buffers through one array of pointers (ctypes refused 20,001 arguments)
  xs = [Tensor([i]) for i in range(20_000)]
  Tensor.realize(*xs)
  s = xs[0]
  for x in xs[1:]: s = s + x
  assert s.item() == sum(range(20_000))

def test_one_kernel_reading_two_thousand_buffers(compiles):
  # a balanced tree of adds is shallow: one kernel with 2,001 parameters, called with one array
  xs = [Tensor([float(i)]) for i in range(2_000)]
  Tensor.realize(*xs)
  while len(xs) > 1: xs = [xs[i] + xs[i + 1] if i + 1 < len(xs) else xs[i] for i in range(0, len(xs), 2)]
  assert xs[0].item() == sum(range(2_000))
  assert len(compiles) == 1 and "bufs[2000]" in compiles[0]
