"""The CUDA device without a GPU: every distinct kernel of the op tests (tests/tensor/test_ops.py's unary, binary and reduce
ops on each dtype they take, plus matmul, softmax, conv, casts and bit casts) rendered as CUDA C (tensor/renderer/gpu.py)
and compiled by NVRTC for sm_80 and sm_90, 0 failures (the count is printed). Skips with one line saying what to install
when NVRTC (PyPI's nvidia-cuda-nvrtc-cu12, extra [cuda]) is absent; where a GPU and its driver are, the op tests run for
real with DEV=CUDA (docs/devices.md). A missing driver or NVRTC is an error naming what is missing.
"""
import importlib.util, os, sys
import pytest
from runtime import ops_cuda
from runtime.device import CompileError, Device, DeviceError
from runtime.dtype import dtypes
from tensor import Tensor
from tensor.codegen import program, target_for

needs_nvrtc = pytest.mark.skipif(ops_cuda._nvrtc() is None, reason=f"no NVRTC: {ops_cuda.NVRTC_INSTALL}")
ARCHS = ("sm_80", "sm_90")

def _op_tests():
  spec = importlib.util.spec_from_file_location("op_tests", os.path.join(os.path.dirname(__file__), "..", "tensor", "test_ops.py"))
  mod = importlib.util.module_from_spec(spec)
  sys.modules.setdefault("op_tests", mod)
  spec.loader.exec_module(mod)  # type: ignore[union-attr]
  return mod

def op_kernels() -> dict:
  """The distinct kernel ASTs of the op tests' ops (kernelized on CPU, never run), by AST."""
  ops = _op_tests()
  outs = []
  for d in ops.ALL:
    x, y = Tensor.empty(3, 5, dtype=d, device="CPU"), Tensor.empty(3, 5, dtype=d, device="CPU")
    for name, (fn, _, allowed, *_r) in ops.BINARY.items():
      if d in allowed: outs.append(fn(x, y))
    for name, (fn, _, allowed, *_r) in ops.UNARY.items():
      if d in allowed: outs.append(fn(x))
    for name, (fn, *_r) in ops.REDUCE.items(): outs += [fn(x), fn(x, axis=1)]
    outs += [x.cast(e) for e in ops.ALL if e is not d] + [x.where(x, y) if d is dtypes.bool else (x > y).where(x, y), x.pad(((1, 1), (0, 2)))]
    if d.itemsize == 4: outs.append(x.bitcast(dtypes.float32 if d is not dtypes.float32 else dtypes.int32))
  a, b = Tensor.empty(33, 17, device="CPU"), Tensor.empty(17, 65, device="CPU")
  outs += [a @ b, a.softmax(-1), a.var(1), a.clip(-1, 1), Tensor.empty(2, 3, 9, 9, device="CPU").conv2d(Tensor.empty(4, 3, 3, 3, device="CPU"))]
  outs += [Tensor.empty(8, dtype=dtypes.bfloat16, device="CPU") * 3, Tensor.arange(10, device="CPU") * 2]
  asts = {}
  for o in outs:
    for u in o.kernelize().uop.toposort():
      if u.op.name == "KERNEL" and u.arg.ast.op.name == "SINK": asts[u.arg.ast] = None
  return asts

@needs_nvrtc
def test_every_op_kernel_compiles_for_sm80_and_sm90():
  target = target_for("CUDA")
  compiled, failed = 0, []
  for ast in op_kernels():
    p = program(ast, target)
    for arch in ARCHS:
      try:
        ops_cuda.compile_cuda(p.src, arch, p.name)
        compiled += 1
      except CompileError as e: failed.append(str(e)[:2000])
  n = compiled // len(ARCHS)
  print(f"NVRTC {ops_cuda.nvrtc_version()}: {compiled} kernels compiled ({n} kernels x {len(ARCHS)} archs), {len(failed)} failed")
  assert not failed, failed[0]
  assert compiled > 300

@needs_nvrtc
def test_a_grid_kernel_reads_the_block_and_thread_indices():
  p = program([u for u in (Tensor.empty(64, 32, device="CPU") + 1).sum(1).kernelize().uop.toposort() if u.op.name == "KERNEL"][0].arg.ast,
              target_for("CUDA"))
  assert p.src.startswith("// launch global=64 local=64") and 'extern "C" __global__ void' in p.src and "blockIdx.x" in p.src
  ops_cuda.compile_cuda(p.src, "sm_80", p.name)

def test_bad_cuda_source_is_a_compile_error_with_the_log():
  if ops_cuda._nvrtc() is None:
    with pytest.raises(CompileError, match="nvidia-cuda-nvrtc-cu12"): ops_cuda.compile_cuda("x", "sm_80")
    return
  with pytest.raises(CompileError, match="NVRTC.*sm_80"): ops_cuda.compile_cuda('extern "C" __global__ void k() { nope; }', "sm_80", "k")

@pytest.mark.skipif(ops_cuda.available(), reason="a CUDA GPU is here")
def test_cuda_without_a_driver_says_what_is_missing():
  with pytest.raises(DeviceError, match="libcuda.so.1|NVRTC"): Device["CUDA"]
  with pytest.raises(DeviceError, match="libcuda.so.1|NVRTC"): Tensor([1, 2], device="CUDA").realize()
