"""rules/render_gpu.rules: OpenCL C and CUDA C where they differ from C. The shared codegen graphs (tests/rules/fires.py)
rendered for both languages, with the every-rule-fires check; what each rule writes, checked on the source (the CL device
runs these kernels in tests/devices/test_cl.py, NVRTC compiles the CUDA ones in tests/devices/test_cuda.py)."""
import functools
from runtime.helpers import Context
from tensor.codegen import program, target_for
from tests.rules.fires import assert_every_rule_fires, firing, given_gpu_opts, graphs, kernel_asts, rules_of

# rules no test graph reaches, and why
UNREACHABLE = {
  # float_compute.rules computes every half op in float32: no ALU, MULACC or math function of half type is left to render
  "u@(MULACC:float16": "half arithmetic is float32 after float_compute", "u@(EXP2|LOG2|SIN|SQRT|TRUNC a:float16)": "as above",
  "u@(MOD:float16": "as above", "u@(IDIV:float16": "as above", "u@(POW:float16": "as above",
  "u@(ALU - CMPLT - CMPNE - CMPEQ:float16": "as above",
  # a private array of halves: a SPLIT of a half reduction, which the GPU targets' heuristic does not pick
  "u@(DEFINE_LOCAL [i]) if u.dtype.base is dtypes.float16": "no half SPLIT on the GPU targets",
  # the frontend divides floats by _float_divmod (tensor/tensor.py): no float IDIV reaches a kernel
  "u@(IDIV:floats a b) if ctx.lang": "no float IDIV from the frontend",
}

def extra() -> list:
  """Graphs the shared ones leave out: a guarded half load (padding), a float remainder, bitcasts to and from bool, half and bfloat16,
  a prefetch of a bool buffer."""
  import numpy as np
  from runtime.dtype import dtypes
  from tensor import Tensor
  h = Tensor(np.arange(12, dtype=np.float16).reshape(3, 4)).realize()
  a, b = Tensor(np.linspace(-3, 3, 12, dtype=np.float32)).realize(), Tensor(np.full(12, 0.7, dtype=np.float32)).realize()
  byte, flag = Tensor(np.array([0, 1, 1, 0], np.uint8)).realize(), Tensor(np.array([True, False, True])).realize()
  words = Tensor(np.arange(12, dtype=np.uint16)).realize()
  # a linear interpolation reads a mask (bool) buffer in a prefetched reduction loop: OpenCL's prefetch takes no bool*
  lerp = Tensor(np.linspace(0, 1, 384, dtype=np.float32).reshape(2, 3, 64)).realize().interpolate((29,), mode="linear")
  return [lerp, h.pad(((1, 1), (0, 0))) * 2, a % b, a.cast(dtypes.float16).pad(((2, 2),)) + 1, byte.bitcast(dtypes.bool), flag.bitcast(dtypes.uint8),
          (h + 1).bitcast(dtypes.int16), words.bitcast(dtypes.float16) + 1, (words.bitcast(dtypes.bfloat16) + 1).bitcast(dtypes.uint16)]

def grouped() -> list:
  """Grouped reductions (GROUP): sums of 2048 halves and bfloat16s (a guarded store of each), softmax's max and sum
  grouped by an Opt list (its row of stores shared by the group's work-items), and GROUPs with UPCAST rows."""
  from runtime.dtype import dtypes
  from tensor import Tensor
  from tensor.codegen.opt import Opt
  sums = [(ast, None) for ast in kernel_asts([Tensor.empty(2048, dtype=d).sum() for d in (dtypes.float16, dtypes.bfloat16)])]
  return sums + [(kernel_asts([Tensor.empty(3, 64).softmax(-1)])[-1], [Opt("GROUP", 2, 8), Opt("GROUP", 3, 8)])] + \
    [(kernel_asts([t])[-1], opts) for t, opts in given_gpu_opts()]  # a GROUP with UPCAST rows: the vector one work-item stores

@functools.cache
def sources() -> tuple[dict, dict]:
  """(rule counts, {(lang, kernel number): source}) of the shared graphs rendered for CL and CUDA."""
  out = {}
  with firing() as counts:
    for i, ast in enumerate(kernel_asts(graphs() + extra())):
      for dev in ("CL", "CUDA"):
        with Context(NOOPT=0): out[(dev, i)] = program(ast, target_for(dev), f"k{i}").src
        with Context(NOOPT=1): program(ast, target_for(dev), f"k{i}")
    for i, (ast, opts) in enumerate(grouped()):
      for dev in ("CL", "CUDA"):
        with Context(NOOPT=0): out[(dev, f"g{i}")] = program(ast, target_for(dev), f"g{i}", opts).src
  return counts, out

def test_every_rule_fires():
  assert_every_rule_fires(rules_of("rules/render_gpu.rules"), sources()[0], UNREACHABLE)

def test_each_language_writes_its_own_kernel_and_types():
  srcs = sources()[1]
  cl = [s for (d, _), s in srcs.items() if d == "CL"]
  cuda = [s for (d, _), s in srcs.items() if d == "CUDA"]
  assert all("__kernel void" in s and "__global" in s and "FP_CONTRACT OFF" in s for s in cl)
  assert all('extern "C" __global__ void' in s and "__kernel" not in s for s in cuda)
  assert not any("long long" in s or "__builtin" in s or "_Float16" in s or "({" in s for s in cl)
  assert any("get_global_id(1)" in s for s in cl) and any("blockIdx.y" in s for s in cuda)
  assert any("vload_half" in s for s in cl) and any("cvt.f32.f16" in s for s in cuda)
