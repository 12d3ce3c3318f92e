"""Scans and sorting (tensor/scan.py) against numpy on CPU and PYTHON: cumsum, cumprod, cummax, cummin, logcumsumexp
(hypothesis shapes with 0-size and 1-element dims, several dtypes, nan and inf), at lengths crossing the optimizer's
reduction split (64) and the scan's block size (tensor/scan.BLOCK); sort, argsort and topk with ties (stable, as numpy's
kind="stable") and nan (last ascending, first descending, as torch).
"""
from __future__ import annotations
import math
import numpy as np
import pytest
from hypothesis import strategies as st
from tensor import Tensor, dtypes
from tensor.scan import BLOCK
from test_ops import DEVICES, arrays, check, int_values, run, shapes
from hypothesis.extra import numpy as hnp

def _acc(d):  # as sum and prod: bools and ints in int64 (torch), uint64 in itself
  return d if dtypes.is_float(d) or d is dtypes.uint64 else dtypes.int64

SCANS = {  # name: (method, numpy oracle, result dtype, value strategy)
  "cumsum": (Tensor.cumsum, lambda a, ax: np.cumsum(a, ax, dtype=dtypes.to_numpy(_acc(dtypes.from_numpy(a.dtype)))), _acc),
  "cumprod": (Tensor.cumprod, lambda a, ax: np.cumprod(a, ax, dtype=dtypes.to_numpy(_acc(dtypes.from_numpy(a.dtype)))), _acc),
  "cummax": (lambda t, ax: t.cummax(ax)[0], lambda a, ax: np.maximum.accumulate(a, ax), lambda d: d),
  "cummin": (lambda t, ax: t.cummin(ax)[0], lambda a, ax: np.minimum.accumulate(a, ax), lambda d: d),
  "logcumsumexp": (Tensor.logcumsumexp, lambda a, ax: np.logaddexp.accumulate(a.astype(np.float32) if a.dtype.kind != "f" else a, ax),
                   lambda d: d if dtypes.is_float(d) else dtypes.float32),
}
SCAN_DTYPES = [dtypes.int32, dtypes.float32, dtypes.bool, dtypes.int8, dtypes.uint8, dtypes.float16, dtypes.float64]

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(SCANS))
def test_scan(device, name):
  fn, np_fn, out = SCANS[name]
  def body(data, shape, d):
    if name in ("cumsum", "cumprod") and dtypes.is_float(d): vals = int_values(d, -3, 3)     # exact in every order
    elif name == "logcumsumexp" and d is dtypes.float16: vals = int_values(d, -8, 8)
    else: vals = None
    a = data.draw(hnp.arrays(dtypes.to_numpy(d), shape, elements=vals) if vals is not None else
                  arrays(d, shape, special=True) if dtypes.is_float(d) else arrays(d, shape))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1)) if shape else 0
    with np.errstate(all="ignore"): want = np_fn(a, axis) if shape else a
    check(fn(Tensor(a, device=device), axis), want, out(d), scale=4)
  run(device, body, st.data(), shapes, st.sampled_from(SCAN_DTYPES))

@pytest.mark.parametrize("n", [63, 64, 65, BLOCK + 1, 3 * BLOCK + 7])
def test_scan_long(n):
  """Lengths across the optimizer's split (64) and the scan's blocks: exact for ints, and for floats of small integers."""
  rng = np.random.default_rng(n)
  a = rng.integers(-3, 4, (2, n)).astype(np.int32)
  t = Tensor(a, device="CPU")
  check(t.cumsum(1), np.cumsum(a, 1, dtype=np.int64), dtypes.int64)
  check(t.cummax(1)[0], np.maximum.accumulate(a, 1), dtypes.int32)
  check(t.float().cummin(-1)[0], np.minimum.accumulate(a, 1).astype(np.float32), dtypes.float32)
  f = rng.standard_normal((n, 2)).astype(np.float32)
  check(Tensor(f, device="CPU").logcumsumexp(0), np.logaddexp.accumulate(f, 0), dtypes.float32, scale=10)
  p = np.where(rng.random(n) < 0.5, 1, -1).astype(np.int8)
  check(Tensor(p, device="CPU").cumprod(0), np.cumprod(p, dtype=np.int64), dtypes.int64)
  check(Tensor(p, device="CPU").cumprod(0, dtype=dtypes.int8), np.cumprod(p, dtype=np.int8), dtypes.int8)
  h = np.ones(n, np.float16)
  check(Tensor(h, device="CPU").cumsum(), np.arange(1, n + 1).astype(np.float16), dtypes.float16)   # accumulates in float32

def test_scan_cases():
  for device in DEVICES:
    assert Tensor([-1000.0, 0.0, -math.inf], device=device).logcumsumexp().tolist() == [-1000.0, 0.0, 0.0]
    assert Tensor([-math.inf, -math.inf], device=device).logcumsumexp().tolist() == [-math.inf, -math.inf]
    assert np.isnan(Tensor([1.0, math.nan, 3.0], device=device).cummax()[0].numpy()[1:]).all()
    v, i = Tensor(2.5, device=device).cummax()
    assert v.item() == 2.5 and i.item() == 0 and i.dtype is dtypes.int32
    assert Tensor([[1, 2], [3, 4]], device=device).cumsum(1, dtype=dtypes.float64).tolist() == [[1.0, 3.0], [3.0, 7.0]]
    assert Tensor(5, device=device).cumsum().item() == 5

def _np_sort(a: np.ndarray, axis: int, descending: bool) -> np.ndarray:
  """Stable argsort along axis; nan last ascending, first descending (torch's order)."""
  a = np.moveaxis(a, axis, -1)
  out = np.empty(a.shape, np.int64)
  for pos in np.ndindex(a.shape[:-1]):
    row = a[pos].astype(np.float64) if a.dtype.kind in "biuf" else a[pos]
    idx = np.arange(row.shape[0])
    if descending: out[pos] = np.lexsort((idx, -np.nan_to_num(row, nan=0.0), ~np.isnan(row)))
    else: out[pos] = np.lexsort((idx, np.nan_to_num(row, nan=0.0), np.isnan(row)))
  return np.moveaxis(out, -1, axis)

@pytest.mark.parametrize("device", DEVICES)
def test_sort(device):
  def body(data, shape, d, descending):
    vals = st.sampled_from([-1.5, 0.0, -0.0, 2.0, math.nan, math.inf, -math.inf]) if dtypes.is_float(d) else int_values(d, -3, 3)
    a = data.draw(hnp.arrays(dtypes.to_numpy(d), shape, elements=vals))                    # many ties
    axis = data.draw(st.integers(-len(shape), len(shape) - 1)) if shape else -1
    t = Tensor(a, device=device)
    v, i = t.sort(axis, descending=descending)
    if not shape:
      check(v, a, d)
      return
    want = _np_sort(a, axis, descending)
    check(i, want, dtypes.int32)
    check(v, np.take_along_axis(a, want, axis), d)
    check(t.argsort(axis, descending), want, dtypes.int32)
    k = data.draw(st.integers(0, shape[axis]))
    for largest in (True, False):
      tv, ti = t.topk(k, axis, largest=largest)
      w = np.take(_np_sort(a, axis, largest), range(k), axis)
      check(ti, w, dtypes.int32)
      check(tv, np.take_along_axis(a, w, axis), d)
  run(device, body, st.data(), shapes, st.sampled_from([dtypes.int32, dtypes.float32, dtypes.bool, dtypes.uint8, dtypes.float16]),
      st.booleans())

def test_sort_long():
  rng = np.random.default_rng(3)
  a = rng.integers(-50, 50, 200).astype(np.float32)
  v, i = Tensor(a, device="CPU").sort()
  assert v.tolist() == np.sort(a).tolist() and i.tolist() == np.argsort(a, kind="stable").tolist()
  tv, ti = Tensor(a, device="CPU").topk(5)
  assert tv.tolist() == sorted(a.tolist(), reverse=True)[:5]

def test_against_torch():
  torch = pytest.importorskip("torch")
  a = np.array([[3.0, -1.0, math.nan, 2.0, 2.0, -math.inf], [0.0, 5.0, 5.0, -2.0, 1.0, 4.0]], np.float32)
  ta = torch.tensor(a)
  for device in DEVICES:
    t = Tensor(a, device=device)
    for ours, theirs in [(t.cummax(1), ta.cummax(1)), (t.cummin(1), ta.cummin(1)), (t.cummax(0), ta.cummax(0))]:
      check(ours[0], theirs.values.numpy(), dtypes.float32)
      check(ours[1], theirs.indices.numpy().astype(np.int32), dtypes.int32)  # of equal values, the last one's index
    ints = Tensor([[1, 3, 3, 2, 5, 5]], device=device)
    check(ints.cummax(1)[1], torch.tensor(ints.numpy()).cummax(1).indices.numpy().astype(np.int32), dtypes.int32)
    check(ints.cummin(1)[1], torch.tensor(ints.numpy()).cummin(1).indices.numpy().astype(np.int32), dtypes.int32)
    check(Tensor.zeros(2, 0, device=device).cummax(1)[1], np.zeros((2, 0), np.int32), dtypes.int32)
    check(t.logcumsumexp(1), ta.logcumsumexp(1).numpy(), dtypes.float32)
    check(t.cumprod(0), ta.cumprod(0).numpy(), dtypes.float32)
    for descending in (False, True):
      v, i = t.sort(1, descending=descending)
      tv, ti = ta.sort(dim=1, descending=descending, stable=True)
      check(v, tv.numpy(), dtypes.float32)
      check(i, ti.numpy(), dtypes.int32)
    check(t[1:].topk(3)[0], ta[1:].topk(3).values.numpy(), dtypes.float32)
