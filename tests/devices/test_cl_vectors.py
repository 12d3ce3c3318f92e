"""OpenCL's vector types (tensor/renderer/gpu.py CL_CAPS, rules/render_gpu.rules): upcast lanes become float4/int4/long2
values read by vloadN and written by vstoreN; results against numpy on CL at lengths that cross the upcast (whole vectors,
a remainder, fewer lanes than a vector) for each lane type the renderer has; and the device's work-group limit reaching
the heuristic, BEAM and the launch.
"""
import numpy as np
import pytest
from runtime import ops_cl
from runtime.device import Device
from runtime.ops import Ops
from tensor import Tensor
from tensor.codegen import program, target_for
from tensor.codegen.grid import GridCostModel
from tensor.codegen.opt import Opt, OptError
from tensor.codegen.target import Target
from tensor.renderer.gpu import CLRenderer, CUDARenderer, MAX_GROUP

needs_cl = pytest.mark.skipif(not ops_cl.available(), reason=f"no OpenCL device: {ops_cl.INSTALL}")

pytestmark = pytest.mark.optimized  # the Opts, vectors and groups the optimizer makes (under NOOPT=1 too: tests/conftest.py)

def kernel_ast(t: Tensor):
  return [u for u in t.kernelize().uop.toposort() if u.op is Ops.KERNEL][-1].arg.ast

def cl_source(t: Tensor) -> str: return program(kernel_ast(t), target_for("CL")).src

def test_an_elementwise_kernel_reads_and_writes_float4s():
  a, b = Tensor.empty(4096, device="CPU"), Tensor.empty(4096, device="CPU")
  src = cl_source((a * b + 1).maximum(a))
  assert "float4 val0 = vload4(0, (data1+" in src and "vstore4(" in src and "select(b, a, (a > b) | isnan(a))" in src
  assert "float val" not in src  # no scalar left

def test_a_matmul_accumulates_in_vectors_with_fma():
  src = cl_source(Tensor.empty(256, 256, device="CPU") @ Tensor.empty(256, 256, device="CPU"))
  assert "float4 acc0" in src and "fma(" in src and "vload4(0, (data2+" in src

def test_cuda_stays_scalar():
  assert CUDARenderer().caps is None and "float4" not in program(kernel_ast(Tensor.empty(4096, device="CPU") * 2), target_for("CUDA")).src

RNG = np.random.default_rng(0)

@needs_cl
@pytest.mark.parametrize("n", [3, 4, 33, 4096, 4097, 65539])
def test_float_elementwise_ops_agree_with_numpy(n):
  x, y = RNG.standard_normal(n).astype(np.float32), RNG.standard_normal(n).astype(np.float32)
  x[::7] = np.nan  # max lets nan win, as numpy's maximum, lane by lane
  a, b = Tensor(x, device="CL"), Tensor(y, device="CL")
  np.testing.assert_array_equal(a.maximum(b).numpy(), np.maximum(x, y))
  np.testing.assert_allclose((a * b - b / 3 + -a).numpy(), x * y - y / np.float32(3) - x, rtol=1e-6)
  np.testing.assert_array_equal(b.relu().numpy(), np.maximum(y, 0))
  np.testing.assert_array_equal((a < b).where(a, b).numpy(), np.where(x < y, x, y))
  np.testing.assert_array_equal(b.bitcast("int32").numpy(), y.view(np.int32))

def run_upcast(f, x: np.ndarray, amount: int) -> tuple[np.ndarray, str]:
  """f of one input run on CL as one kernel with its output loop upcast by `amount` (the heuristic upcasts only float
  kernels; integer vectors come from an Opt list, as BEAM's), and the kernel's source."""
  from runtime.device import Buffer
  from runtime.dtype import dtypes
  t = f(Tensor.empty(x.size, dtype=dtypes.from_numpy(x.dtype), device="CPU"))
  p = program(kernel_ast(t), target_for("CL"), opts=[Opt("UPCAST", 0, amount)])
  out, inp = Buffer("CL", x.size, t.dtype), Buffer("CL", x.size, dtypes.from_numpy(x.dtype), x)
  Device["CL"].program(p.src, p.name)([out.ensure_allocated(), inp])
  return out.numpy(), p.src

@needs_cl
@pytest.mark.parametrize("dtype, vector", [(np.int32, "int4"), (np.uint32, "uint4"), (np.int64, "long2"), (np.uint64, "ulong2")])
@pytest.mark.parametrize("n, amount", [(8, 4), (4096, 8), (4100, 4)])
def test_integer_vectors_wrap_and_shift_as_numpy(dtype, vector, n, amount):
  info = np.iinfo(dtype)
  x = RNG.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
  got, src = run_upcast(lambda a: (a << 3) + (a >> 5) * 3 - a, x, amount)
  assert f"{vector} val0 = vload" in src and ")<<" in src and "int val" not in src and "long val" not in src
  with np.errstate(over="ignore"): np.testing.assert_array_equal(got, (x << dtype(3)) + (x >> dtype(5)) * dtype(3) - x)
  got, src = run_upcast(lambda a: a.maximum(a * 3), x, amount)
  assert "max(a, b)" in src
  with np.errstate(over="ignore"): np.testing.assert_array_equal(got, np.maximum(x, x * dtype(3)))

@pytest.mark.parametrize("n", [4, 8, 36])
def test_shifts_by_loaded_amounts_wider_than_a_vector(n):
  """An int64 shift by amounts read from memory, upcast past CL's long2: C shifts a vector only by one amount, so its lanes
  stay scalars. The split of a too-wide vector into long2 parts must not fire on lanes no part can lift (it rebuilt itself:
  a rewrite cycle); then on CL, against numpy."""
  a, b = np.array(3, np.int32), RNG.integers(0, 40, n).astype(np.int64)
  t = Tensor(a, device="CPU") << Tensor(b, device="CPU")
  p = program(kernel_ast(t), target_for("CL"), opts=[Opt("UPCAST", 0, 4)])
  assert "<<" in p.src
  if ops_cl.available(): np.testing.assert_array_equal((Tensor(a, device="CL") << Tensor(b, device="CL")).numpy(), np.int64(3) << b)

@needs_cl
@pytest.mark.parametrize("shape", [(256, 256, 256), (129, 100, 67), (64, 1024, 48)])
def test_matmuls_agree_with_numpy(shape):
  m, k, n = shape
  x, y = RNG.standard_normal((m, k)).astype(np.float32), RNG.standard_normal((k, n)).astype(np.float32)
  np.testing.assert_allclose((Tensor(x, device="CL") @ Tensor(y, device="CL")).numpy(), x @ y, rtol=1e-4, atol=1e-3)

@needs_cl
@pytest.mark.parametrize("shape, axis", [((64, 1024), 0), ((1000, 36), 0), ((33, 4096), 1)])
def test_sums_across_rows_keep_an_accumulator_per_lane(shape, axis):
  x = RNG.standard_normal(shape).astype(np.float32)
  np.testing.assert_allclose(Tensor(x, device="CL").sum(axis).numpy(), x.sum(axis), rtol=1e-4, atol=1e-3)

# ---- the device's most work-items in a group ----

def test_a_smaller_group_limit_caps_the_heuristic_and_refuses_larger_groups():
  small = Target("CL", CLRenderer(64), GridCostModel())
  ast = kernel_ast(Tensor.empty(1 << 16, device="CPU").sum())
  p = program(ast, small)
  assert [o.amount for o in p.opts if o.op == "GROUP"] == [64] and p.src.startswith("// launch global=64 local=64")
  with pytest.raises(OptError, match="at most 64 work-items"): program(ast, small, opts=[Opt("GROUP", 0, 256)])
  assert CLRenderer(4096).group_max == MAX_GROUP  # never more than the renderer's own most

@needs_cl
def test_the_cl_target_takes_the_devices_limit():
  assert target_for("CL").renderer.group_max == min(MAX_GROUP, Device["CL"].max_group)
