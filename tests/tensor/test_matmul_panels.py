"""Large float32 matmuls on the CPU through column panels (tensor/functional/matmul.py) and the register tile the heuristic
gives them (tensor/codegen/heuristic.py): numpy is the oracle, at sizes on both sides of the packing threshold, with rows
that are not a multiple of the tile, batched and transposed operands; and the generated inner loop's shape."""
from __future__ import annotations
import re
import numpy as np
import pytest
from runtime.helpers import Context
from runtime.ops import Ops
from tensor import Tensor
from tensor.engine.realize import get_program, kernel_buffers, schedule_of
from tensor.functional.matmul import MIN_MACS, panel_tile

rng = np.random.default_rng(0)

def rand(*shape) -> np.ndarray: return rng.standard_normal(shape).astype(np.float32)

def check(x: np.ndarray, w: np.ndarray, xt=lambda t: t, wt=lambda t: t) -> None:
  got = (xt(Tensor(x)) @ wt(Tensor(w))).numpy()
  want = xt(x) @ wt(w)
  assert got.shape == want.shape
  np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(x.shape[-1]))

@pytest.mark.parametrize("m,k,n", [(256, 256, 256), (130, 96, 160), (96, 240, 48), (17, 1000, 64), (300, 64, 64)])
def test_packed_matmul_equals_numpy(m, k, n):
  assert panel_tile(Tensor(rand(m, k)), Tensor(rand(k, n))) is not None  # these do take the packed path
  check(rand(m, k), rand(k, n))

def test_small_odd_and_batched_shapes_take_the_plain_path_and_stay_right():
  assert panel_tile(Tensor(rand(8, 64)), Tensor(rand(64, 64))) is None            # too few rows
  assert panel_tile(Tensor(rand(64, 64)), Tensor(rand(64, 20))) is None           # columns not a multiple of the tile
  assert panel_tile(Tensor(rand(2, 64, 64)), Tensor(rand(2, 64, 64))) is None     # a batched right operand
  assert panel_tile(Tensor(rand(32, 32)), Tensor(rand(32, 32))) is None           # below MIN_MACS
  assert 32 ** 3 < MIN_MACS
  assert panel_tile(Tensor(rand(64, 0)), Tensor(rand(0, 64))) is None             # an empty sum (k = 0)
  np.testing.assert_array_equal((Tensor(rand(64, 0)) @ Tensor(rand(0, 64))).numpy(), np.zeros((64, 64), np.float32))
  for m, k, n in ((8, 64, 64), (64, 64, 20), (100, 100, 100)): check(rand(m, k), rand(k, n))
  check(rand(2, 64, 64), rand(2, 64, 64))

def test_batched_left_operand_folds_into_rows():
  x, w = rand(3, 70, 128), rand(128, 96)
  assert panel_tile(Tensor(x), Tensor(w)) is not None
  check(x, w)

def test_transposed_operands():
  check(rand(128, 200), rand(160, 200), wt=lambda t: t.T)
  check(rand(200, 130), rand(200, 96), xt=lambda t: t.T)

def test_other_dtypes_and_devices_are_not_packed():
  assert panel_tile(Tensor(rand(256, 256).astype(np.float16)), Tensor(rand(256, 256).astype(np.float16))) is None
  assert panel_tile(Tensor(rand(256, 256), device="PYTHON"), Tensor(rand(256, 256), device="PYTHON")) is None
  x, w = rng.integers(-9, 9, (128, 128)).astype(np.int32), rng.integers(-9, 9, (128, 128)).astype(np.int32)
  np.testing.assert_array_equal((Tensor(x) @ Tensor(w)).numpy(), x @ w)

def test_gradients_through_the_packed_path():
  torch = pytest.importorskip("torch")
  x, w = rand(130, 96), rand(96, 64)
  tx, tw = Tensor(x, requires_grad=True), Tensor(w, requires_grad=True)
  (tx @ tw).sum().backward()
  px, pw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
  (px @ pw).sum().backward()
  np.testing.assert_allclose(tx.grad.numpy(), px.grad.numpy(), rtol=1e-4, atol=1e-3)
  np.testing.assert_allclose(tw.grad.numpy(), pw.grad.numpy(), rtol=1e-4, atol=1e-3)

def matmul_program(t: Tensor):
  """The program of the reduction kernel among the kernels computing t."""
  t.kernelize()
  root = t.uop.src[0] if t.uop.op is Ops.RESHAPE else t.uop
  asts = [k.arg.ast for k in schedule_of([root]) if kernel_buffers(k)]
  ast = next(a for a in asts if any(u.op is Ops.REDUCE_AXIS for u in a.toposort()))
  with Context(NOOPT=0): return get_program(ast, "CPU")  # the heuristic's tile, also in a NOOPT=1 run of the suite

def test_inner_loop_is_a_register_tile_over_a_panel():
  from tensor.codegen import vector_caps
  rows, cols = panel_tile(Tensor(rand(384, 384)), Tensor(rand(384, 384)))  # type: ignore[misc]
  p = matmul_program(Tensor(rand(384, 384)) @ Tensor(rand(384, 384)))
  assert [(o.op, o.amount) for o in p.opts] == [("UPCAST", rows), ("UPCAST", cols)]
  lines = p.src[p.src.rindex("for ("):].splitlines()
  lines = lines[:next(i for i, ln in enumerate(lines) if ln.strip() == "}")]  # the innermost loop: k
  updates = [re.search(r"(acc\d+) = vfma_f32x\d+\((vec\d+), (val\d+), \1\);", ln) for ln in lines]  # fused multiply-adds
  updates = [u for u in updates if u]
  assert len(updates) == rows * cols // (vector_caps("CPU").register_bytes // 4)
  # the panel is read at consecutive addresses: one step of k moves by the panel's width
  assert re.search(rf"ridx\d+\*{cols}(ll)?\)", "".join(lines))
  # each broadcast row value is used right after it is made (one live at a time): AVX2's 6x16 tile fits its 16 registers
  made = {u.group(2): next(i for i, ln in enumerate(lines) if f"{u.group(2)} = ((f32x" in ln) for u in updates}
  last_use = {v: max(i for i, ln in enumerate(lines) if f"({v}, " in ln) for v in made}
  spans = sorted((made[v], last_use[v]) for v in made)
  assert len(spans) == rows and all(a[1] < b[0] for a, b in zip(spans, spans[1:]))
