"""tensor/jit.py: TinyJit's phases, the input checks (each kind of mismatch names what differs), reset, nested capture,
nothing captured, JIT=0 and JIT=2, DEBUG lines, methods, keyword inputs, copies, the PYTHON device."""
import numpy as np
import pytest
from tensor import Tensor, TinyJit, Context, GlobalCounters, dtypes
from tensor.engine.jit import JitError

def _scale_sum():
  """A jitted function with a reduction long enough to be split (>= 64) and an upcast output loop, and a call counter."""
  calls = []
  @TinyJit
  def f(x, y):
    calls.append(1)
    return ((x * 2).sum(axis=1) + y).realize()
  return f, calls

def _inputs(rng, rows=5, cols=130, dtype=np.float32):
  return Tensor(rng.standard_normal((rows, cols)).astype(dtype)).realize(), Tensor(rng.standard_normal(rows).astype(dtype)).realize()

def test_phases_and_values_across_sizes_that_split_and_upcast():
  rng = np.random.default_rng(0)
  f, calls = _scale_sum()
  for _ in range(5):
    x, y = _inputs(rng)
    out = f(x, y)
    np.testing.assert_allclose(out.numpy(), (x.numpy() * 2).sum(axis=1) + y.numpy(), rtol=1e-5, atol=1e-5)
  assert len(calls) == 2
  assert f.cnt == 5 and f.captured is not None

def test_outputs_share_storage_across_replays():
  rng = np.random.default_rng(1)
  f, _ = _scale_sum()
  for _ in range(2): f(*_inputs(rng))
  x1, y1 = _inputs(rng)
  first = f(x1, y1)
  snapshot = first.numpy()
  second = f(*_inputs(rng))
  assert second is first  # the captured returned tensor, written again by each replay
  assert not np.allclose(first.numpy(), snapshot)

@pytest.mark.parametrize("kind", ["shape", "dtype", "device", "view"])
def test_args_mismatch_names_the_differing_argument(kind):
  rng = np.random.default_rng(2)
  f, calls = _scale_sum()
  for _ in range(3): f(*_inputs(rng))
  x, y = _inputs(rng)
  if kind == "shape": x, want = Tensor(rng.standard_normal((5, 64)).astype(np.float32)).realize(), "argument 0: shape (5, 64)"
  elif kind == "dtype": y, want = y.cast(dtypes.float16).realize(), "argument 1: shape (5,) half"
  elif kind == "device": y, want = y.to("PYTHON").realize(), "argument 1: shape (5,) float on PYTHON"
  else: x, want = x.reshape(10, 65).realize(), "argument 0: shape (10, 65)"  # the same storage seen as another view
  with pytest.raises(JitError, match="args mismatch") as e: f(x, y)
  assert want in str(e.value) and "captured with" in str(e.value)
  assert len(calls) == 2  # the function did not run

def test_args_mismatch_on_names():
  rng = np.random.default_rng(3)
  f, _ = _scale_sum()
  for _ in range(3): f(*_inputs(rng))
  x, y = _inputs(rng)
  with pytest.raises(JitError, match=r"args mismatch in JIT: the captured call took Tensor arguments \[0, 1\], this call gives \[0, 'y'\]"):
    f(x, y=y)
  with pytest.raises(JitError, match=r"args mismatch.*gives \[0\]"): f(x, 3.0)

def test_keyword_inputs_are_named_and_sorted():
  @TinyJit
  def f(*, b, a): return (a - b).realize()
  for i in range(4):
    a, b = Tensor([float(i), 1.0]).realize(), Tensor([1.0, float(i)]).realize()
    assert f(b=b, a=a).tolist() == [i - 1.0, 1.0 - i]  # the order of the keywords in the call does not matter
  with pytest.raises(JitError, match=r"took Tensor arguments \['a', 'b'\], this call gives \['a', 'c'\]"):
    f(a=a, c=b)

def test_duplicate_inputs_are_an_error():
  f, _ = _scale_sum()
  x = Tensor.ones(5).contiguous().realize()
  with pytest.raises(JitError, match="duplicate inputs to JIT: arguments 0 and 1 are the same tensor storage"):
    f(x.reshape(5, 1), x)

def test_inputs_are_realized_before_the_call():
  @TinyJit
  def f(x): return (x + 1).realize()
  for i in range(4):
    lazy = Tensor([1.0, 2.0]) * i  # not realized: the JIT realizes it first, outside the capture
    assert f(lazy).tolist() == [i + 1.0, 2 * i + 1.0]
  assert len(f.captured.steps) == 1

def test_reset_starts_over():
  rng = np.random.default_rng(4)
  f, calls = _scale_sum()
  for _ in range(3): f(*_inputs(rng))
  f.reset()
  assert f.captured is None and f.cnt == 0
  x, y = _inputs(rng, rows=3, cols=70)  # another shape: fine after a reset
  for _ in range(3): out = f(x, y)
  assert len(calls) == 4
  np.testing.assert_allclose(out.numpy(), (x.numpy() * 2).sum(axis=1) + y.numpy(), rtol=1e-5, atol=1e-5)

def test_nested_capture_is_rejected():
  @TinyJit
  def inner(x): return (x * 3).realize()
  @TinyJit
  def outer(x): return (inner(x) + 1).realize()
  x = Tensor([1.0, 2.0]).realize()
  assert outer(x).tolist() == [4.0, 7.0]  # call 1: both run their Python
  with pytest.raises(JitError, match="TinyJit inside another TinyJit's capture is not supported"): outer(x)
  assert outer.captured is None

def test_a_function_that_realizes_nothing_is_an_error():
  @TinyJit
  def f(x): return x * 2  # lazy: the JIT realizes returned tensors, so this captures a kernel
  @TinyJit
  def g(x): return x  # its input, already realized: no kernel
  x = Tensor([1.0, 2.0]).realize()
  for _ in range(3): assert f(x).tolist() == [2.0, 4.0]
  g(x)
  with pytest.raises(JitError, match="TinyJit captured no kernels from g: it realized nothing"): g(x)

def test_python_side_effects_are_not_replayed():
  seen = []
  @TinyJit
  def f(x, scale):
    seen.append(scale)
    return (x * scale).realize()
  x = Tensor([1.0]).realize()
  assert [f(x, s).item() for s in (2.0, 3.0, 4.0, 5.0)] == [2.0, 3.0, 3.0, 3.0]  # the Python number was baked in at capture
  assert seen == [2.0, 3.0]

def test_jit_0_always_runs_python_and_jit_2_replays_kernel_by_kernel():
  calls = []
  @TinyJit
  def f(x):
    calls.append(1)
    return (x.sum() * 2).realize()
  with Context(JIT=0):
    for i in range(4): assert f(Tensor.full((100,), float(i)).contiguous().realize()).item() == 200.0 * i
  assert len(calls) == 4 and f.captured is None
  with Context(JIT=2):
    for i in range(4): assert f(Tensor.full((100,), float(i)).contiguous().realize()).item() == 200.0 * i
  assert len(calls) == 6 and f.captured is not None

def test_debug_lines(capsys):
  @TinyJit
  def f(x, y): return ((x + y).contiguous() * 2).realize()
  x, y = Tensor.ones(4).contiguous().realize(), Tensor.ones(4).contiguous().realize()
  f(x, y)
  capsys.readouterr()
  with Context(DEBUG=1): f(x, y)
  assert "JIT captured 2 kernels with 2 inputs" in capsys.readouterr().out
  with Context(DEBUG=2): out = f(x, y)
  lines = [l for l in capsys.readouterr().out.splitlines() if "[JIT replay]" in l]
  assert len(lines) == 2 and lines[0].startswith(f"*** {x.device}")
  assert out.tolist() == [4.0] * 4

def test_kernel_counters_count_replayed_kernels():
  @TinyJit
  def f(x): return ((x + 1).contiguous() * 2).realize()
  x = Tensor.ones(4).contiguous().realize()
  for _ in range(2): f(x)
  GlobalCounters.reset()
  f(x)
  assert GlobalCounters.kernel_count == 2

def test_methods():
  class Scaler:
    def __init__(self, k: float): self.w = Tensor([k, k]).realize()
    @TinyJit
    def __call__(self, x): return (x * self.w).realize()
  s = Scaler(3.0)
  for i in range(4): assert s(Tensor([1.0, float(i)]).realize()).tolist() == [3.0, 3.0 * i]
  assert s.__call__.captured is not None and Scaler.__call__.captured is None  # the capture is the instance's

def test_a_method_captures_per_instance():
  """@TinyJit on a method shared one capture across instances: captured on instance 1, a call on instance 2 silently
  returned instance 1's result."""
  class Model:
    def __init__(self, k: float): self.w = Tensor([k, k]).realize()
    @TinyJit
    def step(self, x): return (x * self.w).realize()
  a, b = Model(2.0), Model(10.0)
  x = Tensor([1.0, 2.0]).realize()
  for _ in range(3): assert a.step(x).tolist() == [2.0, 4.0]
  assert a.step.cnt == 3 and a.step.captured is not None
  for _ in range(3): assert b.step(x).tolist() == [10.0, 20.0]  # was [2.0, 4.0]: a's capture replayed
  assert a.step(Tensor([3.0, 1.0]).realize()).tolist() == [6.0, 2.0]
  b.step.reset()
  assert b.step.cnt == 0 and a.step.cnt == 4  # one instance's reset leaves the others
  n = len(Model.step._per_instance)
  del b
  import gc; gc.collect()  # noqa: E702
  assert len(Model.step._per_instance) == n - 1  # an instance's capture goes with it

def test_a_method_of_an_instance_without_weakref_is_a_clear_error():
  class Slotted:
    __slots__ = ("w",)
    def __init__(self): self.w = Tensor([1.0]).realize()
    @TinyJit
    def step(self, x): return (x + self.w).realize()
  with pytest.raises(JitError, match=r"@TinyJit on the method .*Slotted.step: a Slotted can't be weakly referenced.*__weakref__"):
    Slotted().step(Tensor([1.0]).realize())

def test_what_a_capture_bakes_in():
  """docs/jit.md, 'What a capture keeps': a global rebound by name and a Python number (closed over or passed) are read when
  the function runs, so their values at the capture are kept; tensors are inputs, and a Variable's value is bound per call."""
  global SCALE
  SCALE = 2.0
  @TinyJit
  def f(x, k): return (x * SCALE * k).realize()
  x = Tensor([1.0]).realize()
  for _ in range(3): assert f(x, 1.0).item() == 2.0
  SCALE = 5.0
  assert f(x, 3.0).item() == 2.0  # both baked: 2.0 * 1.0 from the capture
  f.reset()
  for _ in range(3): assert f(x, 3.0).item() == 15.0  # reset() captures again with the values of now

def test_copies_are_captured():
  @TinyJit
  def f(x): return (x + Tensor([1.0, 2.0, 3.0])).realize()  # a host constant copied to the device, in the capture
  for i in range(4): assert f(Tensor([float(i)] * 3).realize()).tolist() == [i + 1.0, i + 2.0, i + 3.0]
  assert any(s.fn is None for s in f.captured.steps)

def test_python_device_replays():
  @TinyJit
  def f(x): return (x * x + 1).sum().realize()
  for i in range(4):
    x = Tensor([float(i), 2.0], device="PYTHON").realize()
    assert f(x).item() == i * i + 6.0
  assert f.captured._native is False  # not a CPU kernel: replayed step by step

def test_cpu_replay_is_one_native_call():
  @TinyJit
  def f(x):
    for _ in range(10): x = (x * 2).realize()
    return x
  # on CPU whatever the default device (DEV=CL runs this file too): the native replay is the CPU device's
  for i in range(4): assert f(Tensor([float(i)], device="CPU").realize()).item() == 1024.0 * i
  assert f.captured._native not in (None, False) and len(f.captured.steps) == 10

def test_construction_errors():
  with pytest.raises(JitError, match="needs a function"): TinyJit(None)
  f, _ = _scale_sum()
  import pickle
  with pytest.raises(JitError, match="can be pickled once it has captured"): pickle.dumps(f)

def test_a_returned_input_is_this_calls_input():
  @TinyJit
  def f(x, y): return (x * 2).realize(), y, y.reshape(2, 2)  # y itself, and a view of it: no kernel for either
  for i in range(4):
    x, y = Tensor([float(i)] * 4).realize(), Tensor([float(-i)] * 4).realize()
    a, b, c = f(x, y)
    assert a.tolist() == [2.0 * i] * 4 and b.tolist() == [-float(i)] * 4 and c.tolist() == [[-float(i)] * 2] * 2

def test_a_capture_sees_the_kernels_of_its_engine():
  # TinyJit captures through the engine it is given, the one the function realizes with: an engine of its own (caches of its
  # own, the process's storage) shows the capture every kernel, prepared schedule-cache hits included, and a replay runs them
  from tensor.engine.state import ENGINE, Engine
  from tensor.tensor import realize
  mine = Engine(storage=ENGINE.storage)
  def step(x):
    out = x * 3 + 1
    realize([out], mine)
    return out
  jitted = TinyJit(step, engine=mine)
  rng = np.random.default_rng(3)
  for _ in range(4):
    x = Tensor(rng.standard_normal(8).astype(np.float32)).realize()
    out = jitted(x)
    np.testing.assert_allclose(out.numpy(), x.numpy() * 3 + 1, rtol=1e-6)
  assert len(jitted.captured.steps) == 1 and jitted.captured.engine is mine  # type: ignore[union-attr]
  assert len(mine.programs) >= 1 and not mine.capturing and not ENGINE.capturing
  # an engine with a storage of its own does not hold these tensors' buffers: refused, saying what to make instead
  with pytest.raises(JitError, match="Engine.storage=ENGINE.storage."): TinyJit(step, engine=Engine())
  from tensor.errors import ArgumentValueError
  with pytest.raises(ArgumentValueError, match="another storage"): realize([x + 1], Engine())
