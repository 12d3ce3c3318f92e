"""Memory planning of captured intermediates: buffers whose lifetimes do not overlap share storage, and no buffer the
caller still holds (returned, or kept by a live tensor) shares storage with anything. Checked on fixed functions and on
random graphs captured and replayed against numpy."""
import numpy as np
from hypothesis import given, settings, strategies as st, HealthCheck
from tensor import Tensor, TinyJit
from tensor.engine.state import ENGINE
buffers = ENGINE.storage.buffers

def _root(b): return b.base if b.base is not None else b

def _overlap(a, b) -> bool:
  if _root(a) is not _root(b): return False
  return a.offset < b.offset + b.nbytes and b.offset < a.offset + a.nbytes

def _buffer_of(t: Tensor):
  u = t.uop
  return buffers[u.src[0] if u.op.name == "RESHAPE" else u]

def assert_no_aliasing(captured, held: list) -> None:
  """Two step buffers share bytes only when their lifetimes (first to last step using them) are disjoint; a buffer the
  caller holds shares bytes with no other."""
  span: dict[int, list] = {}
  for j, s in enumerate(captured.steps):
    for b in s.bufs:
      if b is None: continue
      first = span.setdefault(id(b), [b, j, j])
      first[2] = j
  items = list(span.values())
  held_ids = {id(b) for b in held}
  for x, (a, a0, a1) in enumerate(items):
    for b, b0, b1 in items[x + 1:]:
      if not _overlap(a, b): continue
      assert id(a) not in held_ids and id(b) not in held_ids, "a buffer the caller holds shares storage"
      assert a1 < b0 or b1 < a0, f"buffers alive together share storage: steps {a0}-{a1} and {b0}-{b1}"

def test_chain_of_intermediates_reuses_storage():
  @TinyJit
  def f(x):
    for _ in range(8): x = (x * 2 + 1).realize()  # each intermediate dies after the next kernel reads it
    return x
  for i in range(4):
    x = np.full((3, 65), float(i), np.float32)
    out = f(Tensor(x).realize())
    ref = x
    for _ in range(8): ref = ref * 2 + 1
    np.testing.assert_array_equal(out.numpy(), ref)
  c = f.captured
  inner = {id(b): b for s in c.steps for b in s.bufs if b is not None and b is not _buffer_of(out)}
  assert len(inner) == 7 and len({id(_root(b)) for b in inner.values()}) == 2  # ping-pong between two blocks
  assert_no_aliasing(c, [_buffer_of(out)])

def test_buffers_the_caller_keeps_are_never_shared():
  kept: list[Tensor] = []
  @TinyJit
  def f(x):
    kept.clear()
    y = x
    for k in range(6):
      y = (y + 1).realize()
      if k % 2: kept.append(y)  # held by the caller after the call: written by each replay, never reused
    return (y * 3).realize()
  for i in range(5):
    x = np.arange(130, dtype=np.float32) * i
    out = f(Tensor(x).realize())
    np.testing.assert_array_equal(out.numpy(), (x + 6) * 3)
    assert [t.numpy().tolist() for t in kept] == [(x + 2).tolist(), (x + 4).tolist(), (x + 6).tolist()]
  assert_no_aliasing(f.captured, [_buffer_of(t) for t in kept] + [_buffer_of(out)])

# ---- random graphs ----

SIZES = st.sampled_from([(1, 3), (4, 64), (65, 2), (5, 130)])  # crossing the split (>= 64) and upcast thresholds

@st.composite
def programs(draw):
  ops = []
  n_vals = 2
  for k in range(draw(st.integers(2, 9))):  # the first op computes: the call realizes at least one kernel
    kind = draw(st.sampled_from(["add", "mul", "sub", "relu", "sum", "max"] + (["realize", "keep"] if k else [])))
    i = draw(st.integers(0, n_vals - 1))
    j = draw(st.integers(0, n_vals - 1))
    ops.append((kind, i, j))
    if kind not in ("realize", "keep"): n_vals += 1
  return ops

def _run(ops, a, b, lib, kept):
  vals = [a, b]
  for kind, i, j in ops:
    x, y = vals[i], vals[j]
    if kind == "add": vals.append(x + y)
    elif kind == "mul": vals.append(x * y * 0.5)
    elif kind == "sub": vals.append(x - y)
    elif kind == "relu": vals.append(x.relu() if lib == "t" else np.maximum(x, 0))
    elif kind == "sum": vals.append(x.sum(axis=1, keepdims=True) if lib == "n" else x.sum(axis=1, keepdim=True))
    elif kind == "max": vals.append(x.max(axis=0, keepdims=True) if lib == "n" else x.max(axis=0, keepdim=True))
    elif kind == "realize" and lib == "t": vals[i] = x.realize()
    # kept by the caller (a Python side effect: the list is filled by the captured call, whose buffers replays write again)
    elif kind == "keep": kept.append((x + 0.25).realize() if lib == "t" else x + 0.25)
  return vals[-1], vals[-2]

@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), SIZES, st.integers(0, 2**31))
def test_random_graphs_replay_like_numpy(ops, shape, seed):
  rng = np.random.default_rng(seed)
  kept: list = []
  @TinyJit
  def f(a, b):
    kept.clear()
    p, q = _run(ops, a, b, "t", kept)
    return p.realize(), q.realize()
  for _ in range(4):
    a, b = rng.standard_normal(shape).astype(np.float32), rng.standard_normal(shape).astype(np.float32)
    p, q = f(Tensor(a).realize(), Tensor(b).realize())
    ref_kept: list = []
    rp, rq = _run(ops, a, b, "n", ref_kept)
    np.testing.assert_allclose(p.numpy(), np.broadcast_to(rp, p.shape), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(q.numpy(), np.broadcast_to(rq, q.shape), rtol=1e-4, atol=1e-4)
    for t, r in zip(kept, ref_kept): np.testing.assert_allclose(t.numpy(), np.broadcast_to(r, t.shape), rtol=1e-4, atol=1e-4)
  assert_no_aliasing(f.captured, [_buffer_of(t) for t in (p, q, *kept)])
