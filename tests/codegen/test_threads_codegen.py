"""Threads in generated CPU kernels (tensor/codegen/cost.parallel_loops, runtime/threads.py): the outermost output loop
of a big enough kernel carries an OpenMP pragma, reductions and small kernels stay serial, and results on two threads
equal one thread's bit for bit (each output is computed by one thread in the serial order)."""
from __future__ import annotations
import numpy as np
import pytest
from runtime.helpers import Context
from runtime.ops import Ops
from runtime.ops_cpu import openmp_flags
from tensor import Tensor, Variable
from tensor.engine.realize import get_program, schedule_of
from tensor.engine.state import ENGINE

def ast_of(t: Tensor):
  """The AST of t's main kernel: its reduction's when it has one (a packed matmul also runs copy kernels), else its last."""
  t.kernelize()
  u = t.uop.src[0] if t.uop.op is Ops.RESHAPE else t.uop
  asts = [k.arg.ast for k in schedule_of([u])]
  return next((a for a in asts if any(x.op is Ops.REDUCE_AXIS for x in a.toposort())), u.src[1].arg.ast)

rng = np.random.default_rng(0)

def kernels():
  x, w = rng.standard_normal((256, 192)).astype(np.float32), rng.standard_normal((192, 128)).astype(np.float32)
  s = rng.standard_normal((512, 256)).astype(np.float32)
  img, f = rng.standard_normal((4, 8, 18, 18)).astype(np.float32), rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
  a, b = (rng.standard_normal(1 << 21).astype(np.float32) for _ in range(2))
  big = rng.standard_normal((2048, 512)).astype(np.float32)
  # rows of 14 outputs (no multiple of a vector): the implicit GEMM (tensor/functional/conv.py) with its layout copies
  img2, f2 = rng.standard_normal((2, 16, 16, 16)).astype(np.float32), rng.standard_normal((32, 16, 3, 3)).astype(np.float32)
  return {"matmul": lambda: Tensor(x) @ Tensor(w), "softmax": lambda: Tensor(s).softmax(1), "layernorm": lambda: Tensor(s).layernorm(),
          "conv": lambda: Tensor(img).conv2d(Tensor(f)), "conv gemm": lambda: Tensor(img2).conv2d(Tensor(f2)),
          "a*b+1": lambda: Tensor(a) * Tensor(b) + 1,
          "row sums": lambda: Tensor(big).sum(1), "column max": lambda: Tensor(big).max(0)}

KERNELS = kernels()

@pytest.mark.parametrize("name", list(KERNELS))
def test_two_threads_equal_one_bit_for_bit(name):
  with Context(THREADS=1): one = KERNELS[name]().numpy()
  with Context(THREADS=2):
    two = KERNELS[name]().numpy()
    assert "#pragma omp parallel" in get_program(ast_of(KERNELS[name]()), "CPU").src  # the comparison compares something
  assert one.tobytes() == two.tobytes()

def test_big_kernels_get_a_pragma_small_and_reductions_do_not():
  with Context(THREADS=2):
    x = Tensor(rng.standard_normal((256, 256)).astype(np.float32)).realize()
    assert "#pragma omp parallel" in get_program(ast_of(x @ x), "CPU").src
    assert "#pragma omp" not in get_program(ast_of(x[:4, :4] + 1), "CPU").src  # a few ns of work: one thread
    assert "#pragma omp" not in get_program(ast_of(x.sum()), "CPU").src  # the loop is the reduction's
  with Context(THREADS=1): assert "#pragma omp" not in get_program(ast_of(x @ x), "CPU").src

@pytest.mark.optimized
def test_estimated_work_does_not_depend_on_the_vector_width():
  """The cost model reads the kernel's work from codegen.estimate, which counts ALU ops lane by lane: the conv above built
  for AVX-512 (16-float vectors, a taller tile) and for AVX2 (8-float vectors) estimates within 10% of its multiply-adds
  (counting a vector op once made AVX-512's half of AVX2's, and that conv alone of KERNELS got no threads there)."""
  import tensor.codegen as codegen
  from rules.vectorize_helpers import VectorCaps
  from tensor.renderer.cstyle import VECTOR_CAPS, CRenderer
  ast = ast_of(KERNELS["conv"]())
  macs = 4 * 16 * 16 * 16 * 8 * 3 * 3
  for size, registers in ((64, 32), (32, 16)):
    caps = VectorCaps(VECTOR_CAPS.ops, VECTOR_CAPS.scalars, 32, size, size, registers)
    sink, opts = codegen.lower_kernel(ast, codegen.Target("CPU", CRenderer(caps)))
    ops, _ = codegen.estimate(codegen.linearize(sink))
    assert opts and 2 * macs <= ops <= 2.2 * macs, (size, opts, ops)

def test_threads_run_when_openmp_links():
  if not openmp_flags(): pytest.skip("this compiler can't build OpenMP code: kernels run serial")
  with Context(THREADS=2):
    x = rng.standard_normal((512, 256)).astype(np.float32)
    np.testing.assert_allclose((Tensor(x) @ Tensor(x.T)).numpy(), x @ x.T, rtol=1e-4, atol=1e-3)

# ---- the parallel loop in a function of its own (tensor/renderer/cstyle.outline, runtime/threads.parallel_region) ----

def conv_source(t: Tensor) -> str:
  """The C of t's conv kernel (its reduction's)."""
  return get_program(ast_of(t), "CPU").src

def test_parallel_loop_runs_in_a_function_of_its_own():
  # gcc compiles the loop as a plain function (restrict pointers), not inside OpenMP's outlined one: ResNet's 3x3 conv, a
  # 4x64 tile, had reloaded each weight vector once per row there (25% more CPU time per thread than on one thread)
  img, f = rng.standard_normal((4, 64, 10, 10)).astype(np.float32), rng.standard_normal((64, 64, 3, 3)).astype(np.float32)
  with Context(THREADS=2): src = conv_source(Tensor(img).conv2d(Tensor(f), padding=1))
  assert "#pragma omp parallel num_threads(2)" in src and "#pragma omp parallel for" not in src
  assert src.count("void __attribute__((noinline))") == 1 and "_p0(" in src and "part_lo, part_hi)" in src
  with Context(THREADS=1): assert "#pragma omp" not in (one := conv_source(Tensor(img).conv2d(Tensor(f), padding=1))) and "_p0" not in one

# batch 1, odd batches (blocks of the batch loop the threads don't divide: 3 on 2 threads, 5 and 7 on 3), channels no multiple
# of the 64-column tile, padded (channels-last input) and not, strided
CONVS = [(1, 64, 64, 12, 1, 1), (3, 64, 64, 12, 1, 1), (5, 24, 40, 14, 1, 1), (7, 16, 72, 11, 0, 1), (2, 64, 128, 16, 1, 2),
         (8, 32, 64, 9, 1, 1)]

@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("bs,cin,cout,hw,pad,stride", CONVS)
def test_conv_on_threads_matches_numpy_and_one_thread(bs, cin, cout, hw, pad, stride, threads):
  x, w = rng.standard_normal((bs, cin, hw, hw)).astype(np.float32), rng.standard_normal((cout, cin, 3, 3)).astype(np.float32)
  # numpy's conv: the padded input's 3x3 windows, every stride-th, contracted with the weights in float64
  win = np.lib.stride_tricks.sliding_window_view(np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad))), (3, 3), axis=(2, 3))
  want = np.einsum("bchwij,ocij->bohw", win[:, :, ::stride, ::stride].astype(np.float64), w.astype(np.float64))
  with Context(THREADS=1): one = Tensor(x).conv2d(Tensor(w), padding=pad, stride=stride).numpy()
  with Context(THREADS=threads):
    t = Tensor(x).conv2d(Tensor(w), padding=pad, stride=stride)
    got = t.numpy()
    if openmp_flags(): assert "#pragma omp parallel" in conv_source(t)  # each runs on threads (blocks of 12, 3, 5, 7 or 2)
  np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
  assert got.tobytes() == one.tobytes()

@pytest.mark.parametrize("rows", [1, 3, 5, 8])
def test_a_loop_of_symbolic_length_splits_among_threads(rows):
  # the region computes each thread's block from the loop's bound at run time (here a Variable's value)
  if not openmp_flags(): pytest.skip("this compiler can't build OpenMP code: kernels run serial")
  x = rng.standard_normal((8, 1024, 1024)).astype(np.float32)
  X = Tensor(x).realize()
  v = Variable("n", 1, 8)
  with Context(THREADS=2): got = (X[:v.bind(rows)] * 2 + 1).sum(2).numpy()
  np.testing.assert_allclose(got, (x[:rows] * 2 + 1).sum(2), rtol=1e-4, atol=1e-3)
  srcs = [r.program.src for r in ENGINE.programs.values() if getattr(r, "program", None) is not None]
  assert any("int part_n = n," in s for s in srcs)  # the kernel ran on threads, its blocks from n's value

def test_a_kernel_of_more_parameters_than_direct_ones_keeps_its_pragma():
  # past cstyle.MAX_DIRECT_PARAMS the kernel reads its buffers in its entry point: its loop stays under the pragma
  from tensor.renderer.cstyle import MAX_DIRECT_PARAMS
  xs = [rng.standard_normal(1 << 16).astype(np.float32) for _ in range(MAX_DIRECT_PARAMS + 2)]
  with Context(THREADS=2):
    t = sum((Tensor(x) for x in xs[1:]), Tensor(xs[0]))
    src = get_program(ast_of(t), "CPU").src
    got = t.numpy()
  assert "#pragma omp parallel for" in src and "_p0" not in src
  want = xs[0].copy()
  for x in xs[1:]: want += x
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
