"""TinyJit: capture the kernels one call of a function runs, then replay them on new inputs without running its Python.
A frontend layer beside Tensor: it runs the function on Tensors, and the engine (tensor/engine/realize.launch) hands each
kernel it runs to the capture; on the CPU device a replay is one native call (runtime/replay.py). docs/jit.md is the
user's guide.

Call 1 runs the function; call 2 runs it again while capturing every kernel and copy, plans the memory of the captured
intermediates and keeps the returned value; call 3 on checks the inputs against the capture and replays.
"""
from __future__ import annotations
import functools, io, pickle, time, weakref
from typing import Any, Callable, Generic, TypeVar
from runtime import replay as native
from runtime.device import Buffer, Device, copy
from runtime.dtype import dtypes
from runtime.helpers import DEBUG, JIT, GlobalCounters
from runtime.ops import Ops
from runtime.uop import UOp, dim_value, dim_vars, rebind_dim, shape_str, unbind_shape
from tensor.engine import debug
from tensor.engine.compile_queue import UPGRADES, Provisional
from tensor.engine.jit import JitError
from tensor.errors import ShapeError
from tensor.engine.memory import NO_MEMORY_PLANNER, plan_memory
from tensor.engine.realize import BoundRunner, CopyRunner
from tensor.engine.state import ENGINE, Engine
from tensor.engine.storage import realized_buffer
from tensor.parameters import get_parameters
from tensor.tensor import Tensor, buffer_uop, live_tensors

__all__ = ["TinyJit", "CapturedJit", "JitError"]

ReturnType = TypeVar("ReturnType")

# ---- one captured kernel or copy ----

class JitStep:
  """A kernel (or a copy when fn is None) and the buffers it runs on. `args` holds one entry per scalar parameter of the
  program: a constant, or the name (str) of a Variable whose value each replay gives."""
  __slots__ = ("device", "name", "src", "fn", "bufs", "args", "floats", "vals", "ops", "mem")
  def __init__(self, device: str, name: str, src: Any, fn: Callable | None, bufs: list, args: list, floats: list[bool], ops: int, mem: int):
    self.device, self.name, self.src, self.fn, self.bufs, self.args, self.floats = device, name, src, fn, bufs, args, floats
    self.ops, self.mem = ops, mem
    self.vals = tuple(args) if not any(isinstance(a, str) for a in args) else None  # fixed arguments: built once

  @staticmethod
  def of(runner: Any, bufs: list[Buffer], replayed_vars: set[str]) -> JitStep:
    """The step of a runner; its bound Variables named in `replayed_vars` (the call's arguments) take each replay's value,
    the others (bound inside the function) keep the value they had at capture, as every other Python value does."""
    if isinstance(runner, CopyRunner): return JitStep(bufs[0].device, "copy", None, None, bufs, [], [], 0, bufs[0].nbytes * 2)
    program = runner.program
    bound = isinstance(runner, BoundRunner)
    fn = runner.base.fn if bound else runner.fn
    slots = runner.slots if bound else [None] * len(program.vars)
    captured = iter(runner.var_vals if bound else ())
    args = []
    for v, s in zip(program.vars, slots):
      if s is not None: args.append(s)
      elif (value := next(captured, None)) is not None and v.arg[0] not in replayed_vars: args.append(value)
      elif v.arg[0] in replayed_vars: args.append(v.arg[0])
      else: raise JitError(f"kernel {program.name} reads the Variable {v.arg[0]!r}, which no argument of the call binds")
    return JitStep(program.device, program.name, program.src, fn, bufs, args, [dtypes.is_float(v.dtype) for v in program.vars],
                   program.ops, program.mem)

  def run(self, var_vals: dict[str, int]) -> None:
    if self.fn is None:
      copy(self.bufs[0], self.bufs[1])
      return
    vals = self.vals if self.vals is not None else tuple(var_vals[a] if isinstance(a, str) else a for a in self.args)
    self.fn(self.bufs, vals)

# ---- the captured call ----

class CapturedJit(Generic[ReturnType]):
  """A captured call: the steps, which step buffers the inputs replace, what the inputs must look like, and the returned
  value (its tensors hold the output buffers, which every replay writes again). A replay holds its engine's lock."""
  def __init__(self, ret: Any, steps: list[JitStep], input_replace: list[tuple[int, int, int]], expected_names: list[int | str],
               expected_info: list[tuple], var_names: list[str], ret_inputs: list[tuple[int, int]] | None = None, engine: Engine = ENGINE):
    self.ret, self.steps, self.input_replace, self.engine = ret, steps, input_replace, engine
    # returned tensors that are inputs (by their index in get_parameters(ret), and the input's): each replay points them at
    # that call's input
    self.ret_inputs = ret_inputs or []
    self._ret_tensors = _returned_tensors(ret) if self.ret_inputs else []
    self.expected_names, self.expected_info, self.var_names = expected_names, expected_info, var_names
    # returned tensors with a symbolic shape: each replay binds their Variables to the call's values
    self._symbolic_ret = [t for t in _returned_tensors(ret) if any(d.__class__ is UOp for d in t.shape)] if var_names else []
    self._native: native.NativeReplay | None | bool = None  # built on the first replay; False: not possible here
    self.guards: list[tuple[UOp, str]] = []  # conditions on the Variables' values the kernels need (a shrink by a Variable)
    self._ops, self._mem = sum(s.ops for s in steps), sum(s.mem for s in steps)
    self._clear_inputs()
    # the buffers the steps own (outputs, intermediates): an input that is one of them (last call's output fed back) is
    # read and written by one replay, so it is copied first
    self._owned = {id(b.base if b.base is not None else b) for s in steps for b in s.bufs if b is not None}
    # steps running a kernel's quick build (tensor/engine/compile_queue.py): its final build is asked for now (each replay
    # runs it), and the steps take it at the first replay after UPGRADES.version changes
    self._upgrades = UPGRADES.version if any(s.fn.__class__ is Provisional for s in steps) else None
    for s in steps:
      if s.fn.__class__ is Provisional: s.fn.want()  # type: ignore[union-attr]

  def _unalias(self, input_buffers: list[Buffer]) -> list[Buffer]:
    out = list(input_buffers)
    for k, b in enumerate(out):
      if id(b.base if b.base is not None else b) in self._owned:
        out[k] = Buffer(b.device, b.size, b.dtype)
        copy(out[k], b)
    return out

  def _clear_inputs(self) -> None:
    for j, i, _ in self.input_replace: self.steps[j].bufs[i] = None  # a replay must not keep the caller's buffers alive

  def _check_guards(self, var_vals: dict[str, int]) -> None:
    for expr, message in self.guards:
      if (v := dim_value(rebind_dim(expr, var_vals))) < 0:
        values = ", ".join(f"{k}={var_vals[k]}" for k in sorted(var_vals))
        raise ShapeError(f"{message} at {values} ({expr.render()} = {v}): this TinyJit capture can't replay at these values")

  def __call__(self, input_buffers: list[Buffer], var_vals: dict[str, int], input_uops: list[UOp] | None = None) -> ReturnType:
    if self.guards: self._check_guards(var_vals)
    if any(id(b.base if b.base is not None else b) in self._owned for b in input_buffers): input_buffers = self._unalias(input_buffers)
    with self.engine.lock:
      for r, k in self.ret_inputs:
        if input_uops is None: raise JitError("this capture returns one of its inputs: call it through TinyJit")
        t = self._ret_tensors[r]
        t.uop = input_uops[k] if t.shape == input_uops[k].shape else UOp(Ops.RESHAPE, t.dtype, (input_uops[k],), t.shape)
      if self._symbolic_ret: _rebind(self._symbolic_ret, var_vals)
      if self._upgrades is not None and self._upgrades != UPGRADES.version: self._take_final_builds()
      if self._native is None: self._native = self._build_native()
      if self._native is not False and DEBUG.value < 2 and JIT.value < 2:
        nat: native.NativeReplay = self._native  # type: ignore[assignment]
        ptrs = nat.ptrs
        for k, b in enumerate(input_buffers): ptrs[k] = b._ptr or b.ptr
        if self.var_names:
          for k, name in enumerate(self.var_names): nat.vars[k] = var_vals[name]
        nat()
      else: self._run_python(input_buffers, var_vals)
      GlobalCounters.kernel_count += len(self.steps)
      GlobalCounters.global_ops += self._ops
      GlobalCounters.global_mem += self._mem
    return self.ret

  def _take_final_builds(self) -> None:
    """Steps whose kernel's final build is made run it from now on (between two replays: no kernel is running)."""
    seen, provisional = UPGRADES.version, False
    for s in self.steps:
      if s.fn.__class__ is Provisional:
        if s.fn.final is not None:  # type: ignore[union-attr]
          s.fn = s.fn.final  # type: ignore[union-attr]
          self._native = None  # rebuilt with the final entry points (the same replay object: its tables hold the addresses)
        else: provisional = True
    self._upgrades = seen if provisional else None

  def _run_python(self, input_buffers: list[Buffer], var_vals: dict[str, int]) -> None:
    for j, i, k in self.input_replace: self.steps[j].bufs[i] = input_buffers[k]
    try:
      for n, s in enumerate(self.steps):
        c0 = time.thread_time() if DEBUG >= 2 else 0.0
        t0 = time.perf_counter()
        s.run(var_vals)
        if DEBUG >= 2:
          dt = time.perf_counter() - t0
          GlobalCounters.time_sum_s += dt
          debug.kernel_times.append((s.name, dt, time.thread_time() - c0, s.ops, s.mem))
          print(f"*** {s.device:6s} {GlobalCounters.kernel_count + n + 1:4d} {s.name:18s} [JIT replay] arg {len(s.bufs):2d} "
                f"tm {dt * 1e6:9.2f}us")
    finally: self._clear_inputs()
    if DEBUG >= 2: debug.end_of_step()

  def _build_native(self) -> native.NativeReplay | bool:
    """One native function for the whole replay, when every step is a CPU kernel exporting name_call or a copy."""
    slots: dict[int, int] = {}  # id(Buffer) -> pointer-table slot; the inputs first
    fixed: list[tuple[int, Buffer]] = []
    n_in = len(self.expected_names)  # every input has a slot, read by a kernel or not
    inputs = {(j, i): k for j, i, k in self.input_replace}
    def slot(j: int, i: int) -> int:
      if (j, i) in inputs: return inputs[(j, i)]
      b = self.steps[j].bufs[i]
      if id(b) not in slots:
        slots[id(b)] = n_in + len(fixed)
        fixed.append((slots[id(b)], b))
      return slots[id(b)]
    calls: list[native.Step] = []
    for j, s in enumerate(self.steps):
      if s.fn is None:
        calls.append(native.MemCopy(slot(j, 0), slot(j, 1), s.mem // 2))
        continue
      addr = native.kernel_address(s.fn, s.name) if s.device == "CPU" else None
      if addr is None: return False
      ints = tuple(native.VarArg(self.var_names.index(a)) if isinstance(a, str) else a for a, f in zip(s.args, s.floats) if not f)
      floats = tuple(float(a) for a, f in zip(s.args, s.floats) if f)
      calls.append(native.KernelCall(addr, tuple(slot(j, i) for i in range(len(s.bufs))), ints, floats))
    try: nat = native.NativeReplay(calls, n_in + len(fixed), len(self.var_names))
    except Exception as e:  # no compiler here (a pickled capture): replay step by step
      if DEBUG >= 1: print(f"JIT: no batched replay ({e}); replaying kernel by kernel")
      return False
    for k, b in fixed: nat.ptrs[k] = b.ptr
    nat.keep = [b for _, b in fixed]  # type: ignore[attr-defined]  # the pointers stay valid while the replay lives
    return nat

  @property
  def linear(self) -> UOp:
    """The calls a replay makes, in order, as tinygrad's `CapturedJit.linear` shows them (its tests count them): a SINK of
    one KERNEL node per kernel and one COPY node per copy, each over a CUSTOM node naming the program."""
    return UOp(Ops.SINK, dtypes.void, tuple(UOp(Ops.COPY if s.fn is None else Ops.KERNEL, dtypes.void, (UOp(Ops.CUSTOM, dtypes.void, (), s.name),),
                                                s.name) for s in self.steps))

  def __reduce__(self): return _load_captured, (_dump_captured(self),)

def _rebind(tensors: list, var_vals: dict[str, int]) -> None:
  for t in tensors:
    u = t.uop
    shape = tuple(rebind_dim(d, var_vals) if d.__class__ is UOp else d for d in u.shape)
    t.uop = u.replace(arg=shape) if u.op is Ops.RESHAPE else UOp(Ops.RESHAPE, u.dtype, (u,), shape)

# ---- inputs ----

_ref = weakref.ref

def _jit_inputs(args: tuple, kwargs: dict, engine: Engine) -> tuple[list[int | str], list[Buffer], list[UOp], list[tuple], dict[str, int]]:
  """The Tensor arguments (positional by index, keyword by name, sorted), realized: their names, buffers, BUFFER nodes and
  (shape, dtype, device); and the values of the bound Variables among the arguments. One pass: this runs on every replay."""
  names: list[int | str] = []
  tensors: list[Tensor] = []
  var_vals: dict[str, int] = {}
  for n, a in (list(enumerate(args)) + sorted(kwargs.items())) if kwargs else enumerate(args):
    if isinstance(a, Tensor):
      names.append(n)
      tensors.append(a)
    elif isinstance(a, UOp) and a.op is Ops.BIND: var_vals[a.src[0].arg[0]] = a.src[1].arg
    elif isinstance(a, (list, tuple, dict)):  # tensors in a container argument are inputs too (else a replay reads stale ones)
      for k, x in (sorted(a.items(), key=lambda kv: str(kv[0])) if isinstance(a, dict) else enumerate(a)):
        if isinstance(x, Tensor):
          names.append(f"{n}[{k!r}]")
          tensors.append(x)
  bases = [realized_buffer(t.uop) for t in tensors]
  if any(u is None for u in bases):
    pending = [t for t, u in zip(tensors, bases) if u is None]
    pending[0].realize(*pending[1:])
    bases = [realized_buffer(t.uop) for t in tensors]
  uops = [t.uop for t in tensors]
  if any(u is None for u in bases):  # a tensor on several devices (tensor/multi.py): one input per device's shard
    names, uops = [n for n, u in zip(names, uops) for _ in (u.src if u.op is Ops.MULTI else (u,))], \
                  [s for u in uops for s in (u.src if u.op is Ops.MULTI else (u,))]
    bases = [realized_buffer(u) for u in uops]
    if any(u is None for u in bases):
      raise JitError(f"a JIT input is not in memory after its realize: {[u.op for u in uops if realized_buffer(u) is None]}")
  table = engine.storage.buffers.data
  bufs = [table[_ref(u)] for u in bases]  # buffers[u] without the method call: a third of this function's time
  info = [(u.shape, u.dtype, u.device) for u in uops]
  for k, (shape, dt, dev) in enumerate(info):
    if any(d.__class__ is UOp for d in shape):  # a symbolic shape: its Variables are bound by this call, compared unbound
      for d in shape:
        for v in dim_vars(d): var_vals[v.unbind_name()] = v.src[1].arg  # n, or each Variable of an expression (2*n)
      info[k] = (unbind_shape(shape), dt, dev)
  if len(bufs) > 1 and len({id(b) for b in bufs}) != len(bufs):
    seen: dict[int, int | str] = {}
    for n, b in zip(names, bufs):
      if id(b) in seen: raise JitError(f"duplicate inputs to JIT: arguments {seen[id(b)]!r} and {n!r} are the same tensor storage; pass it once")
      seen[id(b)] = n
  return names, bufs, bases, info, var_vals

def _describe(info: tuple) -> str: return f"shape {shape_str(info[0])} {info[1].name} on {info[2]}"

def _check_inputs(c: CapturedJit, names: list, info: list, var_vals: dict[str, int]) -> None:
  if names != c.expected_names:
    raise JitError(f"args mismatch in JIT: the captured call took Tensor arguments {c.expected_names}, this call gives {names}")
  if info != c.expected_info:
    diffs = [f"argument {n!r}: {_describe(got)} (captured with {_describe(want)})"
             for n, got, want in zip(names, info, c.expected_info) if got != want]
    raise JitError("args mismatch in JIT: " + "; ".join(diffs))
  if sorted(var_vals) != c.var_names:
    raise JitError(f"args mismatch in JIT: the captured call bound the Variables {c.var_names}, this call binds {sorted(var_vals)}")

# ---- capture ----

class _Recorder:
  """What realize ran during the captured call, and which outputs it made (not allocated before their first write)."""
  def __init__(self):
    self.steps: list[tuple[Any, list[Buffer]]] = []
    self.made: dict[int, Buffer] = {}
    self.seen: set[int] = set()
    self.guards: list[tuple[UOp, str]] = []  # (expr, message): expr >= 0 at every replay (tensor/symbolic_sizes.check_shrink)
  def add(self, runner: Any, bufs: list[Buffer]) -> None:
    out = bufs[0]
    if id(out) not in self.seen and not out.is_allocated(): self.made[id(out)] = out
    self.seen.update(id(b) for b in bufs)
    self.steps.append((runner, list(bufs)))

def _prune(rec: _Recorder, inputs: dict[int, int]) -> set[int]:
  """Drops the steps that touch no input nor any buffer a kept step touched (their results, computed at the capture, are
  the same at every replay); gives the buffers of the dropped steps, which memory planning must leave alone. Keeps all
  when nothing reads an input."""
  touched, kept, dropped = set(inputs), [], []
  for runner, bufs in rec.steps:
    if any(id(b) in touched for b in bufs):
      kept.append((runner, bufs))
      touched.update(id(b) for b in bufs)
    else: dropped.append((runner, bufs))
  if not kept: return set()
  if DEBUG >= 1: print(f"JIT prune: {len(dropped)} of {len(rec.steps)} kernels read no input and run only at the capture")
  rec.steps = kept
  return {id(b) for _, bufs in dropped for b in bufs}

def _held_buffers(engine: Engine) -> set[int]:
  """The buffers (and their bases) that live tensors hold: the caller may read them, so they are never shared."""
  held: set[int] = set()
  buffers = engine.storage.buffers
  for t in live_tensors():
    u = t.uop
    nodes = [b] if (b := realized_buffer(u)) is not None else [n for n in u.toposort(gate=lambda x: x.op is not Ops.BUFFER) if n.op is Ops.BUFFER]
    for n in nodes:
      if (b := buffers.get(n)) is not None:
        held.add(id(b))
        if b.base is not None: held.add(id(b.base))
  return held

def _plan(steps: list[tuple[Any, list[Buffer]]], plannable: dict[int, Buffer]) -> dict[int, Buffer]:
  """Views of shared blocks for the plannable buffers whose lifetimes (first to last step using them) do not overlap."""
  if NO_MEMORY_PLANNER or not plannable: return {}
  keys = [[id(b) for b in bufs] for _, bufs in steps]
  p = plan_memory(keys, set(plannable), lambda k: plannable[k].device, lambda k: plannable[k].nbytes)  # type: ignore[arg-type,return-value]
  devs = {k: plannable[b].device for b, k in p.placement.items()}
  blocks = [Buffer(devs[k], n, dtypes.uint8) for k, n in enumerate(p.blocks)]
  if DEBUG >= 1:
    print(f"JIT memory: {len(p.placement)} intermediate buffers in {len(p.blocks)} blocks, {p.planned_bytes / 1e6:.2f} MB instead of "
          f"{p.unplanned_bytes / 1e6:.2f} MB")
  return {b: Buffer(plannable[b].device, plannable[b].size, plannable[b].dtype, base=blocks[k]) for b, k in p.placement.items()}

def _returned_tensors(ret: Any) -> list[Tensor]: return get_parameters(ret)

def _check_returned(ret: Any) -> None:
  """A replay returns the capture's value and runs no Python, so a number or other object in it would stay the capture's
  (`return y, n * 10` gives call 2's n * 10 forever): only tensors, None and tuples, lists and dicts of them (tinygrad's)."""
  if ret is None or isinstance(ret, Tensor): return
  if isinstance(ret, (tuple, list, dict)):
    for item in (ret.values() if isinstance(ret, dict) else ret): _check_returned(item)
    return
  raise JitError(f"TinyJit's function returned a {type(ret).__name__}: a replay would return the captured call's value, "
                 "not the new one. Return only tensors (Tensor(value) for a number), None, and tuples, lists or dicts of them")

def _realize_returned(ret: Any) -> None:
  if (params := _returned_tensors(ret)): params[0].realize(*params[1:])

class _BoundJit:
  """A TinyJit method of one instance (what `obj.method` gives): calls pass the instance first; reset() and the capture
  are that instance's."""
  __slots__ = ("jit", "obj")
  def __init__(self, jit: TinyJit, obj: Any): self.jit, self.obj = jit, obj
  def __call__(self, *args, **kwargs): return self.jit(self.obj, *args, **kwargs)
  def __getattr__(self, name: str):
    if name in _BoundJit.__slots__: raise AttributeError(name)  # not set yet (a copy being made): never look it up on jit
    return getattr(self.jit, name)

class TinyJit(Generic[ReturnType]):
  """`@TinyJit` on a function or method: call 1 runs it, call 2 runs it and captures its kernels, calls 3+ replay them on
  the new Tensor arguments without running Python. JIT=0 always runs the function; JIT=2 replays kernel by kernel.
  `engine`: the engine whose kernels it captures and whose lock a replay holds (the frontend's, ENGINE, by default; a
  function realizing with an engine of its own captures with TinyJit(f, engine=that engine)). `prune=True` (tinygrad's):
  the kernels that read no input (nor what such a kernel wrote) run once, at the capture, and not at each replay."""
  def __init__(self, fxn: Callable[..., ReturnType] | None, captured: CapturedJit | None = None, engine: Engine | None = None,
               prune: bool = False):
    if fxn is None and captured is None: raise JitError("TinyJit needs a function to capture (or a CapturedJit to replay)")
    self.fxn, self.captured, self.prune = fxn, captured, prune
    self.engine = engine if engine is not None else captured.engine if captured is not None else ENGINE
    if self.engine.storage is not ENGINE.storage:
      raise JitError("TinyJit with an engine on another storage: the tensors' buffers are ENGINE's; use Engine(storage=ENGINE.storage)")
    self.cnt = 0 if fxn is not None else 2
    self._per_instance: dict[int, tuple[weakref.ref, TinyJit]] = {}  # a method's capture for each instance, by id
    if fxn is not None: functools.update_wrapper(self, fxn)  # type: ignore[arg-type]

  def reset(self) -> None:
    """Forget the capture: the next call runs the function, the one after captures again."""
    if self.fxn is None: raise JitError("this TinyJit was made from a CapturedJit: it has no function to capture again")
    self.cnt, self.captured = 0, None

  def __reduce__(self):
    if self.captured is None: raise JitError("a TinyJit can be pickled once it has captured (after its second call)")
    return TinyJit, (None, self.captured)

  def __get__(self, obj, objtype=None):
    """A method: each instance gets its own capture (a capture replays the kernels of one instance's tensors; shared, a
    call on a second instance returned the first one's result). The instance is passed as the first argument (not a
    Tensor, so not an input) and held weakly: its capture goes when it does."""
    if obj is None: return self
    entry = self._per_instance.get(id(obj))
    if entry is None or entry[0]() is not obj:
      key, table = id(obj), self._per_instance
      try: ref = weakref.ref(obj, lambda _: table.pop(key, None))
      except TypeError:
        raise JitError(f"@TinyJit on the method {getattr(self.fxn, '__qualname__', '?')}: a {type(obj).__name__} can't be weakly referenced "
                       f"(__slots__ without '__weakref__'), so its captures can't be kept apart per instance; add '__weakref__' to "
                       f"its __slots__, or make a TinyJit per instance in __init__") from None
      entry = table[key] = (ref, TinyJit(self.fxn, engine=self.engine, prune=self.prune))
    return _BoundJit(entry[1], obj)

  def __call__(self, *args, **kwargs) -> ReturnType:
    engine = self.engine
    names, input_buffers, input_uops, info, var_vals = _jit_inputs(args, kwargs, engine)
    if self.cnt >= 2 and JIT.value and not engine.capturing:  # the replay, first: it is the call that must be fast
      c: CapturedJit = self.captured  # type: ignore[assignment]
      if names != c.expected_names or info != c.expected_info or (var_vals or c.var_names) and sorted(var_vals) != c.var_names:
        _check_inputs(c, names, info, var_vals)
      self.cnt += 1
      return c(input_buffers, var_vals, input_uops)
    if not JIT:
      ret = self.fxn(*args, **kwargs)  # type: ignore[misc]
      _realize_returned(ret)
      return ret
    if engine.capturing and self.cnt >= 1:
      raise JitError("TinyJit inside another TinyJit's capture is not supported: the inner one would capture or replay on its own. "
                     "Call the inner function undecorated, or capture only the outer one")
    if self.cnt == 0:
      ret = self.fxn(*args, **kwargs)  # type: ignore[misc]
      _realize_returned(ret)
    elif self.cnt == 1: ret = self._capture(args, kwargs, names, input_buffers, info, var_vals)
    else:
      assert self.captured is not None
      _check_inputs(self.captured, names, info, var_vals)
      ret = self.captured(input_buffers, var_vals, input_uops)
    self.cnt += 1
    return ret

  def _capture(self, args, kwargs, names, input_buffers: list[Buffer], info, var_vals) -> ReturnType:
    rec, engine = _Recorder(), self.engine
    engine.capturing.append(rec)
    try:
      ret = self.fxn(*args, **kwargs)  # type: ignore[misc]
      _realize_returned(ret)
    finally: engine.capturing.clear()
    _check_returned(ret)
    if not rec.steps:
      raise JitError(f"TinyJit captured no kernels from {getattr(self.fxn, '__name__', 'the function')}: it realized nothing. "
                     "Return realized tensors (x.realize()) or realize what it computes inside it")
    if DEBUG >= 1: print(f"JIT captured {len(rec.steps)} kernels with {len(input_buffers)} inputs")
    inputs = {id(b): k for k, b in enumerate(input_buffers)}
    held = _held_buffers(engine)
    if self.prune: held |= _prune(rec, inputs)
    plannable = {k: b for k, b in rec.made.items() if k not in inputs and k not in held}
    placed = _plan(rec.steps, plannable)
    steps, input_replace = [], []
    for j, (runner, bufs) in enumerate(rec.steps):
      for i, b in enumerate(bufs):
        if id(b) in inputs: input_replace.append((j, i, inputs[id(b)]))
      steps.append(JitStep.of(runner, [placed.get(id(b), b) for b in bufs], set(var_vals)))
    for s in steps:
      for b in s.bufs: b.ensure_allocated()
    buffers = engine.storage.buffers
    held_by = [(r, id(buffers[b])) for r, t in enumerate(_returned_tensors(ret)) if (b := realized_buffer(t.uop)) is not None]
    ret_inputs = [(r, inputs[b]) for r, b in held_by if b in inputs]
    self.captured = CapturedJit(ret, steps, input_replace, names, info, sorted(var_vals), ret_inputs, engine)
    self.captured.guards = rec.guards
    return ret

# ---- pickling: a captured call saved and replayed in another process ----

class _RetPickler(pickle.Pickler):
  """Pickles the returned value with each Tensor as a reference to its buffer in the capture's table."""
  def __init__(self, f, index: Callable[[Buffer], int]):
    super().__init__(f)
    self.index = index
  def persistent_id(self, obj):
    if not isinstance(obj, Tensor): return None
    if (base := realized_buffer(obj.uop)) is None:
      raise JitError("a captured call's returned tensors are realized; this one is not, so it can't be pickled")
    return ("tensor", self.index(ENGINE.storage.buffers[base]), obj.shape, obj.requires_grad)

class _RetUnpickler(pickle.Unpickler):
  def __init__(self, f, bufs: list[Buffer]):
    super().__init__(f)
    self.bufs = bufs
  def persistent_load(self, pid):
    _, k, shape, requires_grad = pid
    t = Tensor(buffer_uop(self.bufs[k]), requires_grad=requires_grad)
    if t.shape == shape: return t
    # a symbolic shape views the first elements of storage sized for the Variables' maxima (not a reshape of all of it)
    if any(d.__class__ is UOp for d in shape): return Tensor(UOp(Ops.RESHAPE, t.dtype, (t.uop,), shape), requires_grad=requires_grad)
    return t.reshape(shape)

def _dump_captured(c: CapturedJit) -> dict:
  """The capture as plain data: its buffers (with their contents: weights and other state the kernels read), the kernels'
  sources (rebuilt, from the kernel cache, when loaded), which buffers each step uses, and the returned value."""
  table: list[Buffer] = []
  index: dict[int, int] = {}
  def idx(b: Buffer) -> int:
    if id(b) not in index:
      if b.base is not None: idx(b.base)
      index[id(b)] = len(table)
      table.append(b)
    return index[id(b)]
  steps = [(s.device, s.name, s.src, [None if b is None else idx(b) for b in s.bufs], s.args, s.floats, s.ops, s.mem) for s in c.steps]
  f = io.BytesIO()
  _RetPickler(f, idx).dump(c.ret)
  bufs = [(b.device, b.size, b.dtype, None if b.base is None else index[id(b.base)], b.offset, b.host_array().copy() if b.base is None else None)
          for b in table]
  return {"buffers": bufs, "steps": steps, "ret": f.getvalue(), "input_replace": c.input_replace, "names": c.expected_names,
          "info": c.expected_info, "vars": c.var_names, "ret_inputs": c.ret_inputs, "guards": c.guards}

def _load_captured(d: dict) -> CapturedJit:
  bufs: list[Buffer] = []
  for device, size, dtype, base, offset, data in d["buffers"]:
    b = Buffer(device, size, dtype, base=None if base is None else bufs[base], offset=offset)
    if data is not None: b.copyin(data)
    bufs.append(b)
  programs: dict[tuple, Callable] = {}
  steps = []
  for device, name, src, idxs, args, floats, ops, mem in d["steps"]:
    fn = None
    if src is not None:
      key = (device, name, src if isinstance(src, str) else id(src))
      if key not in programs: programs[key] = Device[device].program(src, name)
      fn = programs[key]
    steps.append(JitStep(device, name, src, fn, [None if k is None else bufs[k] for k in idxs], args, floats, ops, mem))
  ret = _RetUnpickler(io.BytesIO(d["ret"]), bufs).load()
  c = CapturedJit(ret, steps, [tuple(x) for x in d["input_replace"]], d["names"], d["info"], d["vars"], d["ret_inputs"])
  c.guards = d.get("guards", [])
  return c
