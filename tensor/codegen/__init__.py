"""Codegen: a kernel AST (from the scheduler) -> a lowered kernel -> a linear program -> the device's program, for a
Target (tensor/codegen/target.py: the device's renderer, vector caps and cost model). Third stage of the pipeline.

  rangeify        loops over the output; AT(x, idx) pushed down to loads     rules/rangeify.rules
  symbolic        index arithmetic simplified                               rules/symbolic.rules
  window          a store of the old value outside a window: loops over it   tensor/codegen/window.py, rules/opt.rules
  float_compute   float16/bfloat16 arithmetic computed in float32            rules/float_compute.rules
  opts            an Opt list: vectors, tiles, partials, stash (not NOOPT)   tensor/codegen/opt.py, rules/opt.rules
  expand          the upcast and unrolled loops' lanes made explicit        rules/expand.rules
  decompositions  exp2, log2, ... as polynomials (vector targets)           rules/decompositions.rules
  vectorize       lanes grouped into the target's vectors                   rules/vectorize.rules
  lower           reductions become accumulators                            rules/lower.rules
  linearize       one list of UOps in execution order                       tensor/codegen/linearize.py
  render          the target's renderer; threads from its cost model       tensor/renderer/, tensor/codegen/cost.py
The Opt list is the heuristic's (tensor/codegen/heuristic.py) unless given: BEAM search (tensor/codegen/beam.py) calls this
module, never the other way round. Python here only drives the passes; every rewrite is a rule.
"""
from __future__ import annotations
import hashlib
from dataclasses import dataclass, field
from runtime.dtype import DType, PtrDType, dtypes
from runtime.helpers import DEBUG, NOOPT, SPEC
from runtime.ops import GroupOp, Ops
from runtime.profile import scope
from runtime.rewrite import graph_rewrite
from runtime.uop import UOp, uop, dim_ident, dim_max
from rules.rangeify_helpers import CodegenContext
from tensor.codegen import spec
from tensor.codegen.cost import estimate
from tensor.codegen.heuristic import hand_coded_opts
from tensor.codegen.linearize import linearize
from tensor.codegen.opt import Opt, OptError, apply_opts
from tensor.codegen.target import Target, target_for
from tensor.codegen.window import window

__all__ = ["full_rewrite_to_sink", "lower_kernel", "linearize", "program", "render", "Program", "kernel_name", "estimate", "Target", "target_for",
           "CodegenContext"]

def rangeify(ast: UOp, ctx: CodegenContext) -> UOp:
  """Loops over each STORE's shape, and the stored value evaluated at those loop indices (AT), pushed down to loads."""
  from rules.rangeify import rangeify as rangeify_rules
  from rules.rangeify_helpers import output_loops
  stores = []
  for st in ast.src:
    g, value = st.src
    shape = value.shape
    ix = ctx.index
    idx, linear, stride = output_loops(ctx, shape), uop(Ops.CONST, ix, (), 0), 1
    for i, d in reversed(list(zip(idx, shape))):
      if d != 1: linear = uop(Ops.ADD, ix, (uop(Ops.MUL, ix, (i, _c(ix, stride))), linear))
      stride = stride * d if stride.__class__ is int and d.__class__ is int else uop(Ops.MUL, ix, (_c(ix, stride), _c(ix, d)))
    at = uop(Ops.AT, value.dtype, (value, uop(Ops.CONST, dtypes.bool, (), True), *idx))
    stores.append(uop(Ops.STORE, dtypes.void, (uop(Ops.INDEX, g.dtype, (g, linear)), at)))
  return graph_rewrite(uop(Ops.SINK, dtypes.void, tuple(stores)), rangeify_rules, ctx, name="rangeify")

def _c(dtype: DType, v) -> UOp:
  # a size is an int or a Variable (a symbolic shape: the loop ends at the kernel's argument)
  return uop(Ops.CONST, dtype, (), v) if v.__class__ is int else v if v.dtype is dtype else uop(Ops.CAST, dtype, (v,))

# index math in int32 while every value it can take stays well inside int32 (loop counters and offsets are cheaper, and
# gcc vectorizes int32 index math better); from a tensor of 2**30 elements on, int64
INT32_INDEX_LIMIT = 2**30

def index_dtype(ast: UOp) -> DType:
  """The index type of a kernel: int64 when a buffer it reads or writes has INT32_INDEX_LIMIT elements or more, or a dim of
  one of its tensors (a loop) is that long, else int32. A broadcast product of many elements that is never stored (a
  conv's windows times its weight: 1.3G elements at batch 128) needs no more: rangeify_simplified checks the bounds of the
  index math it leaves and widens a kernel that may overflow."""
  for u in ast.toposort():
    if isinstance(u.dtype, PtrDType): n = u.dtype.size
    else: n = max((dim_max(d) for d in u.shape), default=0) if u.shape is not None else 0
    if n >= INT32_INDEX_LIMIT: return dtypes.int64
  return dtypes.int32

def index_may_overflow(sink: UOp) -> bool:
  """Whether some index value of an int32 kernel may leave int32: range analysis (runtime/uop.py) gives a node that
  may wrap the whole range of its type, so a non-variable index node spanning all of int32 may have wrapped."""
  lo, hi = dtypes.min(dtypes.int32), dtypes.max(dtypes.int32)
  roots = [s for u in sink.toposort() if u.op in (Ops.INDEX, Ops.RANGE) for s in (u.src[1:] if u.op is Ops.INDEX else u.src)]
  for u in uop(Ops.SINK, dtypes.void, tuple(roots)).toposort(gate=lambda x: x.op not in (Ops.LOAD, Ops.AFTER)):
    if u.dtype is dtypes.int32 and u.op is not Ops.DEFINE_VAR and not lo < u.vmin <= u.vmax < hi: return True
  return False

def rangeify_simplified(ast: UOp) -> tuple[UOp, CodegenContext]:
  """rangeify then symbolic, with the context they leave (range counter, index type). A kernel whose int32 index math may
  overflow is done again in int64."""
  from rules.symbolic import symbolic
  ctx = CodegenContext(index=index_dtype(ast))
  sink = graph_rewrite(rangeify(ast, ctx), symbolic, name="symbolic")
  if ctx.index is dtypes.int32 and index_may_overflow(sink):
    ctx = CodegenContext(index=dtypes.int64)
    sink = graph_rewrite(rangeify(ast, ctx), symbolic, name="symbolic")
  return sink, ctx

def lower_kernel(ast: UOp, target: Target | None = None, opts: list | None = None, opt: bool | None = None) -> tuple[UOp, list[Opt]]:
  """The lowered kernel of a kernel AST for a target (by default the CPU's), and the Opt list applied to it: `opts` when
  given (BEAM's), else the heuristic's (tensor/codegen/heuristic.py) unless opt is False or NOOPT=1 (opt=True forces it)."""
  from rules.expand import expanded
  from rules.lower import lower
  from rules.vectorize import vectorized
  if ast.op is not Ops.SINK: raise ValueError(f"full_rewrite_to_sink takes a kernel's SINK, not {ast.op}")
  if target is None: target = target_for("CPU")
  if SPEC: spec.check(ast, "kernel", "the kernel AST codegen takes")
  sink, ctx = rangeify_simplified(ast)
  sink = window(sink)
  sink = float_compute(sink)
  caps = target.caps
  optimize = opts is not None or (opt if opt is not None else not NOOPT)
  if opts is None: opts = hand_coded_opts(sink, caps, target.renderer.group_max, target.renderer.local_tiles) if optimize else []
  if not target.renderer.group_max and (o := next((o for o in opts if o[0] in ("GROUP", "LOCAL")), None)) is not None:
    raise OptError(f"{o[0]} needs a target with work-group memory (CL, CUDA), not {target.device}")
  if (big := next((o for o in opts if o[0] == "LOCAL" and o[2] * o[2] > target.renderer.group_max), None)) is not None:
    raise OptError(f"{big}: a group of {big[2]} x {big[2]} work-items; {target.device} takes at most {target.renderer.group_max}")
  if (big := next((o for o in opts if o[0] == "GROUP" and o[2] > target.renderer.group_max), None)) is not None:
    raise OptError(f"{big}: {target.device} takes at most {target.renderer.group_max} work-items in a group")
  opts, threads = split_threads(opts)
  if opts:
    # the optimizer numbers the loops it adds after every loop of the kernel
    ctx.next_range = max([ctx.next_range] + [u.arg + 1 for u in sink.toposort() if u.op is Ops.RANGE])
    sink, opts = apply_opts(sink, opts, ctx.new_range)
    sink = graph_rewrite(sink, expanded, name="expand")
  if optimize and caps is not None:
    # exp2 and log2 as polynomials (rules/decompositions.rules): each lane's is plain arithmetic, which gcc vectorizes
    # where a call of exp2f stays one call per element
    from rules.decompositions import decompositions
    sink = graph_rewrite(sink, decompositions, name="decompositions")
  if opts: sink = graph_rewrite(sink, vectorized(caps), name="vectorize")
  ctx.shared_outer = shared_outer(sink)
  ctx.next_range = max([ctx.next_range] + [u.arg + 1 for u in sink.toposort() if u.op is Ops.RANGE])
  sink = graph_rewrite(sink, lower, ctx, name="lower")
  if SPEC: spec.check(sink, "program", "the lowered kernel")
  return sink, opts + threads

# an Opt of this kind caps the kernel's threads at its amount (cost.parallel_loops reads it): BEAM's way to keep a kernel on
# one thread when the cost model of runtime/threads.py would split it; the loops' Opts ignore it
THREADS_OPT = "THREADS"

def split_threads(opts: list) -> tuple[list, list]:
  """(the loop Opts, the THREADS Opts) of an Opt list."""
  if not any(o[0] == THREADS_OPT for o in opts): return list(opts), []
  return [o for o in opts if o[0] != THREADS_OPT], [Opt(*o) for o in opts if o[0] == THREADS_OPT]

def thread_cap(opts: list) -> int | None:
  """The THREADS cap an Opt list sets (None: the default)."""
  return next((o[2] for o in opts if o[0] == THREADS_OPT), None)

def float_compute(sink: UOp) -> UOp:
  """The kernel with its float16 and bfloat16 arithmetic in float32, rounded once where a value leaves it
  (rules/float_compute.rules); a kernel without such ALUs as it is."""
  from rules.float_compute_helpers import NARROW
  if not any(u.dtype.scalar in NARROW and u.op in GroupOp.ALU for u in sink.toposort()): return sink
  from rules.float_compute import float_compute as widen, unmark
  return graph_rewrite(graph_rewrite(sink, widen, name="float compute"), unmark, name="unmark")

def shared_outer(sink: UOp) -> dict[UOp, frozenset]:
  """For each reduce RANGE, the loops around every REDUCE over it. Upcast lanes share reduce loops (one loop updating
  several accumulators); a lane that does not use an outer loop still sits in it, so its accumulator must reset there."""
  from rules.lower_helpers import scope
  memo: dict = {}
  out: dict[UOp, frozenset] = {}
  for q in sink.toposort():
    if q.op is Ops.REDUCE:
      for r in q.src[1:]: out[r] = out.get(r, frozenset()) | scope(q, memo)
  return out

def full_rewrite_to_sink(ast: UOp, opt: bool | None = None, target: Target | None = None) -> UOp:
  """The lowered kernel of a kernel AST: STOREs to INDEXed DEFINE_GLOBALs of values computed from LOADs, in loops.
  opt=None applies the default optimizations unless NOOPT=1; True/False force them on or off. For the CPU unless `target`."""
  return lower_kernel(ast, target, opt=opt)[0]

@dataclass
class Program:
  """A kernel ready for a device: its name, the linear program, the rendered source, and cost estimates."""
  name: str
  uops: list[UOp]
  src: str
  device: str
  n_params: int
  global_size: tuple[int, ...]
  ops: int = 0
  mem: int = 0
  vars: list[UOp] = field(default_factory=list)
  opts: list = field(default_factory=list)

def global_size(ast: UOp) -> tuple[int, ...]:
  """The output loop sizes of a kernel (its output shape without size-1 dims), as DEBUG=2 prints them."""
  return tuple(dim_max(d) for d in ast.src[0].src[1].shape if d != 1) or (1,)  # a symbolic size at its maximum

def base_name(ast: UOp) -> str:
  """E_4 for an elementwise kernel over shape (4,), r_4_8 for one reducing 8 values into each of 4: as in tinygrad."""
  value = ast.src[0].src[1]
  out = [d for d in value.shape if d != 1] or [1]
  red = [x for x in value.toposort() if x.op is Ops.REDUCE_AXIS]
  dims = out + ([d for r in red[:1] for a, d in enumerate(r.src[0].shape) if a in r.arg[1] and d != 1] if red else [])
  return ("r_" if red else "E_") + "_".join(dim_ident(d) for d in dims)

def kernel_name(ast: UOp) -> str:
  """base_name and `n` with four hex digits of a digest of the AST (E_4n1c3f): a function of the kernel alone, the same in
  every process and in any order of compiles, and two kernels of one shape (t * 2 and t + 7) are told apart."""
  return f"{base_name(ast)}n{hashlib.sha256(ast_text(ast).encode()).hexdigest()[:4]}"

def ast_text(ast: UOp) -> str:
  """The AST written out: one line per node (op, dtype, arg, tag, source numbers), sources first (kernel names and the
  cache keys of programs and BEAM's choices are digests of it)."""
  index: dict[UOp, int] = {}
  lines = []
  for u in ast.toposort():
    index[u] = len(index)
    lines.append(f"{u.op.name}|{u.dtype!r}|{u.arg!r}|{u.tag!r}|{','.join(str(index[s]) for s in u.src)}")
  return "\n".join(lines)

def render(target: Target, name: str, uops: list[UOp], opts: list) -> object:
  """A linear program in the target's language, its outer loops on the threads the target's cost model gives them (at most
  the THREADS Opt's amount, when `opts` holds one)."""
  parallel = target.cost.parallel_loops(uops, thread_cap(opts)) if target.renderer.threads else None
  return target.renderer.render(name, uops, parallel)

def program(ast: UOp, target: Target, name: str | None = None, opts: list | None = None) -> Program:
  """A kernel AST lowered, linearized and rendered for a target: its Program (named `name`, by default kernel_name). `opts`:
  the Opt list to apply (BEAM's), else the heuristic's unless NOOPT=1. DEBUG=3 prints the AST and the opts, 4 the
  rendered program, 5 the linear UOps; PROFILE gives each stage a span."""
  name = name or kernel_name(ast)
  sink, applied = lower_kernel(ast, target, opts)
  if DEBUG >= 3:
    print(f"--- {name} AST ---\n{ast}")
    print(f"--- {name} opts: {', '.join(f'{o[0]} axis {o[1]} amount {o[2]}' for o in applied) or 'none'}")
  with scope("linearize", "codegen"): uops = linearize(sink)
  if DEBUG >= 5:
    print(f"--- {name} lowered UOps ---")
    at = {u: i for i, u in enumerate(uops)}
    for i, u in enumerate(uops): print(f"{i:4d} {u.op!s:20s} {u.dtype!r:28s} {[at.get(s, '-') for s in u.src]} {u.arg!r}")
  with scope("render", "codegen"): src = render(target, name, uops, applied)
  if DEBUG >= 4: print(src if isinstance(src, str) else f"({target.device} program: {len(uops)} uops)")
  ops, mem = target.cost.estimate(uops)
  n_params = sum(1 for u in uops if u.op is Ops.DEFINE_GLOBAL)
  return Program(name, uops, src, target.device, n_params, global_size(ast), ops, mem, vars=[u for u in uops if u.op is Ops.DEFINE_VAR],
                 opts=applied)

