"""The C renderer: a linear kernel program -> one C function. The C of every UOp comes from rules/render_c.rules as pieces
(rules/render_c_helpers.py); this driver joins them, decides which values get a variable and which are inlined, and lays out
the file: includes, vector types, helper functions, the kernel's header and its entry point. The loops codegen gives it
as parallel become functions of their own that the kernel calls from an OpenMP region (`outline`, runtime/threads.py);
CRenderer is the CPU target's renderer (tensor/codegen/target.py).
"""
from __future__ import annotations
import functools
from typing import Callable
from runtime.dtype import DType, dtypes
from runtime.ops import GroupOp, Ops
from runtime.uop import UOp, uop
from rules.render_c import render_c as render_rules, render_value, render_operand, c_function
from rules.render_c_helpers import Fn, Line, Param, ctype, vector_typedefs
from rules.vectorize_helpers import VectorCaps
from runtime.threads import loop_bound_hint, parallel_pragma, parallel_region
from tensor.renderer import Renderer

# what this renderer computes on vectors (GCC vector extensions; rules/vectorize.rules): float and int lanes of 32 to
# 256 bytes (wider than a register: gcc splits them), the ops C has on vectors (shifts by a constant amount, bit casts
# between vectors of one size), max and fused multiply-add (exp2's polynomial, rules/decompositions.rules) through helpers
VECTOR_CAPS = VectorCaps(frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.NEG, Ops.MAX, Ops.MULACC, Ops.SHL, Ops.SHR, Ops.BITCAST}),
                         frozenset({dtypes.float32, dtypes.float64, dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32,
                                    dtypes.uint32, dtypes.int64, dtypes.uint64}), 32, 256)

@functools.cache  # a fact of the machine, asked once per process
def cpu_vector_caps() -> VectorCaps:
  """VECTOR_CAPS with the vector registers of the CPU kernels compile for (-march=native): AVX-512 has 32 of 64 bytes,
  AVX2 16 of 32, else (SSE, or a compiler that does not say) 16 of 16."""
  from runtime.ops_cpu import native_macros
  out = native_macros()
  size, count = (64, 32) if "__AVX512F__" in out else (32, 16) if "__AVX2__" in out else (16, 16)
  # no vector wider than a register: gcc keeps a wider one in memory (a 4x16 matmul tile of 64-byte vectors ran at 1 GFLOP/s on AVX2)
  return VectorCaps(VECTOR_CAPS.ops, VECTOR_CAPS.scalars, min(VECTOR_CAPS.min_bytes, size), size, size, count)

class CContext:
  """The text of each UOp so far, and the vector types and helper functions the kernel needs."""
  def __init__(self):
    self.text: dict[UOp, str] = {}
    self.helpers: dict[str, str] = {}
    self.typedefs: dict[str, str] = {}
    self.types: dict[DType, str] = {}
    # each parallel loop of the body: (first line: its pragma, end: past its closing brace, counter, its C type, bound,
    # threads, the variables declared before it outside every loop {name: C type})
    self.parallel: list[tuple[int, int, str, str, str, int, dict[str, str]]] = []

  def join(self, pieces: tuple, widen: bool = False) -> str:
    """The C text of a rule's pieces; widen: the result is a bfloat16 op's, which reads its bfloat16 operands as doubles."""
    out = []
    for p in pieces:
      t = p.__class__
      if t is str: out.append(p)
      elif t is UOp:
        x = self.text[p] if p in self.text else self.join(render_rules.rewrite(p))  # a node of no kernel line: a constant
        out.append(self.join(r) if widen and (r := render_operand.rewrite(p, x)) is not None else x)
      elif t is Fn: out.append(self.helper(*p))
      elif t is tuple: out.append(self.join(p, widen))
      elif isinstance(p, DType): out.append(self.ctype(p))
      else: out.append(str(p))
    return "".join(out)

  def ctype(self, d: DType) -> str:
    """The C type of d, declaring its vector types the first time (a kernel declares the ones it uses)."""
    if (t := self.types.get(d)) is None:
      t = self.types[d] = ctype(d)
      if d.count > 1: self.typedefs[t] = "\n".join(vector_typedefs(d))
    return t

  def helper(self, kind: str, d: DType, src: DType | None = None) -> str:
    """The name of a small inline C function (ruleset c_function of rules/render_c.rules), defined once in the kernel."""
    name = f"{kind}_{ctype(d).replace(' ', '_')}" + (f"_{ctype(src).replace(' ', '_')}" if src is not None else "")
    if name not in self.helpers:
      definition = c_function.rewrite(uop(Ops.CUSTOM, d, () if src is None else (uop(Ops.CUSTOM, src),), kind), name)
      if definition is None: raise NotImplementedError(f"no C function {kind} of {d}; see ruleset c_function in rules/render_c.rules")
      self.helpers[name] = self.join(definition)
    return name

# an innermost loop doing at least this many vector fused multiply-adds per step (a matmul's or conv's register tile: 16 at
# 4x64 floats) is unrolled UNROLL_TILE_STEPS times by gcc, which does not unroll at -O3 by default: matmul 1024's GEMM
# kernel 120-128 -> 133-141 GFLOP/s on one thread (AVX-512, load 16). The same operations in the same order: the same bits
UNROLL_TILE_MIN_FMAS = 8
UNROLL_TILE_STEPS = 4

def unrolled_loops(uops: list[UOp]) -> set[UOp]:
  """The innermost loops whose body holds UNROLL_TILE_MIN_FMAS or more vector fused multiply-adds."""
  out: set[UOp] = set()
  open_loops: list[tuple[UOp, int, bool]] = []  # (range, vector fmas so far, holds a loop)
  for u in uops:
    if u.op is Ops.RANGE:
      if open_loops: open_loops[-1] = (open_loops[-1][0], open_loops[-1][1], True)
      open_loops.append((u, 0, False))
    elif u.op is Ops.END and open_loops:
      r, fmas, nested = open_loops.pop()
      if not nested and fmas >= UNROLL_TILE_MIN_FMAS: out.add(r)
    elif u.op is Ops.MULACC and u.dtype.count > 1 and open_loops:
      open_loops[-1] = (open_loops[-1][0], open_loops[-1][1] + 1, open_loops[-1][2])
  return out

# ops whose value may be written where it is used (once, in the same loop) instead of getting a variable
_INLINE = GroupOp.ALU | {Ops.CAST, Ops.BITCAST, Ops.INDEX, Ops.CONST, Ops.AFTER, Ops.VECTORIZE, Ops.GEP}

class CRenderer(Renderer):
  """C with GCC vector extensions, for the CPU device: its vectors are the CPU's (-march=native: cpu_vector_caps) unless
  given (a test renders for another machine's)."""
  threads = True
  def __init__(self, caps: VectorCaps | None = None): self._caps = caps
  @property
  def caps(self) -> VectorCaps: return self._caps if self._caps is not None else cpu_vector_caps()
  def render(self, name: str, uops: list[UOp], parallel: dict[UOp, int] | None = None) -> str: return render_c(name, uops, parallel)

def render_c(name: str, uops: list[UOp], parallel: dict[UOp, int] | None = None) -> str:
  """The C source of a linear kernel program: each UOp's pieces from the rules, laid out as one kernel and its entry point.
  `parallel`: the loops (RANGEs) to run on several threads, and how many each gets (codegen's cost model decides)."""
  ctx = CContext()
  params, body = render_body(ctx, uops, render_rules.rewrite, render_value.rewrite, parallel or {}, unrolled_loops(uops))
  head = ["#include <math.h>", "#include <stdbool.h>", *ctx.typedefs.values(), *ctx.helpers.values()]
  return "\n".join(head + entry_points(name, params, body, ctx.parallel)) + "\n"

def render_body(ctx: CContext, uops: list[UOp], rewrite: Callable, value: Callable, threads: dict[UOp, int],
                unrolled: set[UOp]) -> tuple[dict, list[str]]:
  """The kernel's parameters ({array: {slot: (name, C type)}}) and the lines of its body, from `rewrite` (a UOp's pieces)
  and `value` (an ALU value's wrapping): the C renderer's and the C-style languages' (tensor/renderer/opencl.py) driver."""
  uses: dict[UOp, int] = {}
  depth_of: dict[UOp, int] = {}
  user_depth: dict[UOp, int] = {}
  depth = 0
  for u in uops:
    if u.op is Ops.RANGE: depth += 1
    elif u.op is Ops.END: depth -= 1
    depth_of[u] = depth
    for s in u.src:
      # a float MAX writes each operand three times (nan propagation): its operands count as used thrice, so they get
      # variables and a chain of maximums stays linear in size
      uses[s] = uses.get(s, 0) + (3 if u.op is Ops.MAX and dtypes.is_float(u.dtype) else 1)
      user_depth[s] = depth
  params: dict[str, dict] = {"bufs": {}, "ivals": {}, "fvals": {}}  # entry-point array -> {slot: (name, C type)}
  body: list[str] = []
  depth = 1
  counters: dict[str, int] = {}
  before_loops: dict[str, str] = {}  # the variables declared outside every loop so far, with their C types (a parallel loop's firstprivate ones)
  arrays: dict[str, str | None] = {}  # the arrays declared there (a SPLIT's partials, which the threads share): their pointer types
  opened: list = []  # the parallel loop open now: [its RANGE, its pragma's line, the depth of its `for`]
  for u in uops:
    op = u.op
    out = rewrite(u)
    if out is None: raise NotImplementedError(f"the C renderer has no rule for {op} ({u.dtype}); see rules/render_c.rules")
    if out.__class__ is Param:
      ctx.text[u] = pname = ctx.join(out.name)
      slots = params[out.array]
      slots[len(slots) if out.slot is None else out.slot] = (pname, ctx.join(out.ctype))
      continue
    if out.__class__ is Line:
      if out.name is not None: ctx.text[u] = ctx.join(out.name)
      if out.indent < 0: depth += out.indent
      if out.name is not None and depth == 1 and op is not Ops.RANGE:
        # an array a parallel loop's function gets as a pointer (None: a name of another kind, whose loop keeps its pragma)
        arrays[ctx.text[u]] = (("unsigned short" if u.dtype.base is dtypes.bfloat16 else ctx.ctype(u.dtype.base)) + "*") \
          if op is Ops.DEFINE_LOCAL else None
      if u in threads:
        opened = [u, len(body), depth]
        body.append("  " * depth + parallel_pragma(threads[u], private=tuple(before_loops)))
      if u in unrolled: body.append("  " * depth + f"#pragma GCC unroll {UNROLL_TILE_STEPS}")
      body.append("  " * depth + ctx.join(out.pieces))
      if out.indent > 0: depth += out.indent
      if u in threads: body.append("  " * depth + loop_bound_hint(ctx.text[u], ctx.join((u.src[0],))))
      if out.indent < 0 and opened and depth == opened[2]:
        r = opened[0]
        ctx.parallel.append((opened[1], len(body), ctx.text[r], ctx.ctype(r.dtype), ctx.join((r.src[0],)), threads[r], {**before_loops, **arrays}))
        opened = []
      continue
    text = ctx.join(out, u.dtype.scalar is dtypes.bfloat16 and op in GroupOp.ALU)
    if op in GroupOp.ALU and (wrapped := value(u, text)) is not None: text = ctx.join(wrapped)
    # inline what is used once, in the same loop, and cheap to repeat; everything else gets a variable
    if op in _INLINE and (op in (Ops.CONST, Ops.INDEX, Ops.AFTER) or uses.get(u, 0) == 1 and user_depth.get(u) == depth_of[u]):
      ctx.text[u] = text
      continue
    prefix = "val" if op is Ops.LOAD else "alu" if op in GroupOp.ALU else "vec" if op in (Ops.VECTORIZE, Ops.GEP) else \
      "acc" if op is Ops.DEFINE_REG else "cast"
    counters[prefix] = counters.get(prefix, 0) + 1
    var = ctx.text[u] = f"{prefix}{counters[prefix] - 1}"
    body.append("  " * depth + f"{ctx.ctype(u.dtype)} {var} = {text};")
    if depth == 1: before_loops[var] = ctx.ctype(u.dtype)
  return params, body

# a kernel with more parameters than this reads its buffers straight from the array (gcc then drops `restrict`: loops may be
# versioned for aliasing); fewer, and the array entry calls the kernel with one restrict pointer each
MAX_DIRECT_PARAMS = 64

def entry_points(name: str, params: dict[str, dict], body: list[str], parallel: list | None = None) -> list[str]:
  """The kernel as the seeds print it, `void name(T* restrict data0, ..., scalars)`, and the entry point the CPU device calls,
  `void name_call(void* const* bufs, const long long* ivals, const double* fvals)`: buffer i is bufs[i] (a buffer the kernel
  no longer reads keeps its place), the int and float scalars come in order from their arrays (runtime/ops_cpu.py).
  `parallel` (CContext.parallel): the body's parallel loops, each moved into a function `name_p{k}` of its own that the
  kernel calls from an OpenMP region (`outline`)."""
  sig = "void* const* bufs, const long long* ivals, const double* fvals"
  ptrs = [(f"{t}* restrict {n}", f"({t}*)bufs[{i}]") for i, (n, t) in sorted(params["bufs"].items())]
  scalars = [(f"{t} {n}", f"({t}){a}[{k}]") for a in ("ivals", "fvals") for k, (n, t) in params[a].items()]
  if len(ptrs) + len(scalars) > MAX_DIRECT_PARAMS:
    return [f"void {name}_call({sig}) {{", *(f"  {d.replace(' restrict', '')} = {v};" for d, v in ptrs + scalars), *body, "}"]
  decls = [d for d, _ in ptrs + scalars]
  loops, body = outline(name, decls, body, parallel or [])
  return [*loops, f"void {name}({', '.join(decls)}) {{", *body, "}",
          f"void {name}_call({sig}) {{ {name}({', '.join(v for _, v in ptrs + scalars)}); }}"]

def outline(name: str, decls: list[str], body: list[str], parallel: list) -> tuple[list[str], list[str]]:
  """(the functions of the body's parallel loops, the body calling them): each loop, from its pragma to its closing brace,
  becomes `void name_p{k}(the kernel's parameters, the variables declared before it, lo, hi)` running its iterations
  [lo, hi) (noinline: gcc compiles it as a plain function with restrict pointers, not inside OpenMP's outlined one), and in
  the body an OpenMP region where each thread calls it on its block (runtime/threads.py parallel_region). A loop whose
  function would take more than MAX_DIRECT_PARAMS parameters keeps its pragma."""
  funcs: list[str] = []
  out: list[str] = []
  done = 0
  for k, (first, end, counter, ctr_type, bound, threads, private) in enumerate(parallel):
    args = decls + [f"{t} {v}" for v, t in private.items()]
    if len(args) + 2 > MAX_DIRECT_PARAMS or None in private.values(): continue
    fn = f"{name}_p{k}"
    # the pragma's line, the `for`'s: replaced; the bound hint, the loop's body and its closing brace: kept
    funcs += [f"void __attribute__((noinline)) {fn}({', '.join(args + [f'{ctr_type} lo', f'{ctr_type} hi'])}) {{",
              f"  for ({ctr_type} {counter} = lo; {counter} < hi; {counter}++) {{", *body[first + 2:end], "}"]
    indent = body[first][:len(body[first]) - len(body[first].lstrip())]
    call = f"{fn}({', '.join([d.split()[-1] for d in decls] + list(private) + ['part_lo', 'part_hi'])})"
    out += body[done:first] + [indent + line for line in parallel_region(threads, bound, ctr_type, call)]
    done = end
  return funcs, out + body[done:]
