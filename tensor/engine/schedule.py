"""The scheduler: cuts a tensor graph into kernels. Second stage of the pipeline (Tensor graph -> kernels -> codegen).

A node becomes a kernel's output ("realize point") when it must exist in memory: a tensor being realized, a COPY,
a CONTIGUOUS, an ASSIGN. Everything else fuses into the kernel that reads it, reductions included: a reduction whose
result is broadcast back (softmax's max and sum, layernorm's mean) runs inside the consumer's loops. A reduction becomes
its own kernel only when fusing would recompute it (read by several kernels, evaluated at several indices, or inside
loops it does not depend on): one walk over the graph decides it, tensor/engine/boundaries.py with rules/boundaries.rules.

`kernelize` leaves ASSIGN(BUFFER, KERNEL) nodes in the graph, as the seeds show. A KERNEL's sources are its output
buffer, its input buffers (in DEFINE_GLOBAL order) and then any kernels it must wait for without reading them (an
assign waits for the kernels that read the old value). The graph rewrites themselves are rules/kernelize.rules.
"""
from __future__ import annotations
from typing import NamedTuple
from runtime.dtype import DType, dtypes
from runtime.helpers import DEBUG, SPEC, getenv
from runtime.kahn import dependency_order
from runtime.ops import GroupOp, Ops
from runtime.rewrite import graph_rewrite
from runtime.trace import VIZ
from runtime.uop import UOp, uop
from rules.kernelize import tensor_cleanup, to_kernel_ast
from rules.kernelize_helpers import KernelContext, below_reshapes
from tensor.codegen import spec
from tensor.engine.boundaries import recomputed_reductions
from tensor.engine.schedule_cache import GraphShape, Launcher, OpChain, Recipe, chain_shape, learn_chain, record, replay, roots_shape, walked
from tensor.engine.multi import is_multi, lower as lower_multi
from tensor.engine.state import ENGINE, Engine
from tensor.engine.storage import base_buffer, realized_buffer

class ScheduleError(Exception):
  """The graph asks for an order of kernels that can't exist (an assign whose old value is read after it)."""

class Kernel:
  """The arg of a KERNEL node: the kernel's AST (a SINK of STOREs to DEFINE_GLOBAL parameters, or a COPY) and how many of
  the KERNEL's sources are buffers it runs on; the rest are kernels it only waits for."""
  __slots__ = ("ast", "nbufs")
  def __init__(self, ast: UOp, nbufs: int): self.ast, self.nbufs = ast, nbufs
  def __hash__(self) -> int: return hash((self.ast, self.nbufs))
  def __eq__(self, other) -> bool: return isinstance(other, Kernel) and other.ast is self.ast and other.nbufs == self.nbufs
  def __repr__(self) -> str: return f"<Kernel {'COPY' if self.ast.op is Ops.COPY else 'SINK'}>"

# SCHEDULE_CACHE=0 schedules every graph afresh; otherwise the schedules of the SCHEDULE_CACHE graph shapes used last are
# kept (in the engine's `schedules`)
SCHEDULE_CACHE = getenv("SCHEDULE_CACHE", 1024)

# ---- what is in memory already ----

# as module names for the per-node tests: `Ops.X` costs about 0.3 us in Python 3.11
_ASSIGN, _KERNEL, _BUFFER, _RESHAPE = Ops.ASSIGN, Ops.KERNEL, Ops.BUFFER, Ops.RESHAPE

def is_kernelized(u: UOp) -> bool:
  """ASSIGN(BUFFER, KERNEL): the output of a kernel made by an earlier kernelize (it may not have run yet)."""
  return u.op is _ASSIGN and u.src[1].op is _KERNEL

def is_stored(u: UOp) -> bool:
  u = below_reshapes(u)
  return u.op is _BUFFER or is_kernelized(u)

def computed(u: UOp) -> bool:
  """Whether u is still to compute: not a BUFFER nor a kernel output (walks of a pending graph stop at stored data)."""
  return u.op is not _BUFFER and not (u.op is _ASSIGN and u.src[1].op is _KERNEL)

# ---- kernels: the part of the graph each realize point computes ----

def kernel_value(x: UOp) -> UOp:
  """What the kernel for realize point x computes."""
  if x.op is Ops.ASSIGN: return x.src[1]
  if x.op is Ops.CONTIGUOUS: return x.src[0]
  return x

def region(x: UOp, points: set[UOp]) -> tuple[list[UOp], list[UOp]]:
  """(nodes computed by the kernel of point x, the inputs it reads)."""
  ctx = KernelContext(x, points)
  value = kernel_value(x)
  nodes, inputs = [], []
  for u in value.toposort(gate=lambda u: not ctx.is_input(u)):
    (inputs if ctx.is_input(u) else nodes).append(u)
  return nodes, inputs

def kernel_ast(x: UOp, points: set[UOp]) -> tuple[UOp, KernelContext]:
  """The AST of point x's kernel (a SINK storing the value to DEFINE_GLOBAL 0), and the context naming its inputs."""
  ctx = KernelContext(x, points)
  if x.op is Ops.COPY:
    return uop(Ops.COPY, x.dtype, (ctx.param(x.src[0]), x.src[1])), ctx
  body = graph_rewrite(kernel_value(x), to_kernel_ast, ctx, bottom_up=True, name="to_kernel_ast")
  g0 = uop(Ops.DEFINE_GLOBAL, x.dtype.ptr(x.size), (), 0)
  return uop(Ops.SINK, dtypes.void, (uop(Ops.STORE, dtypes.void, (g0, body)),)), ctx

# ---- realize points ----

def realize_points(sink: UOp, topo: list[UOp] | None = None) -> tuple[set[UOp], dict[UOp, tuple[list[UOp], list[UOp]]]]:
  """The nodes that become kernel outputs, and the region (nodes, inputs) of each one's kernel."""
  if topo is None: topo = list(sink.toposort(gate=computed))
  points: set[UOp] = set()
  for s in sink.src:
    if not is_stored(s): points.add(below_reshapes(s))  # a reshape of a kernel's output costs nothing
  for u in topo:
    if u.op in (Ops.COPY, Ops.CONTIGUOUS, Ops.ASSIGN) and not is_kernelized(u): points.add(u)
    # a copy moves a whole buffer: its source must be in memory
    if u.op is Ops.COPY and not is_stored(u.src[0]): points.add(below_reshapes(u.src[0]))
  # the reductions fusing would recompute, in one walk; then the kernels' regions, once, unless an assign or a very long
  # chain of ops needs more outputs (then again, with those)
  def is_input(u: UOp) -> bool:  # in memory already, or a reshape of a kernel's output
    if u.op is Ops.RESHAPE:
      u = below_reshapes(u)
      return u in points or u.op is Ops.BUFFER or is_kernelized(u)
    return u.op is Ops.BUFFER or is_kernelized(u)
  while True:
    points |= recomputed_reductions(topo, points, is_input, kernel_value)
    regions = {x: region(x, points) for x in points}
    new = _unsafe_inplace_reads(regions) | _old_reads_needing_the_assign(regions, points) | _too_deep(regions) | _broadcast_into_sums(regions, points)
    if not new: return points, regions
    points |= new

# an expensive elementwise value (a transcendental: GELU's tanh, an exp) broadcast into a reduction at least this many
# times, of at least BROADCAST_MIN_SIZE elements, is a kernel's output: fused, every output of the reduction computes it
# again (GPT-2's MLP down-projection evaluated GELU's 3072 values once per each of its 768 outputs: 2.2 ms of a 2.5 ms decode
# layer; its layernorms before the projections: as much again); a smaller one stays fused, where it costs less than a kernel
# launch, and so do a reduction's own values (softmax's 1/sum broadcast over its row: one kernel)
BROADCAST_MIN_TIMES = 16
BROADCAST_MIN_SIZE = 256
_EXPENSIVE = frozenset({Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.POW})
# so is one of this many ALU ops or more, none a transcendental, broadcast BROADCAST_LONG_TIMES times or more: ReLU's
# gradient (two loads, an add, compares and selects) fused into the MLP's weight gradient was computed again for each of
# its 784 columns (that GEMM at 55 GFLOP/s, the forward one at 107); a ReLU into a matmul of 16 columns or fewer stays fused
# (heuristic.skinny_tile computes it once per row for all of them)
BROADCAST_MIN_OPS = 4
BROADCAST_LONG_TIMES = 64

def _broadcast_into_sums(regions: dict, points: set[UOp]) -> set[UOp]:
  out: set[UOp] = set()
  for nodes, _ in regions.values():
    if not any(u.op is Ops.REDUCE_AXIS for u in nodes): continue
    mine = set(nodes)
    for u in nodes:
      if u.op is not Ops.EXPAND: continue
      src = u.src[0]
      while src.op in (Ops.RESHAPE, Ops.PERMUTE): src = src.src[0]  # the same values (a transposed operand: x.T @ w)
      if src not in mine or src.op not in GroupOp.ALU or not isinstance(n := src.size, int) or not isinstance(m := u.size, int): continue
      if n < BROADCAST_MIN_SIZE or m < BROADCAST_MIN_TIMES * n: continue
      body = [x for x in src.toposort(gate=lambda x: x in mine) if x in mine]
      # a reduction's own values (softmax's 1/sum: as many as the reduction has results) are computed once per row
      # already; a vector normalized by one (layernorm's output) is computed again for each output as any other value
      costly = any(x.op in _EXPENSIVE for x in body) or \
        (m >= BROADCAST_LONG_TIMES * n and sum(x.op in GroupOp.ALU for x in body) >= BROADCAST_MIN_OPS)
      if costly and all(x.size < n for x in body if x.op is Ops.REDUCE_AXIS): out.add(src)
  return out

# the longest chain of dependent ALU ops one kernel computes: gcc's time grows with it (about 0.5 ms per op at -O3) and gcc 12
# crashes on 100,000 dependent statements. A longer chain is cut every MAX_KERNEL_DEPTH ops (the pieces of `t = t + 1` repeated
# are one and the same kernel, compiled once)
MAX_KERNEL_DEPTH = 512

def _too_deep(regions: dict) -> set[UOp]:
  out: set[UOp] = set()
  for x, (nodes, _) in regions.items():
    depth: dict[UOp, int] = {}
    for u in nodes:  # sources first
      d = max((depth.get(s, 0) for s in u.src), default=0)
      if u.op in GroupOp.ALU:
        d += 1
        if d >= MAX_KERNEL_DEPTH and u is not kernel_value(x):
          out.add(u)
          d = 0
      depth[u] = d
  return out

_SAME_INDEX = GroupOp.Elementwise | {Ops.RESHAPE}

def _unsafe_inplace_reads(regions: dict) -> set[UOp]:
  """An assign's kernel writes its target while it runs: it may read the target only at the element it writes.
  A read through a movement op or a reduction is moved into a kernel of its own, which runs first."""
  out: set[UOp] = set()
  for x, (nodes, _) in regions.items():
    if x.op is not Ops.ASSIGN: continue
    target = base_buffer(x.src[0])
    inside = set(nodes)
    same: set[UOp] = set()
    stack = [kernel_value(x)]
    while stack:  # nodes evaluated at the very element being written
      u = stack.pop()
      if u in same or u not in inside: continue
      same.add(u)
      if u.op in _SAME_INDEX: stack.extend(u.src)
    for u in nodes:
      if u in same and u.op in _SAME_INDEX: continue
      if any(s not in inside and base_buffer(s) is target for s in u.src if s.op is not Ops.DEVICE): out.add(u)
  return out

def _old_reads_needing_the_assign(regions: dict, points: set[UOp]) -> set[UOp]:
  """A kernel that reads the version of a buffer an assign overwrites and also needs the assign's result can run neither
  before nor after it: its nodes that read the old version (and don't need the assign) get kernels of their own."""
  writers = {below_reshapes(w.src[0]): w for w in points if w.op is Ops.ASSIGN}  # version of a buffer -> the assign overwriting it
  if not writers: return set()
  needs: dict[UOp, set[UOp]] = {}
  def needed(x: UOp) -> set[UOp]:  # the points x's kernel depends on, transitively (iterative: graphs can be deep)
    stack = [x]
    while stack:
      u = stack[-1]
      if u in needs: stack.pop(); continue  # noqa: E702
      direct = [below_reshapes(i) for i in regions[u][1] if below_reshapes(i) in points]
      todo = [d for d in direct if d not in needs]
      if todo: stack.extend(todo); continue  # noqa: E702
      stack.pop()
      needs[u] = set(direct).union(*(needs[d] for d in direct))
    return needs[x]
  out: set[UOp] = set()
  for r, (nodes, ins) in regions.items():
    for i in ins:
      w = writers.get(below_reshapes(i))
      if w is None or w is r or w not in needed(r): continue
      ctx = KernelContext(r, points)
      out.update(u for u in nodes if i in u.src and w not in u.toposort(gate=lambda n: not ctx.is_input(n)))
  return out

# ---- building the kernels ----

def _order(points: set[UOp], regions: dict, topo: list[UOp]) -> tuple[list[UOp], dict[UOp, set[UOp]]]:
  """Points in an order their kernels can run in, and the points each one waits for without reading them (an assign
  waits for the kernel writing the version it overwrites, and for every kernel reading that version)."""
  deps: dict[UOp, set[UOp]] = {x: {below_reshapes(i) for i in ins if below_reshapes(i) in points} for x, (_, ins) in regions.items()}
  extra: dict[UOp, set[UOp]] = {x: set() for x in points}
  readers: dict[UOp, list[UOp]] = {}
  for r, (_, ins) in regions.items():
    for i in ins: readers.setdefault(below_reshapes(i), []).append(r)
  for w in points:
    if w.op is not Ops.ASSIGN: continue
    prev = below_reshapes(w.src[0])  # the version of the target this assign overwrites
    if prev in points or is_kernelized(prev): extra[w].add(prev)
    extra[w].update(r for r in readers.get(prev, ()) if r is not w)
  for x in points: deps[x] |= extra[x] & points
  # ties broken by graph order so the schedule is deterministic
  pos = {u: i for i, u in enumerate(topo)}
  order = dependency_order(deps, pos.__getitem__)
  if len(order) != len(points):
    raise ScheduleError("an assign's target is read, in its old version, by a computation that also needs the assign's result: "
                        "realize the tensor that reads the old value before assigning")
  return order, extra

def build_kernels(sink: UOp, engine: Engine = ENGINE, made: list[UOp] | None = None) -> dict[UOp, UOp]:
  """Kernels for every realize point under sink: a map from each realize point to ASSIGN(BUFFER, KERNEL) (reshaped back).
  The BUFFERs made for kernel outputs are appended to `made`."""
  topo = list(sink.toposort(gate=computed))
  points, regions = realize_points(sink, topo)
  order, extra = _order(points, regions, topo)
  becomes: dict[UOp, UOp] = {}
  def resolve(p: UOp) -> UOp:
    b = below_reshapes(p)
    b = becomes.get(b, b)
    return below_reshapes(b)
  for x in order:
    value = kernel_value(x)
    if x.op is Ops.CONTIGUOUS and KernelContext(x, points).is_input(value):
      # contiguous of data in memory already: that memory
      b = resolve(value)
      becomes[x] = b if b.shape == x.shape else uop(Ops.RESHAPE, x.dtype, (b,), x.shape)
      continue
    out = _output_buffer(x, engine, made)
    ast, ctx = kernel_ast(x, points)
    srcs = [out] + [resolve(p) for p in ctx.params]
    waits = [resolve(d) for d in extra[x]]
    srcs += [w for w in waits if w not in srcs]
    k = uop(Ops.KERNEL, dtypes.void, tuple(srcs), Kernel(ast, 1 + len(ctx.params)))
    done = uop(Ops.ASSIGN, out.dtype, (out, k))
    becomes[x] = done if x.shape == done.shape else uop(Ops.RESHAPE, x.dtype, (done,), x.shape)
  return becomes

def _output_buffer(x: UOp, engine: Engine, made: list[UOp] | None) -> UOp:
  if x.op is Ops.ASSIGN:
    base = base_buffer(x.src[0])
    if base is None:
      raise NotImplementedError("assign into a tensor that is not a whole realized buffer: realize it first, or assign to the whole tensor")
    return base
  b = new_output_buffer(engine, x.dtype, x.size, x.device)  # type: ignore[arg-type]
  if made is not None: made.append(b)
  return b

def new_output_buffer(engine: Engine, dtype: DType, size: int, device: str, plan: bool = True) -> UOp:
  """A fresh BUFFER for a kernel's output (allocated when the kernel runs, or placed by the memory planner). Without `plan` it
  is not offered to the planner (a schedule-cache hit launches its kernels at once: nothing to plan)."""
  b = engine.storage.new_buffer(dtype, size, device)
  if plan: engine.fresh_buffers.add(b)
  return b

def _reads(u: UOp) -> set[UOp]:
  """The buffers a pending graph reads (not the ones it only assigns into)."""
  out: set[UOp] = set()
  for n in u.toposort(gate=computed):
    for k, s in enumerate(n.src):
      if n.op is _ASSIGN and k == 0: continue
      b = below_reshapes(s)
      if b.op is _BUFFER: out.add(b)
  return out

def pending_readers(roots: list[UOp], engine: Engine) -> list[UOp]:
  """The live roots not yet computed that read a buffer these roots assign into: they must see the old values, so they are
  scheduled together with the assign (and run before it)."""
  targets = {base_buffer(n.src[0]) for r in roots for n in r.toposort(gate=computed) if n.op is _ASSIGN and not is_kernelized(n)}
  targets.discard(None)
  if not targets: return []
  mine, out = set(roots), []
  for u in engine.storage.live_roots():
    if realized_buffer(u) is not None: continue  # realized (most live tensors): no look further
    if u in mine or is_stored(u) or is_multi(u): continue  # a multi-device reader is lowered with the roots (tensor/engine/multi.py)
    if _reads(u) & targets:
      out.append(u)
      mine.add(u)
  return out

def kernelize(roots: list[UOp], engine: Engine = ENGINE) -> tuple[list[UOp], dict[UOp, UOp]]:
  """Replace the computations behind these graph roots with KERNEL nodes (nothing runs): (the roots kernelized: these and
  any pending live roots that read the old value of a buffer they assign into, what each node of their graphs becomes).
  The caller points its live tensors at what they became (tensor/tensor.py's rewire)."""
  with engine.lock: return kernelize_map(roots, engine)

class Lookup(NamedTuple):
  """What the schedule cache says about some roots: the roots to kernelize (these and the pending readers of what they
  assign), the graph's shape (None: not cached) and the recorded recipe (None: not seen yet)."""
  roots: list[UOp]
  shape: GraphShape | None
  recipe: Recipe | Launcher | None

def lookup(roots: list[UOp], engine: Engine = ENGINE, chain: tuple[OpChain, UOp] | None = None) -> Lookup:
  """Look these roots' graph up in the schedule cache. Hold engine.lock. `chain`: (OpChain, its leaf BUFFER) when the one
  root was made by a chain of ops on one realized buffer (schedule_cache.OpChain): when its form was walked before, it is
  looked up by its chain's key (its shape has no topo: a miss walks it)."""
  # VIZ records each realize's rewrites: it schedules afresh (RULECOVERAGE counts rules that ever fired: a hit changes nothing)
  if not SCHEDULE_CACHE or VIZ.value: shape = None
  elif chain is not None:
    if (shape := chain_shape(chain[0], roots[0], chain[1], (MAX_KERNEL_DEPTH,))) is not None:
      if (recipe := engine.schedules.get(shape)) is not None: return _new_lookup(Lookup, (roots, shape, recipe))
      return _new_lookup(Lookup, (roots, roots_shape((roots[0],), (MAX_KERNEL_DEPTH,)), None))  # a miss: counted once
    learn_chain(chain[0], shape := roots_shape((roots[0],), (MAX_KERNEL_DEPTH,)), chain[1])
  else: shape = roots_shape(tuple(roots), (MAX_KERNEL_DEPTH,))
  readers = pending_readers(roots, engine) if shape is None or shape.assigns else []
  if readers:
    # a schedule that depends on other live tensors (readers of an assign's old value) is not the graph's alone: never cached
    return Lookup(roots + readers, None, None)
  return _new_lookup(Lookup, (roots, shape, engine.schedules.get(shape) if shape is not None else None))

_new_lookup = tuple.__new__  # a NamedTuple's own constructor takes four times as long, on every realize

def kernelize_map(roots: list[UOp], engine: Engine = ENGINE, found: Lookup | None = None) -> tuple[list[UOp], dict[UOp, UOp]]:
  """The roots to kernelize (these and the pending readers of what they assign) and what each node of their graphs
  becomes. Hold engine.lock. `found`: the lookup of these roots made already."""
  if found is None and (low := lower_multi(roots, engine)) is not None:  # tensors over several devices: their shards, kernelized
    return roots, low[1](kernelize_map(low[0], engine)[1])
  roots, shape, recipe = found if found is not None else lookup(roots, engine)
  sink = uop(Ops.SINK, dtypes.void, tuple(roots))
  if shape is not None: shape = walked(shape)  # found by its chain: walk it now
  if shape is not None:
    if recipe.__class__ is Recipe:  # a Launcher builds no kernel nodes: kernelize afresh
      becomes = replay(recipe, shape, lambda dtype, size, device: new_output_buffer(engine, dtype, size, device))
      if DEBUG >= 1: print(f"schedule: cached, {len(recipe.outputs)} new buffers for {len(roots)} tensors")
      return roots, becomes
    made: list[UOp] = []
    becomes = _kernelize_graph(sink, engine, made)
    engine.schedules.put(shape, record(shape, becomes, made))
  else: becomes = _kernelize_graph(sink, engine, None)
  if DEBUG >= 1:
    ks = [u for u in uop(Ops.SINK, dtypes.void, tuple(becomes.values())).toposort(gate=lambda u: u.op is not Ops.BUFFER) if u.op is Ops.KERNEL]
    copies = sum(1 for k in ks if k.arg.ast.op is Ops.COPY)
    print(f"schedule: {len(ks)} kernels ({copies} copies) for {len(roots)} tensors")
  return roots, becomes

def _kernelize_graph(sink: UOp, engine: Engine, made: list[UOp] | None) -> dict[UOp, UOp]:
  """What each node of sink's graph becomes (kernelize_map without the cache)."""
  if SPEC: spec.check(sink, "tensor", "the tensor graph kernelize takes")
  # the realize points below the roots (a contiguous(), a copy) and the nodes live tensors hold go through cleanup beside
  # them, so what each becomes is known by its own node too: a live tensor holding one is pointed at its buffer, and no later
  # schedule computes it again. (A held node above a realize point is rewritten by cleanup with it: without its own entry,
  # GPT-2's attention input, a layernorm of the last block's contiguous() output, was computed again for the query.)
  roots = set(sink.src)  # a set: `in sink.src` made realizing 20,000 copies at once quadratic (33 s)
  held = {u for u in engine.storage.live_roots() if u.op is not Ops.BUFFER}
  inner = [u for u in sink.toposort(gate=computed) if (u.op in (Ops.CONTIGUOUS, Ops.COPY) or u in held) and u not in roots]
  clean = graph_rewrite(uop(Ops.SINK, dtypes.void, sink.src + tuple(inner)), tensor_cleanup, name="tensor_cleanup")
  clean, cleaned_inner = uop(Ops.SINK, dtypes.void, clean.src[:len(sink.src)]), clean.src[len(sink.src):]
  becomes = build_kernels(clean, engine, made)
  # map the original roots and inner nodes: cleanup may have replaced them, and a reshape of a kernel's output is that output
  # reshaped (a held `y = x.sum(1)` is a reshape of the sum a kernel wrote)
  for orig, new in zip(sink.src + tuple(inner), clean.src + cleaned_inner):
    if new not in becomes and below_reshapes(new) in becomes:
      b = becomes[below_reshapes(new)]
      becomes[new] = b if b.shape == new.shape else uop(Ops.RESHAPE, new.dtype, (below_reshapes(b),), new.shape)
    if orig is not new:
      if new in becomes: becomes[orig] = becomes[new]
      elif is_stored(new): becomes[orig] = new
  return becomes

__all__ = ["kernelize", "kernelize_map", "lookup", "Kernel", "ScheduleError"]
