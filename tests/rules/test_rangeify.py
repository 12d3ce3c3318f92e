"""rules/rangeify.rules, rule by rule: random chains of movement ops (reshape, permute, expand, pad, shrink, flip) over
random shapes, reductions and gathers, checked against numpy on the PYTHON interpreter (and the CPU); every rule of the
file fires in this module (RULESTATS counts its hits), the symbolic reshape on shapes with a Variable, the empty reshape on
a hand-built AT (no kernel reads an empty tensor). tests/tensor and tests/jit check the same rules through the whole
pipeline; a test-suite-wide comparison of every kernel's program before and after the port found them all equal."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from runtime import UOp, Ops, dtypes, graph_rewrite
from runtime.helpers import Context
from rules.kernelize import parametrize
from rules.kernelize_helpers import Params
from rules.rangeify import rangeify
from tensor import Tensor, Variable
from tensor.codegen import CodegenContext, rangeify as codegen_rangeify
from tensor.engine.realize import schedule_of

# ---- random movement chains against numpy ----

@st.composite
def chains(draw):
  """A shape, and movement ops on it: (name, arg, numpy function) with the shape after each."""
  start = shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
  ops = []
  for _ in range(draw(st.integers(1, 4))):
    kind = draw(st.sampled_from(["reshape", "permute", "expand", "pad", "shrink", "flip"]))
    n = int(np.prod(shape))
    if kind == "reshape":
      # the elements regrouped: n as a random product of factors, with size-1 dims put in
      dims, left = [], n
      while left > 1:
        f = draw(st.sampled_from([d for d in range(2, left + 1) if left % d == 0]))
        dims.append(f)
        left //= f
      for _ in range(draw(st.integers(0, 2))): dims.insert(draw(st.integers(0, len(dims))), 1)
      new = tuple(dims) or (1,)
      ops.append(("reshape", new, lambda a, s=new: a.reshape(s)))
      shape = new
    elif kind == "permute":
      order = tuple(draw(st.permutations(range(len(shape)))))
      ops.append(("permute", order, lambda a, o=order: a.transpose(o)))
      shape = tuple(shape[i] for i in order)
    elif kind == "expand":
      new = tuple(draw(st.integers(2, 3)) if d == 1 and draw(st.booleans()) else d for d in shape)
      ops.append(("expand", new, lambda a, s=new: np.broadcast_to(a, s)))
      shape = new
    elif kind == "pad":
      pads = tuple((draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in shape)
      ops.append(("pad", pads, lambda a, p=pads: np.pad(a, p)))
      shape = tuple(d + b + e for d, (b, e) in zip(shape, pads))
    elif kind == "shrink":
      arg = []
      for d in shape:
        b = draw(st.integers(0, d - 1))
        arg.append((b, draw(st.integers(b + 1, d))))
      ops.append(("shrink", tuple(arg), lambda a, r=tuple(arg): a[tuple(slice(b, e) for b, e in r)]))
      shape = tuple(e - b for b, e in arg)
    else:
      axes = tuple(i for i in range(len(shape)) if draw(st.booleans())) or (0,)
      ops.append(("flip", axes, lambda a, x=axes: np.flip(a, x)))
  return start, ops

def apply(t: Tensor, name: str, arg) -> Tensor:
  if name == "reshape": return t.reshape(arg)
  if name == "permute": return t.permute(arg)
  if name == "expand": return t.expand(arg)
  if name == "pad": return t.pad(arg)
  if name == "shrink": return t.shrink(arg)
  return t.flip(arg)

@settings(max_examples=60, deadline=None)
@given(chains(), st.sampled_from(["value", "sum", "max0"]))
def test_movement_chains_match_numpy(chain, reduce):
  # the values are 1.. so a padded 0 can't pass for data
  shape, ops = chain
  a = np.arange(1, 1 + int(np.prod(shape)), dtype=np.float32).reshape(shape)
  t, want = Tensor(a, device="PYTHON"), a
  for name, arg, fn in ops:
    t, want = apply(t, name, arg), fn(want)
  # the chain read directly, summed (a reduction's RANGEs through it), and reduced over its first axis
  if reduce == "sum": t, want = t.sum(), want.sum()
  elif reduce == "max0": t, want = t.max(0), want.max(0)
  np.testing.assert_array_equal(t.numpy(), np.asarray(want))

def test_a_reduction_over_size_1_axes_loops_nowhere():
  a = np.arange(6, dtype=np.float32).reshape(1, 6, 1)
  t = Tensor(a, device="PYTHON").sum((0, 2))
  np.testing.assert_array_equal(t.numpy(), a.sum((0, 2)))

def test_gather_reads_rows_and_zero_outside():
  x = np.arange(12, dtype=np.float32).reshape(4, 3) + 1
  idx = np.array([[3, 0, 2], [1, 1, 0]])
  np.testing.assert_array_equal(Tensor(x, device="PYTHON").gather(0, Tensor(idx, device="PYTHON")).numpy(), np.take_along_axis(x, idx, 0))

@pytest.mark.parametrize("k", [1, 4, 12])
def test_a_reshape_with_a_variable_size(k):
  # on the CPU: the PYTHON interpreter can't yet run a loop whose end is an expression of a Variable (n*2)
  n = Variable("n", 1, 12).bind(k)
  x = np.arange(60, dtype=np.float32).reshape(12, 5)
  np.testing.assert_array_equal(Tensor(x)[:n].reshape(-1).numpy(), x[:k].reshape(-1))
  np.testing.assert_array_equal((Tensor.ones(n, 4).contiguous().reshape(2, n * 2) * 3).numpy(), np.full((2, 2 * k), 3.0, np.float32))

def test_an_empty_reshape_is_never_valid():
  r = Tensor.empty(0, 3).reshape(3, 0).uop
  ctx = CodegenContext()
  i, j = (UOp(Ops.RANGE, dtypes.int32, (UOp.const(dtypes.int32, 3),), k) for k in range(2))
  got = rangeify.rewrite(UOp(Ops.AT, dtypes.float32, (r, UOp.const(dtypes.bool, True), i, j)), ctx)
  zero = UOp.const(dtypes.int32, 0)
  assert got is UOp(Ops.AT, dtypes.float32, (r.src[0], UOp.const(dtypes.bool, False), zero, zero))

# ---- every rule fires ----

def _kernel_asts(t: Tensor) -> list[UOp]:
  """The kernel ASTs that compute t, as the engine lowers them (its numbers and bound Variables as parameters): scheduled,
  not run, so rangeify is driven directly, whatever the program caches hold."""
  t.kernelize()
  root = t.uop.src[0] if t.uop.op is Ops.RESHAPE else t.uop
  return [graph_rewrite(k.arg.ast, parametrize, Params()) for k in schedule_of([root]) if k.arg.ast.op is Ops.SINK]

def _workload() -> list[Tensor]:
  """Graphs that between them reach every rule of rangeify.rules."""
  x = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
  t = Tensor(x, device="PYTHON")
  n = Variable("n", 1, 3).bind(2)
  return [t + 1, Tensor.full((2, 2), 3.0, device="PYTHON") * 2, t.reshape(4, 3) + 0, t.permute(1, 0) + 0, t.reshape(3, 1, 4).expand(3, 2, 4) + 0,
          t.pad(((1, 0), (0, 2))) + 0, t.pad(((0, 2), (0, 0))).shrink(((0, 3), (0, 4))) + 0, t.shrink(((1, 3), (0, 2))) + 0, t.flip(1) + 0,
          t.sum(1), t.reshape(1, 12).sum(0), t.softmax(1), t.gather(0, Tensor([[2, 0, 1, 0]], device="PYTHON")),
          t[:n].reshape(-1) + 0, t[:n] * 2]

def test_every_rule_fires():
  hits = {r.id: r.hits for r in rangeify.rules}
  with Context(RULESTATS=1):
    for t in _workload():
      for ast in _kernel_asts(t): codegen_rangeify(ast, CodegenContext())
    # no kernel reads an empty tensor or an autograd marker (the scheduler drops them): rangeify meets them in the fusion walk
    x = Tensor.empty(3, 4).uop
    i, j = (UOp(Ops.RANGE, dtypes.int32, (UOp.const(dtypes.int32, 3),), k) for k in range(2))
    graph_rewrite(UOp(Ops.AT, dtypes.float32, (Tensor.empty(0, 3).reshape(3, 0).uop, UOp.const(dtypes.bool, True), i, j)), rangeify, CodegenContext())
    graph_rewrite(UOp(Ops.AT, dtypes.float32, (UOp(Ops.DETACH, x.dtype, (x,)), UOp.const(dtypes.bool, True), i, j)), rangeify, CodegenContext())
    # the fusion walk (tensor/engine/boundaries.py) rewrites one read at a time, so only ctx.reduces makes a reduction met
    # twice at one index one REDUCE (one graph_rewrite memoizes it itself)
    red = next(u for u in Tensor.empty(3, 4).sum(1).uop.toposort() if u.op is Ops.REDUCE_AXIS)
    a, ctx = UOp(Ops.AT, dtypes.float32, (red, UOp.const(dtypes.bool, True), i, UOp.const(dtypes.int32, 0))), CodegenContext()
    assert graph_rewrite(a, rangeify, ctx) is graph_rewrite(a, rangeify, ctx)
  cold = [f"{r.origin}: {r.text}" for r in rangeify.rules if r.hits == hits[r.id]]
  assert not cold, "\n".join(cold)
