"""Prepared launches: what a schedule-cache hit runs, made once per cached schedule and program variant.

A hit of a recipe (or a launcher, tensor/engine/schedule_cache.py) whose kernels all write new buffers needs no kernel
nodes: realize makes the output buffers, runs the kernels and points the tensors at the results. `Prepared` holds that
work made ready: the (dtype, size, device) of each output, and for each kernel its compiled entry point with the argument
arrays it is called with (a pointer array the run fills with its buffers' addresses, the int and float values fixed or
taken from the graph's constants), so a hit builds no runner, key tuple or argument list per kernel.

It is made the first time a schedule is launched and kept on its recipe (one per program variant: NOOPT, THREADS, BEAM
change the programs). It holds the compiled programs it calls, as long as the recipe stays in the schedule cache.
Runs without a capture, DEBUG or PROFILE only (those go through realize.launch, which reports each kernel).
"""
from __future__ import annotations
import ctypes, time, weakref
from typing import Any
from rules.kernelize_helpers import param_index
from runtime.device import HOST, POOL_BYTES, Buffer, Device
from runtime.dtype import dtypes
from runtime.helpers import GlobalCounters
from runtime.ops import Ops, cast_value
from runtime.uop import UOp, buffer_node, uop, with_facts
from tensor.engine.memory import MemoryPlan, plan_memory
from tensor.engine.storage import Storage, device_node

BUFFER = Ops.BUFFER
_clock = time.perf_counter
_ref = weakref.ref
_fresh = Buffer.fresh

class Call:
  """One kernel of a prepared schedule: `at` are its buffers (output first) as places in the run's buffer list; `fn` the
  device program (None for a copy) and `vals` its values, or `params` where each value comes from when the graph's
  constants give some. A compiled CPU kernel is called through its entry point (`cfunc`, with argument arrays kept from
  call to call); anything else (a copy, a PYTHON-device program, an OpenMP kernel, which checks for a fork on each call)
  through the program or the runner."""
  __slots__ = ("at", "runner", "fn", "vals", "params", "cfunc", "value_arrays", "ptrs", "ivals", "fvals", "ops", "mem")
  def __init__(self, at: tuple[int, ...], runner: Any, fn: Any, vals: tuple, params: tuple | None = None):
    self.at, self.runner, self.fn, self.vals, self.params = at, runner, fn, vals, params
    program = getattr(runner, "program", None)
    self.ops, self.mem = (program.ops, program.mem) if program is not None else (0, 0)
    self.cfunc = getattr(fn, "cfunc", None)
    self.value_arrays = getattr(fn, "value_arrays", None)
    self.ptrs: Any = None
    self.ivals = self.fvals = None
    if self.cfunc is not None:
      self.ptrs = (ctypes.c_void_p * len(at))()
      if vals: self.ivals, self.fvals = self.value_arrays(vals)  # type: ignore[misc]

  def __call__(self, bufs: list[Buffer], consts: tuple[UOp, ...]) -> None:
    if (cfunc := self.cfunc) is not None:
      ptrs, at = self.ptrs, self.at
      if len(at) == 2:  # an op on one tensor, the usual eager kernel: two stores, no list
        ptrs[0], ptrs[1] = bufs[at[0]]._ptr or bufs[at[0]].ptr, bufs[at[1]]._ptr or bufs[at[1]].ptr  # .ptr: not allocated yet, now
      else: ptrs[:] = [bufs[i]._ptr or bufs[i].ptr for i in at]
      if self.params is None:
        t0 = _clock()
        cfunc(ptrs, self.ivals, self.fvals)
      else:
        ivals, fvals = self.value_arrays(self._values(consts))  # type: ignore[misc]
        t0 = _clock()
        cfunc(ptrs, ivals, fvals)
    else:
      kbufs = [bufs[i] for i in self.at]
      for b in kbufs:
        if b._array is None: b.ensure_allocated()
      t0 = _clock()
      if self.fn is None: self.runner(kbufs)
      else: self.fn(kbufs, self.vals if self.params is None else self._values(consts))
    GlobalCounters.kernel_count += 1
    GlobalCounters.time_sum_s += _clock() - t0
    if self.fn is not None:
      GlobalCounters.global_ops += self.ops
      GlobalCounters.global_mem += self.mem

  def _values(self, consts: tuple[UOp, ...]) -> tuple:
    """The program's values with this graph's constants: params[k] is (dtype, the form's constant number) for a constant,
    (None, value) for a value fixed at preparation (a bound Variable, or a constant the scheduler made)."""
    return tuple(v if dt is None else cast_value(consts[v].arg, dt) for dt, v in self.params)  # type: ignore[union-attr]

class Prepared:
  """The outputs to make and the kernels to run for one cached schedule. A run's buffer list is the Buffers of `inputs`
  (the value numbers of the graph's slots the kernels read or write), then one per output of the recipe, in order: a new
  BUFFER for an output a root holds (`outputs[j]` is its (dtype, size, device, DEVICE node)), or for a planned one (None
  there) its place in a block of the memory plan, made for the run: `views[j]` is (block, dtype, size, device, typed);
  an intermediate only entry points read is passed as its block (its address is the view's), one a runner reads as a typed
  view. `watch`: places in the graph's walk of nodes that become planned outputs (a live tensor holding one needs the full
  path); `plan` the plan's numbers for engine.last_plan."""
  __slots__ = ("variant", "inputs", "outputs", "blocks", "views", "calls", "after", "after_paths", "direct", "watch", "watch_paths", "plan",
               "upgrades", "single", "call")
  def __init__(self, variant: tuple, inputs: tuple[int, ...], outputs: tuple, blocks: tuple, views: dict, calls: list[Call], after: Any,
               after_paths: tuple, watch: tuple[int, ...], watch_paths: tuple, plan: MemoryPlan):
    self.variant, self.inputs, self.outputs, self.blocks, self.views, self.calls = variant, inputs, outputs, blocks, views, calls
    self.after, self.after_paths, self.watch, self.watch_paths, self.plan = after, after_paths, watch, watch_paths, plan
    # one root that becomes one of the run's values as it is (no node to build): (root number, value number)
    one = len(after_paths) == 1 and len(after_paths[0]) == 1 and not after.steps and not after.fixed
    self.direct = (after_paths[0][0], after.results[0]) if one else None
    # when a call runs a quick build (tensor/engine/compile_queue.py Provisional): UPGRADES.version now, for realize to
    # prepare again once final builds are made; None when every call runs its final program
    self.upgrades: int | None = None
    # run_single's case, an op chain's usual schedule: the one slot (read or not), one new output buffer that the one root
    # becomes, no memory plan: (dtype, size, device, DEVICE node, nbytes, allocator, spare kind or None) of that output, else None
    self.single: tuple | None = None
    # and the usual kernel of that case, one compiled entry point writing the output and reading the slot with values fixed
    # (its Call: run_single makes that call itself), else None
    self.call: Call | None = None
    if self.direct is not None and len(outputs) == 1 and outputs[0] is not None and not blocks and not watch and inputs in ((), (0,)) \
        and self.direct[1] == 1 and after.results == (1,):
      dtype, size, device, dev = outputs[0]
      nbytes, allocator = size * dtype.itemsize, Device.allocator(device)
      # the kind of spare outputs it may reuse (Storage.spare): small host buffers (numpy arrays: their views are counted)
      kind = (nbytes, dtype, device) if allocator is HOST and 0 < nbytes <= POOL_BYTES else None
      self.single = (dtype, size, device, dev, nbytes, allocator, kind)
      if len(calls) == 1 and (c := calls[0]).cfunc is not None and c.params is None and c.at == (1, 0): self.call = c

  def run(self, slots: list[UOp], consts: tuple[UOp, ...], roots: tuple[UOp, ...], storage: Storage,
          topo: list[UOp] | None = None) -> dict[UOp, UOp] | None:
    """Make the outputs, run the kernels, and return what the graph's nodes are now (the kernelize result with the
    kernels run: their buffers); None, having run nothing, when a live tensor holds a node that becomes a planned output.
    The nodes are found at their places in the graph's walk (topo), or without one from the roots by their paths (any
    graph of the recipe's key has them at the same places and paths). The buffers are the storage's."""
    if self.watch:
      held = set(storage.live_roots())
      watched = [topo[p] for p in self.watch] if topo is not None else [_at(roots, p) for p in self.watch_paths]
      if any(u in held for u in watched): return None
    # the weak table's own dict: its methods' Python frames cost as much as the lookups (the jit reads it the same way)
    table, remove, new_unique = storage.buffers.data, storage.buffers.forget, storage.new_unique
    bufs = [table[_ref(slots[i])] for i in self.inputs]
    values = list(slots)
    blocks = [Buffer(device, nbytes, dtypes.uint8).ensure_allocated() for device, nbytes in self.blocks] if self.blocks else None
    for j, spec in enumerate(self.outputs):
      if spec is None:
        k, dtype, size, device, typed = self.views[j]
        bufs.append(Buffer(device, size, dtype, base=blocks[k]) if typed else blocks[k])  # type: ignore[index]
        values.append(None)
        continue
      dtype, size, device, dev = spec
      b = Buffer(device, size, dtype).ensure_allocated()
      u = with_facts(uop(BUFFER, dtype, (new_unique(), dev), size), (size,), device)
      table[_ref(u, remove)] = b
      values.append(u)
      bufs.append(b)
    for c in self.calls: c(bufs, consts)
    paths = self.after_paths
    if (direct := self.direct) is not None: return {roots[direct[0]]: values[direct[1]]}  # the usual: a root becomes a new buffer
    if topo is not None: return dict(zip([topo[p] for p in self.after.positions], self.after.results_of(values)))
    return dict(zip([_at(roots, p) for p in paths], self.after.results_of(values)))

  def run_single(self, leaf: UOp, consts: tuple[UOp, ...], storage: Storage) -> UOp:
    """run, for a Prepared with `single` set and a graph whose one slot is `leaf` (an op chain's): makes the output, runs the
    kernels, and returns the BUFFER node the root becomes (no value list, no dict: the eager path of `(a + 1).realize()`)."""
    dtype, size, device, dev, nbytes, allocator, kind = self.single  # type: ignore[misc]
    table = (buffers := storage.buffers).data
    if kind is not None and (u := storage.spare(kind)) is not None: b = table[_ref(u)]  # an earlier output nobody uses: it again
    else:
      b = _fresh(device, size, dtype, nbytes, allocator)
      u = buffer_node(dtype, dev, size, next(storage._ids), device)  # storage.new_unique's node and its BUFFER, made at once
      table[_ref(u, buffers.forget)] = b
      if kind is not None: storage.keep_spare(kind, u, b)
    if (c := self.call) is not None:  # Call.__call__ of the usual kernel, inline: ptrs[0] the output, ptrs[1] the slot's buffer
      x, ptrs = table[_ref(leaf)], c.ptrs
      ptrs[0], ptrs[1] = b._ptr, x._ptr or x.ptr  # .ptr: not allocated yet, now
      t0 = _clock()
      c.cfunc(ptrs, c.ivals, c.fvals)
      counters = GlobalCounters
      counters.time_sum_s += _clock() - t0
      counters.kernel_count += 1
      counters.global_ops += c.ops
      counters.global_mem += c.mem
      return u
    bufs = [table[_ref(leaf)], b] if self.inputs else [b]  # the places prepare gave: the inputs, then the output
    for c in self.calls: c(bufs, consts)
    return u

def _at(roots: tuple[UOp, ...], path: tuple[int, ...]) -> UOp:
  u = roots[path[0]]
  for i in path[1:]: u = u.src[i]
  return u

def _paths(roots: tuple[UOp, ...], nodes: list[UOp]) -> dict[UOp, tuple[int, ...]]:
  """A path (root number, then source numbers) from the roots to each of these nodes."""
  want, out = set(nodes), {}
  stack: list = [(r, (i,)) for i, r in reversed(list(enumerate(roots)))]
  seen: set[UOp] = set()
  while stack and len(out) < len(want):
    u, path = stack.pop()
    if u in seen: continue
    seen.add(u)
    if u in want: out[u] = path
    if u.op is not BUFFER: stack.extend((s, (*path, j)) for j, s in reversed(list(enumerate(u.src))))
  return out

def prepare(recipe: Any, shape: Any, variant: tuple, entry_of, storage: Storage) -> Prepared:
  """The Prepared of a recipe or a launcher (schedule_cache.py): its launches are each (AST, value numbers), or for a
  launcher (template AST, value numbers, the source of each parameter: the form's constant j or (value,), the bound
  Variables' values). entry_of(ast, device, template) gives (runner, program, values) for an AST (template: a launcher's
  AST with its constants as parameters; its values are left to the run)."""
  launches, outputs, slots, n_slots = recipe.launches, recipe.outputs, shape.slots, len(shape.slots)
  inputs = sorted({i for launch in launches for i in launch[1] if i < n_slots})
  place = {v: k for k, v in enumerate(inputs)}
  place.update((n_slots + j, len(inputs) + j) for j in range(len(outputs)))
  device_of = {n_slots + j: spec[2] for j, spec in enumerate(outputs)}
  calls = []
  for launch in launches:
    ast, at = launch[0], launch[1]
    device = device_of.get(at[0]) or storage.buffers[slots[at[0]]].device
    kat = tuple(place[i] for i in at)
    if len(launch) == 2 or launch[2] is None:  # a recipe's kernel, or a launcher's copy: its values are fixed
      calls.append(Call(kat, *entry_of(ast, device, False)))
      continue
    _, _, sources, bound = launch
    runner, fn, _ = entry_of(ast, device, True)
    params = []
    for v in runner.program.vars:
      if (i := param_index(v)) is None: params.append((None, (bound or {})[v.arg[0]]))
      elif sources[i].__class__ is int: params.append((v.dtype, sources[i]))
      else: params.append((None, cast_value(sources[i][0], v.dtype)))
    calls.append(Call(kat, runner, fn, (), tuple(params)))
  # the intermediates' places, planned once: their lifetimes are the schedule's, the same on every run
  plan = plan_memory([list(launch[1]) for launch in launches], set(recipe.planned), device_of.__getitem__,
                     lambda v: outputs[v - n_slots][1] * outputs[v - n_slots][0].itemsize)
  devices = [""] * len(plan.blocks)
  for v, k in plan.placement.items(): devices[k] = device_of[v]
  views = {}
  for v, k in plan.placement.items():
    dtype, size, device = outputs[v - n_slots]
    typed = any(c.cfunc is None and place[v] in c.at for c in calls)
    views[v - n_slots] = (k, dtype, size, device, typed)
  specs = tuple(None if n_slots + j in plan.placement else (*spec, device_node(spec[2])) for j, spec in enumerate(outputs))
  # the nodes the run points at their results, and the watched ones, by their paths from the roots (shape is walked: topo)
  nodes = [shape.topo[p] for p in recipe.after.positions]
  paths = _paths(shape.roots, nodes + [shape.topo[p] for p in recipe.watch])
  return Prepared(variant, tuple(inputs), specs, tuple(zip(devices, plan.blocks)), views, calls, recipe.after, tuple(paths[n] for n in nodes),
                  recipe.watch, tuple(paths[shape.topo[p]] for p in recipe.watch), plan.summary())

__all__ = ["Prepared", "Call", "prepare"]
