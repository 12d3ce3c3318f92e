"""rules/lower.rules: a REDUCE becomes an accumulator (DEFINE_REG, ASSIGN inside the loops, END, AFTER), and a reduction
over loops its value does not use loses them first (a sum of n equal terms is n * x, a max is x). Every rule fires on the
shared lowering work (tests/rules/fires.py), but the two for loops of 0 and of 1 iterations."""
from __future__ import annotations
import numpy as np
from fires import assert_every_rule_fires, lowering, rules_of
from tensor import Tensor

# rangeify makes no loop for a size-1 dimension, and an empty tensor's kernels never run (the scheduler skips them): no test
# graph has a reduce loop of 0 or 1 iterations its value does not use
UNREACHABLE = {"r@(REDUCE _ _...) if r.arg is Ops.ADD and unused_loops(ctx, r) and repeats(unused_loops(ctx, r)) == 0": "a loop of 0 iterations",
               "r@(REDUCE _ _...) if r.arg is Ops.ADD and unused_loops(ctx, r) and repeats(unused_loops(ctx, r)) == 1": "a loop of 1 iteration"}

def test_every_rule_fires():
  assert_every_rule_fires(rules_of("rules/lower.rules"), lowering(), UNREACHABLE)

def test_unused_loops_go():
  # a sum over a broadcast axis is the value times the count, a max the value itself: no loop over the broadcast axis
  a = np.random.default_rng(1).standard_normal((16, 64)).astype(np.float32)
  x = Tensor(a).reshape(16, 64, 1).expand(16, 64, 8)
  np.testing.assert_allclose(x.sum(2).numpy(), a * 8, rtol=1e-6)
  np.testing.assert_array_equal(x.max(2).numpy(), a)
  assert Tensor.ones(10**12).sum().item() == np.float32(10**12)  # 10**12 in float32: no loop of 10**12 adds runs
