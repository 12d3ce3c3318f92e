"""Codegen: a kernel AST (from the scheduler) -> a lowered kernel -> a linear program. Third stage of the pipeline.

  rangeify   loops over the output; AT(x, idx) pushed down to loads       rules/rangeify.rules
  symbolic   index arithmetic simplified                                 rules/symbolic.rules
  float32    float16/bfloat16 arithmetic computed in float32               rules/float_compute.rules
  opts       an Opt list: vectors, tiles, partials, stash (not NOOPT)      tensor/codegen/opt.py, rules/opt.rules
  lower      reductions become accumulators                              rules/lower.rules
  linearize  one list of UOps in execution order                         tensor/codegen/linearize.py
Python here only drives the passes; every rewrite is a rule.
"""
from __future__ import annotations
from dataclasses import dataclass, field
from runtime.dtype import DType, PtrDType, dtypes
from runtime.helpers import BEAM, NOOPT, SPEC
from runtime.ops import GroupOp, Ops
from runtime.rewrite import graph_rewrite
from runtime.uop import UOp, uop, dim_ident, dim_max
from tensor.codegen import spec
from tensor.codegen.heuristic import hand_coded_opts
from tensor.codegen.linearize import linearize
from tensor.codegen.opt import Opt, apply_opts

__all__ = ["full_rewrite_to_sink", "lower_kernel", "linearize", "Program", "kernel_name"]

class CodegenContext:
  """Counters for fresh RANGE and accumulator ids, the kernel's index type, and the memos the rules keep."""
  def __init__(self, first_range: int = 0, index: DType = dtypes.int32):
    self.next_range, self.next_reg, self.index = first_range, 0, index
    self.scopes: dict = {}
    self.reduces: dict[UOp, UOp] = {}  # AT(REDUCE_AXIS, ...) -> its REDUCE (the memo of rules/rangeify.rules)
    self.shared_outer: dict[UOp, frozenset] = {}  # reduce RANGE -> loops around all the REDUCEs over it (rules/lower_helpers)
  def new_range(self) -> int:
    self.next_range += 1
    return self.next_range - 1
  def new_reg(self) -> int:
    self.next_reg += 1
    return self.next_reg - 1

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
  """The index type of a kernel: int64 when any tensor in it (or any buffer it reads) has INT32_INDEX_LIMIT elements or
  more, else int32 (rangeify_simplified checks the bounds of the result and widens a kernel whose index math may overflow)."""
  for u in ast.toposort():
    n = u.dtype.size if isinstance(u.dtype, PtrDType) else u.size if u.shape is not None else 0
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

def lower_kernel(ast: UOp, opt: bool | None = None, opts: list | None = None, device: str = "CPU") -> tuple[UOp, list[Opt]]:
  """The lowered kernel of a kernel AST for a device, and the Opt list applied to it: `opts` when given, else the heuristic's
  (tensor/codegen/heuristic.py) unless opt is False or NOOPT=1 (opt=True forces it)."""
  from rules.expand import expanded
  from rules.lower import lower
  from rules.vectorize import vectorized
  if ast.op is not Ops.SINK: raise ValueError(f"full_rewrite_to_sink takes a kernel's SINK, not {ast.op}")
  if SPEC: spec.check(ast, "kernel", "the kernel AST codegen takes")
  sink, ctx = rangeify_simplified(ast)
  sink = float_compute(sink)
  caps = vector_caps(device)
  optimize = opts is not None or (opt if opt is not None else not NOOPT)
  if opts is None and optimize and BEAM >= 1 and device != "PYTHON":
    from tensor.codegen.beam import beam_opts
    opts = beam_opts(ast, device, int(BEAM))  # it lowers its candidates through here with `opts` given
  if opts is None: opts = hand_coded_opts(sink, caps) if optimize else []
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

# an Opt of this kind caps the kernel's threads at its amount (the renderer reads THREADS): BEAM's way to keep a kernel on
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

def vector_caps(device: str):
  """The vector ops a device's renderer has (None: scalars only, as the PYTHON interpreter)."""
  if device == "PYTHON": return None
  from tensor.renderer.cstyle import cpu_vector_caps
  return cpu_vector_caps()

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

def full_rewrite_to_sink(ast: UOp, opt: bool | None = None) -> UOp:
  """The lowered kernel of a kernel AST: STOREs to INDEXed DEFINE_GLOBALs of values computed from LOADs, in loops.
  opt=None applies the default optimizations unless NOOPT=1; True/False force them on or off."""
  return lower_kernel(ast, opt)[0]

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

_names: dict[str, int] = {}

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
  """base_name, numbered from the second kernel of that name in this process (E_4n2)."""
  base = base_name(ast)
  n = _names.get(base, 0) + 1
  _names[base] = n
  return base if n == 1 else f"{base}n{n}"

def estimate(uops: list[UOp]) -> tuple[int, int]:
  """(operations, bytes moved) of a linear program, counting loop trip counts. ALU ops count lane by lane (a vector op is
  one per lane, a fused multiply-add two), so the work of a kernel does not depend on the vector width it was built for."""
  ops = mem = 0
  mult = [1]
  for u in uops:
    if u.op is Ops.RANGE: mult.append(mult[-1] * (u.src[0].arg if u.src[0].op is Ops.CONST else 1))
    elif u.op is Ops.END and len(mult) > 1: mult.pop()
    elif u.op in (Ops.LOAD, Ops.STORE):
      dt = u.dtype if u.op is Ops.LOAD else u.src[1].dtype
      mem += mult[-1] * dt.itemsize
    elif u.op in GroupOp.ALU: ops += mult[-1] * u.dtype.count * (2 if u.op is Ops.MULACC else 1)
  return ops, mem
