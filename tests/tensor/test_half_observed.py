"""float16 and bfloat16 values are rounded wherever they are observed (issue 22 item 5): kernels compute half ops in float32
and round once where the value leaves (rules/float_compute.rules), and a comparison is such a place. After sin, exp,
tanh, sigmoid, gelu, silu, log or sqrt in half, argmax returned n (out of range), `x == x.max()` was all False, the
gradient of max was NaN everywhere, and conv -> activation -> max_pool2d gave all-NaN weight gradients: the fused compare
read the unrounded float32 value against the rounded maximum.

Every unary op x {float16, bfloat16} x {argmax, ==, <, max backward, pool backward} (and float32, as a control, for the
ops of the report), on seeded random inputs in each op's domain. The oracle is numpy over the values our own op stored
(the rounding is what is tested, not libm), and torch's float64 derivative for the gradients.
"""
import inspect
import numpy as np
import pytest
from tensor import Tensor, dtypes

torch = pytest.importorskip("torch", reason="the gradient oracle is torch (pip install torch)")

# op -> the interval its inputs are drawn from (its domain, where its values are not all equal)
UNARY = {"neg": (-3, 3), "abs": (-3, 3), "sign": (-3, 3), "square": (-3, 3), "exp": (-3, 3), "exp2": (-3, 3), "expm1": (-3, 3),
         "log": (0.1, 9), "log2": (0.1, 9), "log10": (0.1, 9), "log1p": (-0.5, 9), "sqrt": (0.1, 9), "rsqrt": (0.1, 9),
         "reciprocal": (0.2, 5), "sin": (-3, 3), "cos": (-3, 3), "tan": (-1.2, 1.2), "atan": (-3, 3), "asin": (-0.9, 0.9),
         "acos": (-0.9, 0.9), "sinh": (-3, 3), "cosh": (-3, 3), "tanh": (-3, 3), "asinh": (-3, 3), "acosh": (1.1, 9), "atanh": (-0.9, 0.9),
         "erf": (-2, 2), "sigmoid": (-6, 6), "gelu": (-3, 3), "quick_gelu": (-3, 3), "silu": (-3, 3), "mish": (-3, 3), "softplus": (-3, 3),
         "logsigmoid": (-3, 3), "softsign": (-3, 3), "elu": (-3, 3), "celu": (-3, 3), "selu": (-3, 3), "relu": (-3, 3), "relu6": (-3, 9),
         "leaky_relu": (-3, 3), "hardswish": (-4, 4), "hardsigmoid": (-4, 4), "hardtanh": (-2, 2), "trunc": (-3, 3), "floor": (-3, 3),
         "ceil": (-3, 3), "round": (-3, 3)}
# torch's name where ours differs
TORCH = {"exp2": torch.exp2, "expm1": torch.expm1, "log1p": torch.log1p, "quick_gelu": lambda t: t * torch.sigmoid(1.702 * t),
         "mish": torch.nn.functional.mish, "softplus": torch.nn.functional.softplus, "logsigmoid": torch.nn.functional.logsigmoid,
         "softsign": torch.nn.functional.softsign, "elu": torch.nn.functional.elu, "celu": torch.nn.functional.celu, "selu": torch.selu,
         "relu6": torch.nn.functional.relu6, "leaky_relu": torch.nn.functional.leaky_relu, "hardswish": torch.nn.functional.hardswish,
         "hardsigmoid": torch.nn.functional.hardsigmoid, "hardtanh": torch.nn.functional.hardtanh,
         "gelu": lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
         "silu": torch.nn.functional.silu, "square": torch.square, "reciprocal": torch.reciprocal}
DTYPES = {"float16": dtypes.float16, "bfloat16": dtypes.bfloat16, "float32": dtypes.float32}
REPORTED = {"sin", "cos", "exp", "tanh", "sigmoid", "gelu", "silu", "log", "sqrt", "relu", "round", "abs"}
# what a gradient may differ by: the derivative is computed in the narrow type, from rounded values
GRAD_TOL = {"float16": 2e-2, "bfloat16": 1.5e-1, "float32": 1e-4}

def inputs(op: str, n: int, seed: int) -> np.ndarray:
  lo, hi = UNARY[op]
  rng = np.random.default_rng(seed + sum(map(ord, op)))
  return rng.uniform(lo, hi, n).astype(np.float32)

def stored(t: Tensor) -> np.ndarray:
  """What the tensor holds, as float64 (the values every observation must agree with)."""
  return t.float().numpy().astype(np.float64)

def derivative(op: str, x: np.ndarray) -> np.ndarray:
  """d op / dx at x, by torch in float64."""
  xt = torch.tensor(x.astype(np.float64), requires_grad=True)
  fn = TORCH.get(op) or getattr(torch, op)
  fn(xt).sum().backward()
  return xt.grad.numpy()

def narrow(x: np.ndarray, dt: str) -> Tensor: return Tensor(x).cast(DTYPES[dt])

# piecewise ops: near a kink the derivative depends on which side a rounded intermediate lands (x/6 + 0.5 of x = 3.002 is
# 1.0 in half: a tie with the clip's bound, whose gradient the tie splits); the gradient is compared away from them
KINKS = {"abs": (0,), "relu": (0,), "leaky_relu": (0,), "elu": (0,), "celu": (0,), "selu": (0,), "relu6": (0, 6), "hardtanh": (-1, 1),
         "hardsigmoid": (-3, 3), "hardswish": (-3, 3)}

def near_kink(op: str, x: np.ndarray) -> np.ndarray:
  return np.any([np.abs(x - k) < 0.02 * max(1, abs(k)) for k in KINKS.get(op, ())], axis=0) if op in KINKS else np.zeros(x.shape, bool)

def check_gradient(op: str, dt: str, g: np.ndarray, share: np.ndarray, x: np.ndarray, what: str) -> None:
  assert np.isfinite(g).all(), f"{op} {dt}: a nan or inf in the gradient of {what}: {g.ravel()[:8]}"
  want = share * derivative(op, x)
  keep = ~near_kink(op, x)
  np.testing.assert_allclose(g[keep], want[keep], rtol=GRAD_TOL[dt], atol=GRAD_TOL[dt] * max(1.0, np.abs(want).max()), err_msg=f"{op} {dt} {what}")

@pytest.mark.parametrize("op", sorted(UNARY))
def test_every_observation_sees_the_stored_values(op):
  """op(x) in each dtype, observed by argmax, ==, the gradient of max and the gradient of max_pool2d: all in one realize
  per dtype (few kernels: the cross product runs in the default suite)."""
  for dt in DTYPES if op in REPORTED else ("float16", "bfloat16"):  # float32, the control, for the ops of the report (kept lean)
    x = inputs(op, 37, 0)
    y = getattr(narrow(x, dt), op)()
    px = inputs(op, 64, 1).reshape(1, 1, 8, 8)
    a, b = narrow(x, dt).realize().requires_grad_(), narrow(px, dt).realize().requires_grad_()
    (getattr(a, op)().max().float() + getattr(b, op)().max_pool2d(2).float().sum()).backward()
    am, eq, lt = y.argmax(), (y == y.max()).sum(), (y < y.max()).sum()
    Tensor.realize(y, am, eq, lt, a.grad, b.grad)
    v = stored(y)
    assert am.item() == int(np.argmax(v)), f"{op} {dt}: argmax {am.item()} of {len(v)}, the stored maximum is at {int(np.argmax(v))}"
    assert eq.item() == int((v == v.max()).sum()) >= 1, f"{op} {dt}: x == x.max() holds {eq.item()} times"
    assert lt.item() == int((v < v.max()).sum()), f"{op} {dt}: x < x.max()"
    # max: ties share the gradient (as torch's max()); max_pool2d: each 2x2 window's maxima share its gradient
    check_gradient(op, dt, a.grad.float().numpy().astype(np.float64), (v == v.max()) / (v == v.max()).sum(), stored(a), "max")
    w = stored(getattr(Tensor(b.numpy()).cast(DTYPES[dt]), op)()).reshape(4, 2, 4, 2)
    at = w == w.max(axis=(1, 3), keepdims=True)
    check_gradient(op, dt, b.grad.float().numpy().astype(np.float64), (at / at.sum(axis=(1, 3), keepdims=True)).reshape(1, 1, 8, 8),
                   stored(b), "max_pool2d")

@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
@pytest.mark.parametrize("op", ["tanh", "sigmoid", "gelu", "silu"])
def test_conv_activation_max_pool_weight_gradients_are_finite(op, dt):
  """The report's case: conv -> tanh/sigmoid/gelu/silu -> max_pool2d gave all-NaN weight gradients in half."""
  rng = np.random.default_rng(5)
  x = Tensor(rng.standard_normal((2, 3, 8, 8)).astype(np.float32)).cast(DTYPES[dt])
  w = Tensor(rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.3).cast(DTYPES[dt]).realize().requires_grad_()
  getattr(x.conv2d(w, padding=1), op)().max_pool2d(2).float().sum().backward()
  g = w.grad.float().numpy()
  assert np.isfinite(g).all() and np.abs(g).sum() > 0, f"{op} {dt}: weight gradient {g.ravel()[:8]}"
  # against the same network in float32 from the same (rounded) inputs: ties may route differently, so a loose bound
  x32, w32 = Tensor(x.float().numpy()), Tensor(w.float().numpy()).requires_grad_()
  getattr(x32.conv2d(w32, padding=1), op)().max_pool2d(2).sum().backward()
  ref = w32.grad.numpy()
  assert np.abs(g - ref).max() <= 0.15 * np.abs(ref).max() + 1e-3, f"{op} {dt}: {np.abs(g - ref).max()} vs scale {np.abs(ref).max()}"

def test_the_ops_are_all_tested():
  """Every unary float op of the elementwise and activation mixins is in UNARY (a new one must be added here)."""
  from tensor.elementwise import ElementwiseMixin
  from tensor.functional.activation import ActivationMixin
  predicates = {"signbit", "isnan", "isfinite", "isinf"}
  ops = {name for cls in (ElementwiseMixin, ActivationMixin) for name, fn in vars(cls).items()
         if callable(fn) and not name.startswith("_") and name not in predicates and all(
           p.default is not inspect.Parameter.empty for p in list(inspect.signature(fn).parameters.values())[1:])}
  ops -= {"swish", "softmin", "normalize"}  # another name of silu; two ops over an axis
  assert ops - set(UNARY) == set(), f"unary ops missing from this test: {sorted(ops - set(UNARY))}"
