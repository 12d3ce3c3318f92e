"""Running kernels: realize() schedules tensors into KERNEL nodes (tensor/engine/schedule.py), plans the memory of the
intermediates (tensor/engine/memory.py), then runs each kernel: its AST is lowered, rendered and compiled once (cached by
AST and device). Last stage of the pipeline. A schedule-cache hit whose kernels all come from the cached schedule runs
its prepared launches instead (tensor/engine/prepared.py): no kernel nodes, no runner lookups; a tensor made by an op
chain (schedule_cache.OpChain) runs the ones its chain kept, with no walk of its graph (docs/pipeline.md).

DEBUG=1 prints the schedule and the memory plan; 2 one line per kernel (device, name, global size, time, GFLOPS, GB/s) and
totals at exit; 3 each new kernel's AST and applied opts; 4 its generated code; 5 its lowered UOps.
"""
from __future__ import annotations
import atexit, functools, gc, time
from typing import Callable
from runtime.device import Buffer, copy
from runtime.profile import PROFILE, kernel_run, scope
from runtime.graph import GRAPH
from runtime.trace import COVERAGE_FILE, VIZ, group
from runtime.dtype import dtypes
from runtime.threads import THREADS
from runtime.helpers import BEAM, DEBUG, FLAG_CHANGES, NOOPT, SPEC, GlobalCounters, getenv
from runtime.ops import Ops, cast_value
from runtime.rewrite import graph_rewrite
from runtime.uop import UOp, uop
from rules.kernelize import parametrize
from rules.kernelize_helpers import Params, param_index
from tensor.codegen import Program, kernel_name, program
from tensor.codegen import program_cache
from tensor.codegen.beam import beam_opts
from tensor.engine import schedule as schedule_module  # its SCHEDULE_CACHE, read where set (tests set it)
from tensor.engine import debug
from tensor.engine.compile_queue import QUICK_COMPILE, UPGRADES, CompileQueue, Provisional
from tensor.engine.debug import colored_name, graph_out
from tensor.engine.multi import lower as lower_multi
from tensor.engine.memory import NO_MEMORY_PLANNER, MemoryPlan, apply_plan, plan_memory
from tensor.engine.prepared import Prepared, prepare
from tensor.engine.schedule import is_kernelized, kernelize_map, lookup, new_output_buffer
from tensor.engine.schedule_cache import Launcher, OpChain, kernel_buffers, new_buffers, resolved, walked
from tensor.engine.state import ENGINE, Engine
from tensor.engine.storage import base_buffer, realized_buffer

class Runner:
  """Something that runs on buffers: a compiled kernel, or a copy."""
  name: str = "?"
  def __call__(self, bufs: list[Buffer], var_vals: tuple[int, ...] = ()) -> None: raise NotImplementedError
  def entry(self) -> tuple[Runner, Callable | None, tuple]:
    """(this runner, the device program it calls, the values it calls it with): what a prepared launch calls directly
    (tensor/engine/prepared.py). A copy has no program."""
    return self, None, ()

class Compiling:
  """A device program being compiled on another thread (_parallel_compiles): calling it, or reading its attributes, waits
  for it."""
  __slots__ = ("future",)
  def __init__(self, future): self.future = future
  def __call__(self, *args): return self.future.result()(*args)
  def __getattr__(self, name: str): return getattr(self.future.result(), name)

class CompiledRunner(Runner):
  """A compiled kernel; var_vals are the values of its DEFINE_VARs (program.vars), in order."""
  def __init__(self, program: Program, fn: Callable):
    self.program, self._fn, self.name = program, fn, program.name
  @property
  def fn(self) -> Callable:
    if (fn := self._fn).__class__ is Compiling: fn = self._fn = fn.future.result()  # type: ignore[attr-defined]
    # a quick build whose final build is made: hold the final one (compile_queue.py)
    if fn.__class__ is Provisional and fn.final is not None: self._fn = fn.final  # type: ignore[attr-defined]
    return self._fn
  def __call__(self, bufs: list[Buffer], var_vals: tuple = ()) -> float | None: return self.fn(bufs, var_vals)
  def entry(self) -> tuple[Runner, Callable | None, tuple]: return self, self.fn, ()

class BoundRunner(Runner):
  """A kernel compiled with its constants as parameters (rules/kernelize.rules `parametrize`), bound to one AST's values;
  var_vals give the other variables (bound Variables), in order, by default the values the AST bound them to."""
  def __init__(self, base: CompiledRunner, values: list, bound: dict[str, int] | None = None):
    self.base, self.program, self.name = base, base.program, base.name
    self.slots = [None if (i := param_index(v)) is None else cast_value(values[i], v.dtype) for v in base.program.vars]
    self.var_vals = tuple((bound or {})[v.arg[0]] for v, s in zip(base.program.vars, self.slots) if s is None) if bound else ()
  def __call__(self, bufs: list[Buffer], var_vals: tuple = ()) -> float | None: return self.base.fn(bufs, self.values(var_vals))
  def values(self, var_vals: tuple = ()) -> tuple:
    rest = iter(var_vals or self.var_vals)
    return tuple(next(rest) if v is None else v for v in self.slots)
  def entry(self) -> tuple[Runner, Callable | None, tuple]: return self, self.base.fn, self.values()

class CopyRunner(Runner):
  name = "copy"
  def __call__(self, bufs: list[Buffer], var_vals: tuple[int, ...] = ()) -> None:
    copy(*bufs)  # dst, src: through the host unless both are on one device

def get_program(ast: UOp, device: str, name: str | None = None, engine: Engine = ENGINE) -> Program:
  """A kernel AST lowered, linearized and rendered for a device, by codegen for the engine's target of that device (named
  `name`, by default its kernel_name). The Opt list is BEAM's search (BEAM=n, not NOOPT) or codegen's heuristic."""
  target = engine.target(device)
  name = name or kernel_name(ast)
  graph_out(ast, f"kernel_{name}")
  # PROFILE: a span per stage (each graph_rewrite is one too); VIZ: the rewrites inside belong to this kernel
  with scope(f"codegen {name}", "codegen"), group(name):
    # search calls codegen: it lowers its candidates with their Opt lists given, and its choice is lowered the same way
    opts = beam_opts(ast, target, int(BEAM)) if BEAM >= 1 and not NOOPT and target.searchable else None
    return program(ast, target, name, opts)

def program_variant() -> tuple[bool, int, int, bool]:
  """What besides the AST changes a program: Context(NOOPT=1) must not reuse an optimized one, THREADS=1 a threaded one,
  BEAM=n a heuristic one (tensor/codegen/beam.py); SPEC=1 one lowered unchecked (its lowering checks the IR's spec)."""
  return bool(NOOPT.value), int(THREADS.value), int(BEAM.value), bool(SPEC.value)

def get_runner(ast: UOp, device: str, engine: Engine = ENGINE) -> Runner:
  """The runner of a kernel AST. The first AST of a kind is compiled with its constants in the code (the seeds' `(val0+7)`);
  when another AST differing only in its constants comes (`t * float(i) + 1` in a loop), the kind is compiled once more
  with its constants as parameters, and that program serves every later value."""
  noopt = program_variant()
  programs, templates = engine.programs, engine.templates  # compiled runners by (device, AST, NOOPT/THREADS); first AST per template
  key = (device, ast, noopt)
  if (r := dict.get(programs, key)) is not None:  # LRU.get's work with one lookup: this runs for every kernel launched
    programs.move_to_end(key)
    return r
  if ast.op is Ops.COPY: r = CopyRunner()
  else:
    params = Params()
    template = graph_rewrite(ast, parametrize, params, name="parametrize")
    tkey = (device, template, noopt)
    first = templates.get(tkey) if params.values else None
    if not params.bound and (first is None or first is ast):  # a kernel reading bound Variables is always a template
      if params.values: templates[tkey] = ast
      r = compile_ast(ast, device, engine)
    else: r = BoundRunner(template_program(template, device, engine), params.values, params.bound)  # type: ignore[arg-type]
  programs[key] = r
  return r

def template_program(template: UOp, device: str, engine: Engine = ENGINE) -> CompiledRunner:
  """The program of a kernel compiled with its constants as parameters, compiled once per (device, template, variant): every
  BoundRunner of it, from get_runner or from a schedule-cache launcher, shares it."""
  key = (device, template, program_variant())
  if (base := engine.programs.get(key)) is None: base = engine.programs[key] = compile_ast(template, device, engine)
  return base

# PROGRAM_DISK_CACHE=0: lower and render every kernel in each process (the compiled object still comes from the kernel cache)
PROGRAM_DISK_CACHE = getenv("PROGRAM_DISK_CACHE", 1)

def compile_ast(ast: UOp, device: str, engine: Engine = ENGINE) -> CompiledRunner:
  """Compile an AST, taking its lowered program from codegen's disk cache when an earlier process left it there (not when
  the lowering is watched: DEBUG>=3 prints its stages, GRAPH=1 draws each kernel, VIZ and RULECOVERAGE record its rewrites)."""
  watched = DEBUG >= 3 or GRAPH or VIZ or COVERAGE_FILE
  target = engine.target(device)
  use_disk = PROGRAM_DISK_CACHE and device != "PYTHON" and not watched
  key = program_cache.program_key(ast, target, program_variant()) if use_disk else None
  p = program_cache.load(key) if key is not None else None
  pool = _compile_pool if device != "PYTHON" else None
  store = None
  if p is None:
    p = get_program(ast, device, engine=engine)
    # written by the compile thread when there is one: the write waits on the disk (0.5 s of a cold CNN step's main thread)
    if key is not None: store = functools.partial(program_cache.store, key, p)
  if pool is not None: return CompiledRunner(p, Compiling(pool.submit(target.device, p.src, p.name, after=store)))
  if store is not None: store()
  return CompiledRunner(p, target.compile(p.src, p.name))

# while a schedule's new kernels are prepared (_parallel_compiles): the compiler runs on these threads, one per core, while
# the next kernels lower, each run building every kernel waiting (the C compiler, 40-70 ms a kernel of which about 40 is its
# start, was most of a cold first step: one kernel at a time)
_compile_pool: CompileQueue | None = None

def _parallel_compiles(schedule: list[UOp], engine: Engine) -> None:
  """Make the runners of a schedule's kernels, the C compiler running on a thread per core (tensor/engine/compile_queue.py;
  each runner waits for its object when first called: the schedule's first kernels run while its last ones compile).
  Kernels compiled before are found as they are: only a schedule with two new ones uses it."""
  global _compile_pool
  variant, table = program_variant(), engine.storage.buffers
  new = [k for k in schedule if k.arg.ast.op is not Ops.COPY and (table[kernel_buffers(k)[0]].device, k.arg.ast, variant) not in engine.programs]
  if len(new) < 2 or _compile_pool is not None: return
  _compile_pool = pool = CompileQueue(quick=bool(QUICK_COMPILE.value))  # quick builds: the final ones come when a kernel runs again
  # lowering makes many objects that live a while and few cycles: the cyclic collector's passes over them took a third of
  # a cold CNN step's codegen (1.1 -> 0.7 s CPU); the cycles it leaves are collected after
  collecting = gc.isenabled()
  gc.disable()
  try:
    for k in new: get_runner(k.arg.ast, table[kernel_buffers(k)[0]].device, engine)
  finally:
    if collecting: gc.enable()
    _compile_pool = None
    pool.close(wait=False)  # the first kernels run (each runner waits for its own object) while the last ones compile

def run_kernel(k: UOp, engine: Engine = ENGINE) -> None:
  table = engine.storage.buffers
  bufs = [table[b] for b in kernel_buffers(k)]
  launch(get_runner(k.arg.ast, bufs[0].device, engine), bufs, engine)

def launch(runner: Runner, bufs: list[Buffer], engine: Engine = ENGINE) -> None:
  """Run a kernel's runner on its buffers (output first), counting and reporting it. TinyJit's capture hook (tensor/jit.py):
  while a call is captured, its recorder is in engine.capturing and sees every kernel and copy run, before the buffers are
  allocated (an output not yet allocated is one the captured call made)."""
  if engine.capturing: engine.capturing[0].add(runner, bufs)
  for b in bufs:
    if b._array is None: b.ensure_allocated()
  c0 = time.thread_time() if DEBUG >= 2 else 0.0
  t0 = time.perf_counter()
  device_time = runner(bufs)
  # a GPU-style device's program returns the kernel's time from the device's events (CL); the others are timed here
  dt = device_time if device_time.__class__ is float else time.perf_counter() - t0
  GlobalCounters.kernel_count += 1
  GlobalCounters.time_sum_s += dt
  program: Program | None = getattr(runner, "program", None)  # compiled kernels (bound to their constants or not); copies have none
  if program is not None:
    ops, mem, gsz = program.ops, program.mem, program.global_size
    GlobalCounters.global_ops += ops
    GlobalCounters.global_mem += mem
  else: ops, mem, gsz = 0, bufs[0].nbytes * 2, (bufs[0].size,)
  device = bufs[0].device
  kernel_run(runner.name, device, t0, dt, ops, mem, gsz, copy=program is None)
  if DEBUG >= 2:
    debug.kernel_times.append((runner.name, dt, dt if device_time.__class__ is float else time.thread_time() - c0, ops, mem))
    name = colored_name(runner.name, len(gsz), program.opts, 18) if program is not None else f"{runner.name:18s}"
    print(f"*** {device:6s} {GlobalCounters.kernel_count:4d} {name} arg {len(bufs):2d} mem {GlobalCounters.mem_used / 1e9:.2f} GB "
          f"gsz {str(list(gsz)):14s} tm {dt * 1e6:9.2f}us ({ops / max(dt, 1e-9) / 1e9:8.2f} GFLOPS {mem / max(dt, 1e-9) / 1e9:7.2f} GB/s)")

def schedule_of(uops: list[UOp]) -> list[UOp]:
  """The KERNEL nodes under these graphs, in an order they can run in (every kernel after the kernels it depends on)."""
  sink = uop(Ops.SINK, dtypes.void, tuple(uops))
  return [u for u in sink.toposort(gate=lambda n: n.op is not Ops.BUFFER) if u.op is Ops.KERNEL]

def _held_buffers(among: set[UOp], becomes: dict[UOp, UOp], engine: Engine) -> set[UOp]:
  """Which of these BUFFERs live tensors hold, or will hold once the kernels scheduled for them have run (a node of their
  graph that `becomes` a kernel's output holds that output's buffer)."""
  held: set[UOp] = set()
  for u in engine.storage.live_roots():
    if (b := realized_buffer(u)) is not None:  # realized already: no walk
      if b in among: held.add(b)
      continue
    for n in u.toposort(gate=lambda x: x not in becomes and x.op is not Ops.BUFFER and not is_kernelized(x)):
      if n in becomes: held.add(base_buffer(becomes[n]))  # type: ignore[arg-type]
      elif n.op is Ops.BUFFER: held.add(n)
      elif is_kernelized(n): held.add(n.src[0])
  return held & among

def plan(schedule: list[UOp], outputs: set[UOp], becomes: dict[UOp, UOp] | None = None, engine: Engine = ENGINE) -> MemoryPlan:
  """Place the intermediate outputs of a schedule (fresh, unallocated, kept by no live tensor) in shared blocks. `outputs`
  are buffers the tensors being realized hold: when no other buffer is a candidate, live tensors need not be looked at."""
  if NO_MEMORY_PLANNER: return MemoryPlan()
  buffers = engine.storage.buffers
  steps = [kernel_buffers(k) for k in schedule]
  candidates = {s[0] for s in steps if s[0] in engine.fresh_buffers and not buffers[s[0]].is_allocated()} - outputs
  plannable = candidates - _held_buffers(candidates, becomes or {}, engine) if candidates else set()
  if not plannable: return MemoryPlan()
  p = plan_memory(steps, plannable, lambda b: buffers[b].device, lambda b: buffers[b].nbytes)
  apply_plan(p, buffers, lambda b: buffers[b].device)
  return p

def realize(roots: list[UOp], engine: Engine = ENGINE, chain: tuple[OpChain, UOp] | None = None) -> dict[UOp, UOp]:
  """Schedule, compile and run what these graph roots need. Returns what each node became (a kernel's output: its buffer),
  for the caller to point its live tensors at. One thread at a time: it holds engine.lock (realize_held, for a caller that
  holds it already: the frontend holds it until its tensors point at the results)."""
  with engine.lock: return realize_held(roots, engine, chain)

_BUFFER, _RESHAPE = Ops.BUFFER, Ops.RESHAPE  # module names: `Ops.X` costs about 0.3 us in Python 3.11

def realize_held(roots: list[UOp], engine: Engine, chain: tuple[OpChain, UOp] | None = None) -> dict[UOp, UOp]:
  """realize, for a caller holding engine.lock. `chain`: (OpChain, its leaf BUFFER) when the one root was made by a chain of
  ops on one realized buffer (schedule_cache.OpChain): its schedule is found without a walk."""
  # a root made by an op chain whose last realize ran prepared launches, the schedule cache unchanged since: run them again,
  # straight from the chain (no walk, no key, no lookup)
  if chain is not None and (ready := _chain_ready(chain[0], engine)):
    if (done := ready.run([chain[1]], chain[0].consts, (roots[0],), engine.storage)) is not None:
      engine.schedules.hits += 1
      engine.last_plan = ready.plan
      return done
  BUFFER, RESHAPE = _BUFFER, _RESHAPE
  pending = [u for u in roots if u.op is not BUFFER and not (u.op is RESHAPE and u.src[0].op is BUFFER)]  # not realized yet
  if not pending: return {}
  if (low := lower_multi(pending, engine)) is not None: return low[1](realize_held(low[0], engine))  # tensors over several devices
  if GRAPH.value: graph_out(uop(Ops.SINK, dtypes.void, tuple(pending)), "tensor_graph")
  # PROFILE: the Python since the last realize built the tensor graph; VIZ: kernelize's rewrites are the schedule's (off, as
  # when eager: no scope objects)
  if PROFILE.value or VIZ.value:
    with scope("schedule", "schedule", gap="tensor graph"), group("schedule"): found, values, pending, becomes = _schedule(pending, engine)
  else:
    found = lookup(pending, engine, chain if len(pending) == 1 else None)
    # a hit whose kernels all write new buffers (or intermediates no live tensor holds): run them, nothing else
    if (ready := _prepared(found, engine)) is not None and \
        (done := ready.run((s := found.shape).slots, s.consts, s.roots, engine.storage, s.topo)) is not None:
      engine.last_plan = ready.plan
      # found by an op chain (its only slot is its buffer): the next runs at once, while the flags (DEBUG, PROFILE, VIZ and
      # GRAPH off here but for GRAPH; the program variant) are as now
      if s.topo is None and not found.recipe.planned and not GRAPH.value:
        chain[0].ready = (engine.schedules, engine.schedules.version, FLAG_CHANGES[0], schedule_module.MAX_KERNEL_DEPTH, ready)  # type: ignore[index]
      return done
    found, values, pending, becomes = _schedule(pending, engine, found)
  recipe = found.recipe
  if values is not None:
    if recipe.__class__ is Launcher: _launch_form(recipe, values, found.shape.consts, engine)  # type: ignore[union-attr]
    else:
      buffers = engine.storage.buffers
      for ast, at in recipe.launches:  # type: ignore[union-attr]
        kbufs = [buffers[values[i]] for i in at]
        launch(get_runner(ast, kbufs[0].device, engine), kbufs, engine)
    return recipe.after.run(values, found.shape.topo)  # type: ignore[union-attr]
  outs = [becomes.get(u, u) for u in pending]
  schedule = schedule_of(outs)
  p = plan(schedule, {base_buffer(r) for r in outs} - {None}, becomes, engine)  # type: ignore[arg-type]
  engine.last_plan = p.summary()
  if DEBUG >= 1 and p.placement:
    print(f"memory: {len(p.placement)} intermediate buffers in {len(p.blocks)} blocks, {p.planned_bytes / 1e6:.2f} MB "
          f"instead of {p.unplanned_bytes / 1e6:.2f} MB")
  del p
  _parallel_compiles(schedule, engine)
  for k in schedule: run_kernel(k, engine)
  if DEBUG >= 2: debug.end_of_step()
  # every kernel output is its buffer now: the live tensors' graphs point straight at the buffers
  done: dict[UOp, UOp] = {}
  for u in uop(Ops.SINK, dtypes.void, tuple(outs)).toposort(gate=lambda n: n.op is not Ops.BUFFER):
    if is_kernelized(u): done[u] = u.src[0]
  return {**resolved(becomes, done), **done}

_NO_PLAN = MemoryPlan().summary()

def run_chain(chain: OpChain, leaf: UOp, engine: Engine) -> UOp | None:
  """The eager path, for a caller holding engine.lock: the BUFFER node a root made by an op chain on `leaf` becomes, when
  the chain's last realize left prepared launches that still apply and make one new buffer for it (Prepared.single): they
  run, nothing is walked, no dict is made. None when they don't (nothing ran): the caller takes realize_held."""
  if (p := _chain_ready(chain, engine)) is None or p.single is None: return None
  out = p.run_single(leaf, chain.consts, engine.storage)
  engine.schedules.hits += 1
  engine.last_plan = p.plan
  return out

def _chain_ready(chain, engine: Engine) -> Prepared | None:
  """The prepared launches an op chain's last realize ran, while they still apply: the same schedule cache, unchanged
  since, no flag set since (DEBUG, PROFILE, VIZ, GRAPH and the program variant: what was checked when they were kept holds),
  no capture (it must see each kernel), the same scheduler settings, and no final build made for a quick one since."""
  if (ready := chain.ready) is None or ready[0] is not (schedules := engine.schedules) or ready[1] != schedules.version \
      or ready[2] != FLAG_CHANGES[0] or engine.capturing or ready[3] != schedule_module.MAX_KERNEL_DEPTH or not schedule_module.SCHEDULE_CACHE:
    return None
  if (p := ready[4]).upgrades is not None and p.upgrades != UPGRADES.version: return None  # final builds made since: prepare again
  return p

def _prepared(found, engine: Engine) -> Prepared | None:
  """The prepared launches of a schedule-cache hit whose kernels all write new buffers (made on its first such hit), or
  None: a miss, kernels to plan or pending, or a realize that reports its kernels (DEBUG, a TinyJit capture)."""
  recipe = found.recipe
  if recipe is None or recipe.launches is None or recipe.after is None or DEBUG.value or engine.capturing: return None
  if recipe.planned and NO_MEMORY_PLANNER.value: return None  # each intermediate its own buffer: the full path
  variant = program_variant()
  # prepared again when final builds were made since (its quick builds' entry points are taken once: compile_queue.py)
  if (ready := recipe.prepared.get(variant)) is None or (ready.upgrades is not None and ready.upgrades != UPGRADES.version):
    def entry_of(ast: UOp, device: str, template: bool) -> tuple:
      return (template_program(ast, device, engine) if template else get_runner(ast, device, engine)).entry()
    seen = UPGRADES.version  # before: a final build made while this prepares makes it prepare again
    ready = recipe.prepared[variant] = prepare(recipe, walked(found.shape), variant, entry_of, engine.storage)
    if any(c.fn.__class__ is Provisional for c in ready.calls): ready.upgrades = seen
  return ready

def _schedule(pending: list[UOp], engine: Engine, found=None) -> tuple:
  """(lookup, values, tensors, becomes): a schedule-cache hit with nothing to plan gives the replay's values (its kernels are
  launched on new output buffers, no kernel nodes built), anything else the kernelize result."""
  if found is None: found = lookup(pending, engine)
  if found.shape is not None and found.shape.topo is None: found = found._replace(shape=walked(found.shape))  # the launches read the walk
  if (recipe := found.recipe) is not None and recipe.launches is not None and recipe.after is not None and not recipe.planned and DEBUG.value < 1:
    engine.last_plan = _NO_PLAN
    # its kernels run at once: no plan to offer the new buffers to
    return found, new_buffers(recipe, found.shape, lambda dtype, size, device: new_output_buffer(engine, dtype, size, device, False)), pending, None
  return found, None, *kernelize_map(pending, engine, found)

def _launch_form(launcher: Launcher, values: list, consts: tuple[UOp, ...], engine: Engine) -> None:
  """Run a launcher's kernels, each compiled once with its constants as parameters, with this graph's constant values."""
  buffers = engine.storage.buffers
  for ast, at, sources, bound in launcher.launches:
    bufs = [buffers[values[i]] for i in at]
    device = bufs[0].device
    if sources is None: runner = get_runner(ast, device, engine)
    else: runner = BoundRunner(template_program(ast, device, engine), [consts[s].arg if s.__class__ is int else s[0] for s in sources], bound)
    launch(runner, bufs, engine)


def _print_totals() -> None:
  if DEBUG >= 2 and GlobalCounters.kernel_count:
    t = max(GlobalCounters.time_sum_s, 1e-9)
    print(f"avg: {GlobalCounters.global_ops / t / 1e9:8.2f} GFLOPS {GlobalCounters.global_mem / t / 1e9:8.2f} GB/s "
          f"total: {GlobalCounters.kernel_count:5d} kernels {GlobalCounters.global_ops / 1e9:8.2f} GOPS {GlobalCounters.global_mem / 1e9:8.2f} GB "
          f"{GlobalCounters.time_sum_s * 1e3:8.2f} ms")
atexit.register(_print_totals)
