"""Running kernels: each KERNEL node's AST is lowered, rendered and compiled once (cached by AST), then run on its
buffers. Last stage of the pipeline; DEBUG=2 prints one line per kernel and totals at exit.
"""
from __future__ import annotations
import atexit, time
from typing import Callable
from runtime.device import Buffer, Device
from runtime.helpers import DEBUG, GlobalCounters
from runtime.ops import Ops
from runtime.uop import UOp, uop
from runtime.dtype import dtypes
from tensor.codegen import Program, estimate, full_rewrite_to_sink, kernel_name
from tensor.codegen.linearize import linearize
from tensor.tensor import Tensor, buffers

class Runner:
  """Something that runs on buffers: a compiled kernel, or a copy."""
  name: str = "?"
  def __call__(self, bufs: list[Buffer], var_vals: tuple[int, ...] = ()) -> None: raise NotImplementedError

class CompiledRunner(Runner):
  def __init__(self, program: Program, fn: Callable):
    self.program, self.fn, self.name = program, fn, program.name
  def __call__(self, bufs: list[Buffer], var_vals: tuple[int, ...] = ()) -> None: self.fn(bufs, var_vals)

class CopyRunner(Runner):
  name = "copy"
  def __call__(self, bufs: list[Buffer], var_vals: tuple[int, ...] = ()) -> None:
    dst, src = bufs
    dst.as_array()[:] = src.as_array()

def render(device: str, name: str, uops: list[UOp]):
  if device == "PYTHON": return uops
  from tensor.renderer.cstyle import render_c
  return render_c(name, uops)

_programs: dict[tuple[str, UOp], Runner] = {}

def get_program(ast: UOp, device: str) -> Program:
  """Lower, linearize and render a kernel AST for a device."""
  name = kernel_name(ast)
  if DEBUG >= 3: print(f"--- {name} AST ---\n{ast}")
  sink = full_rewrite_to_sink(ast)
  uops = linearize(sink)
  if DEBUG >= 5:
    for i, u in enumerate(uops): print(f"{i:4d} {u.op!s:20s} {u.dtype!r:28s} {[uops.index(s) if s in uops else '-' for s in u.src]} {u.arg!r}")
  src = render(device, name, uops)
  if DEBUG >= 4: print(src if isinstance(src, str) else f"(PYTHON program: {len(uops)} uops)")
  ops, mem = estimate(uops)
  n_params = sum(1 for u in uops if u.op is Ops.DEFINE_GLOBAL)
  gsize = tuple(u.src[0].arg for u in uops if u.op is Ops.RANGE and u.src[0].op is Ops.CONST)[:3]
  return Program(name, uops, src, device, n_params, gsize, ops, mem)

def get_runner(ast: UOp, device: str) -> Runner:
  key = (device, ast)
  if key not in _programs:
    if ast.op is Ops.COPY: _programs[key] = CopyRunner()
    else:
      p = get_program(ast, device)
      _programs[key] = CompiledRunner(p, Device[device].program(p.src, p.name))
  return _programs[key]

def _buffer_of(u: UOp) -> Buffer:
  while u.op is not Ops.BUFFER: u = u.src[0]
  return buffers[u]

def run_kernel(k: UOp) -> None:
  bufs = [_buffer_of(s) for s in k.src]
  device = bufs[0].device
  runner = get_runner(k.arg.ast, device)
  for b in bufs: b.ensure_allocated()
  t0 = time.perf_counter()
  runner(bufs)
  dt = time.perf_counter() - t0
  GlobalCounters.kernel_count += 1
  GlobalCounters.time_sum_s += dt
  if isinstance(runner, CompiledRunner):
    GlobalCounters.global_ops += runner.program.ops
    GlobalCounters.global_mem += runner.program.mem
  if DEBUG >= 2:
    ops, mem = (runner.program.ops, runner.program.mem) if isinstance(runner, CompiledRunner) else (0, bufs[0].nbytes * 2)
    print(f"*** {device:6s} {GlobalCounters.kernel_count:4d} {runner.name:18s} arg {len(bufs):2d} mem {GlobalCounters.mem_used / 1e9:.2f} GB "
          f"tm {dt * 1e6:9.2f}us ({ops / max(dt, 1e-9) / 1e9:8.2f} GFLOPS {mem / max(dt, 1e-9) / 1e9:7.2f} GB/s)")

def realize(tensors: list[Tensor]) -> None:
  from tensor.engine.schedule import apply_becomes, kernelize
  pending = [t for t in tensors if not _is_done(t.uop)]
  if not pending: return
  kernelize(pending)
  sink = uop(Ops.SINK, dtypes.void, tuple(t.uop for t in pending))
  done: dict[UOp, UOp] = {}
  for u in sink.toposort(gate=lambda n: n.op is not Ops.BUFFER):
    if u.op is Ops.KERNEL: run_kernel(u)
    elif u.op is Ops.ASSIGN and u.src[1].op is Ops.KERNEL: done[u] = u.src[0]
  apply_becomes(done)

def _is_done(u: UOp) -> bool:
  return u.op is Ops.BUFFER or (u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER)

def _print_totals() -> None:
  if DEBUG >= 2 and GlobalCounters.kernel_count:
    t = max(GlobalCounters.time_sum_s, 1e-9)
    print(f"avg: {GlobalCounters.global_ops / t / 1e9:8.2f} GFLOPS {GlobalCounters.global_mem / t / 1e9:8.2f} GB/s "
          f"total: {GlobalCounters.kernel_count:5d} kernels {GlobalCounters.global_ops / 1e9:8.2f} GOPS {GlobalCounters.global_mem / 1e9:8.2f} GB "
          f"{GlobalCounters.time_sum_s * 1e3:8.2f} ms")
atexit.register(_print_totals)
