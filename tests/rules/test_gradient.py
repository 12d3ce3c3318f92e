"""rules/gradient.rules: every rule fires on an example node and gives one entry per source of the source's shape and
dtype (None where the op has no derivative); every differentiable op's gradient agrees with central finite differences
in float64 on the PYTHON device (directional: <grad, v> against (f(x+hv) - f(x-hv)) / 2h for random directions v), also
for second derivatives; and the points where a derivative needs a convention (ties, zeros) follow torch's.
"""
from __future__ import annotations
import math
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from runtime import Ops, UOp, dtypes
from runtime.ops import GroupOp
from runtime.uop import uop
from rules.gradient import gradient as gradient_rules
from rules.gradient_helpers import full_like
from tensor import Tensor
from tensor.autograd import GradientError

DEV, F64 = "PYTHON", dtypes.float64

def T(a, dtype=F64, device=DEV, **kw) -> Tensor: return Tensor(np.asarray(a), device=device, dtype=dtype, **kw)

def raw(op: Ops, *srcs: Tensor, dtype=None, arg=None) -> Tensor:
  """A tensor-graph node Tensor has no method for (MULACC, a float MOD, ...)."""
  return Tensor(uop(op, dtype or srcs[0].dtype, tuple(s.uop for s in srcs), arg))

# ---- every rule: an example node, and the shape of what it gives ----

def examples() -> list[tuple[Tensor, bool]]:
  """(node, whether some source gets a gradient) covering every rule of the rule set."""
  x, y = T(np.full((2, 3), 1.5), dtypes.float32), T(np.full((2, 3), 0.5), dtypes.float32)
  i, j = T(np.full((2, 3), 6), dtypes.int32), T(np.full((2, 3), 2), dtypes.int32)
  u = T(np.full((2, 3), 6), dtypes.uint64)
  out = [x + y, x - y, x * y, -x, x / y, x / (x + 1), raw(Ops.MULACC, x, y, x), x.maximum(y), raw(Ops.MOD, x, y), raw(Ops.IDIV, x, y),
         raw(Ops.TRUNC, x), x.exp2(), x.log2(), x.sin(), x.sqrt(), x.reciprocal(), x ** y, (x < y).where(x, y),
         x.cast(dtypes.float64), raw(Ops.CONTIGUOUS_BACKWARD, x), x.contiguous(), x.to("CPU"),
         Tensor.empty(2, 3, device=DEV).assign(x * 2), x.reshape(3, 2), x.reshape(2, 1, 3).expand(2, 4, 3), raw(Ops.EXPAND, x, arg=(2, 3)),
         x.permute(1, 0), x.pad(((1, 0), (0, 2))), x.shrink(((0, 1), (1, 3))), x.flip(0), x.sum(1), x.max(0), x.prod(1),
         x[T([1, 0, 1], dtypes.int32)], x.reshape(1, 2, 3).conv1d(y.reshape(3, 2, 1)), x.to("CPU").shard(("CPU", "CPU:1"), axis=0)]
  none = [x.cast(dtypes.int32), x.bitcast(dtypes.int32), x.detach(), x < y, x.ne(y), x.eq(y), i & j, i | j, i ^ j, i << j, i >> j,
          raw(Ops.IDIV, i, j), raw(Ops.MOD, i, j), raw(Ops.THREEFRY, u, u)]
  return [(t, True) for t in out] + [(t, False) for t in none]

def reduction(u: UOp) -> UOp:
  """sum/max/prod without keepdim reshape the REDUCE_AXIS away: the example is the REDUCE_AXIS."""
  return u.src[0] if u.op is Ops.RESHAPE and u.src[0].op is Ops.REDUCE_AXIS else u

def test_every_rule_fires_and_gives_one_entry_per_source():
  fired = set()
  for t, differentiable in examples():
    node = reduction(t.uop)
    ctx = full_like(node, 1)
    rule, entries = gradient_rules.table[node.op](node, ctx)
    fired.add(rule)
    assert len(entries) == len(node.src), rule.text
    for s, d in zip(node.src, entries):
      if d is None: continue
      assert (d.shape, d.dtype) == (s.shape, s.dtype), f"{rule.text}: {d.dtype} {d.shape} for a source of {s.dtype} {s.shape}"
    assert any(d is not None for d in entries) == differentiable, rule.text
  missing = [f"{r.line}: {r.text}" for r in gradient_rules.rules if r not in fired]
  assert not missing, "rules no example fires:\n" + "\n".join(missing)

def test_dispatch_agrees_with_each_rule_alone():
  for t, _ in examples():
    node = reduction(t.uop)
    ctx = full_like(node, 1)
    rule, entries = gradient_rules.table[node.op](node, ctx)
    assert rule.fn(node, ctx) == entries, rule.text

def test_every_op_of_the_tensor_graph_has_a_rule():
  ops = GroupOp.ALU | GroupOp.Movement | {Ops.CAST, Ops.BITCAST, Ops.CONTIGUOUS, Ops.CONTIGUOUS_BACKWARD, Ops.DETACH, Ops.COPY, Ops.ASSIGN,
                                         Ops.REDUCE_AXIS}
  assert sorted(op.name for op in ops if gradient_rules.table[op] is None) == []

def test_an_op_without_a_rule_is_a_clear_error():
  # a kernelized tensor is ASSIGN(BUFFER, KERNEL): no rule differentiates the kernel behind it
  x = T([1.0, 2.0]).realize()
  y = (x * 2).kernelize()
  with pytest.raises(GradientError, match="no gradient rule for Ops.ASSIGN .* kernelized or realized in between"):
    y.sum().gradient(x)

# ---- finite differences ----

def directional_check(f, inputs: list[np.ndarray], h: float = 1e-6, tol: float = 1e-6, directions: int = 2, seed: int = 0) -> None:
  """f maps Tensors to a Tensor; its gradient, contracted with random weights on the output and random directions on each
  input, must match central differences of the same contraction."""
  rng = np.random.default_rng(seed)
  ts = [T(x) for x in inputs]
  out = f(*ts)
  w = rng.standard_normal(out.shape)
  grads = [g.numpy() for g in (out * T(w)).sum().gradient(*ts)]
  def value(args: list[np.ndarray]) -> float: return float((f(*[T(a) for a in args]).numpy() * w).sum())
  for i, x in enumerate(inputs):
    assert grads[i].shape == x.shape and grads[i].dtype == np.float64
    for _ in range(directions):
      v = rng.standard_normal(x.shape)
      plus, minus = list(inputs), list(inputs)
      plus[i], minus[i] = x + h * v, x - h * v
      fd = (value(plus) - value(minus)) / (2 * h)
      assert float((grads[i] * v).sum()) == pytest.approx(fd, rel=tol, abs=tol), f"input {i}"

def normal(*shape, seed=1) -> np.ndarray: return np.random.default_rng(seed).standard_normal(shape)
def positive(*shape, seed=2) -> np.ndarray: return np.random.default_rng(seed).uniform(0.5, 2.0, shape)
def apart(*shape, seed=3, offset=0.05) -> np.ndarray:
  """Distinct values 0.37 apart, shuffled: no ties for max, no steps of trunc near them (offset 0.2 gives another set, so
  two such inputs never tie either)."""
  n = math.prod(shape)
  return np.random.default_rng(seed).permutation(np.arange(n) * 0.37 - n * 0.15 + offset).reshape(shape)

# (name, f, inputs): each rule's op on its own and the Tensor methods built from them
CASES = [
  ("add", lambda a, b: a + b, [normal(3, 4), normal(4, seed=5)]),
  ("sub", lambda a, b: a - b, [normal(3, 4), normal(3, 1, seed=5)]),
  ("mul", lambda a, b: a * b, [normal(3, 4), normal(3, 4, seed=5)]),
  ("neg", lambda a: -a, [normal(3, 4)]),
  ("div", lambda a, b: a / b, [normal(3, 4), positive(3, 4)]),
  ("mulacc", lambda a, b, c: raw(Ops.MULACC, a, b, c), [normal(3, 4), normal(3, 4, seed=5), normal(3, 4, seed=6)]),
  ("maximum", lambda a, b: a.maximum(b), [apart(3, 4), apart(3, 4, seed=5, offset=0.2)]),
  ("minimum", lambda a, b: a.minimum(b), [apart(3, 4), apart(3, 4, seed=5, offset=0.2)]),
  ("fmod", lambda a, b: raw(Ops.MOD, a, b), [apart(3, 4) * 3, positive(3, 4) + 0.05]),
  ("trunc", lambda a: raw(Ops.TRUNC, a) + a * 0.5, [apart(3, 4)]),
  ("floor ceil round", lambda a: a.floor() + a.ceil() * 2 + a.round() * 3 + a, [apart(3, 4)]),
  ("exp2", lambda a: a.exp2(), [normal(3, 4)]),
  ("exp", lambda a: a.exp(), [normal(3, 4)]),
  ("log2", lambda a: a.log2(), [positive(3, 4)]),
  ("log", lambda a: a.log(), [positive(3, 4)]),
  ("sin", lambda a: a.sin(), [normal(3, 4) * 3]),
  ("cos tan", lambda a: a.cos() + a.tan(), [normal(3, 4) * 0.5]),
  ("sqrt rsqrt", lambda a: a.sqrt() + a.rsqrt(), [positive(3, 4)]),
  ("reciprocal", lambda a: a.reciprocal(), [positive(3, 4)]),
  ("pow", lambda a, b: a ** b, [positive(3, 4), normal(3, 4, seed=5)]),
  ("pow by a float", lambda a: a ** 2.5, [positive(3, 4)]),
  ("pow of a float", lambda a: 2.5 ** a, [normal(3, 4)]),
  ("square-and-multiply pow", lambda a: a ** 3 + a ** 2, [normal(3, 4)]),
  ("where", lambda a, b: (a > b).where(a * 2, b), [apart(3, 4), apart(3, 4, seed=5, offset=0.2)]),
  ("relu abs sign clip", lambda a: a.relu() + a.abs() + a.sign() + a.clip(-0.5, 0.7), [apart(3, 4)]),
  ("sigmoid tanh gelu silu", lambda a: a.sigmoid() + a.tanh() + a.gelu() + a.silu(), [normal(3, 4)]),
  # float32 rounds: differences need a wider step
  ("cast between floats", lambda a: a.cast(dtypes.float32).cast(dtypes.float64) * 3, [normal(3, 4)], dict(h=1e-2, tol=1e-4)),
  ("contiguous", lambda a: (a * 2).contiguous() * a, [normal(3, 4)]),
  ("contiguous_backward", lambda a: raw(Ops.CONTIGUOUS_BACKWARD, a * 2) * a, [normal(3, 4)]),
  ("copy", lambda a: (a.to("CPU") * 2).to(DEV) * a, [normal(3, 4)]),
  ("assign", lambda a: Tensor.empty(3, 4, device=DEV, dtype=F64).assign(a * 2) * a, [normal(3, 4)]),
  ("reshape", lambda a: a.reshape(2, 6) * T(np.arange(12.0).reshape(2, 6)), [normal(3, 4)]),
  ("expand", lambda a: a.reshape(3, 1, 4).expand(3, 5, 4), [normal(3, 4)]),
  ("permute", lambda a: a.permute(2, 0, 1), [normal(2, 3, 4)]),
  ("pad", lambda a: a.pad(((1, 2), (0, 1))), [normal(3, 4)]),
  ("pad with a value", lambda a: a.pad(((1, 2), (0, 1)), value=3.0) * 2, [normal(3, 4)]),
  ("shrink", lambda a: a[1:3, 1:], [normal(3, 4)]),
  ("flip", lambda a: a.flip(1) * T(np.arange(12.0).reshape(3, 4)), [normal(3, 4)]),
  ("slices with steps", lambda a: a[::-2, 1::2], [normal(5, 6)]),
  ("sum", lambda a: a.sum(1), [normal(3, 4)]),
  ("max", lambda a: a.max(0), [apart(3, 4)]),
  ("min", lambda a: a.min(1), [apart(3, 4)]),
  ("prod", lambda a: a.prod(1), [normal(3, 4)]),
  ("mean var std", lambda a: a.mean(0) + a.var(0) + a.std(0), [normal(3, 4)]),
  ("softmax log_softmax logsumexp", lambda a: a.softmax(1) + a.log_softmax(1) + a.logsumexp(1).reshape(3, 1), [normal(3, 4)]),
  ("matmul", lambda a, b: a @ b, [normal(3, 4), normal(4, 5, seed=5)]),
  ("batched matmul", lambda a, b: a @ b, [normal(2, 3, 4), normal(4, 2, seed=5)]),
  ("tensor index", lambda a: a[Tensor([2, 0, 2, 1], device=DEV)], [normal(3, 4)]),
]

@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_gradient_matches_finite_differences(case):
  _, f, inputs, *options = case
  directional_check(f, inputs, **(options[0] if options else {}))

@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3), st.data())
def test_broadcast_and_reduce_over_any_axes(shape, data):
  # broadcasting one operand over any subset of the other's axes, then reducing any axes
  small = [1 if data.draw(st.booleans()) else d for d in shape]
  axes = tuple(sorted(set(data.draw(st.lists(st.integers(0, len(shape) - 1), max_size=len(shape))))))
  op, keepdim = data.draw(st.sampled_from(["sum", "max", "prod"])), data.draw(st.booleans())
  def f(a, b): return getattr(a * b + b, op)(axes or None, keepdim=keepdim)
  seed = data.draw(st.integers(0, 100))
  directional_check(f, [apart(*shape, seed=seed), positive(*small, seed=seed + 1)], directions=1, seed=seed)

# ---- second derivatives: the gradient graph is differentiated by the same rules ----

SECOND = [
  ("mul", lambda a: a * a * a, [normal(3, 4)]),
  ("div", lambda a: 1 / (a + 3), [positive(3, 4)]),
  ("exp log", lambda a: a.exp() + (a + 3).log(), [normal(3, 4)]),
  ("sin sqrt", lambda a: a.sin() + (a * a + 1).sqrt(), [normal(3, 4)]),
  ("pow", lambda a: (a + 3) ** 2.5, [normal(3, 4)]),
  ("tanh", lambda a: a.tanh(), [normal(3, 4)]),
  ("softmax", lambda a: a.softmax(1), [normal(3, 4)]),
  ("max", lambda a: a.max(1) * a.sum(1), [apart(3, 4)]),
  ("matmul", lambda a: (a @ a.T).relu() @ a, [normal(3, 4)]),
]

@pytest.mark.parametrize("name,f,inputs", SECOND, ids=[c[0] for c in SECOND])
def test_second_derivative_matches_finite_differences(name, f, inputs):
  w = normal(*f(T(inputs[0])).shape, seed=9)
  def first(a: Tensor) -> Tensor:
    g, = (f(a) * T(w)).sum().gradient(a)
    return g
  directional_check(first, inputs, h=1e-5, tol=1e-5)

def test_second_derivatives_exactly():
  # realizing a gradient replaces its graph by its values, so the next order is taken first
  x = T([1.0, 2.0, -3.0])
  g, = (x * x * x).sum().gradient(x)
  gg, = g.sum().gradient(x)
  ggg, = gg.sum().gradient(x)
  assert (g.tolist(), gg.tolist(), ggg.tolist()) == ([3.0, 12.0, 27.0], [6.0, 12.0, -18.0], [6.0, 6.0, 6.0])

# ---- conventions at points without a derivative, as torch defines them ----

def grads(f, *values) -> list[list]:
  ts = [T(v) for v in values]
  return [g.tolist() for g in f(*ts).sum().gradient(*ts)]

def test_ties_and_zeros():
  # maximum: a tie shares the gradient half and half (torch.maximum); max over an axis: equally among the maxima (torch.amax)
  assert grads(lambda a, b: a.maximum(b), [1.0, 2.0, 3.0], [3.0, 2.0, 1.0]) == [[0.0, 0.5, 1.0], [1.0, 0.5, 0.0]]
  assert grads(lambda a: a.max(), [1.0, 3.0, 3.0, 3.0, 2.0]) == [[0.0, 1 / 3, 1 / 3, 1 / 3, 0.0]]
  # relu at 0: 0, as torch (x > 0 picks the constant branch)
  assert grads(lambda a: a.relu(), [-1.0, 0.0, 2.0]) == [[0.0, 0.0, 1.0]]
  # prod: the product of the others, also with zeros (dividing the product by the element is not)
  assert grads(lambda a: a.prod(), [2.0, 3.0, 4.0]) == [[12.0, 8.0, 6.0]]
  assert grads(lambda a: a.prod(), [2.0, 0.0, 4.0]) == [[0.0, 8.0, 0.0]]
  assert grads(lambda a: a.prod(), [0.0, 3.0, 0.0]) == [[0.0, 0.0, 0.0]]
  assert grads(lambda a: a.prod(1), [[0.0, 2.0], [3.0, 5.0]]) == [[[2.0, 0.0], [5.0, 3.0]]]
  # pow at 0: d/db of b^0 is 0 (not 0 * 0^-1), d/de of 0^e is 0 for e >= 0 and -inf for e < 0
  assert grads(lambda b, e: b ** e, [0.0, 0.0, 0.0, 2.0], [0.0, 2.0, -1.0, 3.0]) == [[0.0, 0.0, -math.inf, 12.0],
                                                                                     [0.0, 0.0, -math.inf, 8 * math.log(2)]]
  # sqrt at 0 is inf, as torch
  assert grads(lambda a: a.sqrt(), [0.0, 4.0]) == [[math.inf, 0.25]]

def test_ops_without_a_derivative_give_no_gradient():
  x = T([0.5, 1.5, 2.5])
  for f in [lambda a: (a > 1).cast(F64), lambda a: a.cast(dtypes.int32).cast(F64), lambda a: a.detach() * 2,
            lambda a: a.bitcast(dtypes.int64).cast(F64), lambda a: a.eq(1.5).where(1.0, 2.0)]:
    g, = f(x).sum().gradient(x)  # x is in the graph, under ops with no derivative: zeros (torch's and tinygrad's rule)
    assert g.tolist() == [0.0, 0.0, 0.0]
  # a step function's derivative is 0 where it is defined: floor, trunc and round pass zeros on
  g, = (x.floor() + x.round()).sum().gradient(x)
  assert g.tolist() == [0.0, 0.0, 0.0]

def test_ratio_with_its_own_numerator_and_exp_at_overflow():
  """x/(x+c) gives its whole derivative c/(x+c)^2 to the numerator: finite differences agree, and at x = inf it is 0."""
  x = T([0.5, 3.0, -0.25])
  got = (x / (x + 2)).sum().gradient(x)[0].numpy()
  np.testing.assert_allclose(got, 2 / (np.array([0.5, 3.0, -0.25]) + 2) ** 2, rtol=1e-12)
  e = T([800.0])                                        # exp(800) is inf in float64: a zero upstream gradient stays 0
  assert (e.exp() / (1 + e.exp())).sum().gradient(e)[0].item() == 0.0
