"""Large float32 matmuls on the CPU through row and column panels (tensor/functional/matmul.py) and the register tile the
heuristic gives them (tensor/codegen/heuristic.py): numpy is the oracle, at sizes on both sides of the packing threshold,
with rows and columns that are not multiples of the tile (padded), batched and transposed operands, on one thread and
two (bit for bit); the tile's shape for AVX-512 and AVX2 registers; and the generated inner loop."""
from __future__ import annotations
import re
import numpy as np
import pytest
from runtime.helpers import Context
from runtime.ops import Ops
from rules.vectorize_helpers import VectorCaps
from tensor import Tensor
from tensor.codegen import target_for
from tensor.codegen.heuristic import RUN_BYTES, col_vectors, register_tile
from tensor.engine.realize import get_program, kernel_buffers, schedule_of
from tensor.functional.matmul import MIN_MACS, column_vectors, panel_tile

rng = np.random.default_rng(0)
def vector_caps(device: str): return target_for(device).caps
WIDTH = vector_caps("CPU").register_bytes // 4  # floats per vector register of this machine

def rand(*shape) -> np.ndarray: return rng.standard_normal(shape).astype(np.float32)

def check(x: np.ndarray, w: np.ndarray, xt=lambda t: t, wt=lambda t: t) -> np.ndarray:
  got = (xt(Tensor(x)) @ wt(Tensor(w))).numpy()
  want = xt(x) @ wt(w)
  assert got.shape == want.shape
  np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(x.shape[-1]))
  return got

# rows: a multiple of the tile's and not (130, 17, 61 leave remainders for 6 and 8 rows); columns: a multiple of the widest
# tile (256, 64), of a narrower one (48, 96, 160: 3 or 2 vectors of 16, or AVX2's 8), and of none (20, 100, 1000: padded)
SHAPES = [(256, 256, 256), (130, 96, 160), (96, 240, 48), (17, 1000, 64), (300, 64, 64), (61, 256, 100), (64, 900, 20),
          (200, 70, 1000), (48, 256, 96)]

@pytest.mark.parametrize("m,k,n", SHAPES)
def test_packed_matmul_equals_numpy(m, k, n):
  rows, cols = panel_tile(Tensor(rand(m, k)), Tensor(rand(k, n)))  # type: ignore[misc]  # these do take the packed path
  assert cols % WIDTH == 0 and 2 <= rows
  check(rand(m, k), rand(k, n))

def test_padding_crosses_the_tile_both_ways():
  # the shapes above pad rows (M % rows) and columns (N % cols) on this machine's tile, and leave some unpadded
  tiles = {s: panel_tile(Tensor(rand(s[0], s[1])), Tensor(rand(s[1], s[2]))) for s in SHAPES}
  assert any(m % t[0] for (m, _, _), t in tiles.items()) and any(m % t[0] == 0 for (m, _, _), t in tiles.items())
  assert any(n % t[1] for (_, _, n), t in tiles.items()) and any(n % t[1] == 0 for (_, _, n), t in tiles.items())

def test_small_odd_and_batched_shapes_take_the_plain_path_and_stay_right():
  assert panel_tile(Tensor(rand(8, 64)), Tensor(rand(64, 64))) is None                  # too few rows
  assert panel_tile(Tensor(rand(64, 64)), Tensor(rand(64, WIDTH // 2 - 1))) is None     # under half a vector of columns
  assert panel_tile(Tensor(rand(2, 64, 64)), Tensor(rand(2, 64, 64))) is None           # a batched right operand
  assert panel_tile(Tensor(rand(32, 32)), Tensor(rand(32, 32))) is None                 # below MIN_MACS
  assert 32 ** 3 < MIN_MACS
  assert panel_tile(Tensor(rand(64, 0)), Tensor(rand(0, 64))) is None                   # an empty sum (k = 0)
  np.testing.assert_array_equal((Tensor(rand(64, 0)) @ Tensor(rand(0, 64))).numpy(), np.zeros((64, 64), np.float32))
  for m, k, n in ((8, 64, 64), (64, 64, WIDTH // 2 - 1), (100, 100, 100)): check(rand(m, k), rand(k, n))
  check(rand(2, 64, 64), rand(2, 64, 64))

def test_batched_left_operand_folds_into_rows():
  x, w = rand(3, 70, 128), rand(128, 96)
  assert panel_tile(Tensor(x), Tensor(w)) is not None
  check(x, w)

def test_transposed_operands():
  check(rand(128, 200), rand(160, 200), wt=lambda t: t.T)
  check(rand(200, 130), rand(200, 96), xt=lambda t: t.T)

@pytest.mark.parametrize("m,k,n", [(256, 192, 128), (130, 96, 160), (61, 256, 100), (200, 70, 1000)])
def test_two_threads_equal_one_bit_for_bit(m, k, n):
  x, w = rand(m, k), rand(k, n)
  with Context(THREADS=1): one = (Tensor(x) @ Tensor(w)).numpy()
  with Context(THREADS=2): two = check(x, w)
  assert one.tobytes() == two.tobytes()

def test_sums_are_fused_multiply_adds_in_the_order_of_k():
  # each output is one chain of fmas over k: the same bits as numpy's float64 fma chain rounded at every step
  x, w = rand(64, 200), rand(200, 48)
  want = np.zeros((64, 48), np.float64)
  for k in range(200): want = (x[:, k, None].astype(np.float64) * w[None, k, :] + want).astype(np.float32).astype(np.float64)
  got = (Tensor(x) @ Tensor(w)).numpy()
  assert np.mean(got == want.astype(np.float32)) > 0.99  # a float64 product plus a float32 sum rounds twice, now and then

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

def test_register_tile_fills_the_registers_of_avx512_and_avx2():
  avx512, avx2 = VectorCaps(frozenset(), frozenset(), 32, 64, 64, 32), VectorCaps(frozenset(), frozenset(), 32, 32, 32, 16)
  assert (col_vectors(avx512), col_vectors(avx2)) == (4, 2)
  assert register_tile(avx512, 4) == (6, 64) and register_tile(avx2, 4) == (6, 16)  # 24 of 32 and 12 of 16 accumulators
  assert register_tile(avx512, 4, 2) == (8, 32) and register_tile(avx2, 4, 1) == (8, 8)  # narrower tiles: at most 8 rows
  for caps in (avx512, avx2):
    for nv in range(1, col_vectors(caps) + 1):
      rows, _ = register_tile(caps, 4, nv)
      assert rows * nv + nv + 2 <= caps.registers  # accumulators, column vectors, a broadcast and a product
  # columns: the fewest padded (a narrower tile counting 10% more per vector fewer)
  assert [column_vectors(n, 16, 4) for n in (16, 20, 48, 64, 96, 100, 1000)] == [1, 2, 3, 4, 3, 4, 4]
  assert [column_vectors(n, 8, 2) for n in (8, 20, 24, 32, 64)] == [1, 1, 1, 2, 2]

def matmul_program(t: Tensor):
  """The program of the reduction kernel among the kernels computing t."""
  t.kernelize()
  root = t.uop.src[0] if t.uop.op in (Ops.RESHAPE, Ops.SHRINK) else t.uop
  asts = [k.arg.ast for k in schedule_of([root]) if kernel_buffers(k)]
  ast = next(a for a in asts if any(u.op is Ops.REDUCE_AXIS for u in a.toposort()))
  with Context(NOOPT=0, THREADS=1): return get_program(ast, "CPU")  # the heuristic's tile, also in a NOOPT=1 run of the suite

def test_inner_loop_is_a_register_tile_over_two_panels():
  rows, cols = panel_tile(Tensor(rand(384, 384)), Tensor(rand(384, 384)))  # type: ignore[misc]
  p = matmul_program(Tensor(rand(384, 384)) @ Tensor(rand(384, 384)))
  # the tile, then the column panels' loop outside the row panels' (a panel stays in the L2 while all of A streams past)
  assert [(o.op, o.amount) for o in p.opts] == [("UPCAST", rows), ("UPCAST", cols), ("SWAP", 1)]
  outer = re.findall(r"for \(\w+ \w+ = 0; \w+ < (\d+)", p.src)
  assert [int(v) for v in outer] == [384 // cols, 384 // rows, 384]  # column panels, row panels, k
  lines = p.src[p.src.rindex("for ("):].splitlines()
  lines = lines[:next(i for i, ln in enumerate(lines) if ln.strip() == "}")]  # the innermost loop: k
  updates = [re.search(r"(acc\d+) = vfma_f32x\d+\((vec\d+), (val\d+), \1\);", ln) for ln in lines]  # fused multiply-adds
  updates = [u for u in updates if u]
  assert len(updates) == rows * cols // WIDTH
  # both panels are read at consecutive addresses: one step of k moves by the tile's rows in A and its columns in B
  assert re.search(rf"ridx\d+\*{cols}(ll)?\)", "".join(lines)) and re.search(rf"ridx\d+\*{rows}(ll)?\)", "".join(lines))
  # each broadcast row value is used right after it is made (one live at a time), so the tile fits the registers
  made = {u.group(2): next(i for i, ln in enumerate(lines) if f"{u.group(2)} = ((f32x" in ln) for u in updates}
  last_use = {v: max(i for i, ln in enumerate(lines) if f"({v}, " in ln) for v in made}
  spans = sorted((made[v], last_use[v]) for v in made)
  assert len(spans) == rows and all(a[1] < b[0] for a, b in zip(spans, spans[1:]))

@pytest.mark.optimized
def test_three_panels_on_two_threads_keep_the_row_panels_outermost():
  # the outer loop is what the threads split: 3 column panels would leave one thread idle a third of the time
  w = rand(128, 3 * WIDTH * col_vectors(vector_caps("CPU")))
  t = Tensor(rand(384, 128)) @ Tensor(w)
  t.kernelize()
  ast = next(k.arg.ast for k in schedule_of([t.uop.src[0] if t.uop.op is Ops.RESHAPE else t.uop])
             if any(u.op is Ops.REDUCE_AXIS for u in k.arg.ast.toposort()))
  with Context(THREADS=2): assert "SWAP" not in [o.op for o in get_program(ast, "CPU").opts]
  with Context(THREADS=1): assert "SWAP" in [o.op for o in get_program(ast, "CPU").opts]
  x = rand(384, 128)
  with Context(THREADS=1): one = (Tensor(x) @ Tensor(w)).numpy()
  with Context(THREADS=2): two = check(x, w)
  assert one.tobytes() == two.tobytes()  # the loop order differs, each output's sum does not

def kernel_count(t: Tensor) -> int:
  t.kernelize()
  return sum(1 for k in schedule_of([t.uop.src[0] if t.uop.op in (Ops.RESHAPE, Ops.SHRINK) else t.uop]) if kernel_buffers(k))

def test_a_realized_left_operand_is_read_in_place():
  # a realized A whose rows divide into the tile is read where it is (no copy into row panels: one kernel fewer); one
  # whose rows don't (padded), a lazy one (computed first) and a transposed view are packed; the same values every way
  k, n = 96, 2 * WIDTH * col_vectors(vector_caps("CPU"))
  rows = panel_tile(Tensor(rand(1, k)).expand(600, k), Tensor(rand(k, n)))[0]  # type: ignore[index]
  w = rand(k, n)
  for m, in_place in ((rows * 40, True), (rows * 40 + 1, False), (rows * 8 * 3, True)):
    x = rand(m, k)
    assert panel_tile(Tensor(x), Tensor(w)) is not None and (m % panel_tile(Tensor(x), Tensor(w))[0] == 0) is in_place  # type: ignore[index]
    X = Tensor(x).realize()
    assert X.is_realized()
    packed = 4 if m % rows else 3  # A's and B's panels, the GEMM and, when rows were padded, the copy cutting them off
    assert kernel_count(X @ Tensor(w).realize()) == (2 if in_place else packed)
    assert kernel_count((X * 2) @ Tensor(w).realize()) == packed  # lazy: computed into the row panels by the packing kernel
    np.testing.assert_allclose(((X * 2) @ Tensor(w).realize()).numpy(), (x * 2) @ w, rtol=1e-4, atol=2e-4 * np.sqrt(k))
    with Context(THREADS=1): one = (Tensor(x).realize() @ Tensor(w).realize()).numpy()
    with Context(THREADS=2): two = (Tensor(x).realize() @ Tensor(w).realize()).numpy()
    np.testing.assert_allclose(one, x @ w, rtol=1e-4, atol=1e-4 * np.sqrt(k))
    assert one.tobytes() == two.tobytes()
    # the packed path's sums are the same sums in the same order of k: the same bits
    assert one.tobytes() == (Tensor(x) @ Tensor(w)).numpy().tobytes()
  xt = Tensor(rand(k, rows * 40)).realize()
  check(xt.numpy(), w, xt=lambda t: t.T)  # a transposed view of a buffer: not in place, packed
  b = rand(3, rows * 10, k)
  B = Tensor(b).realize()
  assert kernel_count(B @ Tensor(w).realize()) == 2  # a batched buffer folds into rows in place
  np.testing.assert_allclose((B @ Tensor(w).realize()).numpy(), b @ w, rtol=1e-4, atol=1e-4 * np.sqrt(k))

def test_in_place_inner_loop_reads_a_along_its_rows():
  x, w = Tensor(rand(384, 384)).realize(), Tensor(rand(384, 384)).realize()
  rows, _ = panel_tile(x, w)  # type: ignore[misc]
  assert 384 % rows == 0
  src = matmul_program(x @ w).src
  inner = src[src.rindex("for ("):]
  # one step of k moves A by one float (its row), each of the tile's rows a whole row of 384 further
  assert re.search(r"\(alu\d+\+ridx\d+\)", inner) and f"+{384 * (rows - 1)}" in inner

def innermost_loop(src: str) -> tuple[str, list[str]]:
  """The line before the last `for (` of a kernel, and the lines of that loop's body (before[-1] is that for's indent)."""
  before, after = src[:src.rindex("for (")].splitlines(), src[src.rindex("for ("):].splitlines()
  return before[-2], after[:next(i for i, ln in enumerate(after) if ln.strip() == "}")]

def test_tile_loops_with_many_fmas_are_unrolled():
  from tensor.renderer.cstyle import UNROLL_TILE_MIN_FMAS, UNROLL_TILE_STEPS
  # a packed matmul's tile (WIDTH-float vectors: 4x4 or 6x2 per step), plain matmuls with narrower tiles, an elementwise fma
  cases = [Tensor(rand(384, 384)) @ Tensor(rand(384, 384)), Tensor(rand(64, 64)) @ Tensor(rand(64, WIDTH)),
           Tensor(rand(8, 64)) @ Tensor(rand(64, 2 * WIDTH)), Tensor(rand(16, 64)) @ Tensor(rand(64, 3))]
  seen = set()
  for t in cases:
    line, body = innermost_loop(matmul_program(t).src)
    fmas = sum(len(re.findall(r"vfma_f32x\d+\(", ln)) for ln in body)
    unrolled = line.strip() == f"#pragma GCC unroll {UNROLL_TILE_STEPS}"
    assert unrolled == (fmas >= UNROLL_TILE_MIN_FMAS), (fmas, line)
    seen.add(unrolled)
  assert seen == {True, False}  # both sides of the threshold

def copy_program(t: Tensor):
  t.kernelize()
  ast = schedule_of([t.uop.src[0] if t.uop.op is Ops.RESHAPE else t.uop])[-1].arg.ast
  with Context(NOOPT=0): return get_program(ast, "CPU")

@pytest.mark.parametrize("shape,perm,swaps", [
  ((96, 6, 16), (1, 0, 2), 1),        # B (96, 96) into 6 column panels of 16 (runs of RUN_BYTES), as packed_matmul does
  ((96, 12, 8), (1, 0, 2), 0),        # runs of 8 floats, shorter than RUN_BYTES: left in the output's order
  ((8, 5, 7, 32), (2, 0, 1, 3), 2),   # three outer loops, the source's order two SWAPs away
  ((4, 6, 16), (0, 1, 2), 0),         # already in the source's order (not a permute: no kernel of its own)
  ((6, 16), (1, 0), 0),               # a transpose: the innermost loop moves the load 6 on, no reorder
  ((16, 6, 5), (1, 2, 0), 2),         # a transpose strided in the source: the innermost loop as lanes, its rest outermost
])
def test_permuting_copy_reads_its_source_in_order(shape, perm, swaps):
  # a copy whose innermost loop moves both sides one element on runs its outer loops in the source's order (largest stride
  # outermost): packing B reads B once through; the values are numpy's permute and two threads give one's bits
  assert RUN_BYTES == 64  # the shapes' runs of 16 and 8 floats lie either side of it
  x = rng.standard_normal(shape).astype(np.float32)
  want = np.ascontiguousarray(x.transpose(perm))
  if perm != tuple(range(len(perm))):
    p = copy_program(Tensor(x).realize().permute(perm).contiguous())
    assert [o.op for o in p.opts].count("SWAP") == swaps
    if swaps:
      outer = [int(v) for v in re.findall(r"for \(\w+ \w+ = 0; \w+ < (\d+)", p.src)]
      # the loops nest as the source's axes, each as long as the source's (a transpose's lanes: the rest of their loop)
      lanes = next((o.amount for o in p.opts if o.op == "UPCAST"), 1)
      assert outer == [shape[0] // lanes, *shape[1:]]
  with Context(THREADS=1): one = Tensor(x).realize().permute(perm).contiguous().numpy()
  with Context(THREADS=2): two = Tensor(x).realize().permute(perm).contiguous().numpy()
  np.testing.assert_array_equal(one, want)
  assert one.tobytes() == two.tobytes()
