"""Indexing (tensor/indexing.py) against numpy: ints, slices with any step, None, Ellipsis, lists, numpy arrays and
integer tensors on any axes (broadcast together, placed where numpy places them), boolean masks; t[...] = v; torch's
gather, scatter and scatter_reduce (oracles written with numpy loops), masked_fill, masked_select, nonzero; and the
documented out-of-range behaviour: IndexError for an index known on the host, 0 (and no write) for a tensor's entry.
"""
from __future__ import annotations
import math
import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from tensor import Tensor, dtypes
from tensor.errors import TensorIndexError
from test_ops import DEVICES, EXAMPLES, check, run, shapes

@st.composite
def advanced_index(draw, shape: tuple[int, ...]):
  """An index tuple for `shape` mixing ints, slices, None, ... and advanced items (lists, int arrays, int tensors, one
  boolean mask), as numpy takes it; returns (our index, numpy's index)."""
  ours, theirs = [], []
  ell = draw(st.booleans()) and len(shape) > 0
  cut = draw(st.integers(0, len(shape))) if ell else len(shape)
  k = 0
  while k < cut:
    n = shape[k]
    kind = draw(st.sampled_from(["int", "slice", "list", "array", "tensor", "mask", "none"]))
    if kind == "none":
      ours.append(None); theirs.append(None)  # noqa: E702
      continue
    if kind == "int" and n:
      i = draw(st.integers(-n, n - 1))
      ours.append(i); theirs.append(i)  # noqa: E702
    elif kind == "slice" or (kind == "int" and not n):
      bound = st.one_of(st.none(), st.integers(-n - 2, n + 2))
      s = slice(draw(bound), draw(bound), draw(st.one_of(st.none(), st.sampled_from([-3, -2, -1, 1, 2, 3]))))
      ours.append(s); theirs.append(s)  # noqa: E702
    elif kind == "mask":
      m = draw(hnp.arrays(np.bool_, (n,)))
      as_tensor = draw(st.booleans())
      ours.append(Tensor(m, device="PYTHON") if as_tensor else m); theirs.append(m)  # noqa: E702
    else:
      ishape = draw(st.sampled_from([(), (2,), (3,), (1,), (2, 1), (0,)]))
      idx = draw(hnp.arrays(np.int64, ishape, elements=st.integers(-n, n - 1))) if n else np.zeros((0,) * len(ishape) or (0,), np.int64)
      if kind == "list": ours.append(idx.tolist() if idx.ndim else [int(idx)]); theirs.append(np.array(ours[-1], np.int64))  # noqa: E702
      elif kind == "array": ours.append(idx); theirs.append(idx)  # noqa: E702
      else: ours.append(Tensor(idx.astype(np.int32), device="PYTHON")); theirs.append(idx)  # noqa: E702
    k += 1
  if ell:
    ours.append(Ellipsis); theirs.append(Ellipsis)  # noqa: E702
  return tuple(ours), tuple(theirs)

def torch_rule(a: np.ndarray, idx, value=None) -> np.ndarray:
  """a[idx] as torch (and tinygrad, and we) index: an int selects first, also beside advanced indices (numpy counts it
  as one of them, which moves the advanced dims first when the int separates them). With value: a[idx] = value."""
  items = list(idx) if isinstance(idx, tuple) else [idx]
  def width(i) -> int: return 0 if i is None or i is Ellipsis else i.ndim if isinstance(i, np.ndarray) and i.dtype == np.bool_ else 1
  if Ellipsis in [i for i in items if not isinstance(i, np.ndarray)]:
    k = next(j for j, i in enumerate(items) if not isinstance(i, np.ndarray) and i is Ellipsis)
    items[k:k + 1] = [slice(None)] * (a.ndim - sum(width(i) for i in items))
  selects, rest = [], []
  for it in items:
    if it is None: rest.append(None)
    elif isinstance(it, (int, np.integer)): selects.append(it)
    else:
      selects.extend([slice(None)] * width(it))
      rest.append(it)
  # ints and whole slices (and ..., so a 0-d result is an array too): a view of a, so a write into it is a write into a
  selected = a[(*selects, Ellipsis)]
  if value is not None: selected[tuple(rest)] = value
  return selected[tuple(rest)]

def _broadcastable(theirs) -> bool:
  arrays = [np.asarray(i) for i in theirs if isinstance(i, np.ndarray) and i.dtype != np.bool_]
  masks = [np.nonzero(i)[0] for i in theirs if isinstance(i, np.ndarray) and i.dtype == np.bool_]
  try: np.broadcast_shapes(*(a.shape for a in arrays + masks))
  except ValueError: return False
  return True

@pytest.mark.parametrize("device", DEVICES)
def test_getitem_advanced(device):
  def body(data, shape):
    a = data.draw(hnp.arrays(np.int32, shape, elements=st.integers(-100, 100)))
    ours, theirs = data.draw(advanced_index(shape))
    if not _broadcastable(theirs): return
    ours = tuple(i.to(device) if isinstance(i, Tensor) else i for i in ours)
    check(Tensor(a, device=device)[ours], torch_rule(a, theirs), dtypes.int32)
  run(device, body, st.data(), shapes, examples=4 * EXAMPLES[device])

def test_getitem_placement():
  """Advanced indices next to each other put their dims in place, separated ones put them first; an int between them
  selects first (torch's rule: numpy would put (0, :, j)'s dims first, torch and we keep them in place)."""
  a = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5).astype(np.int32)
  t = Tensor(a, device="CPU")
  i, j = np.array([[0, 1], [1, 0]]), np.array([1, 2])
  for idx in [(slice(None), i, j), (i, slice(None), j), (0, slice(None), j), (slice(None), 1, slice(None), j), (Ellipsis, i),
              (i, j, None), (None, slice(None), i, j, slice(1, 3)), (slice(None), [[1], [2]], [0, 1, 3], slice(None, None, -2))]:
    check(t[idx], torch_rule(a, idx), dtypes.int32)
  assert t[0, :, j].shape == (3, 2, 5) and a[0, :, j].shape == (2, 3, 5)  # where numpy's rule differs
  check(t[Tensor(i, device="CPU"), :, Tensor(j, device="CPU")], a[i, :, j], dtypes.int32)

def test_getitem_masks():
  a = np.arange(24).reshape(2, 3, 4).astype(np.float32)
  for device in DEVICES:
    t = Tensor(a, device=device)
    check(t[t > 10], a[a > 10], dtypes.float32)
    m2 = a[:, :, 0] > 5
    check(t[Tensor(m2, device=device)], a[m2], dtypes.float32)
    check(t[:, [True, False, True]], a[:, [True, False, True]], dtypes.float32)
    check(t[..., np.array([False, True, True, False])], a[..., np.array([False, True, True, False])], dtypes.float32)
    check(t[t < -1], a[a < -1], dtypes.float32)                                   # nothing selected: shape (0,)

def test_getitem_sizes_past_thresholds():
  """Rows taken from a long axis: the one-hot reduction over 300 rows is split by the optimizer; values stay exact."""
  a = np.arange(300 * 70, dtype=np.float32).reshape(300, 70) - 1000.5
  rows = np.array([299, 0, 150, 7, 64, 65, 299])
  t = Tensor(a, device="CPU")
  check(t[Tensor(rows, device="CPU")], a[rows], dtypes.float32)
  check(t[rows, 3:69:5], a[rows, 3:69:5], dtypes.float32)
  check(t[:, Tensor([69, 0], device="CPU")], a[:, [69, 0]], dtypes.float32)
  h = a.astype(np.float16)
  check(Tensor(h, device="CPU")[rows], h[rows], dtypes.float16)

def test_out_of_range():
  """A host index out of range raises IndexError naming it; an index tensor's out-of-range entries read 0."""
  t = Tensor([[1, 2, 3], [4, 5, 6]], device="PYTHON")
  for idx in ([0, 2], np.array([-3]), (slice(None), [3]), (1, [0, 5]), 2, (0, -4)):
    with pytest.raises(TensorIndexError, match="out of bounds"): t[idx]
    with pytest.raises(IndexError): t[idx]
  assert t[Tensor([1, 2, -1, -3], device="PYTHON")].tolist() == [[4, 5, 6], [0, 0, 0], [4, 5, 6], [0, 0, 0]]
  assert t[:, Tensor([2, 3], device="PYTHON")].tolist() == [[3, 0], [6, 0]]
  assert t[Tensor([0, 1], device="PYTHON"), Tensor([7, 2], device="PYTHON")].tolist() == [0, 6]
  f = Tensor([[1.5, -2.0]], device="CPU")
  assert f[Tensor([0, 1], device="CPU")].tolist() == [[1.5, -2.0], [0.0, 0.0]]
  b = Tensor([True, False], device="CPU")
  assert b[Tensor([1, 0, 9], device="CPU")].tolist() == [False, True, False]

# ---- t[...] = v ----
@pytest.mark.parametrize("device", DEVICES)
def test_setitem_basic(device):
  def body(data, shape):
    a = data.draw(hnp.arrays(np.float32, shape, elements=st.integers(-50, 50).map(float)))
    idx = data.draw(hnp.basic_indices(shape, min_dims=0, allow_newaxis=True, allow_ellipsis=True))
    view = a[idx]
    # a value broadcast to the view: a scalar, or the view's trailing shape
    tail = view.shape[data.draw(st.integers(0, len(view.shape))):]
    v = data.draw(hnp.arrays(np.float32, tail, elements=st.integers(100, 200).map(float)))
    t = Tensor(a, device=device).contiguous().realize()
    t[idx] = Tensor(v, device=device) if data.draw(st.booleans()) else (v if v.ndim else float(v))
    want = a.copy()
    want[idx] = v
    check(t, want, dtypes.float32)
  run(device, body, st.data(), shapes, examples=3 * EXAMPLES[device])

@pytest.mark.parametrize("device", DEVICES)
def test_setitem_advanced(device):
  def body(data, shape):
    a = data.draw(hnp.arrays(np.int32, shape, elements=st.integers(-50, 50)))
    ours, theirs = data.draw(advanced_index(shape))
    if not _broadcastable(theirs): return
    ours = tuple(i.to(device) if isinstance(i, Tensor) else i for i in ours)
    view = torch_rule(a, theirs)
    v = data.draw(hnp.arrays(np.int32, view.shape, elements=st.integers(100, 200)))
    t = Tensor(a, device=device).contiguous().realize()
    t[ours] = Tensor(v, device=device)
    want = a.copy()
    torch_rule(want, theirs, v)  # numpy: of repeated indices, the last write wins
    check(t, want, dtypes.int32)
  run(device, body, st.data(), shapes, examples=3 * EXAMPLES[device])

def test_setitem_cases():
  for device in DEVICES:
    t = Tensor.zeros(3, 4, device=device).contiguous().realize()
    t[1] = 5
    t[:, 1:3] = Tensor([7.0, 8.0], device=device)
    t[[0, 2], [3, 0]] = 9
    t[::-2, -1] = Tensor([-1.0, -2.0], device=device)
    assert t.tolist() == [[0, 7, 8, -2], [5, 7, 8, 5], [9, 7, 8, -1]]
    t[t > 7] = 0                                                     # a mask with a scalar: a select
    assert t.tolist() == [[0, 7, 0, -2], [5, 7, 0, 5], [0, 7, 0, -1]]
    t[Tensor([0, 0, 2], device=device)] = Tensor([[1.0] * 4, [2.0] * 4, [3.0] * 4], device=device)   # last write wins
    assert t.tolist() == [[2] * 4, [5, 7, 0, 5], [3] * 4]
    t[Tensor([1, 9], device=device), 0] = 42                            # an out-of-range tensor entry writes nothing
    assert t[:, 0].tolist() == [2, 42, 3]
    u = Tensor([1, 2, 3], device=device) * 10                           # not realized: takes the new value
    u[0] = -1
    assert u.tolist() == [-1, 20, 30]
    w = Tensor.zeros(2, 2, dtype=dtypes.int8, device=device).contiguous().realize()
    w[0] = Tensor([1.7, -2.9], device=device)                           # the value takes w's dtype
    assert w.tolist() == [[1, -2], [0, 0]] and w.dtype is dtypes.int8
    with pytest.raises(ValueError, match="shape"): w[0] = Tensor([1, 2, 3], device=device)
    with pytest.raises(OverflowError): w[0] = 300
    s = Tensor.arange(6, device=device).contiguous().realize()
    s[1:] = s[:-1]                                                       # reads the old values
    assert s.tolist() == [0, 0, 1, 2, 3, 4]

# ---- gather / scatter / scatter_reduce ----
def np_gather(a, dim, idx):
  out = np.empty(idx.shape, a.dtype)
  for pos in np.ndindex(idx.shape):
    src = list(pos)
    src[dim] = idx[pos]
    out[pos] = a[tuple(src)]
  return out

def np_scatter(a, dim, idx, src, reduce=None, include_self=True):
  out = a.copy()
  got: dict = {}
  for pos in np.ndindex(idx.shape):
    dst = list(pos)
    dst[dim] = idx[pos]
    got.setdefault(tuple(dst), []).append(src[pos])
  for dst, vals in got.items():
    if reduce is None: out[dst] = vals[-1]; continue  # noqa: E702
    vals = ([a[dst]] if include_self else []) + vals
    if reduce == "sum": out[dst] = np.sum(vals, dtype=a.dtype)
    elif reduce == "prod": out[dst] = np.prod(vals, dtype=a.dtype)
    elif reduce == "amax": out[dst] = max(vals)
    elif reduce == "amin": out[dst] = min(vals)
    elif reduce == "mean": out[dst] = np.sum(vals) / len(vals) if a.dtype.kind == "f" else np.sum(vals) // len(vals)
  return out

@st.composite
def gather_case(draw):
  shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
  dim = draw(st.integers(-len(shape), len(shape) - 1))
  d = dim % len(shape)
  ishape = tuple(draw(st.integers(0 if k != d else 1, s if k != d else 5)) for k, s in enumerate(shape))
  idx = draw(hnp.arrays(np.int32, ishape, elements=st.integers(0, shape[d] - 1)))
  return shape, dim, idx

@pytest.mark.parametrize("device", DEVICES)
def test_gather(device):
  def body(data, case):
    shape, dim, idx = case
    a = data.draw(hnp.arrays(np.float32, shape, elements=st.integers(-9, 9).map(float)))
    check(Tensor(a, device=device).gather(dim, Tensor(idx, device=device)), np_gather(a, dim % len(shape), idx), dtypes.float32)
  run(device, body, st.data(), gather_case())

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduce", [None, "sum", "prod", "mean", "amax", "amin"])
def test_scatter(device, reduce):
  def body(data, case, include_self, dt):
    shape, dim, idx = case
    d = dim % len(shape)
    a = data.draw(hnp.arrays(np.float32, shape, elements=st.integers(-9, 9).map(float))).astype(dt)
    src = data.draw(hnp.arrays(np.float32, idx.shape, elements=st.integers(-9, 9).map(float))).astype(dt)
    t, i, s = Tensor(a, device=device), Tensor(idx, device=device), Tensor(src, device=device)
    got = t.scatter(dim, i, s) if reduce is None else t.scatter_reduce(dim, i, s, reduce, include_self=include_self)
    check(got, np_scatter(a, d, idx, src, reduce, include_self), dtypes.from_numpy(np.dtype(dt)))
  run(device, body, st.data(), gather_case(), st.booleans(), st.sampled_from([np.float32, np.int32]), examples=EXAMPLES[device] // 2 + 1)

def test_scatter_forms():
  for device in DEVICES:
    z = Tensor.zeros(3, 4, device=device)
    idx = Tensor([[0, 1, 2, 0]], device=device)
    assert z.scatter(0, idx, 5.0).tolist() == [[5, 0, 0, 5], [0, 5, 0, 0], [0, 0, 5, 0]]
    ones = Tensor.ones(1, 4, device=device)
    assert z.scatter(0, idx, 1.0, reduce="add").scatter(0, idx, 1.0, reduce="add").sum().item() == 8.0
    assert Tensor.ones(2, 2, device=device).scatter(1, Tensor([[1], [0]], device=device), 3.0, reduce="multiply").tolist() == [[1, 3], [3, 1]]
    # a Tensor src with reduce is scatter_reduce's (tinygrad refuses it, torch deprecates it), checked before the axis
    with pytest.raises(TypeError, match=r"use scatter_reduce\(dim, index, src, 'sum'\)"):
      Tensor.ones(4, device=device).scatter(dim=1, index=Tensor([0], device=device), src=Tensor.ones(4, device=device), reduce="add")
    # out-of-range index entries (device data) write nothing; gather reads 0 for them
    assert z.scatter(0, Tensor([[3, -4, 1, 0]], device=device), ones).tolist() == [[0, 0, 0, 1], [0, 0, 1, 0], [0, 0, 0, 0]]
    assert Tensor([[1, 2], [3, 4]], device=device).gather(1, Tensor([[1, 5], [-1, 0]], device=device)).tolist() == [[2, 0], [4, 3]]

# ---- masks ----
@pytest.mark.parametrize("device", DEVICES)
def test_masks(device):
  def body(data, shapes2):
    a = data.draw(hnp.arrays(np.float32, shapes2.input_shapes[0], elements=st.integers(-9, 9).map(float)))
    m = data.draw(hnp.arrays(np.bool_, shapes2.input_shapes[1]))
    t, tm = Tensor(a, device=device), Tensor(m, device=device)
    if np.broadcast_shapes(a.shape, m.shape) == a.shape: check(t.masked_fill(tm, -1.5), np.where(m, np.float32(-1.5), a), dtypes.float32)
    big, bm = np.broadcast_arrays(a, m)
    check(t.masked_select(tm), big[bm], dtypes.float32)
    if a.ndim: check(t.nonzero(), np.stack(np.nonzero(a), 1).reshape(-1, a.ndim), dtypes.int32)
    if a.ndim:
      for ours, theirs in zip(t.nonzero(as_tuple=True), np.nonzero(a)): check(ours, theirs, dtypes.int32)
  pairs = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, min_side=0, max_side=4)
  run(device, body, st.data(), pairs)

def test_masked_fill_keeps_dtype():
  t = Tensor([1, 2, 3], dtype=dtypes.uint8, device="PYTHON")
  out = t.masked_fill(Tensor([True, False, True], device="PYTHON"), 200)
  assert out.dtype is dtypes.uint8 and out.tolist() == [200, 2, 200]
  assert Tensor([1.0, math.nan], device="PYTHON").masked_fill(Tensor([False, True], device="PYTHON"), 0).tolist() == [1.0, 0.0]

def test_against_torch():
  """torch's own gather / scatter / scatter_reduce (every reduce, with and without self) / masked ops on the same data."""
  torch = pytest.importorskip("torch")
  rng = np.random.default_rng(2)
  a = rng.integers(-9, 10, (3, 5)).astype(np.float32)
  idx = rng.integers(0, 3, (2, 5))
  src = rng.integers(-9, 10, (2, 5)).astype(np.float32)
  ta, ti, ts = torch.tensor(a), torch.tensor(idx), torch.tensor(src)
  for device in DEVICES:
    t, i, s = Tensor(a, device=device), Tensor(idx.astype(np.int32), device=device), Tensor(src, device=device)
    check(t.gather(0, i), torch.gather(ta, 0, ti).numpy(), dtypes.float32)
    check(t.scatter_reduce(0, i, s, "sum"), ta.scatter_add(0, ti, ts).numpy(), dtypes.float32)
    for reduce in ("sum", "prod", "mean", "amax", "amin"):
      for include_self in (True, False):
        want = ta.scatter_reduce(0, ti, ts, reduce, include_self=include_self).numpy()
        check(t.scatter_reduce(0, i, s, reduce, include_self=include_self), want, dtypes.float32)
        wi = ta.int().scatter_reduce(0, ti, ts.int(), reduce, include_self=include_self).numpy()
        check(t.int().scatter_reduce(0, i, s.int(), reduce, include_self=include_self), wi, dtypes.int32)
    m = a > 0
    check(t.masked_fill(Tensor(m, device=device), 7.0), ta.masked_fill(torch.tensor(m), 7.0).numpy(), dtypes.float32)
    check(t.masked_select(Tensor(m, device=device)), ta.masked_select(torch.tensor(m)).numpy(), dtypes.float32)
    check(Tensor(m, device=device).nonzero(), torch.tensor(m).nonzero().numpy(), dtypes.int32)
    check(t[Tensor([2, 0], device=device), 1:4], ta[torch.tensor([2, 0]), 1:4].numpy(), dtypes.float32)

def test_take_is_a_load():
  """Rows picked by an index tensor cost what they read, not the size of the axis: the GATHER node becomes a load at
  the index's value (rules/rangeify.rules), so picking 4 rows of 20,000 moves about 4 rows of memory."""
  from tensor import GlobalCounters
  x = Tensor.arange(20000 * 8, device="CPU").reshape(20000, 8).realize()
  idx = Tensor([19999, 0, 12345, 7], device="CPU").realize()
  before = GlobalCounters.global_mem
  out = x[idx].realize()
  assert GlobalCounters.global_mem - before < 1000
  assert out.tolist() == [[i * 8 + k for k in range(8)] for i in (19999, 0, 12345, 7)]
  # torch's gather too: one logit per row of a 4 x 20,000 table
  logits = x.reshape(4, 40000)
  labels = Tensor([[39999], [0], [123], [7]], device="CPU").realize()
  before = GlobalCounters.global_mem
  picked = logits.gather(1, labels).realize()
  assert GlobalCounters.global_mem - before < 1000 and picked.tolist() == [[39999], [40000], [80123], [120007]]

def test_take_edges():
  for device in DEVICES:
    x = Tensor([[1.0, 2.0], [3.0, 4.0]], device=device)
    # out-of-range rows of a computed source are 0, not f(0): the select is outside the computation
    assert (x * 2 + 1)[Tensor([1, 5, -3], device=device)].tolist() == [[7.0, 9.0], [0.0, 0.0], [0.0, 0.0]]
    # a wide index can't wrap into range (tested before it is narrowed to the index type)
    wide = Tensor([2**32, 2**32 + 1, 1, -1], dtype=dtypes.int64, device=device)
    assert x[wide].tolist() == [[0.0, 0.0], [0.0, 0.0], [3.0, 4.0], [3.0, 4.0]]
    # the index computed in the same kernel (an argmax), and unsigned indices
    assert x[(x.sum(1) > 4).cast(dtypes.int32)].tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert x[Tensor([1, 0, 7], dtype=dtypes.uint8, device=device)].tolist() == [[3.0, 4.0], [1.0, 2.0], [0.0, 0.0]]
    assert x[Tensor([[1], [0]], device=device), Tensor([1, 0], device=device)].tolist() == [[4.0, 3.0], [2.0, 1.0]]
