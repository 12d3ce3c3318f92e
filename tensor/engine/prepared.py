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
import ctypes, time
from typing import Any
from rules.kernelize_helpers import param_index
from runtime.device import Buffer
from runtime.helpers import GlobalCounters
from runtime.ops import Ops, cast_value
from runtime.uop import UOp, uop, with_facts
from tensor.tensor import _device, _new_unique, buffers

BUFFER = Ops.BUFFER
_clock = time.perf_counter

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
      ptrs = self.ptrs
      ptrs[:] = [b._ptr or b.ptr for b in [bufs[i] for i in self.at]]
      ivals, fvals = (self.ivals, self.fvals) if self.params is None else self.value_arrays(self._values(consts))  # type: ignore[misc]
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
  """The outputs to make and the kernels to run for one cached schedule: `inputs` are the value numbers (slots) of the
  buffers that exist already, which the kernels read or write; a run's buffer list is their Buffers, then the new outputs'."""
  __slots__ = ("variant", "inputs", "outputs", "calls", "after")
  def __init__(self, variant: tuple, inputs: tuple[int, ...], outputs: tuple, calls: list[Call], after: Any):
    self.variant, self.inputs, self.outputs, self.calls, self.after = variant, inputs, outputs, calls, after

  def run(self, slots: list[UOp], consts: tuple[UOp, ...], topo: list[UOp]) -> dict[UOp, UOp]:
    """Make the outputs, run the kernels, and return what the graph's nodes are now (the kernelize result with the
    kernels run: their buffers)."""
    bufs = [buffers[slots[i]] for i in self.inputs]
    values = list(slots)
    for dtype, size, device, dev in self.outputs:
      b = Buffer(device, size, dtype).ensure_allocated()
      u = with_facts(uop(BUFFER, dtype, (_new_unique(), dev), size), (size,), device)
      buffers[u] = b
      values.append(u)
      bufs.append(b)
    for c in self.calls: c(bufs, consts)
    return self.after.run(values, topo)

def prepare(launches: tuple, outputs: tuple, after: Any, slots: list[UOp], variant: tuple, entry_of) -> Prepared:
  """The Prepared of a recipe's or a launcher's launches: each (AST, value numbers), or for a launcher (template AST,
  value numbers, the source of each parameter: the form's constant j or (value,), the bound Variables' values).
  entry_of(ast, device, template) gives (runner, program, values) for an AST (template: a launcher's AST with its
  constants as parameters; its values are left to the run)."""
  n_slots = len(slots)
  inputs = sorted({i for launch in launches for i in launch[1] if i < n_slots})
  place = {v: k for k, v in enumerate(inputs)}
  place.update((n_slots + j, len(inputs) + j) for j in range(len(outputs)))
  device_of = {n_slots + j: spec[2] for j, spec in enumerate(outputs)}
  calls = []
  for launch in launches:
    ast, at = launch[0], launch[1]
    device = device_of.get(at[0]) or buffers[slots[at[0]]].device
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
  return Prepared(variant, tuple(inputs), tuple((*spec, _device(spec[2])) for spec in outputs), calls, after)

__all__ = ["Prepared", "Call", "prepare"]
