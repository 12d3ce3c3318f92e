"""float16 and bfloat16 kernels compute in float32 (rules/float_compute.rules): the result of a fused expression is its
float32 value rounded once to the dtype, bit for bit, on the CPU (C) and the PYTHON interpreter."""
from __future__ import annotations
import numpy as np
import pytest
from runtime.dtype import dtypes
from runtime.ops import Ops
from runtime.ops_cpu import find_compiler
from tensor import Tensor
from tensor.codegen import lower_kernel, target_for

N = 1024  # long enough for the vectorized (UPCAST) form on CPU
DEVICES = ["PYTHON"] + (["CPU"] if find_compiler(required=False) is not None else [])

def round_to(x: np.ndarray, dtype) -> np.ndarray:
  """float32 values rounded to nearest-even float16 / bfloat16, returned as float32."""
  x = x.astype(np.float32)
  if dtype is dtypes.float16: return x.astype(np.float16).astype(np.float32)
  u = x.view(np.uint32).astype(np.uint64)
  return (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)

# (ours on Tensors, numpy's on float32 arrays)
EXPRS = {
  "a*b+c": (lambda a, b, c: a * b + c,) * 2,
  "(a-b)/c": (lambda a, b, c: (a - b) / c,) * 2,
  "chain": (lambda a, b, c: ((a + b) * c - a) * 0.5 + 1.0,) * 2,
  "where max": (lambda a, b, c: ((a < b).where(a * b, c)).maximum(b + c), lambda a, b, c: np.maximum(np.where(a < b, a * b, c), b + c)),
  "sqrt": (lambda a, b, c: (a * a + b * b).sqrt(), lambda a, b, c: np.sqrt(a * a + b * b)),
}

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [dtypes.float16, dtypes.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("name", list(EXPRS))
def test_rounded_once_from_float32(device, dtype, name):
  rng = np.random.default_rng(len(name))
  xs = [rng.uniform(-4, 4, N).astype(np.float32) for _ in range(3)]
  xs[2] = np.where(np.abs(xs[2]) < 0.25, 0.5, xs[2]).astype(np.float32)  # a divisor away from 0
  ts = [Tensor(x, device=device).cast(dtype).realize() for x in xs]
  vals = [t.numpy().astype(np.float32) for t in ts]  # the inputs as the dtype holds them
  ours, ref = EXPRS[name]
  out = ours(*ts).numpy().astype(np.float32)
  want = round_to(ref(*vals), dtype)
  np.testing.assert_array_equal(out.view(np.uint32), want.view(np.uint32))

def test_intermediate_rounding_is_gone():
  # 3 * 683 + 1 in float16: rounded per op, 2049 -> 2048 (halves are 2 apart there), + 1 -> 2049 -> 2048 (the even one);
  # in float32, 2050, which float16 holds
  t = (Tensor(np.array([3.0], np.float32)).cast(dtypes.float16) * Tensor(np.array([683.0], np.float32)).cast(dtypes.float16)
       + Tensor(np.array([1.0], np.float32)).cast(dtypes.float16))
  assert t.numpy()[0] == 2050.0

def test_graph_casts_keep_their_rounding():
  # x.half() of a float32 x is a cast the graph holds: 2049 rounds to 2048 there; + 1 -> 2049 -> 2048 (without it, 2050)
  x = Tensor(np.array([2049.0], np.float32))
  assert (x.cast(dtypes.float16) + 1).numpy()[0] == 2048.0
  assert ((x * 1.0).cast(dtypes.float16).cast(dtypes.float32) - 2048.0).numpy()[0] == 0.0

def test_lowered_alus_are_float32():
  a, b, c = (Tensor(np.ones(N, np.float32)).cast(dtypes.float16).realize() for _ in range(3))
  t = a * b + c
  t.kernelize()
  ast = next(n.arg.ast for n in t.uop.toposort(gate=lambda n: n.op is not Ops.BUFFER) if n.op is Ops.KERNEL and n.arg.ast.op is Ops.SINK)
  sink, _ = lower_kernel(ast, target_for("PYTHON"), opt=False)
  alus = [u for u in sink.toposort() if u.op in (Ops.ADD, Ops.MUL) and u.dtype.scalar in (dtypes.float16, dtypes.float32, dtypes.bfloat16)]
  assert alus and all(u.dtype.scalar is dtypes.float32 for u in alus)

def test_every_rule_fires():
  from fires import assert_every_rule_fires, lowering, rules_of
  assert_every_rule_fires(rules_of("rules/float_compute.rules"), lowering())
