"""Local bindings in results: `-> (MUL p scale) where p = ..., scale = ...`.

The oracle: numpy. A float32 exp2 lowering written as one rule with `where` lines (range reduction, a Horner polynomial,
the exponent built from bits) must agree with np.exp2 on inputs across its range, and its generated code must be one
short line per binding instead of one long expression.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from dslc.compile import compile_rules, exec_module
from runtime import UOp, Ops, dtypes
from runtime.ops import GroupOp, cast_value, exec_alu

EXP2 = """
ruleset decompose
# exp2(x) = 2^n * 2^f with n = floor(x) and f = x - n in [0, 1): 2^f by its Taylor polynomial in Horner form, 2^n by
# writing n + 127 into the exponent bits of a float32 (for x in [-126, 127])
(EXP2 x:float32) -> (MUL p scale)
  where t = (TRUNC x)
  where below = (WHERE (CMPLT x t) 1.0 0.0)
  where n = (SUB t below)
  where f = (SUB x n)
  where h7 = (ADD (MUL f 1.3215486790144307e-06) 1.525273380405984e-05)
  where h6 = (ADD (MUL f h7) 0.00015403530393381606)
  where h5 = (ADD (MUL f h6) 0.0013333558146428443)
  where h4 = (ADD (MUL f h5) 0.009618129107628477)
  where h3 = (ADD (MUL f h4) 0.05550410866482158)
  where h2 = (ADD (MUL f h3) 0.2402265069591007)
  where h1 = (ADD (MUL f h2) 0.6931471805599453)
  where p = (ADD (MUL f h1) 1.0)
  where e = (ADD (CAST:int32 n) 127)
  where bits = (SHL e 23)
  where scale = (BITCAST:float32 bits)
# a {python} value that is None declines; a number becomes a constant where a node needs one
(SQRT x) -> (MUL x k) where k = {0.5 if x.vmin > 0 else None}
# where values can be used several times, and in any later one
(MULACC a b c) -> (ADD m m2) where m = (MUL a b), m2 = (ADD m c)
"""

@pytest.fixture(scope="module")
def decompose():
  ns: dict = {}
  exec_module(compile_rules("t.rules", "t.rules", source=EXP2), "t.rules", ns)
  return ns["decompose"]

def evaluate(root: UOp, env: dict) -> float:
  """The value of a graph with C's float32 semantics (exec_alu rounds each op to its dtype), BITCAST through numpy."""
  vals: dict = {}
  for u in root.toposort():
    if u.op is Ops.CONST: v = u.arg
    elif u.op is Ops.DEFINE_VAR: v = env[u.arg[0]]
    elif u.op is Ops.CAST: v = cast_value(vals[u.src[0]], u.dtype)
    elif u.op is Ops.BITCAST: v = float(np.array(vals[u.src[0]], np.int32).view(np.float32))
    elif u.op in GroupOp.ALU: v = exec_alu(u.op, u.dtype, [vals[s] for s in u.src])
    else: raise ValueError(u.op)
    vals[u] = v
  return vals[root]

@settings(max_examples=200, deadline=None)
@given(st.floats(-126, 127, width=32))
def test_exp2_lowering_agrees_with_numpy(decompose, v):
  x = UOp.variable("x", -126, 127, dtypes.float32)
  lowered = decompose.rewrite(x.alu(Ops.EXP2))
  assert lowered is not None and Ops.EXP2 not in {u.op for u in lowered.toposort()}
  want = float(np.exp2(np.float32(v)))
  assert evaluate(lowered, {"x": v}) == pytest.approx(want, rel=2e-6)

def test_each_binding_is_a_line_of_its_own():
  code = compile_rules("t.rules", "t.rules", source=EXP2)
  body = code.split("def decompose_EXP2(")[1].split("\ndef ")[0]
  lines = [x.strip() for x in body.split("\n")]
  for name in ("t", "n", "f", "h7", "h1", "p", "scale"): assert any(x.startswith(f"{name} = _uop(") for x in lines), name
  assert max(len(x) for x in body.split("\n") if not x.lstrip().startswith("#")) <= 150

def test_a_python_binding_declines_with_none_and_numbers_become_constants(decompose):
  pos, anyv = UOp.variable("a", 1, 9, dtypes.float32), UOp.variable("b", -1, 9, dtypes.float32)
  assert decompose.rewrite(pos.alu(Ops.SQRT)) is pos * 0.5
  assert decompose.rewrite(anyv.alu(Ops.SQRT)) is None
  a, b, c = (UOp.variable(n, 0, 9, dtypes.int32) for n in "abc")
  m = a * b
  assert decompose.rewrite(UOp(Ops.MULACC, dtypes.int32, (a, b, c))) is m + (m + c)
