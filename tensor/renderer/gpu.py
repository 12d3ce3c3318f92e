"""The GPU-style renderers: a linear kernel program -> one OpenCL C `__kernel` (CL device, runtime/ops_cl.py) or one CUDA C
`__global__` function (CUDA device, runtime/ops_cuda.py). Both share the C renderer's rules and driver
(tensor/renderer/cstyle.py, rules/render_c.rules) and put their differences first (rules/render_gpu.rules); what
differs between the two is a capability set (GPU_LANGS): the kernel qualifier, the buffers' address space, the global
index, type names, the helper functions' qualifier and rule set, the preamble. The loops codegen puts on the launch grid (`grid`:
RANGE -> dimension, tensor/codegen/grid.py) read the global index; every other loop stays a loop.

The source's first line says how to launch it, `// launch global=a,b,c local=x,y,z` (local all 1 on CL: the platform's
choice; on CUDA the block, each a divisor of its global size), and its second the types of its scalar parameters in order
(`// scalars: int float`, a type of two words joined by _): the device reads both, so a kernel cached or captured as its
source alone still launches right.
"""
from __future__ import annotations
from dataclasses import dataclass
from rules.vectorize_helpers import VectorCaps
from runtime.dtype import DType, dtypes
from runtime.uop import UOp, uop
from runtime.ops import Ops
from rules.render_c import render_c as c_rules, render_value as c_value, c_function
from rules.render_c_helpers import ctype as c_ctype
from rules.render_gpu import render_gpu as gpu_rules, render_gpu_value as gpu_value, cl_function, cuda_function
from tensor.renderer import Renderer
from tensor.renderer.cstyle import CContext, render_body

@dataclass(frozen=True)
class GPULang:
  """What a GPU-style C dialect spells its own way."""
  name: str                      # "CL" or "CUDA": ctx.lang in rules/render_gpu.rules
  kernel: str                    # the kernel's qualifier and return type
  buffer: str                    # a buffer parameter: {t} its element type, {n} its name
  gid: tuple[str, ...]           # the global index of each grid dimension, then the index in a group of dimension 0
  types: dict                    # type names where they are not C's
  functions: object              # the rule set of its helper functions (then C's, c_function)
  qualifier: str                 # what C's helpers get instead of `static inline`
  preamble: tuple[str, ...]      # the file's first lines after the launch line
  max_local: int                 # the most work-items in a group the renderer asks for (0: the platform chooses)
  shared: str                    # the qualifier of an array in a group's shared memory
  barrier: str                   # every work-item of a group waits here until all have stored into shared memory
  caps: VectorCaps | None = None  # the vectors it computes on (rules/vectorize.rules); None: scalars only
  vectors: dict | None = None     # the name of a vector type of each lane type, the lane count appended (float4)

# OpenCL C's vector types (float4, int8, ...) of 2 to 16 bytes; their operators work lane by lane, a comparison gives an int
# vector (-1 where true) as GCC's. No 8/16-bit lanes (their ops would need the wrap-back casts OpenCL has no vector form of),
# no half (a half value is held as a float), no double (an extension not every device has)
CL_VECTORS = {dtypes.float32: "float", dtypes.int32: "int", dtypes.uint32: "uint", dtypes.int64: "long", dtypes.uint64: "ulong"}
CL_CAPS = VectorCaps(frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.NEG, Ops.MAX, Ops.SHL, Ops.SHR, Ops.BITCAST}),
                     frozenset(CL_VECTORS), min_bytes=8, max_bytes=16, register_bytes=16, registers=32)
CL = GPULang("CL", "__kernel void", "__global {t}* {n}", ("get_global_id(0)", "get_global_id(1)", "get_global_id(2)", "get_local_id(0)"),
             {dtypes.int8: "char", dtypes.uint8: "uchar", dtypes.uint16: "ushort", dtypes.uint32: "uint", dtypes.int64: "long",
              dtypes.uint64: "ulong", dtypes.float16: "float"}, cl_function, "inline", ("#pragma OPENCL FP_CONTRACT OFF",), 0,
             "__local ", "barrier(CLK_LOCAL_MEM_FENCE);", CL_CAPS, CL_VECTORS)
CUDA = GPULang("CUDA", 'extern "C" __global__ void', "{t}* __restrict__ {n}",
               (*(f"((int)(blockIdx.{a}*blockDim.{a}+threadIdx.{a}))" for a in "xyz"), "((int)threadIdx.x)"), {dtypes.float16: "float"},
               cuda_function, "static __device__ inline", ("#define INFINITY (__int_as_float(0x7f800000))",
                                                           "#define NAN (__int_as_float(0x7fc00000))"), 256, "__shared__ ", "__syncthreads();")
GPU_LANGS = {"CL": CL, "CUDA": CUDA}
# the grid dimension of a GROUP's loop (tensor/codegen/grid.py): the work-item's index in a group spanning dimension 0
GROUP_DIM = -1
# ... and of a loop beside it whose iterations the group's work-items share, each every group-size-th one
SHARED_DIM = -2
# the most work-items a GROUP asks for in a group (OpenCL guarantees no fewer than 1 per group; every GPU and pocl take 256)
MAX_GROUP = 256

class GPUContext(CContext):
  """CContext in a GPU dialect: its type names and helper functions, and the loops on the grid."""
  def __init__(self, lang: GPULang, grid: dict[UOp, int], tiled: bool = False):
    super().__init__()
    self.lang, self.grid, self.gids, self.dialect = lang.name, grid, lang.gid, lang
    grouped = GROUP_DIM in grid.values()
    self.fenced: frozenset = frozenset()  # the loops holding a LOCAL tile's BARRIER: each iteration ends with one (render_gpu sets them)
    self.shared, self.barrier = (lang.shared if grouped or tiled else ""), lang.barrier
    self.group = next((r.src[0].arg for r, d in grid.items() if d == GROUP_DIM), 1)
    self.once = f"if ({lang.gid[-1]} == 0) " if grouped else ""
    self.guarded: frozenset = frozenset()  # the global stores one work-item of a group makes (render_gpu sets them)
  def ctype(self, d: DType) -> str:
    if d.count > 1:
      # a vector of bools is the mask a comparison of 32-bit vectors gives (rules/vectorize.rules makes no other)
      lane = dtypes.int32 if d.scalar is dtypes.bool else d.scalar
      if self.dialect.vectors is None or lane not in self.dialect.vectors:
        raise NotImplementedError(f"the {self.lang} renderer has no vectors of {d}")
      return f"{self.dialect.vectors[lane]}{d.count}"
    return self.dialect.types.get(d.scalar) or c_ctype(d)
  def helper(self, kind: str, d: DType, src: DType | None = None) -> str:
    name = f"{kind}_{self.ctype(d)}" + (f"_{self.ctype(src)}" if src is not None else "")
    name = name.replace(" ", "_")
    if name not in self.helpers:
      node = uop(Ops.CUSTOM, d, () if src is None else (uop(Ops.CUSTOM, src),), kind)
      definition = self.dialect.functions.rewrite(node, name) or c_function.rewrite(node, name)  # type: ignore[attr-defined]
      if definition is None: raise NotImplementedError(f"no {self.lang} function {kind} of {d}; see rules/render_gpu.rules")
      text = self.join(definition)
      if text.startswith("static inline "): text = self.dialect.qualifier + text[len("static inline") :]
      self.helpers[name] = text
    return name

def local_sizes(sizes: list[int], most: int) -> list[int]:
  """Work-group sizes dividing each global size, dimension 0 first, at most `most` work-items in all (1s when most is 0)."""
  out, left = [], most
  for s in sizes:
    d = max((k for k in range(1, min(s, left) + 1) if s % k == 0), default=1) if left > 1 else 1
    out.append(d)
    left //= d
  return out

class GPURenderer(Renderer):
  """OpenCL C (with its vector types) or CUDA C (scalars); `threads`: it takes the loops codegen puts on the launch grid
  (its cost model's parallel_loops: RANGE -> grid dimension)."""
  threads = True
  def __init__(self, lang: GPULang, group_max: int = MAX_GROUP, local_tiles: bool = True):
    # `group_max`: the device's most work-items in a group (CL_DEVICE_MAX_WORK_GROUP_SIZE, CUDA's threads per block), where
    # a device is open to ask; no GROUP and no block is larger. `local_tiles`: the device is a GPU, where a matmul's tiles
    # through group memory pay (pocl, OpenCL on the CPU, ran matmul 1024 24x slower than with register tiles)
    self.lang, self.group_max, self.local_tiles = lang, min(MAX_GROUP, group_max), local_tiles
  @property
  def caps(self) -> VectorCaps | None: return self.lang.caps
  def render(self, name: str, uops: list[UOp], parallel: dict[UOp, int] | None = None) -> str:
    return render_gpu(self.lang, name, uops, parallel, self.group_max)

def CLRenderer(group_max: int | None = None, gpu: bool = False) -> GPURenderer: return GPURenderer(CL, group_max or MAX_GROUP, gpu)
def CUDARenderer(group_max: int | None = None, gpu: bool = True) -> GPURenderer: return GPURenderer(CUDA, group_max or MAX_GROUP, gpu)

def _buffer_of(store: UOp) -> UOp:
  b = store.src[0].src[0]
  return b.src[0] if b.op is Ops.AFTER else b

def _single_stores(uops: list[UOp], grid: dict[UOp, int]) -> list[UOp]:
  """The global stores of a kernel with a GROUP outside every loop its work-items share: one work-item makes each."""
  shared, out = 0, []
  for u in uops:
    if u.op is Ops.RANGE and grid.get(u) == SHARED_DIM: shared += 1
    elif u.op is Ops.END and grid.get(u.src[0]) == SHARED_DIM: shared -= 1
    elif u.op is Ops.STORE and not shared and _buffer_of(u).op is Ops.DEFINE_GLOBAL: out.append(u)  # each work-item's partials: its own
  return out

def _fenced(uops: list[UOp]) -> list[UOp]:
  """The loops directly around a LOCAL tile's BARRIER: the next iteration's stores into the tiles wait until every
  work-item has read them, so each iteration ends at a barrier too."""
  open_loops: list[UOp] = []
  out = []
  for u in uops:
    if u.op is Ops.RANGE: open_loops.append(u)
    elif u.op is Ops.END: open_loops.pop()
    elif u.op is Ops.BARRIER and open_loops: out.append(open_loops[-1])
  return out

def render_gpu(lang: GPULang, name: str, uops: list[UOp], grid: dict[UOp, int] | None = None, most: int = MAX_GROUP) -> str:
  """The source of a linear kernel program in a GPU dialect; `grid`: the loops that are launch-grid dimensions (RANGE -> 0, 1, 2);
  `most`: the most work-items in a group the device takes."""
  grid = grid or {}
  tiled = _fenced(uops)
  ctx = GPUContext(lang, grid, bool(tiled))
  ctx.fenced = frozenset(tiled)
  if ctx.once: ctx.guarded = frozenset(_single_stores(uops, grid))
  def rewrite(u: UOp):
    return r if (r := gpu_rules.rewrite(u, ctx)) is not None else c_rules.rewrite(u)
  def value(u: UOp, text: str):
    return r if (r := gpu_value.rewrite(u, text)) is not None else c_value.rewrite(u, text)
  params, body = render_body(ctx, uops, rewrite, value, {}, set())
  dims = max([0, *grid.values()]) + 1
  sizes = [1] * dims
  # (a loop whose iterations the group's work-items share strides by the group's size: not a dimension of its own)
  for r, dim in grid.items():
    if dim != SHARED_DIM: sizes[max(dim, 0)] = r.src[0].arg
  # a GROUP's loop: dimension 0 is one group of its size (the work-item's index in it is its global index there)
  local = [sizes[0]] + [1] * (dims - 1) if GROUP_DIM in grid.values() or tiled else local_sizes(sizes, min(lang.max_local, most))
  launch = f"// launch global={','.join(map(str, sizes))} local={','.join(map(str, local))}"
  # the values come in the order of the program's DEFINE_VARs (Program.vars): ints and floats as they are met
  order = [ctx.text[u] for u in uops if u.op is Ops.DEFINE_VAR]
  scalars = sorted((p for a in ("ivals", "fvals") for p in params[a].values()), key=lambda p: order.index(p[0]))
  # every buffer the device passes has its place, the ones the kernel no longer reads too
  bufs = params["bufs"]
  args = [lang.buffer.format(t=bufs[i][1] if i in bufs else ctx.ctype(dtypes.uint8), n=bufs[i][0] if i in bufs else f"unused{i}")
          for i in range(max(bufs, default=-1) + 1)] + [f"{t} {n}" for n, t in scalars]
  text = "\n".join(body)
  head = [launch, f"// scalars: {' '.join(t.replace(' ', '_') for _, t in scalars)}", *lang.preamble]
  if lang is CL and ("double" in text or any("double" in h for h in ctx.helpers.values())):
    head.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
  return "\n".join(head + list(ctx.helpers.values()) + [f"{lang.kernel} {name}({', '.join(args)}) {{", text, "}"]) + "\n"

__all__ = ["GPURenderer", "CLRenderer", "CUDARenderer", "GPU_LANGS", "render_gpu", "local_sizes"]
