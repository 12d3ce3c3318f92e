"""Reductions, softmax and threads in generated kernels: the Opts STASH, SPLIT and PREFETCH (rules/opt.rules,
tensor/codegen/opt.py), when the heuristic picks them (tensor/codegen/heuristic.py), exp2's polynomial as vector code
(rules/vectorize.rules, rules/render_c.rules), and the hints on an OpenMP loop (runtime/threads.py). numpy is the oracle, at
sizes either side of each threshold; an Opt that only moves work (STASH, PREFETCH) must not change a bit, and two threads
must give one thread's bits."""
from __future__ import annotations
import subprocess
import numpy as np
import pytest
from runtime import ops_cpu
from runtime.device import Buffer
from runtime.dtype import dtypes
from runtime.helpers import Context
from runtime.ops import Ops
from runtime.ops_python import program
from tensor import Tensor
from tensor.codegen import lower_kernel, rangeify_simplified, render, target_for
from tensor.codegen.heuristic import MATVEC_PREFETCH, MAX_CHAINS, PARTIALS, SPLIT_MIN_BYTES, STASH_MAX_BYTES
from tensor.codegen.linearize import linearize
from tensor.codegen.opt import Opt, OptError, apply_opt
from tensor.engine.realize import get_program, kernel_buffers, schedule_of
from tensor.engine.state import ENGINE
buffers = ENGINE.storage.buffers

rng = np.random.default_rng(0)

def kernel_of(t: Tensor):
  """The AST of the last kernel computing t (its inputs realized), and its buffers."""
  t.kernelize()
  root = t.uop.src[0] if t.uop.op is Ops.RESHAPE else t.uop
  k = schedule_of([root])[-1]
  bufs = [buffers[b] for b in kernel_buffers(k)]
  for b in bufs: b.ensure_allocated()
  return k.arg.ast, bufs

def heuristic(t: Tensor) -> list[Opt]:
  with Context(NOOPT=0): return get_program(kernel_of(t)[0], "CPU").opts

def kinds(t: Tensor) -> list[str]: return [o.op for o in heuristic(t)]

def source(t: Tensor, opts=None, threads: int = 1) -> str:
  with Context(THREADS=threads, NOOPT=0):
    sink, applied = lower_kernel(kernel_of(t)[0], target_for("CPU"), opts)
    return render(target_for("CPU"), "k", linearize(sink), applied)  # type: ignore[return-value]

def run(t: Tensor, opts, device: str = "CPU", threads: int = 1) -> np.ndarray:
  """t's last kernel with these Opts (None: the heuristic's) on `device`, into a fresh output."""
  ast, bufs = kernel_of(t)
  with Context(THREADS=threads, NOOPT=0):
    sink, applied = lower_kernel(ast, target_for(device), opts)
    uops = linearize(sink)
    prog = program(uops, "k") if device == "PYTHON" else ops_cpu.program(render(target_for(device), "k", uops, applied), "k")
  out = Buffer(device, bufs[0].size, bufs[0].dtype)
  prog([out, *(b if b.device == device else Buffer(device, b.size, b.dtype, b.numpy()) for b in bufs[1:])])
  return out.numpy()

def softmax_ref(a: np.ndarray) -> np.ndarray:
  with np.errstate(all="ignore"):
    x = a.astype(np.float64)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)

def with_specials(a: np.ndarray) -> np.ndarray:
  """Rows with a nan, an inf, all -inf, a huge spread (exp2 underflows to 0 and to subnormals)."""
  a = a.copy()
  a[0, a.shape[1] // 2] = np.nan
  if a.shape[0] > 1: a[1, 0] = np.inf
  if a.shape[0] > 2: a[2, :] = -np.inf
  if a.shape[0] > 3: a[3, ::2] = -150.0
  return a

# ---- STASH: softmax's exponentials computed once ----

@pytest.mark.parametrize("cols", [3, 16, 1000, 1001, 1024, STASH_MAX_BYTES // 4])
def test_softmax_matches_numpy_and_keeps_its_bits_with_threads(cols):
  a = with_specials(rng.standard_normal((6, cols)).astype(np.float32) * 8)
  A = Tensor(a).realize()
  assert "STASH" in kinds(A.softmax(-1))
  with Context(THREADS=1): one = A.softmax(-1).numpy()
  with Context(THREADS=2): two = A.softmax(-1).numpy()
  assert one.tobytes() == two.tobytes()
  ref = softmax_ref(a)
  np.testing.assert_array_equal(np.isnan(one), np.isnan(ref))
  rtol = 2e-6 * max(1, cols / 1024)  # a float32 sum of the row's terms
  np.testing.assert_allclose(np.nan_to_num(one), np.nan_to_num(ref), rtol=rtol, atol=1e-7)
  with Context(NOOPT=1): np.testing.assert_allclose(np.nan_to_num(A.softmax(-1).numpy()), np.nan_to_num(ref), rtol=rtol, atol=1e-7)

def test_stash_changes_no_bit():
  a = with_specials(rng.standard_normal((8, 1024)).astype(np.float32) * 8)
  t = Tensor(a).realize().softmax(-1)
  opts = heuristic(t)
  assert opts[0] == Opt("STASH", 2, 0)
  assert run(t, opts).tobytes() == run(t, opts[1:]).tobytes()

def test_stash_computes_each_exponential_once():
  t = Tensor(rng.standard_normal((8, 1024)).astype(np.float32)).realize().softmax(-1)
  def loops(src: str) -> list[str]: return src.split("for (int ")[2:]  # the loops inside the row loop: max, sum, output
  with_stash, without = loops(source(t)), loops(source(t, [o for o in heuristic(t) if o.op != "STASH"]))
  # the output loop reads the exponentials back from the output instead of reading x and computing them again
  assert "*(data1" not in with_stash[2] and "*(data0+" in with_stash[2] and "12582912.0f" not in with_stash[2]
  assert "*(data1" in without[2] and "12582912.0f" in without[2]

def test_one_stash_for_two_reductions_it_could_take():
  # the output holds one row of values: the heuristic stashes the first (a second STASH no longer applies)
  a = rng.standard_normal((4, 64)).astype(np.float32)
  A = Tensor(a).realize()
  e1, e2 = A.exp(), (A * 2).exp()
  t = e1 / e1.sum(1, keepdim=True) + e2 / e2.sum(1, keepdim=True)
  assert kinds(t).count("STASH") == 1
  np.testing.assert_allclose(t.numpy(), softmax_ref(a) + softmax_ref(2 * a), rtol=2e-6, atol=1e-7)

def test_stash_not_past_its_row_size():
  a = rng.standard_normal((2, STASH_MAX_BYTES // 4 + 16)).astype(np.float32)
  A = Tensor(a).realize()
  assert "STASH" not in kinds(A.softmax(-1))
  np.testing.assert_allclose(A.softmax(-1).numpy(), softmax_ref(a), rtol=2e-6, atol=1e-8)

def test_stash_leaves_half_softmax_alone():
  # the exponentials are float32, the output float16: storing them would round them
  a = rng.standard_normal((64, 256)).astype(np.float16)
  A = Tensor(a).realize()
  assert "STASH" not in kinds(A.softmax(-1))
  np.testing.assert_allclose(A.softmax(-1).numpy().astype(np.float64), softmax_ref(a), rtol=2e-3, atol=1e-5)

@pytest.mark.parametrize("rows,cols", [(3, 3), (5, 64), (7, 1024)])
def test_no_stash_of_a_softmax_broadcast_over_another_loop(rows, cols):
  # v * softmax(a): the softmax's reductions do not use v's row loop, so they run once before it, and a store of the
  # exponentials at the output's index (which uses the row loop) has no row to store to: gcc saw an undeclared value
  v, a = rng.standard_normal((rows, 1)).astype(np.float32), rng.standard_normal(cols).astype(np.float32)
  t = Tensor(v).realize() * Tensor(a).realize().softmax(-1)
  assert "STASH" not in kinds(t)
  with Context(NOOPT=0): np.testing.assert_allclose(t.numpy(), v * softmax_ref(a[None])[0], rtol=1e-5, atol=1e-7)

def test_stash_applies_only_where_the_value_is_read_back():
  sink, _ = rangeify_simplified(kernel_of(Tensor(np.ones((4, 32), np.float32)).realize().log_softmax(-1))[0])
  with pytest.raises(OptError, match="STASH"): apply_opt(sink, Opt("STASH", 2, 0), lambda: 99)  # log_softmax stores x - max - log(sum)
  sink, _ = rangeify_simplified(kernel_of(Tensor(np.ones((4, 32), np.float32)).realize().softmax(-1))[0])
  with pytest.raises(OptError, match="amount 0"): apply_opt(sink, Opt("STASH", 2, 4), lambda: 99)
  sink, _ = rangeify_simplified(kernel_of(Tensor(np.ones((4, 32), np.float32)).realize().sum(1))[0])
  with pytest.raises(OptError, match="STASH"): apply_opt(sink, Opt("STASH", 1, 0), lambda: 99)

@pytest.mark.parametrize("opts", [[("STASH", 2, 0), ("UPCAST", 0, 2), ("UNROLL", 2, 4)], [("STASH", 2, 0), ("UPCAST", 1, 4)],
                                  [("UPCAST", 0, 3), ("STASH", 2, 0)], [("STASH", 2, 0), ("TILE", 1, 4), ("PREFETCH", 3, 2)]])
def test_stash_with_other_opts_on_python(opts):
  # integers: exp2 of them is exact, their sums too, so any order gives the same bits
  a = rng.integers(-6, 3, (6, 16)).astype(np.float32)
  A = Tensor(a, device="PYTHON").realize()
  x = A - A.max(1, keepdim=True)
  t = x.exp2() / x.exp2().sum(1, keepdim=True)
  np.testing.assert_array_equal(run(t, [Opt(*o) for o in opts], "PYTHON"), run(t, [], "PYTHON"))
  np.testing.assert_array_equal(run(t, [Opt(*o) for o in opts], "CPU"), run(t, [], "PYTHON"))

@pytest.mark.parametrize("cols, lanes", [(1024, 16), (1000, 8), (1004, 4), (1001, None)])
def test_row_reductions_take_the_widest_lanes_that_divide_the_row(cols, lanes):
  a = rng.standard_normal((3, cols)).astype(np.float32)
  A = Tensor(a).realize()
  assert [o.amount for o in heuristic(A.sum(1)) if o.op == "UNROLL"] == ([lanes] if lanes else [])
  np.testing.assert_allclose(A.sum(1).numpy(), a.astype(np.float64).sum(1), rtol=1e-5, atol=1e-4)
  np.testing.assert_array_equal(A.max(1).numpy(), a.max(1))

def test_row_max_combines_its_partials_as_vectors():
  # MAX_CHAINS vectors of partial maxes (independent chains), their halves combined lane by lane as vectors, then a tree of
  # scalar maxes, each a select of bits (no branch: gcc made the select `a > b || a != a ? a : b` branches, mispredicted
  # on random data)
  a = with_specials(rng.standard_normal((8, 1024)).astype(np.float32))
  t = Tensor(a).realize().max(1)
  src = source(t)
  assert [o.amount for o in heuristic(t) if o.op == "UNROLL"] == [16 * MAX_CHAINS]
  assert 0 < src.count("smax_float(") - 1 < 15 and "||" not in src  # the helper's definition, then fewer than 15 calls
  np.testing.assert_array_equal(run(t, None), a.max(1))
  np.testing.assert_array_equal(run(t, None, "PYTHON"), a.max(1))

def test_softmax_exp_polynomial_is_fused_multiply_adds():
  import re
  src = source(Tensor(rng.standard_normal((4, 1024)).astype(np.float32)).realize().softmax(-1))
  assert len(re.findall(r"vfma_f32x\d+\(", src)) >= 7  # exp2's six Horner steps and the sum's accumulator, all vectors
  assert "__builtin_fmaf(" not in src.split("void k(")[1]  # none lane by lane in the kernel

# ---- SPLIT: a whole tensor's reduction in partials that threads share out ----

@pytest.mark.parametrize("n, parts", [(SPLIT_MIN_BYTES // 4 - 16, None), (SPLIT_MIN_BYTES // 4, PARTIALS), (SPLIT_MIN_BYTES // 4 + 256, 16),
                                      (SPLIT_MIN_BYTES // 4 + 4, None)])
def test_split_sum_and_max(n, parts):
  a = rng.standard_normal(n).astype(np.float32)
  A = Tensor(a).realize()
  opts = heuristic(A.sum())
  assert [o.amount for o in opts if o.op == "SPLIT"] == ([parts] if parts else [])
  with Context(THREADS=1): one = (A.sum().numpy(), A.max().numpy())
  with Context(THREADS=2): two = (A.sum().numpy(), A.max().numpy())
  assert one[0].tobytes() == two[0].tobytes() and one[1].tobytes() == two[1].tobytes()
  # within float32's rounding of a serial sum (NOOPT=1 runs one): a lost or doubled block would be off by hundreds
  np.testing.assert_allclose(one[0], a.astype(np.float64).sum(), rtol=0, atol=2e-7 * np.abs(a).sum())
  assert one[1] == a.max()
  if parts: assert "#pragma omp parallel" in source(A.sum(), threads=2) and "#pragma" not in source(A.sum(), threads=1)

def test_split_of_a_2d_sum_at_its_outer_loop():
  a = rng.standard_normal((1024, SPLIT_MIN_BYTES // 4 // 1024)).astype(np.float32)
  A = Tensor(a).realize()
  assert heuristic(A.sum())[0] == Opt("SPLIT", 0, PARTIALS)  # the rows' loop: each partial a block of whole rows
  with Context(THREADS=1): one = A.sum().numpy()
  with Context(THREADS=2): two = A.sum().numpy()
  assert one.tobytes() == two.tobytes()
  np.testing.assert_allclose(one, a.astype(np.float64).sum(), rtol=0, atol=2e-7 * np.abs(a).sum())
  assert "SPLIT" not in kinds(Tensor(a[:, : a.shape[1] // 2 - 1]).realize().sum())  # just under 2 MiB

def test_split_max_keeps_nan_and_inf():
  a = np.full(SPLIT_MIN_BYTES // 4, -np.inf, np.float32)
  A = Tensor(a).realize()
  assert "SPLIT" in kinds(A.max())
  assert A.max().item() == -np.inf
  a[5] = np.inf
  assert Tensor(a).max().item() == np.inf
  a[-3] = np.nan
  assert np.isnan(Tensor(a).max().item())

def test_split_int_and_half_sums():
  ai = rng.integers(-2**31, 2**31 - 1, SPLIT_MIN_BYTES // 4, dtype=np.int64).astype(np.int32)
  AI = Tensor(ai).realize()
  assert "SPLIT" in kinds(AI.sum(dtype=dtypes.int32))
  np.testing.assert_array_equal(AI.sum(dtype=dtypes.int32).numpy(), ai.sum(dtype=np.int32))  # wrapping: every order agrees
  ah = rng.standard_normal(SPLIT_MIN_BYTES // 2).astype(np.float16)
  AH = Tensor(ah).realize()
  with Context(THREADS=1): one = AH.sum().numpy()
  with Context(THREADS=2): two = AH.sum().numpy()
  assert one.tobytes() == two.tobytes()
  np.testing.assert_allclose(one.astype(np.float64), ah.astype(np.float64).sum(), rtol=2e-3, atol=0.5)

def test_split_of_a_mean_and_a_var():
  a = rng.standard_normal(SPLIT_MIN_BYTES // 4).astype(np.float32) + 3
  A = Tensor(a).realize()
  assert kinds(A.var()).count("SPLIT") >= 1
  np.testing.assert_allclose(A.var().numpy(), a.astype(np.float64).var(ddof=1), rtol=1e-3)  # a serial float32 sum (NOOPT=1): 2e-4
  np.testing.assert_allclose(A.mean().numpy(), a.astype(np.float64).mean(), rtol=1e-4)

@pytest.mark.parametrize("opts", [[("SPLIT", 0, 4)], [("SPLIT", 0, 4), ("UNROLL", 0, 4)], [("SPLIT", 0, 8), ("TILE", 0, 2)],
                                  [("SPLIT", 0, 8), ("UNROLL", 1, 4)], [("SPLIT", 0, 2), ("UNROLL", 0, 16), ("UNROLL", 1, 2)]])
def test_split_on_python(opts):
  a = rng.integers(-4, 5, 64).astype(np.float32)
  t = Tensor(a, device="PYTHON").realize().sum()
  np.testing.assert_array_equal(run(t, [Opt(*o) for o in opts], "PYTHON"), np.array(a.sum(), np.float32))
  np.testing.assert_array_equal(run(t, [Opt(*o) for o in opts], "CPU"), np.array(a.sum(), np.float32))

def test_split_applies_only_outside_every_loop():
  sink, _ = rangeify_simplified(kernel_of(Tensor(np.ones((4, 64), np.float32)).realize().sum(1))[0])
  with pytest.raises(OptError, match="inside no loop"): apply_opt(sink, Opt("SPLIT", 1, 4), lambda: 99)  # row sums: in the row loop
  sink, _ = rangeify_simplified(kernel_of(Tensor(np.ones(64, np.float32)).realize().sum())[0])
  with pytest.raises(OptError, match="shorter"): apply_opt(sink, Opt("SPLIT", 0, 64), lambda: 99)
  with pytest.raises(OptError, match="divide"): apply_opt(sink, Opt("SPLIT", 0, 5), lambda: 99)
  unrolled, _ = apply_opt(sink, Opt("UNROLL", 0, 4), lambda: 99)
  with pytest.raises(OptError, match="lanes"): apply_opt(unrolled, Opt("SPLIT", 0, 4), lambda: 100)
  split, _ = apply_opt(sink, Opt("SPLIT", 0, 4), lambda: 99)
  with pytest.raises(OptError, match="inside no loop"): apply_opt(split, Opt("SPLIT", 0, 4), lambda: 100)  # the partials are in a loop

# ---- PREFETCH: the next row asked for while this one computes ----

def test_prefetch_where_rows_are_read_in_several_loops():
  A = Tensor(rng.standard_normal((16, 1024)).astype(np.float32)).realize()
  for t in (A.layernorm(), A.log_softmax(-1)): assert "PREFETCH" in kinds(t)
  assert "PREFETCH" not in kinds(A.sum(1))  # read once: the hardware's prefetcher keeps up
  # a stashed kernel's exp loop leaves the prefetcher time enough: not prefetched
  assert "STASH" in kinds(A.softmax(-1)) and "PREFETCH" not in kinds(A.softmax(-1))
  src = source(A.layernorm())
  assert src.count("__builtin_prefetch(") == 1 and "((ridx0+1)%16)" in src
  # a guarded (padded) load's index may point outside the buffer: not prefetched
  a = rng.standard_normal((16, 60)).astype(np.float32)
  P = Tensor(a).realize().pad(((0, 0), (2, 2)))
  assert "PREFETCH" not in kinds(P.softmax(-1))
  np.testing.assert_allclose(P.softmax(-1).numpy(), softmax_ref(np.pad(a, ((0, 0), (2, 2)))), rtol=2e-6, atol=1e-8)

def test_prefetch_changes_no_bit():
  a = with_specials(rng.standard_normal((8, 1024)).astype(np.float32))
  t = Tensor(a).realize().layernorm()
  opts = heuristic(t)
  assert "PREFETCH" in [o.op for o in opts]
  assert run(t, opts).tobytes() == run(t, [o for o in opts if o.op != "PREFETCH"]).tobytes()

def test_prefetch_lanes_one_per_cache_line():
  t = Tensor(rng.standard_normal((4, 256)).astype(np.float32)).realize().softmax(-1)
  one_vector = source(t, [Opt("STASH", 2, 0), Opt("PREFETCH", 2, 1), Opt("UNROLL", 2, 16)])
  assert one_vector.count("__builtin_prefetch(") == 1  # 16 floats: one line
  assert source(t, [Opt("STASH", 2, 0), Opt("PREFETCH", 2, 1), Opt("UNROLL", 2, 32)]).count("__builtin_prefetch(") == 2

@pytest.mark.parametrize("rows", [63, 64, 300])
def test_quantized_matvec_prefetches_rows_ahead(rows):
  # int8 groups of 32 times a scale per group, summed over groups x elements (tensor/llm/quant.py's matvec): its rows asked
  # for MATVEC_PREFETCH rows ahead from 64 rows on; the same bits with and without, numpy's values
  q = rng.integers(-8, 8, (rows, 5, 32)).astype(np.int8)
  s, x = rng.standard_normal((rows, 5)).astype(np.float32), rng.standard_normal((5, 32)).astype(np.float32)
  t = (Tensor(q).realize().float() * Tensor(s).realize().unsqueeze(-1) * Tensor(x).realize()).sum((-1, -2))
  opts = heuristic(t)
  if rows < 64:
    assert "PREFETCH" not in [o.op for o in opts]
    return
  assert Opt("PREFETCH", 2, MATVEC_PREFETCH) in opts
  assert f"((ridx0+{MATVEC_PREFETCH})%{rows})" in source(t)
  with_pf = run(t, opts)
  assert with_pf.tobytes() == run(t, [o for o in opts if o.op != "PREFETCH"]).tobytes()
  np.testing.assert_allclose(with_pf, ((q * s[..., None]) * x).sum((-1, -2)), rtol=1e-5, atol=1e-4)

# ---- exp2's polynomial as vector code ----

def test_softmax_exp2_is_vector_code():
  width = target_for("CPU").caps.max_bytes // 4  # type: ignore[union-attr]
  src = source(Tensor(rng.standard_normal((8, 1024)).astype(np.float32)).realize().softmax(-1))
  # the float <-> int steps of the polynomial are vector casts and shifts, not one scalar helper call per lane
  assert "bitcast_" not in src and f"((u32x{width})" in src and "<<" in src and "exp2f" not in src

def test_vector_exp2_equals_the_scalar_polynomial():
  bits = np.arange(0, 2**32, 4099, dtype=np.uint64).astype(np.uint32)
  x = np.concatenate([bits.view(np.float32), np.float32([0, -0.0, np.inf, -np.inf, np.nan, -151, -150.5, 128, 129, -126.5, 1e-45])])
  x = x[: len(x) // 16 * 16]
  t = Tensor(x).realize().exp2()
  vec = run(t, [Opt("UPCAST", 0, 16)])
  assert "f32x" in source(t, [Opt("UPCAST", 0, 16)])
  np.testing.assert_array_equal(vec.view(np.uint32), run(t, []).view(np.uint32))  # the same polynomial, in scalars, gcc's vectors

@pytest.mark.parametrize("fn", [lambda a, b: a << 3, lambda a, b: a >> 5, lambda a, b: a << b, lambda a, b: a >> b,
                                lambda a, b: (a.bitcast(dtypes.float32) * 2).bitcast(dtypes.int32)])
def test_vector_shifts_and_bitcasts(fn):
  a = rng.integers(-2**31, 2**31 - 1, 64, dtype=np.int64).astype(np.int32)
  b = rng.integers(-3, 40, 64).astype(np.int32)  # amounts out of range too: exec_alu's 0 (or -1)
  A, B = Tensor(a).realize(), Tensor(b).realize()
  want = run(fn(A, B), [])
  np.testing.assert_array_equal(run(fn(A, B), [Opt("UPCAST", 0, 16)]), want)
  A, B = Tensor(a, device="PYTHON").realize(), Tensor(b, device="PYTHON").realize()
  np.testing.assert_array_equal(run(fn(A, B), [], "PYTHON"), want)

@pytest.mark.parametrize("k", [3.0, -151.0, 0.0, -0.0, np.inf])
def test_vector_max_with_a_constant(k):
  # one comparison when the constant is not nan nor zero: the same values as exec_alu's max (nan wins; a tie gives b)
  x = np.float32([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 3.0, -151.0, 1e-45, -1e-45, 2.5, 7.0, -200.0, 151.0, 3.0000002, 2.9999998])
  t = Tensor(x).realize().maximum(k)
  src = source(t, [Opt("UPCAST", 0, 16)])
  assert ("vmaxk_" in src) == (k not in (0.0,) and k == k)
  want = run(Tensor(x, device="PYTHON").realize().maximum(k), [], "PYTHON")
  np.testing.assert_array_equal(run(t, [Opt("UPCAST", 0, 16)]).view(np.uint32), want.view(np.uint32))

# ---- the OpenMP loop ----

def test_parallel_loop_keeps_its_inner_loops_vectorized(tmp_path):
  # OpenMP moves the loop into a function of its own: without the bound hint gcc finds the inner loops' addresses not
  # affine and keeps them scalar (softmax on 2 threads took 4x one thread's CPU time)
  if not ops_cpu.openmp_flags(): pytest.skip("this compiler can't build OpenMP code")
  t = Tensor(rng.standard_normal((4096, 1024)).astype(np.float32)).realize().softmax(-1)
  def vectorized(src: str) -> int:
    flags = [f for f in ops_cpu.cflags(src) if f != "-w"] + list(ops_cpu.openmp_flags())
    r = subprocess.run([ops_cpu.find_compiler(), *flags, "-fopt-info-vec-optimized", "-x", "c", "-", "-o", str(tmp_path / "k.so")],
                       input=src, capture_output=True, text=True, timeout=120)
    if r.returncode != 0 and "opt-info" in r.stderr: pytest.skip(f"{ops_cpu.compiler_version()} has no -fopt-info-vec (gcc's)")
    assert r.returncode == 0, r.stderr
    return r.stderr.count("loop vectorized")
  two = source(t, threads=2)
  # the loop in a function of its own (cstyle.outline), the values computed before it passed in, its counter's range hinted
  assert "#pragma omp parallel" in two and "_p0(" in two and "__builtin_unreachable();" in two
  assert vectorized(two) == vectorized(source(t, threads=1)) >= 1

@pytest.mark.parametrize("cols", [10, 16])
def test_a_few_columns_over_a_consecutive_reduction_unroll_whole(cols):
  # the MLP's logits: a ReLU fused into a matmul of 10 columns; all columns in one pass over each row, the row in vectors
  h, b, w = rng.standard_normal((64, 128)).astype(np.float32), rng.standard_normal(128).astype(np.float32), \
    rng.standard_normal((cols, 128)).astype(np.float32)
  H, B, W = (Tensor(a).realize() for a in (h, b, w))
  t = (H + B).relu().linear(W)
  opts = heuristic(t)
  assert [o.op for o in opts] == ["UPCAST", "UNROLL"] and opts[0].amount == cols, opts
  np.testing.assert_allclose(run(t, None).reshape(64, cols), np.maximum(h + b, 0) @ w.T, rtol=1e-4, atol=1e-4)

def test_a_few_columns_over_a_reduction_that_no_vector_divides_keep_the_tile():
  # 100 = no multiple of a vector: not unrolled that way (the gathered tile as before)
  H, W = Tensor(rng.standard_normal((64, 100)).astype(np.float32)).realize(), Tensor(rng.standard_normal((10, 100)).astype(np.float32)).realize()
  assert "UNROLL" not in kinds(H.relu().linear(W))

@pytest.mark.parametrize("bs,h,w,c", [(8, 54, 54, 64), (2, 7, 7, 512), (3, 9, 6, 32), (1, 5, 10, 48), (2, 6, 5, 16), (4, 6, 6, 64)])
def test_channels_last_to_nchw_copy_takes_lanes_of_channels(bs, h, w, c):
  # a conv's channels-last GEMM output made NCHW, its row of w pixels no multiple of a vector: a vector of channels (each
  # lane stores to its plane), times a pair of pixels when w is even (heuristic.channel_lanes)
  from tensor.renderer.cstyle import cpu_vector_caps
  width = cpu_vector_caps().register_bytes // 4
  x = rng.standard_normal((bs, h, w, c)).astype(np.float32)
  t = Tensor(x).realize().permute(0, 3, 1, 2).contiguous()
  opts = heuristic(t)
  if c % width == 0 and not any(a >= 4 and w % a == 0 and a < w for a in (width, width // 2)):
    assert any(o.op == "UPCAST" and o.amount == width for o in opts), opts
    assert any(o.op == "UPCAST" and o.amount == 2 for o in opts) == (w % 2 == 0), opts
  for threads in (1, 2): np.testing.assert_array_equal(run(t, None, threads=threads).reshape(bs, c, h, w), x.transpose(0, 3, 1, 2))
