"""Creation and movement beyond the six movement ops (tensor/creation.py, tensor/movement.py) against numpy on CPU and
PYTHON: eye, linspace, meshgrid, tril, triu, diag, diagonal, cat, stack, split, chunk, repeat, tile, repeat_interleave,
roll, unflatten, unfold, clone, and pad's keyword forms (modes, value=, None widths). Shapes from hypothesis include
0-size and 1-element dims; dtypes include bool and float16 (no arithmetic touches the values, so -0.0 and nan survive).
"""
from __future__ import annotations
import math
import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from tensor import Tensor, dtypes
from test_ops import DEVICES, EXAMPLES, arrays, check, run, shapes

DTS = [dtypes.int32, dtypes.float32, dtypes.bool, dtypes.float16]
nonempty = hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=5)

def values(data, d, shape):
  return data.draw(arrays(d, shape, special=True) if dtypes.is_float(d) else arrays(d, shape))

@pytest.mark.parametrize("device", DEVICES)
def test_cat_stack(device):
  def body(data, shape, d, count):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    parts = []
    for _ in range(count):  # same shape but along axis
      s = list(shape)
      s[axis] = data.draw(st.integers(0, 3))
      parts.append(values(data, d, tuple(s)))
    ts = [Tensor(p, device=device) for p in parts]
    check(ts[0].cat(*ts[1:], dim=axis), np.concatenate(parts, axis), d)
    check(Tensor.cat(ts, dim=axis), np.concatenate(parts, axis), d)                     # torch's list form
    same = [values(data, d, shape) for _ in range(count)]
    sd = data.draw(st.integers(-len(shape) - 1, len(shape)))
    check(Tensor.stack([Tensor(p, device=device) for p in same], dim=sd), np.stack(same, sd), d)
  run(device, body, st.data(), nonempty, st.sampled_from(DTS), st.integers(1, 3))

def test_cat_promotes_and_keeps_negative_zero():
  for device in DEVICES:
    out = Tensor([1, 2], device=device).cat(Tensor([-0.0, math.nan], device=device))
    assert out.dtype is dtypes.float32
    got = out.numpy()
    assert got[:2].tolist() == [1.0, 2.0] and np.signbit(got[2]) and math.isnan(got[3])

@pytest.mark.parametrize("device", DEVICES)
def test_split_chunk_unflatten(device):
  def body(data, shape):
    a = data.draw(arrays(dtypes.int32, shape))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    n = shape[axis]
    size = data.draw(st.integers(1, 4))
    ours = Tensor(a, device=device).split(size, axis)
    theirs = np.split(a, list(range(size, n, size)), axis) if n else [a]
    assert len(ours) == len(theirs)
    for o, t in zip(ours, theirs): check(o, t, dtypes.int32)
    cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=3)))
    sizes = [b - a_ for a_, b in zip([0] + cuts, cuts + [n])]
    for o, t in zip(Tensor(a, device=device).split(sizes, axis), np.split(a, cuts, axis)): check(o, t, dtypes.int32)
    chunks = data.draw(st.integers(1, 4))
    ours = Tensor(a, device=device).chunk(chunks, axis)
    step = max(1, math.ceil(n / chunks))
    theirs = np.split(a, list(range(step, n, step)), axis) if n else [a]
    assert [o.shape for o in ours] == [t.shape for t in theirs]
    for o, t in zip(ours, theirs): check(o, t, dtypes.int32)
    if n:  # -1 is inferred from the dim (torch's unflatten), also when another dim is 0
      f = data.draw(st.sampled_from([f for f in (1, 2, 3, n) if n % f == 0]))
      k = axis % len(shape)
      check(Tensor(a, device=device).unflatten(axis, (f, -1)), a.reshape(a.shape[:k] + (f, n // f) + a.shape[k + 1:]), dtypes.int32)
  # each piece is its own kernel: CPU compiles are the cost, so CPU runs fewer examples than PYTHON
  run(device, body, st.data(), nonempty, examples=4 if device == "CPU" else None)

@pytest.mark.parametrize("device", DEVICES)
def test_repeat_tile_roll(device):
  def body(data, shape, d):
    a = values(data, d, shape)
    t = Tensor(a, device=device)
    reps = tuple(data.draw(st.lists(st.integers(0, 3), min_size=len(shape), max_size=len(shape) + 2)))
    check(t.repeat(*reps), np.tile(a, reps), d)
    short = reps[:data.draw(st.integers(0, len(reps)))]
    check(t.tile(short), np.tile(a, short), d)
    if len(shape):
      axis = data.draw(st.integers(-len(shape), len(shape) - 1))
      r = data.draw(st.integers(0, 3))
      check(t.repeat_interleave(r, axis), np.repeat(a, r, axis), d)
      counts = data.draw(st.lists(st.integers(0, 2), min_size=shape[axis], max_size=shape[axis]))
      check(t.repeat_interleave(counts, axis), np.repeat(a, counts, axis), d)
      shift = data.draw(st.integers(-7, 7))
      check(t.roll(shift, axis), np.roll(a, shift, axis), d)
    check(t.repeat_interleave(2), np.repeat(a, 2), d)
    s = data.draw(st.integers(-7, 7))
    check(t.roll(s), np.roll(a, s), d)
    if len(shape) >= 2:
      check(t.roll((1, -2), (0, -1)), np.roll(a, (1, -2), (0, -1)), d)
  run(device, body, st.data(), shapes, st.sampled_from(DTS))

@pytest.mark.parametrize("device", DEVICES)
def test_unfold(device):
  def body(data, shape):
    a = data.draw(arrays(dtypes.int32, shape))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    n = shape[axis]
    size = data.draw(st.integers(0, n))
    step = data.draw(st.integers(1, 4))
    want = np.moveaxis(np.lib.stride_tricks.sliding_window_view(a, size, axis)[tuple(
      slice(None, None, step) if k == axis % len(shape) else slice(None) for k in range(len(shape)))], -1, -1)
    check(Tensor(a, device=device).unfold(axis, size, step), want, dtypes.int32)
  run(device, body, st.data(), hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=7))

def test_unfold_long_axis():
  a = np.arange(300, dtype=np.float32)
  check(Tensor(a, device="CPU").unfold(0, 70, 3), np.lib.stride_tricks.sliding_window_view(a, 70)[::3], dtypes.float32)

@pytest.mark.parametrize("device", DEVICES)
def test_pad_modes(device):
  def body(data, shape, d, mode):
    a = values(data, d, shape)
    nd = len(shape)
    pads = []
    for n in shape:
      hi = {"constant": 3, "reflect": max(n - 1, 0), "replicate": 3 if n else 0, "circular": n}[mode]
      pads.append((data.draw(st.integers(-min(n, 2), hi)), data.draw(st.integers(-min(n, 2), hi))))
    pads = [(b, e) if b + e >= -n else (b, 0) for (b, e), n in zip(pads, shape)]
    crop = a[tuple(slice(-min(b, 0), n + min(e, 0)) for (b, e), n in zip(pads, shape))]
    pos = [(max(b, 0), max(e, 0)) for b, e in pads]
    np_mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode]
    if any(c == 0 and p != (0, 0) for c, p in zip(crop.shape, pos)) and mode != "constant": return  # nothing to reflect
    if mode == "reflect" and any(p[0] >= c or p[1] >= c for c, p in zip(crop.shape, pos) if p != (0, 0)): return
    if mode == "circular" and any(p[0] > c or p[1] > c for c, p in zip(crop.shape, pos)): return
    want = np.pad(crop, pos, mode=np_mode) if nd else crop
    t = Tensor(a, device=device)
    check(t.pad(tuple(pads), mode=mode), want, d)
    flat = tuple(v for b, e in reversed(pads) for v in (b, e))                  # torch's flat form, last axis first
    check(t.pad(flat, mode=mode), want, d)
  run(device, body, st.data(), shapes, st.sampled_from(DTS), st.sampled_from(["constant", "reflect", "replicate", "circular"]),
      examples=2 * EXAMPLES[device])

def test_pad_values():
  for device in DEVICES:
    t = Tensor([[1.0, 2.0]], device=device)
    assert t.pad(((0, 0), (1, 1)), value=math.inf).tolist() == [[math.inf, 1.0, 2.0, math.inf]]
    n = t.pad(((1, 0), None), value=math.nan).numpy()
    assert np.isnan(n[0]).all() and n[1].tolist() == [1.0, 2.0]
    assert np.signbit(t.pad((1, 0), value=-0.0).numpy()[0, 0])
    assert Tensor([1, 2], dtype=dtypes.int8, device=device).pad((1, 1), value=-128).tolist() == [-128, 1, 2, -128]
    assert Tensor([True], device=device).pad((1, 0), value=True).tolist() == [True, True]
    assert t.pad(((0, 0), (None, 2))).tolist() == [[1.0, 2.0, 0.0, 0.0]]
    assert t.pad((None, (1, 0)), value=5).tolist() == [[5.0, 1.0, 2.0]]
    r = Tensor([[1.0, 2.0, 3.0]], device=device)
    assert r.pad(((0, 0), (1, 2)), mode="reflect").tolist() == [np.pad([1.0, 2.0, 3.0], (1, 2), mode="reflect").tolist()]
    assert r.pad((2, 1), mode="replicate").tolist() == [[1.0, 1.0, 1.0, 2.0, 3.0, 3.0]]
    assert r.pad((3, 3), mode="circular").tolist() == [[1.0, 2.0, 3.0] * 3]
    assert r.pad((-1, 1), mode="circular").tolist() == [[2.0, 3.0, 2.0]]

# ---- creation ----
@pytest.mark.parametrize("device", DEVICES)
def test_structured_creation(device):
  for n, m in [(0, 0), (1, 1), (3, 3), (2, 5), (5, 2), (70, 3)]:
    check(Tensor.eye(n, m, device=device), np.eye(n, m, dtype=np.float32), dtypes.float32)
  check(Tensor.eye(3, dtype=dtypes.int8, device=device), np.eye(3, dtype=np.int8), dtypes.int8)
  check(Tensor.eye(2, dtype=dtypes.bool, device=device), np.eye(2, dtype=bool), dtypes.bool)
  for start, stop, steps in [(0, 1, 5), (-3, 7, 1), (2, 2, 3), (1, -1, 0), (0, 10, 101)]:
    check(Tensor.linspace(start, stop, steps, device=device), np.linspace(start, stop, steps, dtype=np.float32), dtypes.float32)
  check(Tensor.linspace(0, 10, 4, dtype=dtypes.int32, device=device), np.linspace(0, 10, 4).astype(np.int32), dtypes.int32)
  check(Tensor.linspace(0.5, 1.5, 3, dtype=dtypes.float64, device=device), np.linspace(0.5, 1.5, 3), dtypes.float64)
  x, y, z = np.array([1, 2], np.int32), np.array([3, 4, 5], np.int32), np.array([6], np.int32)
  tx, ty, tz = (Tensor(v, device=device) for v in (x, y, z))
  for ours, theirs in zip(tx.meshgrid(ty, tz), np.meshgrid(x, y, z, indexing="ij")): check(ours, theirs, dtypes.int32)
  for ours, theirs in zip(Tensor.meshgrid(tx, ty, tz, indexing="xy"), np.meshgrid(x, y, z)): check(ours, theirs, dtypes.int32)
  for ours, theirs in zip(tx.meshgrid(ty, indexing="xy"), np.meshgrid(x, y)): check(ours, theirs, dtypes.int32)

@pytest.mark.parametrize("device", DEVICES)
def test_triangles_and_diagonals(device):
  def body(data, shape, d):
    a = values(data, d, shape)
    t = Tensor(a, device=device)
    k = data.draw(st.integers(-4, 4))
    if len(shape) >= 2:
      check(t.tril(k), np.tril(a, k), d)
      check(t.triu(k), np.triu(a, k), d)
      d1, d2 = data.draw(st.permutations(range(len(shape))))[:2]
      check(t.diagonal(k, d1, d2), np.diagonal(a, k, d1, d2), d)
    if len(shape) == 2: check(t.diag(k), np.diag(a, k), d)
    if len(shape) == 1: check(t.diag(k), np.diag(a, k), d)
  run(device, body, st.data(), hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=5), st.sampled_from(DTS))

def test_tril_big():
  a = np.arange(100 * 70, dtype=np.float32).reshape(100, 70)
  check(Tensor(a, device="CPU").tril(-3), np.tril(a, -3), dtypes.float32)

def test_clone():
  for device in DEVICES:
    a = Tensor([1.0, -0.0, math.nan], device=device).realize()
    c = a.clone()
    c.realize()
    assert c.uop is not a.uop and np.signbit(c.numpy()[1]) and math.isnan(c.numpy()[2])
    c += 1                                                               # its own storage: a is untouched
    assert a.numpy()[0] == 1.0 and c.numpy()[0] == 2.0
    b = Tensor([True, False], device=device).clone()
    assert b.dtype is dtypes.bool and b.tolist() == [True, False]

def test_against_torch():
  torch = pytest.importorskip("torch")
  a = np.arange(24, dtype=np.float32).reshape(4, 6) - 11.5
  ta = torch.tensor(a)
  for device in DEVICES:
    t = Tensor(a, device=device)
    check(t.unfold(1, 3, 2), ta.unfold(1, 3, 2).numpy(), dtypes.float32)
    check(t.repeat_interleave(2, 0), ta.repeat_interleave(2, 0).numpy(), dtypes.float32)
    check(t.repeat(2, 1, 2), ta.repeat(2, 1, 2).numpy(), dtypes.float32)
    check(t.diagonal(1), ta.diagonal(1).numpy(), dtypes.float32)
    check(t[0].diag(-2), torch.diag(ta[0], -2).numpy(), dtypes.float32)
    check(t.roll((1, -2), (0, 1)), ta.roll((1, -2), (0, 1)).numpy(), dtypes.float32)
    check(t.tril(1), ta.tril(1).numpy(), dtypes.float32)
    check(t.chunk(3, 1)[2], ta.chunk(3, 1)[2].numpy(), dtypes.float32)
    for mode in ("reflect", "replicate", "circular"):
      want = torch.nn.functional.pad(ta[None], (2, 1, 1, 2), mode=mode)[0].numpy()
      check(t.pad((2, 1, 1, 2), mode=mode), want, dtypes.float32)
    check(Tensor.linspace(-1, 1, 7, device=device), torch.linspace(-1, 1, 7).numpy(), dtypes.float32)
