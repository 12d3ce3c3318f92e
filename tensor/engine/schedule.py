"""The scheduler: cuts a tensor graph into kernels. Second stage of the pipeline (Tensor graph -> kernels -> codegen).

A node becomes a kernel's output ("realize point") when it must exist in memory: a tensor being realized, a COPY,
a CONTIGUOUS, an ASSIGN, and a reduction whose result is expanded (or used twice), since fusing it would recompute
it per element. Everything else fuses into the kernel that reads it. `kernelize` leaves ASSIGN(BUFFER, KERNEL) nodes
in the graph, as the seeds show; the graph rewrites themselves are rules/kernelize.rules.
"""
from __future__ import annotations
from runtime.device import Buffer
from runtime.dtype import dtypes
from runtime.helpers import DEBUG
from runtime.ops import Ops
from runtime.rewrite import graph_rewrite
from runtime.uop import UOp, uop
from rules.kernelize import tensor_cleanup, to_kernel_ast
from tensor.tensor import Tensor, _device, _new_unique, buffers

class Kernel:
  """The arg of a KERNEL node: the kernel's AST, a SINK of STOREs to DEFINE_GLOBAL parameters (or a COPY)."""
  __slots__ = ("ast",)
  def __init__(self, ast: UOp): self.ast = ast
  def __hash__(self) -> int: return hash(self.ast)
  def __eq__(self, other) -> bool: return isinstance(other, Kernel) and other.ast is self.ast
  def __repr__(self) -> str: return f"<Kernel {'COPY' if self.ast.op is Ops.COPY else 'SINK'}>"

class KernelContext:
  """What to_kernel_ast needs: which nodes are inputs, and the parameter each one became."""
  def __init__(self, inputs: set[UOp]):
    self.inputs = inputs
    self.params: list[UOp] = []
    self.globals: dict[UOp, UOp] = {}
  def is_input(self, x: UOp) -> bool: return x in self.inputs
  def param(self, x: UOp) -> UOp:
    if x not in self.globals:
      self.params.append(x)
      self.globals[x] = uop(Ops.DEFINE_GLOBAL, x.dtype.ptr(x.size), (), len(self.params))
    return self.globals[x]

def _is_buffer_view(u: UOp) -> bool:
  # a realized tensor: a BUFFER, or a reshape of one
  return u.op is Ops.BUFFER or (u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER)

def realize_points(sink: UOp) -> list[UOp]:
  """The nodes that become kernel outputs, in dependency order."""
  topo = list(sink.toposort(gate=lambda u: u.op is not Ops.BUFFER))
  points: set[UOp] = {s for s in sink.src if not _is_buffer_view(s)}
  for u in topo:
    if u.op in (Ops.COPY, Ops.CONTIGUOUS, Ops.ASSIGN) and u.src[0].op is not Ops.BUFFER_VIEW: points.add(u)
    if u.op is Ops.COPY and not _is_buffer_view(u.src[0]): points.add(u.src[0])
  # consumers first: a reduction that some consumer expands (inside the same kernel) must be its own kernel
  users: dict[UOp, list[UOp]] = {}
  for u in topo:
    for s in u.src: users.setdefault(s, []).append(u)
  expanded: dict[UOp, bool] = {}
  for u in reversed(topo):
    e = False
    for c in users.get(u, []):
      if c in points: e |= c.op is Ops.EXPAND
      else: e |= expanded.get(c, False) or c.op is Ops.EXPAND
    if u.op is Ops.REDUCE_AXIS and (e or len(users.get(u, [])) > 1):
      points.add(u)
      e = False
    expanded[u] = e
  return [u for u in topo if u in points]

def _kernel_value(x: UOp) -> UOp:
  """What the kernel for realize point x computes."""
  if x.op is Ops.ASSIGN: return x.src[1]
  if x.op is Ops.CONTIGUOUS: return x.src[0]
  return x

def _target_buffer(x: UOp) -> UOp:
  if x.op is Ops.ASSIGN:
    t = x.src[0]
    base = t.src[0] if t.op is Ops.RESHAPE else t
    if base.op is not Ops.BUFFER:
      raise NotImplementedError("assign into a tensor that is not a whole realized buffer: realize it first, or assign to the whole tensor")
    return base
  b = uop(Ops.BUFFER, x.dtype, (_new_unique(), _device(x.device)), x.size)  # type: ignore[arg-type]
  buffers[b] = Buffer(x.device, x.size, x.dtype)  # type: ignore[arg-type]
  return b

def build_kernels(sink: UOp) -> dict[UOp, UOp]:
  """Kernels for every realize point under sink: a map from each realize point to ASSIGN(BUFFER, KERNEL) (reshaped back)."""
  points = realize_points(sink)
  pset = set(points)
  becomes: dict[UOp, UOp] = {}
  for x in points:
    value = _kernel_value(x)
    out = _target_buffer(x)
    if x.op is Ops.COPY:
      src = value.src[0]
      ctx = KernelContext({src})
      ast = uop(Ops.COPY, x.dtype, (ctx.param(src), value.src[1]))
    else:
      # the kernel's part of the graph stops at buffers and at other kernels' outputs
      inputs = {u for u in value.toposort(gate=lambda u: u is value or (u not in pset and u.op is not Ops.BUFFER))
                if u is not value and (u in pset or u.op is Ops.BUFFER)}
      ctx = KernelContext(inputs)
      body = graph_rewrite(value, to_kernel_ast, ctx, bottom_up=True, name="to_kernel_ast")
      g0 = uop(Ops.DEFINE_GLOBAL, x.dtype.ptr(x.size), (), 0)
      ast = uop(Ops.SINK, dtypes.void, (uop(Ops.STORE, dtypes.void, (g0, body)),))
    srcs = [out] + [becomes.get(p, p) if p.op is not Ops.BUFFER else p for p in ctx.params]
    # inputs that are realize points appear as their ASSIGN (dependencies stay explicit), reshaped views unwrapped
    srcs = [s.src[0] if s.op is Ops.RESHAPE and s.src[0].op is Ops.ASSIGN else s for s in srcs]
    k = uop(Ops.KERNEL, dtypes.void, tuple(srcs), Kernel(ast))
    done = uop(Ops.ASSIGN, out.dtype, (out, k))
    becomes[x] = done if x.shape == done.shape else uop(Ops.RESHAPE, x.dtype, (done,), x.shape)
  return becomes

def apply_becomes(becomes: dict[UOp, UOp]) -> None:
  """Point every live tensor that uses a replaced node at its replacement."""
  if not becomes: return
  for t in list(Tensor._live):
    u = t.uop
    if u in becomes: t.uop = becomes[u]
    elif not _is_buffer_view(u) and any(x in becomes for x in u.toposort(gate=lambda n: n.op is not Ops.BUFFER)): t.uop = u.substitute(becomes)

def kernelize(tensors: list[Tensor]) -> None:
  """Replace the computations behind `tensors` with KERNEL nodes (nothing runs)."""
  sink = uop(Ops.SINK, dtypes.void, tuple(t.uop for t in tensors))
  clean = graph_rewrite(sink, tensor_cleanup, name="tensor_cleanup")
  becomes = build_kernels(clean)
  # map the original nodes: cleanup may have replaced them
  for orig, new in zip(sink.src, clean.src):
    if orig is not new:
      if new in becomes: becomes[orig] = becomes[new]
      elif _is_buffer_view(new) or new.op is Ops.ASSIGN: becomes[orig] = new
  if DEBUG >= 1: print(f"scheduled {sum(1 for v in becomes.values() if v.op in (Ops.ASSIGN, Ops.RESHAPE))} kernels")
  apply_becomes(becomes)

__all__ = ["kernelize", "Kernel"]
