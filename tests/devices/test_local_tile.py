"""A matmul tiled through a work-group's shared memory (LOCAL: tensor/codegen/opt.py, rules/opt.rules' local_tile,
tensor/codegen/grid.py, rules/render_gpu.rules): against numpy on CL at sizes crossing the tile's thresholds (16 and 8
dividing the loops, neither: refused and the register tile instead), batched, int32 and float32; the Opt refused where
there is no group memory or the shape is not a matmul's; BEAM's actions; the CUDA form compiled by NVRTC.
"""
import numpy as np
import pytest
from runtime import ops_cl, ops_cuda
from runtime.dtype import dtypes
from runtime.ops import Ops
from tensor import Tensor
from tensor.codegen import program, rangeify_simplified, target_for
from tensor.codegen.opt import Opt, OptError

# every test here checks the tile the heuristic picks: under NOOPT=1 it runs with the optimizer on (tests/conftest.py)
pytestmark = pytest.mark.optimized
needs_cl = pytest.mark.skipif(not ops_cl.available(), reason=f"no OpenCL device: {ops_cl.INSTALL}")

def kernel_ast(t: Tensor):
  return [u for u in t.kernelize().uop.toposort() if u.op is Ops.KERNEL][-1].arg.ast

def gpu_cl():
  """A CL target that tiles matmuls as a GPU's does (pocl is a CPU: its heuristic keeps the register tile)."""
  from tensor.codegen.grid import GridCostModel
  from tensor.codegen.target import Target
  from tensor.renderer.gpu import CLRenderer
  return Target("CL", CLRenderer(256, gpu=True), GridCostModel())

def run_cl(p, out_dtype, out_size: int, *xs: np.ndarray) -> np.ndarray:
  """A program run on CL with numpy inputs."""
  from runtime.device import Buffer, Device
  out = Buffer("CL", out_size, out_dtype)
  ins = [Buffer("CL", x.size, out_dtype, x.ravel()) for x in xs]
  Device["CL"].program(p.src, p.name)([out.ensure_allocated(), *ins])
  return out.numpy()

# (a's shape, b's shape, the tile the heuristic picks on a GPU: None where no tile divides the loops)
CASES = [((64, 48), (48, 32), 16), ((24, 40), (40, 56), 8), ((100, 30), (30, 70), None), ((3, 32, 48), (3, 48, 16), 16),
         ((16, 16), (16, 16), 16), ((8, 8), (8, 8), 8), ((2, 8), (8, 8), None)]

@needs_cl
@pytest.mark.parametrize("sa, sb, tile", CASES)
@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.int32])
def test_matmul_tiles_agree_with_numpy(sa, sb, tile, dtype):
  rng = np.random.default_rng(sum(sa) + sum(sb))
  npd = np.float32 if dtype is dtypes.float32 else np.int32
  a, b = rng.integers(-9, 9, sa).astype(npd), rng.integers(-9, 9, sb).astype(npd)
  if dtype is dtypes.float32: a, b = a + rng.random(sa, dtype=np.float32), b + rng.random(sb, dtype=np.float32)
  want = a @ b
  t = Tensor.empty(*sa, dtype=dtype, device="CPU") @ Tensor.empty(*sb, dtype=dtype, device="CPU")
  p = program(kernel_ast(t), gpu_cl())
  assert [o.amount for o in p.opts if o.op == "LOCAL"] == ([tile] if tile else [])
  if tile is None: assert "barrier" not in p.src  # refused: the register tile (the heuristic's CPU-style opts)
  got = run_cl(p, dtype, want.size, a, b).reshape(want.shape)
  if dtype is dtypes.int32: np.testing.assert_array_equal(got, want)
  else: np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)

@needs_cl
def test_a_1024_matmul_tiled_and_the_tensor_path_on_a_gpu_like_cl(monkeypatch):
  from tensor.engine import state
  rng = np.random.default_rng(1)
  a, b = (rng.standard_normal((1024, 1024)).astype(np.float32) for _ in range(2))
  # (at 1024 the matmul reads b packed into panels of 64 columns, made by a kernel before it: rows of a in 256 x 4)
  p = program(kernel_ast(Tensor.empty(1024, 1024, device="CPU") @ Tensor.empty(1024, 1024, device="CPU")), gpu_cl())
  assert [o for o in p.opts if o.op == "LOCAL"] == [Opt("LOCAL", 4, 16)]
  # through Tensor, with CL taken for a GPU; then a matmul with a bias and relu after it, and its gradient's matmuls
  monkeypatch.setattr(state.ENGINE, "targets", {"CL": gpu_cl()})
  np.testing.assert_allclose((Tensor(a, device="CL") @ Tensor(b, device="CL")).numpy(), a @ b, rtol=1e-4, atol=1e-3)
  x, w, c = (rng.standard_normal(s).astype(np.float32) for s in ((32, 64), (64, 48), (48,)))
  tx, tw = Tensor(x, device="CL", requires_grad=True), Tensor(w, device="CL", requires_grad=True)
  out = (tx @ tw + Tensor(c, device="CL")).relu()
  out.sum().backward()
  np.testing.assert_allclose(out.numpy(), np.maximum(x @ w + c, 0), rtol=1e-5, atol=1e-4)
  mask = (x @ w + c > 0).astype(np.float32)
  np.testing.assert_allclose(tw.grad.numpy(), x.T @ mask, rtol=1e-5, atol=1e-4)
  np.testing.assert_allclose(tx.grad.numpy(), mask @ w.T, rtol=1e-5, atol=1e-4)

def test_the_source_has_the_tiles_two_barriers_and_a_group_per_tile():
  t = Tensor.empty(64, 48, device="CPU") @ Tensor.empty(48, 32, device="CPU")
  src = program(kernel_ast(t), target_for("CL"), opts=[Opt("LOCAL", 2, 16)]).src
  assert src.split("\n")[0] == "// launch global=256,2,4 local=256,1,1"  # 16 x 16 work-items per group, 4 x 2 groups
  assert src.count("__local float local") == 2 and src.count("barrier(CLK_LOCAL_MEM_FENCE);") == 2
  assert "for (int ridx2 = 0; ridx2 < 3; ridx2++)" in src  # 48 / 16 steps of the reduction

def test_local_is_refused_where_it_does_not_apply():
  mm = kernel_ast(Tensor.empty(64, 48, device="CPU") @ Tensor.empty(48, 32, device="CPU"))
  with pytest.raises(OptError, match="work-group memory"): program(mm, target_for("CPU"), opts=[Opt("LOCAL", 2, 16)])
  with pytest.raises(OptError, match="work-group memory"): program(mm, target_for("PYTHON"), opts=[Opt("LOCAL", 2, 16)])
  with pytest.raises(OptError, match="divides"): program(mm, target_for("CL"), opts=[Opt("LOCAL", 2, 12)])
  with pytest.raises(OptError, match="at most 256"): program(mm, target_for("CL"), opts=[Opt("LOCAL", 2, 32)])
  with pytest.raises(OptError, match="reduction loop"): program(mm, target_for("CL"), opts=[Opt("LOCAL", 0, 16)])
  with pytest.raises(OptError, match="apply it first"): program(mm, target_for("CL"), opts=[Opt("UPCAST", 1, 4), Opt("LOCAL", 2, 16)])
  with pytest.raises(OptError, match="the last Opt"): program(mm, target_for("CL"), opts=[Opt("LOCAL", 2, 16), Opt("UPCAST", 0, 2)])
  s = kernel_ast(Tensor.empty(64, 48, device="CPU").sum(1))
  with pytest.raises(OptError, match="sum of products"): program(s, target_for("CL"), opts=[Opt("LOCAL", 1, 16)])
  # a 16-bit operand: the tiles hold 32-bit scalars only
  h = kernel_ast(Tensor.empty(32, 32, dtype=dtypes.int16, device="CPU") @ Tensor.empty(32, 32, dtype=dtypes.int16, device="CPU"))
  with pytest.raises(OptError, match="32-bit"): program(h, target_for("CL"), opts=[Opt("LOCAL", 2, 16)])

def test_the_heuristic_tiles_on_gpus_only_and_beam_tries_tiles_on_gpu_targets():
  from tensor.codegen.beam import actions
  t = Tensor.empty(64, 48, device="CPU") @ Tensor.empty(48, 32, device="CPU")
  for dev in ("CPU", "PYTHON") + (("CL",) if ops_cl.available() and not ops_cl.available(default=True) else ()):
    assert not [o for o in program(kernel_ast(t), target_for(dev)).opts if o.op == "LOCAL"], dev
  assert [o for o in program(kernel_ast(t), target_for("CUDA")).opts if o.op == "LOCAL"] == [Opt("LOCAL", 2, 16)]
  sink, _ = rangeify_simplified(kernel_ast(t))
  assert {o for o in actions(sink, 256) if o.op == "LOCAL"} == {Opt("LOCAL", 2, 8), Opt("LOCAL", 2, 16)}
  assert {o for o in actions(sink, 64) if o.op == "LOCAL"} == {Opt("LOCAL", 2, 8)}
  assert not [o for o in actions(sink) if o.op == "LOCAL"]

def test_local_tiles_env_forces_the_gpu_heuristic_either_way(monkeypatch):
  from runtime.helpers import getenv
  from tensor.codegen.target import device_group
  for value, want in (("1", True), ("0", False)):
    monkeypatch.setenv("LOCAL_TILES", value)
    getenv.cache_clear()
    assert device_group("CUDA")[1] is want and (not ops_cl.available() or device_group("CL")[1] is want)
  monkeypatch.delenv("LOCAL_TILES")
  getenv.cache_clear()
  assert device_group("CUDA")[1] is True

@pytest.mark.skipif(ops_cuda._nvrtc() is None, reason=f"no NVRTC: {ops_cuda.NVRTC_INSTALL}")
def test_nvrtc_compiles_the_cuda_form():
  for sa, sb, _ in CASES[:2] + CASES[3:4]:
    for d in (dtypes.float32, dtypes.int32):
      p = program(kernel_ast(Tensor.empty(*sa, dtype=d, device="CPU") @ Tensor.empty(*sb, dtype=d, device="CPU")), target_for("CUDA"))
      assert any(o.op == "LOCAL" for o in p.opts) and p.src.count("__syncthreads();") == 2 and "__shared__" in p.src
      ops_cuda.compile_cuda(p.src, "sm_80", p.name)
