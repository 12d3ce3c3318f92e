"""numpy references for the functional ops (tensor/functional/), written from the ops' definitions (loops over kernel
taps and windows, torch's documented formulas) rather than from our implementation, and the shared checking helpers of
tests/tensor/test_functional_*.py. Every check compares with these; with torch installed, also with torch.
"""
from __future__ import annotations
import itertools, math, os
import numpy as np
from hypothesis import HealthCheck, given, settings
from tensor import Tensor

try: import torch
except ImportError: torch = None

DEVICES = ["CPU", "PYTHON"]
# CPU examples compile kernels (~0.1 s each, cached on disk); the PYTHON device interprets scalar by scalar, so its
# tensors stay tiny. EXAMPLES_SCALE=20 runs twenty times as many (a fuzzing session, not CI).
EXAMPLES = {d: n * int(os.environ.get("EXAMPLES_SCALE", "1")) for d, n in {"CPU": 8, "PYTHON": 4}.items()}

def run(device: str, fn, *strategies, examples: int | None = None) -> None:
  """Run hypothesis test `fn` with the device's example budget (one test function serves both devices)."""
  n = examples if examples is not None else EXAMPLES[device]
  settings(max_examples=n, deadline=None, suppress_health_check=list(HealthCheck), database=None)(given(*strategies)(fn))()

def close(out, ref, rtol: float = 1e-4, atol: float = 1e-5, what: str = "") -> None:
  got = out.numpy() if isinstance(out, Tensor) else np.asarray(out)
  ref = ref.detach().numpy() if torch is not None and isinstance(ref, torch.Tensor) else np.asarray(ref)
  assert got.shape == ref.shape, f"{what}: shape {got.shape}, expected {ref.shape}"
  np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=rtol, atol=atol, err_msg=what, equal_nan=True)

def T(a: np.ndarray):
  """numpy -> torch (int arrays as int64, as torch wants class indices)."""
  a = np.asarray(a)
  return torch.tensor(a.astype(np.int64) if a.dtype.kind in "iu" else a)

def rand(rng: np.random.Generator, *shape, lo: float = -2, hi: float = 2) -> np.ndarray:
  return rng.uniform(lo, hi, shape).astype(np.float32)

# ---- conv ----

def conv(x, w, bias=None, stride=1, dilation=1, pads=0, groups=1) -> np.ndarray:
  """x (N, C, *S) * w (O, C/groups, *K): the sum over kernel taps of shifted, strided slices of the padded input."""
  nd = w.ndim - 2
  st, dl = _tup(stride, nd), _tup(dilation, nd)
  pads = [(p, p) for p in _tup(pads, nd)] if not isinstance(pads, list) else pads
  x = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + pads)
  out = [(x.shape[2 + i] - dl[i] * (w.shape[2 + i] - 1) - 1) // st[i] + 1 for i in range(nd)]
  cg, og = w.shape[1], w.shape[0] // groups
  res = np.zeros((x.shape[0], w.shape[0], *out))
  for g in range(groups):
    for t in itertools.product(*[range(k) for k in w.shape[2:]]):
      sl = tuple(slice(t[i] * dl[i], t[i] * dl[i] + (out[i] - 1) * st[i] + 1, st[i]) for i in range(nd))
      xs = x[(slice(None), slice(g * cg, (g + 1) * cg)) + sl]                                  # (N, cg, *out)
      res[:, g * og:(g + 1) * og] += np.einsum("nc...,oc->no...", xs, w[(slice(g * og, (g + 1) * og), slice(None)) + t])
  return res if bias is None else res + bias.reshape(1, -1, *[1] * nd)

def conv_transpose(x, w, bias=None, stride=1, dilation=1, padding=0, output_padding=0, groups=1) -> np.ndarray:
  """Each input element scattered through the kernel: out[i*s + t*d - p] += x[i] * w[t], per group."""
  nd = w.ndim - 2
  st, dl, pd, op = _tup(stride, nd), _tup(dilation, nd), _tup(padding, nd), _tup(output_padding, nd)
  spatial, kernel = x.shape[2:], w.shape[2:]
  full = [(i - 1) * s + d * (k - 1) + 1 + o for i, s, d, k, o in zip(spatial, st, dl, kernel, op)]
  cg, og = x.shape[1] // groups, w.shape[1]
  res = np.zeros((x.shape[0], og * groups, *full))
  for g in range(groups):
    xs = x[:, g * cg:(g + 1) * cg].astype(np.float64)
    for t in itertools.product(*[range(k) for k in kernel]):
      sl = tuple(slice(t[i] * dl[i], t[i] * dl[i] + (spatial[i] - 1) * st[i] + 1, st[i]) for i in range(nd))
      res[(slice(None), slice(g * og, (g + 1) * og)) + sl] += np.einsum("nc...,co->no...", xs, w[(slice(g * cg, (g + 1) * cg), slice(None)) + t])
  res = res[(slice(None), slice(None)) + tuple(slice(p, f - p) for p, f in zip(pd, full))]
  return res if bias is None else res + bias.reshape(1, -1, *[1] * nd)

def _tup(v, n: int) -> tuple[int, ...]: return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n

# ---- pools ----

def pool_out(i: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
  """torch's pooling output size (its docs' formula, with the rule that the last window starts inside the input)."""
  span = i + 2 * p - d * (k - 1) - 1
  o = (math.ceil(span / s) if ceil_mode else span // s) + 1
  return o - 1 if ceil_mode and (o - 1) * s >= i + p else o

def max_pool(x, kernel, stride, padding, dilation, ceil_mode) -> tuple[np.ndarray, np.ndarray]:
  """Values and flat input indices of the first maximum of each window (windows visited position by position). A
  window over padding only (dilation can make one) is -inf at index prod(spatial), as documented in pool.py."""
  nd = len(kernel)
  spatial = x.shape[-nd:]
  outs = [pool_out(i, k, s, p, d, ceil_mode) for i, k, s, p, d in zip(spatial, kernel, stride, padding, dilation)]
  vals = np.zeros(x.shape[:-nd] + tuple(outs), x.dtype)
  idx = np.zeros(x.shape[:-nd] + tuple(outs), np.int64)
  for o in itertools.product(*[range(v) for v in outs]):
    best = np.full(x.shape[:-nd], -np.inf)
    arg = np.full(x.shape[:-nd], math.prod(spatial), np.int64)
    seen = False
    for t in itertools.product(*[range(k) for k in kernel]):
      pos = [o[j] * stride[j] + t[j] * dilation[j] - padding[j] for j in range(nd)]
      if any(not 0 <= q < n for q, n in zip(pos, spatial)): continue
      v = x[(Ellipsis, *pos)]
      better, seen = (v > best) | (not seen), True
      best, arg = np.where(better, v, best), np.where(better, np.ravel_multi_index(pos, spatial), arg)
    vals[(Ellipsis, *o)], idx[(Ellipsis, *o)] = best, arg
  return vals, idx

def avg_pool(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override=None) -> np.ndarray:
  """torch's CPU avg_pool: the divisor is the window clipped to the padded input (count_include_pad) or to the input."""
  nd = len(kernel)
  spatial = x.shape[-nd:]
  outs = [pool_out(i, k, s, p, 1, ceil_mode) for i, k, s, p in zip(spatial, kernel, stride, padding)]
  res = np.zeros(x.shape[:-nd] + tuple(outs))
  for o in itertools.product(*[range(v) for v in outs]):
    lo = [o[j] * stride[j] - padding[j] for j in range(nd)]
    hi = [min(lo[j] + kernel[j], spatial[j] + padding[j]) for j in range(nd)]
    size_pad = math.prod(h - l_ for l_, h in zip(lo, hi))
    lo, hi = [max(v, 0) for v in lo], [min(h, n) for h, n in zip(hi, spatial)]
    total = x[(Ellipsis, *[slice(a, b) for a, b in zip(lo, hi)])].astype(np.float64).sum(axis=tuple(range(-nd, 0)))
    div = divisor_override or (size_pad if count_include_pad else math.prod(b - a for a, b in zip(lo, hi)))
    res[(Ellipsis, *o)] = total / div
  return res

def max_unpool(x, idx, out_size) -> np.ndarray:
  nd = len(out_size)
  lead = x.shape[:-nd]
  res = np.zeros(lead + (math.prod(out_size),), x.dtype)
  np.put_along_axis(res, idx.reshape(lead + (-1,)), x.reshape(lead + (-1,)), axis=-1)
  return res.reshape(lead + tuple(out_size))

# ---- interpolate ----

def interpolate(x, size, mode, align_corners=False, scale_factor=None) -> np.ndarray:
  """Separable resizing of the last len(size) axes with torch's documented source-index formulas (float32); with a
  scale_factor, positions map by 1/scale_factor."""
  f32 = np.float32
  out = x.astype(np.float64)
  for j in range(1, len(size) + 1):
    n_in, n_out = out.shape[-j], size[-j]
    o = np.arange(n_out, dtype=f32)
    scale = f32(1.0 / scale_factor) if scale_factor else f32(n_in) / f32(n_out)
    moved = np.moveaxis(out, -j, -1)
    if mode == "nearest" and n_out in (n_in, 2 * n_in): res = moved[..., np.arange(n_out) // (n_out // n_in)]  # torch's exact cases
    elif mode == "nearest": res = moved[..., np.minimum(np.floor(o * scale).astype(np.int64), n_in - 1)]
    elif mode == "nearest-exact": res = moved[..., np.minimum(np.floor((o + f32(0.5)) * scale).astype(np.int64), n_in - 1)]
    else:
      src = o * (f32(n_in - 1) / f32(n_out - 1) if n_out > 1 else f32(0)) if align_corners else np.maximum((o + f32(0.5)) * scale - f32(0.5), 0)
      i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
      i1 = np.minimum(i0 + 1, n_in - 1)
      lam = (src - i0).astype(np.float64)
      res = moved[..., i0] * (1 - lam) + moved[..., i1] * lam
    out = np.moveaxis(res, -1, -j)
  return out

# ---- losses, attention, norms, activations ----

def log_softmax(x, axis):
  m = x.max(axis, keepdims=True)
  return x - m - np.log(np.exp(x - m).sum(axis, keepdims=True))

def nll(logp, y, weight=None, ignore_index=-100, reduction="mean"):
  """logp (N, C, *d), y (N, *d): -weight[y] * logp[y], the mean over the picked weights."""
  c = logp.shape[1]
  w = np.ones(c) if weight is None else weight.astype(np.float64)
  keep = (y != ignore_index) & (y >= 0) & (y < c)
  safe = np.where(keep, y, 0)
  picked = np.take_along_axis(logp, safe[:, None], 1)[:, 0]
  wy = np.where(keep, w[safe], 0)
  loss = -picked * wy
  with np.errstate(invalid="ignore"):  # every target ignored: the mean is 0/0 = nan, as torch's
    return loss if reduction == "none" else loss.sum() if reduction == "sum" else loss.sum() / wy.sum()

def cross_entropy(x, y, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
  """torch's definition: (1-eps) * nll + eps/C * the smoothing term, both over the same divisor for mean."""
  logp = log_softmax(x.astype(np.float64), 1)
  c = x.shape[1]
  w = np.ones(c) if weight is None else weight.astype(np.float64)
  if y.shape == x.shape:  # probabilities
    t = y * (1 - label_smoothing) + label_smoothing / c
    loss = -(logp * t * w.reshape(1, c, *[1] * (x.ndim - 2))).sum(1)
    return loss if reduction == "none" else loss.sum() if reduction == "sum" else loss.mean()
  keep = y != ignore_index
  smooth = -(logp * w.reshape(1, c, *[1] * (x.ndim - 2))).sum(1) * keep
  base = nll(logp, y, weight, ignore_index, "none")
  if reduction == "none": return (1 - label_smoothing) * base + label_smoothing / c * smooth
  if reduction == "sum": return (1 - label_smoothing) * base.sum() + label_smoothing / c * smooth.sum()
  div = np.where(keep & (y >= 0) & (y < c), w[np.where(keep, y, 0).clip(0, c - 1)], 0).sum()
  with np.errstate(invalid="ignore"): return ((1 - label_smoothing) * base.sum() + label_smoothing / c * smooth.sum()) / div

def sdpa(q, k, v, mask=None, is_causal=False, scale=None):
  s = q.astype(np.float64) @ np.swapaxes(k, -1, -2) * (scale if scale is not None else 1 / math.sqrt(q.shape[-1]))
  if is_causal: mask = np.tril(np.ones(s.shape[-2:], bool))
  if mask is not None: s = s + (np.where(mask, 0, -np.inf) if mask.dtype == bool else mask)
  e = np.exp(s - s.max(-1, keepdims=True))
  return (e / e.sum(-1, keepdims=True)) @ v

_erf = np.vectorize(math.erf)
ACTIVATIONS = {  # name: (our call, numpy reference in float64)
  "gelu": (lambda t: t.gelu(approximate="none"), lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2)))),
  "gelu_tanh": (lambda t: t.gelu(), lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
  "quick_gelu": (lambda t: t.quick_gelu(), lambda x: x / (1 + np.exp(-1.702 * x))),
  "softsign": (lambda t: t.softsign(), lambda x: x / (1 + np.abs(x))),
  "relu6": (lambda t: t.relu6(), lambda x: np.clip(x, 0, 6)),
  "hardtanh": (lambda t: t.hardtanh(-0.5, 2.0), lambda x: np.clip(x, -0.5, 2.0)),
  "hardsigmoid": (lambda t: t.hardsigmoid(), lambda x: np.clip(x + 3, 0, 6) / 6),
  "hardswish": (lambda t: t.hardswish(), lambda x: x * np.clip(x + 3, 0, 6) / 6),
  "elu": (lambda t: t.elu(1.5), lambda x: np.where(x > 0, x, 1.5 * np.expm1(x))),
  "celu": (lambda t: t.celu(0.5), lambda x: np.maximum(x, 0) + np.minimum(0, 0.5 * np.expm1(x / 0.5))),
  "selu": (lambda t: t.selu(), lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(x))),
  "softplus": (lambda t: t.softplus(), lambda x: np.where(x > 20, x, np.logaddexp(0, x))),
  "softplus_beta": (lambda t: t.softplus(beta=2.0, threshold=3.0), lambda x: np.where(2 * x > 3, x, np.logaddexp(0, 2 * x) / 2)),
  "logsigmoid": (lambda t: t.logsigmoid(), lambda x: -np.logaddexp(0, -x)),
  "mish": (lambda t: t.mish(), lambda x: x * np.tanh(np.where(x > 20, x, np.logaddexp(0, x)))),
}
TORCH_ACTIVATIONS = {  # the same through torch.nn.functional, where torch is installed
  "gelu": lambda F, x: F.gelu(x), "gelu_tanh": lambda F, x: F.gelu(x, approximate="tanh"), "quick_gelu": lambda F, x: x * torch.sigmoid(1.702 * x),
  "softsign": lambda F, x: F.softsign(x), "relu6": lambda F, x: F.relu6(x), "hardtanh": lambda F, x: F.hardtanh(x, -0.5, 2.0),
  "hardsigmoid": lambda F, x: F.hardsigmoid(x), "hardswish": lambda F, x: F.hardswish(x), "elu": lambda F, x: F.elu(x, 1.5),
  "celu": lambda F, x: F.celu(x, 0.5), "selu": lambda F, x: F.selu(x), "softplus": lambda F, x: F.softplus(x),
  "softplus_beta": lambda F, x: F.softplus(x, 2.0, 3.0), "logsigmoid": lambda F, x: F.logsigmoid(x), "mish": lambda F, x: F.mish(x),
}
