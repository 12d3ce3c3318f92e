"""Reductions grouped through a work-group's shared memory (GROUP: tensor/codegen/opt.py, rules/opt.rules' split,
tensor/codegen/grid.py, rules/render_gpu.rules): against numpy on CL at sizes crossing the heuristic's thresholds (the
reduction's length, the group sizes, lengths they do not divide), the Opt refused where there is no group memory, BEAM's
actions, and the CUDA form compiled by NVRTC.
"""
import numpy as np
import pytest
from runtime import ops_cl, ops_cuda
from runtime.ops import Ops
from tensor import Tensor
from tensor.codegen import program, target_for
from tensor.codegen.heuristic import GROUP_MIN
from tensor.codegen.opt import Opt, OptError

needs_cl = pytest.mark.skipif(not ops_cl.available(), reason=f"no OpenCL device: {ops_cl.INSTALL}")

pytestmark = pytest.mark.optimized  # the Opts, vectors and groups the optimizer makes (under NOOPT=1 too: tests/conftest.py)

def kernel_ast(t: Tensor):
  return [u for u in t.kernelize().uop.toposort() if u.op is Ops.KERNEL][-1].arg.ast

def grouped(t: Tensor, device: str = "CL") -> list:
  return [o for o in program(kernel_ast(t), target_for(device)).opts if o.op == "GROUP"]

@pytest.mark.parametrize("n, group", [(GROUP_MIN - 1, None), (GROUP_MIN, 256), (3000, 8), (3001, None), (1 << 20, 256)])
def test_a_full_sum_is_grouped_from_the_threshold_on(n, group):
  """Below GROUP_MIN, or a length no group size divides: a loop in one work-item; else one group of the largest size."""
  assert [o.amount for o in grouped(Tensor.empty(n, device="CPU").sum())] == ([group] if group else [])

def test_the_source_has_the_shared_array_the_barrier_and_one_store():
  src = program(kernel_ast(Tensor.empty(1 << 16, device="CPU").sum()), target_for("CL")).src
  assert src.startswith("// launch global=256 local=256")
  assert "__local float local" in src and "barrier(CLK_LOCAL_MEM_FENCE);" in src and "if (get_local_id(0) == 0) *(data0+0)" in src

@needs_cl
@pytest.mark.parametrize("shape, axis", [((GROUP_MIN - 1,), None), ((GROUP_MIN,), None), ((3000,), None), ((1 << 20,), None),
                                          ((5, 4096), 1), ((3, 2048), 1), ((2, 3, 1280), 2)])
def test_grouped_sums_and_maxes_agree_with_numpy(shape, axis):
  x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
  t = Tensor(x, device="CL")
  np.testing.assert_allclose(t.sum(axis).numpy(), x.sum(axis), rtol=1e-4, atol=1e-3)
  np.testing.assert_array_equal(t.max(axis).numpy(), x.max(axis))
  np.testing.assert_allclose(t.mean(axis).numpy(), x.mean(axis), rtol=1e-4, atol=1e-6)
  i = np.random.default_rng(1).integers(-1000, 1000, shape, dtype=np.int32)
  np.testing.assert_array_equal(Tensor(i, device="CL").sum(axis).numpy(), i.sum(axis, dtype=np.int32))

@needs_cl
def test_a_softmax_grouped_by_an_opt_list_shares_its_row_of_stores():
  """Softmax's max and sum grouped (BEAM may pick it; the heuristic does not on it): the loop writing the row has its
  iterations shared by the group's work-items, strided by the group's size, and the results are numpy's."""
  from runtime.device import Buffer, Device
  from runtime.dtype import dtypes
  x = np.random.default_rng(2).standard_normal((3, 1000)).astype(np.float32)
  ast = kernel_ast(Tensor.empty(3, 1000, device="CPU").softmax(-1))
  p = program(ast, target_for("CL"), opts=[Opt("GROUP", 2, 8), Opt("GROUP", 3, 8)])
  assert "+= 8)" in p.src and p.src.count("barrier(") == 2
  assert p.src.startswith("// launch global=8,3 local=8,1")  # a group of 8 per row (the shared loop is no dimension)
  out, inp = Buffer("CL", x.size, dtypes.float32), Buffer("CL", x.size, dtypes.float32, x.ravel())
  Device["CL"].program(p.src, p.name)([out.ensure_allocated(), inp])
  e = np.exp(x - x.max(-1, keepdims=True))
  np.testing.assert_allclose(out.numpy().reshape(3, 1000), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)

def _run_cl(t: Tensor, x: np.ndarray, opts: list) -> np.ndarray:
  from runtime.device import Buffer, Device
  from runtime.dtype import dtypes
  p = program(kernel_ast(t), target_for("CL"), opts=opts)
  group = next(o.amount for o in opts if o.op == "GROUP")
  assert p.src.split("\n")[0].split(" local=")[1].split(",")[0] == str(group)  # one group of the GROUP's size
  out, inp = Buffer("CL", t.numel(), dtypes.float32), Buffer("CL", x.size, dtypes.float32, x.ravel())
  Device["CL"].program(p.src, p.name)([out.ensure_allocated(), inp])
  return out.numpy().reshape(t.shape)

GROUP_UPCASTS = [((4, 4096), "sum", [Opt("GROUP", 1, 64), Opt("UPCAST", 0, 4)]),
                 ((8, 4096), "max", [Opt("GROUP", 1, 256), Opt("UPCAST", 0, 4)]),
                 ((8, 2048), "sum", [Opt("GROUP", 1, 32), Opt("UPCAST", 0, 2), Opt("UNROLL", 1, 4)]),
                 ((6, 1000), "softmax", [Opt("GROUP", 2, 8), Opt("GROUP", 3, 8), Opt("UPCAST", 0, 3)])]

@needs_cl
@pytest.mark.parametrize("shape, op, opts", GROUP_UPCASTS)
def test_a_group_with_upcast_outputs_keeps_a_partial_per_lane(shape, op, opts):
  """An UPCAST of the outputs after a GROUP: each work-item's partials are vectors, the shared array holds one
  per lane (lane-minor) and every work-item stores its own (vstore into group memory, unguarded); numpy's results."""
  x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
  t = Tensor.empty(*shape, device="CPU")
  got = _run_cl(getattr(t, op)(1) if op != "softmax" else t.softmax(-1), x, opts)
  if op == "softmax":
    e = np.exp(x - x.max(-1, keepdims=True))
    want = e / e.sum(-1, keepdims=True)
  else: want = getattr(x, op)(1)
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

def test_group_with_upcast_sizes_the_shared_array_by_lanes():
  p = program(kernel_ast(Tensor.empty(4, 4096, device="CPU").sum(1)), target_for("CL"), opts=[Opt("GROUP", 1, 64), Opt("UPCAST", 0, 4)])
  assert "__local float local" in p.src and "[256];" in p.src and p.src.startswith("// launch global=64 local=64")
  assert "vstore4(acc1, 0, (local" in p.src and "if (get_local_id(0) == 0) vstore4(acc1" not in p.src

def test_group_needs_a_target_with_group_memory():
  ast = kernel_ast(Tensor.empty(4096, device="CPU").sum())
  with pytest.raises(OptError, match="work-group memory"): program(ast, target_for("CPU"), opts=[Opt("GROUP", 0, 64)])
  with pytest.raises(OptError, match="at most 256 work-items"): program(ast, target_for("CL"), opts=[Opt("GROUP", 0, 4096)])
  small = kernel_ast(Tensor.empty(128, device="CPU").sum())
  with pytest.raises(OptError, match="shorter"): program(small, target_for("CL"), opts=[Opt("GROUP", 0, 128)])
  rows = kernel_ast(Tensor.empty(8, 4096, device="CPU").sum(1))
  with pytest.raises(OptError, match="put the GROUP first"): program(rows, target_for("CL"), opts=[Opt("UPCAST", 0, 2), Opt("GROUP", 1, 32)])
  assert grouped(Tensor.empty(4096, device="CPU").sum(), "CPU") == []

def test_beam_tries_groups_on_gpu_targets_only():
  from tensor.codegen import rangeify_simplified
  from tensor.codegen.beam import actions
  sink, _ = rangeify_simplified(kernel_ast(Tensor.empty(4096, device="CPU").sum()))
  assert {o for o in actions(sink, 256) if o.op == "GROUP"} == {Opt("GROUP", 0, 32), Opt("GROUP", 0, 256)}
  assert not [o for o in actions(sink) if o.op == "GROUP"]

@pytest.mark.skipif(ops_cuda._nvrtc() is None, reason=f"no NVRTC: {ops_cuda.NVRTC_INSTALL}")
def test_nvrtc_compiles_the_cuda_form():
  for t in (Tensor.empty(1 << 20, device="CPU").sum(), Tensor.empty(5, 4096, device="CPU").max(1)):
    p = program(kernel_ast(t), target_for("CUDA"))
    assert "__shared__ float local" in p.src and "__syncthreads();" in p.src and "if (((int)threadIdx.x) == 0)" in p.src
    ops_cuda.compile_cuda(p.src, "sm_80", p.name)
  for shape, op, opts in GROUP_UPCASTS:
    t = Tensor.empty(*shape, device="CPU")
    p = program(kernel_ast(getattr(t, op)(1) if op != "softmax" else t.softmax(-1)), target_for("CUDA"), opts=opts)
    assert "__shared__ float local" in p.src and "__syncthreads();" in p.src
    ops_cuda.compile_cuda(p.src, "sm_80", p.name)
