"""rules/boundaries.rules: which reductions end a kernel. Each rule against the kernel count and the values (numpy) of a
graph made for it, both rules seen firing, the `Looping` pattern's guard (a reduction over size-1 axes
runs no loop, so it may be read twice), and the rules alone on a hand-filled Reads: exactly the reads the rules describe."""
import numpy as np
from runtime import UOp, Ops
from rules.boundaries import recompute
from tensor import Tensor
from tensor.engine.boundaries import Reads

RNG = np.random.default_rng(3)

def kernels(t: Tensor) -> int:
  t.kernelize()
  return len({n for n in t.uop.toposort(gate=lambda n: n.op is not Ops.BUFFER) if n.op is Ops.KERNEL and n.arg.ast.op is Ops.SINK})

def test_each_rule_on_its_graph():
  a = RNG.standard_normal((6, 5)).astype(np.float32)
  A, A1 = Tensor(a).realize(), Tensor(a[:1]).realize()
  seen = []
  def rewrite(u, ctx, _rules=recompute):
    # the rule that fired on each reduction the walk decided (boundaries.py asks one node at a time)
    seen.extend(r for r in _rules.rules if u.op in r.ops and r.fn(u, ctx) is not None)
    return _original(u, ctx)
  _original = recompute.rewrite
  recompute.rewrite = rewrite
  try:
    # read at two indices: the sum is a kernel of its own, read by the other
    two = A.sum(1) + A.sum(1).flip(0)
    assert kernels(two) == 2
    np.testing.assert_allclose(two.numpy(), a.sum(1) + a.sum(1)[::-1], rtol=1e-5)
    # read inside a loop its value does not use: the max over axis 0 is broadcast along the rows
    sm = A.softmax(0)
    assert kernels(sm) == 3
    e = np.exp(a - a.max(0))
    np.testing.assert_allclose(sm.numpy(), e / e.sum(0), rtol=1e-5)
    # over a size-1 axis no loop runs: read twice, it stays fused
    one = A1.sum(0) + A1.sum(0).flip(0)
    assert kernels(one) == 1
    np.testing.assert_allclose(one.numpy(), a[0] + a[0][::-1], rtol=1e-5)
    # read once, at a gather's index: the output's 200 elements would each run one of the sum's 5 reductions (40 times
    # each: more than a short reduction may be recomputed)
    idx = np.arange(200, dtype=np.int32) % 5
    picked = A.sum(0).gather(0, Tensor(idx).realize())
    assert kernels(picked) == 2
    np.testing.assert_allclose(picked.numpy(), a.sum(0)[idx], rtol=1e-5)
  finally: del recompute.rewrite
  assert {r.id for r in seen} == {r.id for r in recompute.rules}, [r.text for r in seen]

def test_the_rules_read_what_they_declare():
  x = Tensor.empty(4, 3).uop
  r = UOp(Ops.REDUCE_AXIS, x.dtype, (x,), (Ops.ADD, (1,)))
  k1, k2, a1, a2 = (UOp.variable(n, 0, 1) for n in ("k1", "k2", "a1", "a2"))
  loop_i, loop_j = UOp.variable("i", 0, 3), UOp.variable("j", 0, 3)
  reads = Reads()
  assert recompute.rewrite(r, reads) is None  # not read at all
  reads.at[r] = {(k1, a1): None}
  reads.used[a1], reads.around[a1] = frozenset({loop_i}), frozenset({loop_i})
  assert recompute.rewrite(r, reads) is None  # read once, at the loops it uses
  reads.around[a1] = frozenset({loop_i, loop_j})
  assert recompute.rewrite(r, reads) is UOp(Ops.CONTIGUOUS, r.dtype, (r,))  # inside a loop it does not use
  reads.around[a1] = frozenset({loop_i})
  reads.at[r][(k2, a2)] = None
  assert recompute.rewrite(r, reads) is UOp(Ops.CONTIGUOUS, r.dtype, (r,))  # read at two places
  # read once, at the loops it uses, but those run 400 times for the reduction's 4 results (a gather's index)
  loop_k = UOp.variable("k", 0, 99)
  reads.at[r] = {(k1, a1): None}
  reads.used[a1], reads.around[a1] = frozenset({loop_i, loop_k}), frozenset({loop_i, loop_k})
  assert recompute.rewrite(r, reads) is UOp(Ops.CONTIGUOUS, r.dtype, (r,))
  # 16 runs for 4 results of 3 values each: a short reduction computed 4 times (a pooling window's at each of its pixels,
  # max-pool's backward) stays fused
  reads.used[a1], reads.around[a1] = frozenset({loop_i, loop_j}), frozenset({loop_i, loop_j})
  assert recompute.rewrite(r, reads) is None
  reads.used[a1], reads.around[a1] = frozenset({loop_i}), frozenset({loop_i})  # 4 runs for 4 results: fused
  assert recompute.rewrite(r, reads) is None
  reads.at[r][(k2, a2)] = None
  unit = UOp(Ops.REDUCE_AXIS, x.dtype, (Tensor.empty(4, 1).uop,), (Ops.ADD, (1,)))
  reads.at[unit] = dict(reads.at[r])
  assert recompute.rewrite(unit, reads) is None  # no loop to run twice
