"""The C renderer (tensor/renderer/cstyle.py joining the pieces of rules/render_c.rules): the layout of a kernel with a
loop, a scalar parameter and statements, and the C of the ops C's operators get wrong, run on the CPU device against
exec_alu / cast_value on Python numbers: x/0 and INT_MIN/-1, x%0, shifts out of range, small ints wrapping, floats
(nan, inf, out of range) to ints, bitcasts. Each op runs as a hand-built linear program over buffers of 64 elements,
so the values come from memory (not folded constants) and each C helper function of ruleset c_function is compiled."""
from __future__ import annotations
import re, uuid
import numpy as np
import pytest
from runtime import ops_cpu
from runtime.device import Buffer
from runtime.dtype import DType, dtypes
from runtime.ops import Ops, cast_value, exec_alu
from runtime.uop import UOp, uop
from tensor.renderer.cstyle import render_c

N = 64
SINTS = [dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64]
UINTS = [dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64]

def program(op: Ops, out: DType, ins: list[DType], name: str) -> list[UOp]:
  """The linear program out[i] = op(in0[i], in1[i], ...) for i < N: parameters, the loop, loads, the op, the store."""
  gs = [uop(Ops.DEFINE_GLOBAL, d.ptr(N), (), i) for i, d in enumerate([out, *ins])]
  n = UOp.const(dtypes.int32, N)
  r = uop(Ops.RANGE, dtypes.int32, (n,), 0)
  idx = [uop(Ops.INDEX, g.dtype, (g, r)) for g in gs]
  loads = [uop(Ops.LOAD, d, (i,)) for d, i in zip(ins, idx[1:])]
  value = uop(op, out, tuple(loads))
  st = uop(Ops.STORE, dtypes.void, (idx[0], value))
  return [*gs, n, r, *[x for pair in zip(idx[1:], loads) for x in pair], value, idx[0], st, uop(Ops.END, dtypes.void, (st, r))]

def run(op: Ops, out: DType, ins: list[tuple[DType, np.ndarray]]) -> np.ndarray:
  name = f"t_{uuid.uuid4().hex[:10]}"
  src = render_c(name, program(op, out, [d for d, _ in ins], name))
  bufs = [Buffer("CPU", N, out)] + [Buffer("CPU", N, d, a) for d, a in ins]
  ops_cpu.program(src, name)(bufs)
  return bufs[0].numpy()

def edge_ints(d: DType, rng) -> list[int]:
  lo, hi = dtypes.min(d), dtypes.max(d)
  edges = [lo, lo + 1, -2, -1, 0, 1, 2, 7, hi - 1, hi]
  return [v for v in edges if lo <= v <= hi] + [int(v) for v in rng.integers(lo, hi, size=N, endpoint=True, dtype=np.int64 if lo < 0 else np.uint64)]

def pairs(d: DType, seconds: list[int], rng) -> tuple[np.ndarray, np.ndarray]:
  """N pairs: every edge value against every second operand first, then random ones."""
  firsts = edge_ints(d, rng)
  grid = [(a, b) for b in seconds for a in firsts[:10] if dtypes.min(d) <= b <= dtypes.max(d)]
  grid = (grid + [(a, b) for a, b in zip(firsts[10:], rng.choice(seconds, N))])[:N]
  a, b = zip(*grid)
  return np.array(a, dtype=dtypes.to_numpy(d)), np.array([cast_value(int(x), d) for x in b], dtype=dtypes.to_numpy(d))

@pytest.mark.parametrize("op", [Ops.IDIV, Ops.MOD, Ops.SHL, Ops.SHR, Ops.ADD, Ops.MUL, Ops.SUB])
@pytest.mark.parametrize("d", SINTS + UINTS, ids=str)
def test_int_ops_match_exec_alu(op, d):
  rng = np.random.default_rng(int(op) * 100 + SINTS.index(d) if d in SINTS else int(op) * 100 + 50 + UINTS.index(d))
  bits = 8 * d.itemsize
  seconds = [-bits - 1, -1, 0, 1, bits - 1, bits, bits + 1, 3] if op in (Ops.SHL, Ops.SHR) else [0, -1, 1, 2, 3, -7, dtypes.min(d), dtypes.max(d)]
  a, b = pairs(d, seconds, rng)
  got = run(op, d, [(d, a), (d, b)])
  want = [exec_alu(op, d, [int(x), int(y)]) for x, y in zip(a, b)]
  assert got.tolist() == want, [(int(x), int(y), g, w) for x, y, g, w in zip(a, b, got.tolist(), want) if g != w][:5]

@pytest.mark.parametrize("d", [dtypes.int8, dtypes.uint8, dtypes.int32, dtypes.int64, dtypes.uint64], ids=str)
def test_float_to_int_matches_cast_value(d):
  specials = [np.nan, np.inf, -np.inf, 1e20, -1e20, 2.0**63, -2.0**63, 2.0**64, 3.7, -3.7, 0.5, -0.5, 255.9, 256.0, -129.0, 0.0]
  a = np.concatenate([specials, np.random.default_rng(1).uniform(-1e3, 1e3, N - len(specials))]).astype(np.float32)
  got = run(Ops.CAST, d, [(dtypes.float32, a)])
  assert got.tolist() == [cast_value(float(x), d) for x in a]

def test_bitcast_matches_numpy():
  a = np.array([0.0, -0.0, 1.0, np.nan, np.inf, -2.5] + list(range(N - 6)), dtype=np.float32)
  assert run(Ops.BITCAST, dtypes.int32, [(dtypes.float32, a)]).tolist() == a.view(np.int32).tolist()

def isa_features(march: str) -> set[str]:
  """The instruction-set macros (__SSE4_1__, __AVX2__, ...) the compiler defines for -march=`march`."""
  return {m for m in ops_cpu.target_macros(march).splitlines() if re.fullmatch(r"#define __[A-Z0-9_]+__ 1", m)}

def marchs_here() -> list[str]:
  """native and each x86-64 level this CPU runs (its instruction sets are among native's): gcc's folds differ by level."""
  native = isa_features("native")
  return ["native"] + [m for m in ("x86-64-v2", "x86-64-v3", "x86-64-v4") if (f := isa_features(m)) and f <= native]

@pytest.mark.parametrize("d", [dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64], ids=str)
def test_a_float_to_int_and_back_is_positive_zero_on_every_march(d, monkeypatch):
  """d -> int -> d gives +0.0 for -0.5, as cast_value: with -fno-trapping-math gcc folds (T)(int)x into trunc(x), which keeps
  -0.0, wherever the target has a trunc instruction for T (SSE4.1, x86-64-v2, for float and double; AVX512-FP16 for half,
  which native has on Sapphire Rapids), scalar or vectorized. Every int type, built for native and each x86-64 level this
  CPU runs; the values come from memory, 64 of them (vector loops run too)."""
  a = np.array([-0.5, -0.0, 0.5, -1.5, 2.5, -0.9, 0.0, -3.0, 300.5, -129.5, 40000.0, -1e-3] * 5 + [-0.7] * 4, np.float32)
  x = Buffer("CPU", N, d, a).numpy()  # the values as d holds them
  flags = list(ops_cpu.CFLAGS)
  marchs = marchs_here()
  assert "native" in marchs and (len(marchs) > 1 or "__SSE4_1__" not in isa_features("native"))
  for march in marchs:
    monkeypatch.setattr(ops_cpu, "CFLAGS", [f"-march={march}" if f == "-march=native" else f for f in flags])
    for i in SINTS + UINTS:
      name = f"cast_back_{d.name}_{i.name}".replace(" ", "_")
      gs = [uop(Ops.DEFINE_GLOBAL, d.ptr(N), (), k) for k in range(2)]
      n = UOp.const(dtypes.int32, N)
      r = uop(Ops.RANGE, dtypes.int32, (n,), 0)
      idx = [uop(Ops.INDEX, g.dtype, (g, r)) for g in gs]
      v = uop(Ops.LOAD, d, (idx[1],))
      back = v.cast(i).cast(d)
      st = uop(Ops.STORE, dtypes.void, (idx[0], back))
      src = render_c(name, [*gs, n, r, idx[1], v, back.src[0], back, idx[0], st, uop(Ops.END, dtypes.void, (st, r))])
      bufs = [Buffer("CPU", N, d), Buffer("CPU", N, d, a)]
      ops_cpu.program(src, name)(bufs)
      want = np.array([cast_value(cast_value(float(e), i), d) for e in x], dtype=x.dtype)
      got = bufs[0].numpy()
      wrong = [(float(e), float(g), float(w)) for e, g, w in zip(x, got, want) if g.tobytes() != w.tobytes()]
      assert not wrong, (march, str(i), wrong[:4])

@pytest.mark.parametrize("d", [dtypes.float32, dtypes.int32, dtypes.int8], ids=str)
def test_vector_max_matches_exec_alu(d):
  """MAX of 4-lane vectors: a C helper selecting by the comparison's mask (its int vector type declared too); nan wins."""
  v = d.vec(4)
  gs = [uop(Ops.DEFINE_GLOBAL, d.ptr(N), (), i) for i in range(3)]
  n, four = UOp.const(dtypes.int32, N // 4), UOp.const(dtypes.int32, 4)
  r = uop(Ops.RANGE, dtypes.int32, (n,), 0)
  at = r * four
  idx = [uop(Ops.INDEX, g.dtype, (g, at)) for g in gs]
  a, b = (uop(Ops.LOAD, v, (i,)) for i in idx[1:])
  st = uop(Ops.STORE, dtypes.void, (idx[0], a.maximum(b)))
  name = f"t_{uuid.uuid4().hex[:10]}"
  src = render_c(name, [*gs, n, r, four, at, idx[1], a, idx[2], b, a.maximum(b), idx[0], st, uop(Ops.END, dtypes.void, (st, r))])
  rng = np.random.default_rng(3)
  if d is dtypes.float32: xa, xb = rng.standard_normal((2, N)).astype(np.float32); xa[::7], xb[::5] = np.nan, np.nan
  else: xa, xb = (np.array(edge_ints(d, rng)[:N], dtype=dtypes.to_numpy(d)) for _ in range(2)); xb = xb[::-1].copy()
  bufs = [Buffer("CPU", N, d), Buffer("CPU", N, d, xa), Buffer("CPU", N, d, xb)]
  ops_cpu.program(src, name)(bufs)
  want = [exec_alu(Ops.MAX, d, [x.item(), y.item()]) for x, y in zip(xa, xb)]
  assert "vmax_" in src and np.array_equal(bufs[0].numpy(), np.array(want, dtype=dtypes.to_numpy(d)), equal_nan=True), src

def hard_fma_operands(d: DType, rng) -> list[np.ndarray]:
  """N triples (a, b, c) where a*b + c rounds differently fused and unfused: c cancels most of a*b, or is tiny beside it."""
  t = dtypes.to_numpy(d).type
  a = (rng.standard_normal(N) * 2.0 ** rng.integers(-20, 20, N)).astype(t)
  b = rng.standard_normal(N).astype(t)
  c = (-(a.astype(np.float64) * b) * (1 + rng.standard_normal(N) * 1e-3)).astype(t)
  c[::3] = rng.standard_normal(len(c[::3])).astype(t) * t(1e-6)
  a[:4], b[:4], c[:4] = [np.inf, 0.0, -0.0, np.nan], [0.0, 5.0, 2.0, 1.0], [1.0, -0.0, 0.0, 1.0]
  return [a, b, c]

@pytest.mark.parametrize("d", [dtypes.float32, dtypes.float64], ids=str)
def test_mulacc_is_a_fused_multiply_add_as_exec_alu(d):
  """MULACC rounds once (C's fma), scalar and on vectors (the vector helper gcc makes one FMA instruction), as exec_alu."""
  rng = np.random.default_rng(4)
  a, b, c = hard_fma_operands(d, rng)
  want = np.array([exec_alu(Ops.MULACC, d, [x.item(), y.item(), z.item()]) for x, y, z in zip(a, b, c)], dtype=dtypes.to_numpy(d))
  with np.errstate(invalid="ignore"): assert np.sum(want != (a * b + c)) > N // 3  # the operands tell fused from unfused
  got = run(Ops.MULACC, d, [(d, a), (d, b), (d, c)])
  assert np.array_equal(got, want, equal_nan=True)
  v = d.vec(4)
  gs = [uop(Ops.DEFINE_GLOBAL, d.ptr(N), (), i) for i in range(4)]
  n, four = UOp.const(dtypes.int32, N // 4), UOp.const(dtypes.int32, 4)
  r = uop(Ops.RANGE, dtypes.int32, (n,), 0)
  at = r * four
  idx = [uop(Ops.INDEX, g.dtype, (g, at)) for g in gs]
  xs = [uop(Ops.LOAD, v, (i,)) for i in idx[1:]]
  f = uop(Ops.MULACC, v, tuple(xs))
  st = uop(Ops.STORE, dtypes.void, (idx[0], f))
  name = f"t_{uuid.uuid4().hex[:10]}"
  src = render_c(name, [*gs, n, r, four, at, *[y for p in zip(idx[1:], xs) for y in p], f, idx[0], st, uop(Ops.END, dtypes.void, (st, r))])
  # the target's FMA instruction (x86 with FMA or AVX-512), and the fallback of one fma per lane (other targets)
  for text in (src, src.replace("#if defined(", "#if 0 && defined(")):
    bufs = [Buffer("CPU", N, d)] + [Buffer("CPU", N, d, x) for x in (a, b, c)]
    ops_cpu.program(text, name)(bufs)
    assert "vfma_" in text and np.array_equal(bufs[0].numpy(), want, equal_nan=True), text
  assert src.count("#if defined(") == 1

@pytest.mark.parametrize("d", [dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16], ids=str)
def test_vector_int_to_float_cast_converts_each_lane(d):
  """A CAST of a vector of 16 small ints to floats (a quantized matvec's weights): each lane's value, as cast_value, by
  AVX-512's widening and converting instructions and by the convertvector fallback (other targets)."""
  f, v = dtypes.float32.vec(16), d.vec(16)
  g0, g1 = uop(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(N), (), 0), uop(Ops.DEFINE_GLOBAL, d.ptr(N), (), 1)
  n, sixteen = UOp.const(dtypes.int32, N // 16), UOp.const(dtypes.int32, 16)
  r = uop(Ops.RANGE, dtypes.int32, (n,), 0)
  at = r * sixteen
  i0, i1 = uop(Ops.INDEX, g0.dtype, (g0, at)), uop(Ops.INDEX, g1.dtype, (g1, at))
  x = uop(Ops.LOAD, v, (i1,))
  y = uop(Ops.CAST, f, (x,))
  st = uop(Ops.STORE, dtypes.void, (i0, y))
  name = f"t_{uuid.uuid4().hex[:10]}"
  src = render_c(name, [g0, g1, n, sixteen, r, at, i1, x, y, i0, st, uop(Ops.END, dtypes.void, (st, r))])
  a = np.array(edge_ints(d, np.random.default_rng(5))[:N], dtype=dtypes.to_numpy(d))
  for text in (src, src.replace("#if defined(", "#if 0 && defined(")):
    bufs = [Buffer("CPU", N, dtypes.float32), Buffer("CPU", N, d, a)]
    ops_cpu.program(text, name)(bufs)
    assert "vcvt_" in text and np.array_equal(bufs[0].numpy(), a.astype(np.float32)), text

def test_kernel_layout():
  """The pieces of the rules laid out: includes, the kernel with one restrict pointer per buffer and its scalars, the
  loop a RANGE opens and its END closes, a load in a variable, a small-int result wrapped back to its type, the entry point reading the arrays."""
  g0, g1 = uop(Ops.DEFINE_GLOBAL, dtypes.int8.ptr(), (), 0), uop(Ops.DEFINE_GLOBAL, dtypes.int8.ptr(), (), 1)
  n = UOp.variable("n", 1, 100, dtypes.int32)
  r = uop(Ops.RANGE, dtypes.int32, (n,), 0)
  x = uop(Ops.LOAD, dtypes.int8, (uop(Ops.INDEX, g1.dtype, (g1, r)),))
  st = uop(Ops.STORE, dtypes.void, (uop(Ops.INDEX, g0.dtype, (g0, r)), x * 3))
  c3 = UOp.const(dtypes.int8, 3)
  uops = [g0, g1, n, r, x.src[0], x, c3, x * 3, st.src[0], st, uop(Ops.END, dtypes.void, (st, r))]
  assert render_c("k", uops) == "\n".join([
    "#include <math.h>", "#include <stdbool.h>",
    "void k(signed char* restrict data0, signed char* restrict data1, int n) {",
    "  for (int ridx0 = 0; ridx0 < n; ridx0++) {",
    "    signed char val0 = (*(data1+ridx0));",
    "    *(data0+ridx0) = ((signed char)(val0*((signed char)3)));",
    "  }", "}",
    "void k_call(void* const* bufs, const long long* ivals, const double* fvals) { k((signed char*)bufs[0], (signed char*)bufs[1], (int)ivals[0]); }",
    ""])

# ---- every rule fires ----

def test_every_rule_fires():
  # each ALU op, cast and bitcast of every dtype as a program of its own (only rendered: the combinations C has no rule
  # for raise), and the shared lowering work's kernels (tests/rules/fires.py)
  from fires import assert_every_rule_fires, firing, lowering, rules_of
  from runtime.ops import GroupOp
  every = [dtypes.bool, *SINTS, *UINTS, dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64]
  with firing() as counts:
    for op in GroupOp.ALU:
      for d in every:
        ins = [dtypes.bool, d, d] if op is Ops.WHERE else [d] * (3 if op in GroupOp.Ternary else 2 if op in GroupOp.Binary else 1)
        try: render_c("k", program(op, dtypes.bool if op in GroupOp.Comparison else d, ins, "k"))
        except NotImplementedError: pass
    for a in every:
      for b in every:
        render_c("k", program(Ops.CAST, b, [a], "k"))
        if a.itemsize == b.itemsize: render_c("k", program(Ops.BITCAST, b, [a], "k"))
  assert_every_rule_fires(rules_of("rules/render_c.rules"), {**lowering(), **counts})
