"""Prepared launches (tensor/engine/prepared.py): a schedule-cache hit runs each kernel's entry point on argument arrays made
once. They must compute what a fresh schedule computes, follow the program variant (NOOPT, THREADS), plan intermediates as
the memory planner does, and leave to the full path any realize where a live tensor holds a node that becomes an
intermediate (it must get its own buffer, not a block that later kernels overwrite)."""
from __future__ import annotations
import numpy as np
import pytest
from runtime.helpers import Context
from tensor import Tensor
from tensor.engine import prepared, schedule
from tensor.engine.schedule_cache import Recipe
from tensor.engine.state import ENGINE, Engine

RNG = np.random.default_rng(3)

def rand(*shape) -> np.ndarray: return RNG.standard_normal(shape).astype(np.float32)

def counting_calls():
  """A spy on prepared launches: the list of Calls run while it is installed (uninstall with the returned function); the one
  Prepared.run_single makes itself (Prepared.call) counts as run by it."""
  seen: list = []
  orig, orig_single = prepared.Call.__call__, prepared.Prepared.run_single
  def spy(self, *args):
    seen.append(self)
    orig(self, *args)
  def spy_single(self, *args):
    if self.call is not None: seen.append(self.call)
    return orig_single(self, *args)
  prepared.Call.__call__, prepared.Prepared.run_single = spy, spy_single
  def undo(): prepared.Call.__call__, prepared.Prepared.run_single = orig, orig_single
  return seen, undo

def test_a_hit_runs_prepared_launches_with_the_right_values():
  a = Tensor(rand(16)).realize()
  for _ in range(2): (a * 3 + 1).realize()  # recorded, then the launches are prepared
  seen, undo = counting_calls()
  try: outs = [(a * 3 + 1).realize() for _ in range(5)]
  finally: undo()
  assert len(seen) == 5 and all(c.cfunc is not None for c in seen)  # one C call per realize, through the entry point
  for o in outs: np.testing.assert_allclose(o.numpy(), a.numpy() * 3 + 1, rtol=1e-6)
  assert len({o.uop for o in outs}) == 5  # each result a buffer of its own

@pytest.mark.optimized
def test_each_program_variant_gets_its_own_prepared_launches():
  # NOOPT=1 must not run the optimized program a hit prepared before (nor the other way round)
  a = Tensor(rand(4096)).realize()
  for _ in range(2): a.sum().realize()
  with Context(NOOPT=1):
    for _ in range(2): np.testing.assert_allclose(a.sum().realize().numpy(), a.numpy().sum(), rtol=1e-4)
  recipe = schedule.lookup([a.sum().uop], ENGINE).recipe  # this graph's
  assert recipe.__class__ is Recipe
  opts = {v[0]: [c.runner.program.opts for c in p.calls] for v, p in recipe.prepared.items()}
  assert opts[True] == [[]] and opts[False] != [[]]  # the NOOPT launches run the program without opts

def test_a_planned_hit_uses_two_blocks_and_computes_the_chain():
  x0 = rand(256)
  x = Tensor(x0).realize()
  def chain(t, n=12):
    for _ in range(n): t = (t * 2 + 1).contiguous()
    return t
  want = x0.astype(np.float64)
  for _ in range(12): want = want * 2 + 1
  for _ in range(2): chain(x).realize()
  seen, undo = counting_calls()
  try: y = chain(x).realize()
  finally: undo()
  assert len(seen) == 12  # the hit ran through prepared launches
  assert ENGINE.last_plan.n_buffers == 11 and len(ENGINE.last_plan.blocks) == 2
  np.testing.assert_allclose(y.numpy(), want, rtol=1e-5)

def test_a_hit_leaves_intermediates_live_tensors_hold_to_the_full_path():
  x0 = rand(64)
  x = Tensor(x0).realize()
  def steps_of(t, n=6):
    out = [t]
    for _ in range(n): out.append((out[-1] * 2 + 1).contiguous())
    return out
  for _ in range(2): steps_of(x)[-1].realize()  # recorded with 5 planned intermediates, then prepared
  steps = steps_of(x)  # the same graph, each intermediate held by a live tensor
  seen, undo = counting_calls()
  try: steps[-1].realize()
  finally: undo()
  assert not seen  # the full path ran it: it leaves held buffers out of the plan
  assert all(t.is_realized() for t in steps)  # and points every live tensor at its result
  assert len({t.uop for t in steps}) == len(steps)  # each its own buffer
  want = x0
  for t in steps:
    np.testing.assert_allclose(t.numpy(), want, rtol=1e-5)
    want = want * np.float32(2) + np.float32(1)

def test_prepared_launches_are_the_engines_own():
  # an Engine of its own prepares its own launches (its programs and caches are its own)
  from tensor.tensor import realize as realize_tensors
  mine = Engine(storage=ENGINE.storage)
  a = Tensor(rand(8)).realize()
  for _ in range(3): realize_tensors([b := a * 5 - 2], mine)
  np.testing.assert_allclose(b.numpy(), a.numpy() * 5 - 2, rtol=1e-6)
  assert any(r.prepared for r in mine.schedules.recipes.values())
  assert all(c.runner in mine.programs.values() for r in mine.schedules.recipes.values() for p in r.prepared.values() for c in p.calls)

def test_a_capture_sees_every_kernel_of_a_prepared_schedule():
  # TinyJit captures through realize.launch: a hit whose launches are prepared must still show it its kernels
  from tensor import TinyJit
  a = Tensor(rand(16)).realize()
  for _ in range(3): (a + 2).realize()
  step = TinyJit(lambda x: (x + 2).realize())
  for _ in range(4): out = step(a)
  np.testing.assert_allclose(out.numpy(), a.numpy() + 2, rtol=1e-6)
  assert len(step.captured.steps) == 1  # type: ignore[union-attr]
