"""Codegen (tensor/codegen, rules/rangeify.rules, rules/lower.rules): the lowered kernel of the seeds, kernel names, the
upcast heuristic against NOOPT, guarded loads for padding (the PYTHON device raises on any out-of-bounds access), the
shape of the generated C, and what each DEBUG level prints."""
from __future__ import annotations
import os, re, subprocess, sys
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
import tensor.codegen as codegen
from runtime.helpers import Context
from runtime.ops import Ops
from runtime.uop import UOp
from tensor import Tensor
from tensor.codegen import full_rewrite_to_sink, kernel_name, lower_kernel
from tensor.engine.realize import get_program

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SETTINGS = settings(deadline=None, suppress_health_check=list(HealthCheck), database=None)

def ast_of(t: Tensor) -> UOp:
  t.kernelize()
  u = t.uop.src[0] if t.uop.op is Ops.RESHAPE else t.uop
  return u.src[1].arg.ast

def seed_ast() -> UOp: return ast_of(Tensor([1, 2, 3, 4]) + 3 + 4)

# ---- the lowered kernel of the seeds ----

def test_full_rewrite_to_sink_of_the_seed():
  with Context(NOOPT=0): sink = full_rewrite_to_sink(seed_ast())  # the default when NOOPT is not set
  ops = {u.op for u in sink.toposort()}
  assert sink.op is Ops.SINK and {Ops.STORE, Ops.INDEX, Ops.DEFINE_GLOBAL, Ops.LOAD, Ops.ADD} <= ops
  assert any(u.op is Ops.CONST and u.arg == 7 for u in sink.toposort())  # + 3 + 4 folded
  assert all(s.arg == 7 for a in sink.toposort() if a.op is Ops.ADD for s in a.src if s.op is Ops.CONST)
  # upcast by default: four stores, no loop; NOOPT keeps one store in a loop
  assert len(sink.src) == 4 and not any(u.op is Ops.RANGE for u in sink.toposort())
  plain = full_rewrite_to_sink(seed_ast(), opt=False)
  assert len(plain.src) == 1 and any(u.op is Ops.RANGE and u.src[0].arg == 4 for u in plain.toposort())
  with Context(NOOPT=1): assert full_rewrite_to_sink(seed_ast()) is plain

def test_full_rewrite_to_sink_rejects_a_non_kernel():
  with pytest.raises(ValueError, match="SINK"): full_rewrite_to_sink(Tensor([1, 2]).uop)

def test_reduce_lowers_to_an_accumulator():
  A = Tensor(np.ones((4, 8), np.float32)).realize()
  sink, opts = lower_kernel(ast_of(A.sum(1)), opt=False)
  ops = [u.op for u in sink.toposort()]
  assert Ops.DEFINE_REG in ops and Ops.ASSIGN in ops and Ops.END in ops and Ops.AFTER in ops and Ops.REDUCE not in ops
  assert opts == []
  _, opts = lower_kernel(ast_of(A.sum(1)), opt=True)
  assert opts == [("UPCAST", 0, 4)]  # the four rows, one accumulator each

# ---- kernel names ----

def test_kernel_names():
  # the shape's name (tinygrad's: E_ for elementwise, r_ for reductions, output dims then reduced ones) and a digest of the
  # kernel: a function of the kernel alone, so compiling others first, or another process, names it the same
  name = kernel_name(seed_ast())
  assert re.fullmatch(r"E_4n[0-9a-f]{4}", name)
  other = kernel_name(ast_of(Tensor([1, 2, 3, 4]) * 2))
  assert re.fullmatch(r"E_4n[0-9a-f]{4}", other) and other != name and kernel_name(seed_ast()) == name
  A = Tensor(np.ones((5, 7), np.float32)).realize()
  assert kernel_name(ast_of(A.sum(1))).startswith("r_5_7n")
  assert kernel_name(ast_of(A.sum())).startswith("r_1_5_7n")
  assert kernel_name(ast_of(A @ Tensor(np.ones((7, 3), np.float32)))).startswith("r_5_3_7n")
  assert kernel_name(ast_of(A.T + 1)).startswith("E_7_5n")
  code = "from tensor import Tensor; from tensor.codegen import kernel_name; a = Tensor([1, 2, 3, 4]) + 3 + 4; a.kernelize(); "\
         "print(kernel_name(a.uop.src[1].arg.ast))"
  env = {**os.environ, "PYTHONPATH": ROOT}
  assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300).stdout.strip() == name

def test_program_global_size_and_opts():
  A = Tensor(np.ones((6, 3), np.float32)).realize()
  with Context(NOOPT=0): p = get_program(ast_of(A * 2), "PYTHON")
  assert p.global_size == (6, 3) and p.opts == [("UPCAST", 1, 3)]
  with Context(NOOPT=1): p = get_program(ast_of(A * 2), "PYTHON")
  assert p.global_size == (6, 3) and p.opts == []

# ---- the C the kernels become ----

def c_of(t: Tensor, opt: bool | None = None) -> str:
  from tensor.renderer.cstyle import render_c
  from tensor.codegen.linearize import linearize
  return render_c("k", linearize(full_rewrite_to_sink(ast_of(t), opt)))

def test_matmul_c_loads_inside_the_reduce_loop_only():
  A, B = Tensor(np.ones((16, 32), np.float32)).realize(), Tensor(np.ones((32, 8), np.float32)).realize()
  src = c_of(A @ B, opt=False)
  inner = src.split("for (int ridx2 = 0; ridx2 < 32; ridx2++) {")[1].split("}")[0]
  assert inner.count("*(data1+") == 1 and inner.count("*(data2+") == 1 and "acc0 = " in inner
  assert "ridx0*32" not in inner  # the row offset is computed outside the reduce loop

def test_softmax_c_one_kernel_three_loops_per_row():
  A = Tensor(np.ones((4, 16), np.float32)).realize()
  src = c_of(A.softmax(), opt=False)
  assert src.count("for (") == 4  # rows, then max, sum and output loops inside
  assert src.count("exp2f") == 2 and "acc0 = (-INFINITY);" in src
  assert "exp2f" not in c_of(A.softmax(), opt=True)  # optimized: exp2 as a polynomial gcc vectorizes (rules/decompositions.rules)

def test_padded_load_is_guarded():
  A = Tensor(np.ones((4,), np.float32)).realize()
  src = c_of(A.pad(((2, 2),)) + 1, opt=False)
  # the load reads only inside the data, and reads 0 in the padding: no second select around it
  assert re.search(r"float val0 = \(.*\(1<ridx0\).*\(ridx0<6\).*\?\*\(data1\+\(ridx0\+\(-2\)\)\):0\.0f\);", src), src
  assert "*(data0+ridx0) = (val0+1.0f);" in src

def test_chain_of_maximums_renders_linear_c():
  A = Tensor(np.ones(8, np.float32)).realize()
  t = A
  for i in range(8): t = t.maximum(A + i)
  assert len(c_of(t)) < 20_000

# ---- optimizations ----

def test_long_contiguous_reduction_splits_into_lanes():
  a = np.random.default_rng(0).standard_normal((5, 1024)).astype(np.float32)
  A = Tensor(a).realize()
  sink, opts = lower_kernel(ast_of(A.sum(1)), opt=True)
  assert [o[0] for o in opts] == ["UNROLL"] and opts[0][2] == 16
  # 16 independent partial sums, in vector accumulators of the CPU's vector width
  assert sum(u.dtype.count for u in sink.toposort() if u.op is Ops.DEFINE_REG) == 16
  with Context(NOOPT=0):  # the split kernels run
    np.testing.assert_allclose(A.sum(1).numpy(), a.sum(1), rtol=1e-5)
    np.testing.assert_allclose(A.max(1).numpy(), a.max(1))
    # ints: the order of a wrapping sum does not matter
    ai = np.random.default_rng(1).integers(-2**31, 2**31 - 1, 4096, dtype=np.int64).astype(np.int32)
    np.testing.assert_array_equal(Tensor(ai).sum(dtype=Tensor(ai).dtype).numpy(), ai.sum(dtype=np.int32))

def test_split_reduction_inside_a_split_reduction_is_computed_once():
  a = np.random.default_rng(3).standard_normal((8, 256)).astype(np.float32)
  A = Tensor(a).realize()
  ln = (A - A.mean(1, keepdim=True)) / (A.var(1, keepdim=True) + 1e-5).sqrt()
  src = c_of(ln, opt=True)
  assert src.count("for (") == 4  # rows; mean, var and output loops
  assert sum(int(n) for n in re.findall(r"f32x(\d+) acc", src)) == 32  # mean and var: 16 lanes each, in vector accumulators
  want = (a - a.mean(1, keepdims=True)) / np.sqrt(a.var(1, ddof=1, keepdims=True) + 1e-5)
  with Context(NOOPT=0): np.testing.assert_allclose(ln.numpy(), want, rtol=1e-4, atol=1e-5)  # the split kernels run

def test_a_split_loop_encloses_the_reductions_inside_it():
  # max over 64 columns of column sums: the split makes the max's loop 4 iterations of 16 lanes, holding
  # the sums' loop (5 rows); loops nest by what encloses what, not by id (this raised "depend on each other in a cycle")
  from tensor.codegen.linearize import linearize
  A = Tensor(np.ones((5, 64), np.float32)).realize()
  sink, opts = lower_kernel(ast_of(A.sum(0).max(0)), opt=True)
  assert opts == [("UNROLL", 0, 16)]
  loops, depth = [], 0
  for u in linearize(sink):
    if u.op is Ops.RANGE: loops.append((depth, u.src[0].arg, u.arg)); depth += 1  # noqa: E702
    elif u.op is Ops.END: depth -= 1
  assert [(d, n) for d, n, _ in loops] == [(0, 4), (1, 5)]
  with Context(NOOPT=0): assert A.sum(0).max(0).item() == 5.0

def test_split_max_keeps_nan_and_inf():
  a = np.full(256, -np.inf, np.float32)
  assert Tensor(a).max().item() == -np.inf
  a[77] = np.nan
  assert np.isnan(Tensor(a).max().item())

def test_strided_reduction_is_not_split():
  A = Tensor(np.ones((64, 64), np.float32)).realize()
  kinds = [o[0] for o in lower_kernel(ast_of(A @ A), opt=True)[1]]
  assert kinds[:2] == ["UPCAST", "UPCAST"] and "UNROLL" not in kinds  # a register tile (and its loop order), the reduction kept whole
  # column sums read with stride 64: no partial sums of the strided reduction; the columns as vector lanes (across_rows_opts)
  assert [o[0] for o in lower_kernel(ast_of(A.sum(0)), opt=True)[1]] == ["UPCAST"]

def test_split_upcast_of_part_of_a_loop():
  # r -> r'*4 + k: four accumulators sharing one reduce loop, each as exact as the plain loop
  from runtime.device import Buffer
  from runtime.ops_python import program
  from tensor.codegen import rangeify_simplified
  from tensor.codegen.linearize import linearize
  from tensor.codegen.opt import Opt, apply_opts
  from rules.expand import expanded
  from rules.lower import lower
  from rules.vectorize import vectorized
  from runtime.rewrite import graph_rewrite
  a, b = (np.random.default_rng(i).standard_normal((6, 8)).astype(np.float32) for i in (2, 3))
  A, B = Tensor(a, device="PYTHON").realize(), Tensor(b, device="PYTHON").realize()
  ast = ast_of(A @ B.T)
  sink, ctx = rangeify_simplified(ast)
  ctx.next_range = 1 + max(u.arg for u in sink.toposort() if u.op is Ops.RANGE)
  sink = graph_rewrite(apply_opts(sink, [Opt("UPCAST", 1, 2)], ctx.new_range)[0], expanded)
  sink = graph_rewrite(sink, vectorized(None))  # the PYTHON device runs scalars
  ctx.shared_outer = codegen.shared_outer(sink)
  uops = linearize(graph_rewrite(sink, lower, ctx))
  assert sum(1 for u in uops if u.op is Ops.DEFINE_REG) == 2 and sum(1 for u in uops if u.op is Ops.RANGE) == 3
  out = Buffer("PYTHON", 36, A.dtype)
  from tensor.engine.state import ENGINE
  buffers = ENGINE.storage.buffers
  program(uops, "k")([out, buffers[A.uop.src[0]], buffers[B.uop.src[0]]])
  from runtime.helpers import Context
  with Context(NOOPT=1): want = (A @ B.T).numpy()  # the plain loop (the heuristic's vectors of k sum in another order)
  np.testing.assert_array_equal(out.numpy().reshape(6, 6), want)

# ---- NOOPT and the default optimizations compute the same values ----

UNARY = [lambda t: t + 1, lambda t: t * t, lambda t: t.relu(), lambda t: -t, lambda t: t.exp2(), lambda t: (t > 0.5).where(t, 2.0)]

@st.composite
def programs(draw):
  shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
  ops = draw(st.lists(st.tuples(st.integers(0, 4), st.integers(0, len(UNARY) - 1), st.integers(0, 2)), min_size=1, max_size=4))
  return shape, ops

def apply_program(x: Tensor, ops) -> Tensor:
  for kind, u, ax in ops:
    ax = ax % x.ndim
    if kind == 0: x = UNARY[u](x)
    elif kind == 1: x = x.sum(ax, keepdim=True)
    elif kind == 2: x = x - x.max(ax, keepdim=True)
    elif kind == 3: x = x.flip(ax) * x
    else: x = x.permute(tuple(reversed(range(x.ndim)))) + 1
  return x

@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_noopt_matches_default(device):
  @settings(SETTINGS, max_examples=25 if device == "CPU" else 40)
  @given(programs(), st.integers(0, 2**31 - 1))
  def check(prog, seed):
    shape, ops = prog
    a = np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)
    outs = []
    for noopt in (0, 1):
      with Context(NOOPT=noopt): outs.append(apply_program(Tensor(a, device=device), ops).numpy())
    # optimized CPU kernels compute exp2 as rules/decompositions.rules' polynomial (within 0.501 ulp), NOOPT ones call
    # libm's exp2f: the two may differ by an ulp (and the ops after it carry that on); everything else is bit for bit
    if device == "CPU" and any(k == 0 and u == 4 for k, u, _ in ops): np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-6)
    else: np.testing.assert_array_equal(outs[0], outs[1])
  check()

# ---- padding and every movement op: guarded loads, no access out of bounds (the PYTHON device checks each one) ----

@st.composite
def movements(draw):
  shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
  steps, cur = [], shape
  for _ in range(draw(st.integers(1, 5))):
    kind = draw(st.sampled_from(["pad", "shrink", "flip", "reshape", "permute", "expand"]))
    n = len(cur)
    if kind == "pad":
      arg = tuple((draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in cur)
      cur = tuple(d + b + a for d, (b, a) in zip(cur, arg))
    elif kind == "shrink":
      arg = []
      for d in cur:
        b = draw(st.integers(0, d - 1))
        arg.append((b, draw(st.integers(b + 1, d))))
      arg = tuple(arg)
      cur = tuple(e - b for b, e in arg)
    elif kind == "flip": arg = tuple(sorted(set(draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n)))))
    elif kind == "permute":
      arg = tuple(draw(st.permutations(range(n))))
      cur = tuple(cur[i] for i in arg)
    elif kind == "reshape":
      opts = [(int(np.prod(cur)),), cur + (1,), (1,) + cur]
      if n >= 2: opts.append((cur[0] * cur[1],) + cur[2:])
      if n >= 2: opts.append(cur[:-2] + (cur[-2] * cur[-1],))
      arg = draw(st.sampled_from(opts))
      cur = arg
    else:
      k = draw(st.integers(2, 3))
      arg = k
      cur = (k,) + cur
    steps.append((kind, arg))
  return shape, steps, draw(st.booleans())

def move(x, kind, arg, is_np: bool):
  if kind == "pad": return np.pad(x, arg) if is_np else x.pad(arg)
  if kind == "shrink": return x[tuple(slice(b, e) for b, e in arg)] if is_np else x.shrink(arg)
  if kind == "flip": return np.flip(x, arg) if is_np else x.flip(arg)
  if kind == "permute": return np.transpose(x, arg) if is_np else x.permute(arg)
  if kind == "reshape": return x.reshape(arg)
  return np.broadcast_to(x[None], (arg,) + x.shape) if is_np else x.reshape((1,) + x.shape).expand((arg,) + x.shape)

@settings(SETTINGS, max_examples=150)
@given(movements(), st.integers(0, 2**31 - 1))
def test_movement_ops_are_guarded_index_expressions(prog, seed):
  shape, steps, reduce = prog
  a = np.random.default_rng(seed).integers(-9, 9, shape).astype(np.int32)
  t, ref = Tensor(a, device="PYTHON"), a
  for kind, arg in steps: t, ref = move(t, kind, arg, False), move(ref, kind, arg, True)
  t, ref = t * 3 + 1, ref * 3 + 1
  if reduce: t, ref = t.sum(0), ref.sum(0)
  for opt in (0, 1):
    with Context(NOOPT=opt): np.testing.assert_array_equal(Tensor(t.uop).numpy(), ref)  # KernelMemoryError if out of bounds

# once wrong: the symbolic rules weakened a load's guard under an int WHERE, though the load runs either way
def test_int_padding_keeps_its_load_guard():
  A = Tensor(np.array([5], np.int32), device="PYTHON").realize()
  sink = full_rewrite_to_sink(ast_of((A * 3).pad(((2, 2),)) + 1), opt=False)
  guards = [u.src[2] for u in sink.toposort() if u.op is Ops.INDEX and len(u.src) == 3]
  rng = next(u for u in sink.toposort() if u.op is Ops.RANGE)
  assert guards and all([g.sym_infer({}) for g in [g.substitute({rng: rng.const_like(r)}) for r in range(5)]] == [r == 2 for r in range(5)]
                        for g in guards)

def test_padded_int_reduction_reads_inside_its_input():
  x = Tensor(np.arange(12, dtype=np.int32).reshape(3, 4), device="PYTHON")
  assert x.sum(1).pad(((1, 1),)).tolist() == [0, 6, 22, 38, 0]

def test_out_of_bounds_access_raises_on_python():
  # the check the test above relies on: an unguarded read past the end raises
  from runtime.ops_python import KernelMemoryError
  from runtime.device import Buffer
  from tensor.codegen.linearize import linearize
  A = Tensor(np.ones(4, np.int32), device="PYTHON").realize()
  sink = full_rewrite_to_sink(ast_of(A.pad(((0, 2),)) + 1), opt=False)
  unguarded = sink.substitute({u: u.replace(src=u.src[:2]) for u in sink.toposort() if u.op is Ops.INDEX and len(u.src) == 3})
  from runtime.ops_python import program
  with pytest.raises(KernelMemoryError): program(linearize(unguarded), "k")([Buffer("PYTHON", 6, A.dtype), Buffer("PYTHON", 4, A.dtype)])

# ---- DEBUG levels ----

SCRIPT = """
import numpy as np
from tensor import Tensor
t = Tensor([1, 2, 3, 4])
print((t * 2).tolist())
print((t + 3 + 4).tolist())
print(Tensor(np.ones((4, 8), np.float32)).sum(1).tolist())
print(((Tensor.ones(16).contiguous() + 1).contiguous() * 2).sum().item())
"""

def run_debug(level: int, noopt: int = 0) -> str:
  env = {**os.environ, "DEBUG": str(level), "CPU": "1", "NOOPT": str(noopt), "PYTHONPATH": ROOT}
  env.pop("DEV", None)
  r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
  assert r.returncode == 0, r.stderr
  return r.stdout

@pytest.mark.parametrize("level", [1, 2, 3, 4, 5])
def test_debug_levels(level):
  out = run_debug(level)
  assert "[8, 9, 10, 11]" in out and "64.0" in out
  has = {
    1: "schedule:" in out and "memory: 1 intermediate buffers in 1 blocks" in out,  # the summed tensor, read by .item(), holds the other
    2: bool(re.search(r"\*\*\* CPU .* E_4n[0-9a-f]{4} .* gsz \[4\] .* tm .*us .*GFLOPS .*GB/s", out)) and "avg:" in out and "total:" in out,
    3: bool(re.search(r"--- E_4n[0-9a-f]{4} AST ---", out)) and "UOp(Ops.SINK" in out and "opts: UPCAST axis 0 amount 4" in out,
    4: bool(re.search(r"void E_4n[0-9a-f]{4}\(int\* restrict data0, int\* restrict data1\)", out)) and "*(data0+3) = (val3+7);" in out,
    5: "lowered UOps" in out and "Ops.DEFINE_GLOBAL" in out and "Ops.STORE" in out,
  }
  for lvl, ok in has.items(): assert ok == (lvl <= level), f"DEBUG={level}: marker of level {lvl} {'missing' if not ok else 'printed'}\n{out}"
  if level < 2: assert "*** CPU" not in out

def test_debug4_noopt_keeps_the_loop():
  out = run_debug(4, noopt=1)
  assert "for (int ridx0 = 0; ridx0 < 4; ridx0++) {" in out and "*(data0+ridx0) = (val0+7);" in out
