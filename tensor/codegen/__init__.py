"""Codegen: a kernel AST (from the scheduler) -> a lowered kernel -> a linear program. Third stage of the pipeline.

  rangeify   loops over the output; AT(x, idx) pushed down to loads       rules/rangeify.rules
  symbolic   index arithmetic simplified                                 rules/symbolic.rules
  opts       long reductions split, small inner loops unrolled (not NOOPT) tensor/codegen/opt.py
  lower      reductions become accumulators                              rules/lower.rules
  linearize  one list of UOps in execution order                         tensor/codegen/linearize.py
Python here only drives the passes; every rewrite is a rule.
"""
from __future__ import annotations
from dataclasses import dataclass, field
from runtime.dtype import DType, PtrDType, dtypes
from runtime.helpers import NOOPT
from runtime.ops import GroupOp, Ops
from runtime.rewrite import graph_rewrite
from runtime.uop import UOp, uop, dim_ident, dim_max
from tensor.codegen.heuristic import hand_coded_opts
from tensor.codegen.linearize import linearize, range_nests
from tensor.codegen.opt import Opt, apply_opts

__all__ = ["full_rewrite_to_sink", "lower_kernel", "linearize", "Program", "kernel_name", "recomputed_reductions"]

class CodegenContext:
  """Counters for fresh RANGE and accumulator ids, the kernel's index type, the scope memo the lowering uses, and which
  REDUCE_AXIS of the AST each reduction's first RANGE came from (the scheduler asks which reductions fusing would recompute)."""
  def __init__(self, first_range: int = 0, index: DType = dtypes.int32):
    self.next_range, self.next_reg, self.index = first_range, 0, index
    self.scopes: dict = {}
    self.origins: dict[UOp, UOp] = {}
    self.reduces: dict[UOp, UOp] = {}  # AT(REDUCE_AXIS, ...) -> its REDUCE (rules/rangeify_helpers.at_reduce)
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
  stores = []
  for st in ast.src:
    g, value = st.src
    shape = value.shape
    ix = ctx.index
    idx, linear, stride = [], uop(Ops.CONST, ix, (), 0), 1
    for d in shape: idx.append(uop(Ops.RANGE, ix, (_c(ix, d),), ctx.new_range()) if d != 1 else _c(ix, 0))
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

def recomputed_reductions(sink: UOp, ctx: CodegenContext) -> set[UOp]:
  """The REDUCE_AXIS nodes (of the AST rangeified into `sink`) whose reductions the loops would recompute: one evaluated
  at several indices, or one sitting inside a loop its value does not depend on (the linearizer puts a node in every loop
  enclosing the loops it uses, as rules/lower_helpers.scope and linearize's nests define them)."""
  from rules.lower_helpers import scope
  topo = list(sink.toposort())
  reduces = [u for u in topo if u.op is Ops.REDUCE]
  memo: dict = {}
  nest = range_nests(topo, Ops.REDUCE, memo)
  bad, seen = set(), set()
  for q in reduces:
    origin = ctx.origins.get(q.src[1])
    if origin is None: continue
    inside = scope(q, memo)
    if origin in seen or frozenset().union(*(nest(r) for r in inside)) != inside: bad.add(origin)
    seen.add(origin)
  return bad

_simplified: dict[UOp, tuple[UOp, CodegenContext]] = {}

def rangeify_simplified(ast: UOp) -> tuple[UOp, CodegenContext]:
  """rangeify then symbolic, remembered for the last few hundred ASTs: the scheduler's fusion check and the lowering of
  the same kernel share it. Returns a fresh context (range counter and reduce origins as rangeify left them)."""
  from rules.symbolic import symbolic
  if ast not in _simplified:
    ctx = CodegenContext(index=index_dtype(ast))
    sink = graph_rewrite(rangeify(ast, ctx), symbolic, name="symbolic")
    if ctx.index is dtypes.int32 and index_may_overflow(sink):
      ctx = CodegenContext(index=dtypes.int64)
      sink = graph_rewrite(rangeify(ast, ctx), symbolic, name="symbolic")
    if len(_simplified) >= 512: _simplified.clear()
    _simplified[ast] = (sink, ctx)
  sink, done = _simplified[ast]
  ctx = CodegenContext(done.next_range, done.index)
  ctx.origins, ctx.reduces = done.origins, done.reduces
  return sink, ctx

def lower_kernel(ast: UOp, opt: bool | None = None, opts: list | None = None, device: str = "CPU") -> tuple[UOp, list[Opt]]:
  """The lowered kernel of a kernel AST for a device, and the Opt list applied to it: `opts` when given, else the heuristic's
  (tensor/codegen/heuristic.py) unless opt is False or NOOPT=1 (opt=True forces it)."""
  from rules.expand import expanded
  from rules.lower import lower
  from rules.vectorize import vectorized
  if ast.op is not Ops.SINK: raise ValueError(f"full_rewrite_to_sink takes a kernel's SINK, not {ast.op}")
  sink, ctx = rangeify_simplified(ast)
  caps = vector_caps(device)
  optimize = opts is not None or (opt if opt is not None else not NOOPT)
  if opts is None: opts = hand_coded_opts(sink, caps) if optimize else []
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
  return graph_rewrite(sink, lower, ctx, name="lower"), opts

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

def kernel_name(ast: UOp) -> str:
  """E_4 for an elementwise kernel over shape (4,), r_4_8 for one reducing 8 values into each of 4: as in tinygrad."""
  value = ast.src[0].src[1]
  out = [d for d in value.shape if d != 1] or [1]
  red = [x for x in value.toposort() if x.op is Ops.REDUCE_AXIS]
  dims = out + ([d for r in red[:1] for a, d in enumerate(r.src[0].shape) if a in r.arg[1] and d != 1] if red else [])
  base = ("r_" if red else "E_") + "_".join(dim_ident(d) for d in dims)
  n = _names.get(base, 0) + 1
  _names[base] = n
  return base if n == 1 else f"{base}n{n}"

def estimate(uops: list[UOp]) -> tuple[int, int]:
  """(operations, bytes moved) of a linear program, counting loop trip counts."""
  ops = mem = 0
  mult = [1]
  for u in uops:
    if u.op is Ops.RANGE: mult.append(mult[-1] * (u.src[0].arg if u.src[0].op is Ops.CONST else 1))
    elif u.op is Ops.END and len(mult) > 1: mult.pop()
    elif u.op in (Ops.LOAD, Ops.STORE):
      dt = u.dtype if u.op is Ops.LOAD else u.src[1].dtype
      mem += mult[-1] * dt.itemsize
    elif u.op in GroupOp.ALU: ops += mult[-1]
  return ops, mem
