"""rules/spec.rules, the IR's spec (checked by tensor/codegen/spec.py): a representative workload under SPEC=2 (every
graph_rewrite's result checked, and every stage boundary) computes what numpy does, breaks no rule of the spec, and makes
every rule of it fire; a rule that makes a node the spec does not allow is named, with the node, under SPEC=2 and SPEC=1;
each stage's rule set rejects what that stage must not hold."""
import contextlib
import numpy as np
import pytest
from fires import assert_every_rule_fires, firing, given_gpu_opts, given_opts, graphs, kernel_asts, rules_of
from dslc.compile import compile_rules
from runtime.dtype import dtypes
from runtime.helpers import Context
from runtime.ops import Ops
from runtime.provenance import forget, track_rules
from runtime.rewrite import graph_rewrite
from runtime.uop import UOp, uop
from tensor import Tensor, Variable
from tensor.codegen import spec, target_for

@contextlib.contextmanager
def rules_tracked():
  """The record of which rule made each node that a violation names, on for the block (and as it was after: a run under
  SPEC has it on throughout)."""
  from runtime import provenance
  was = (provenance.TRACK_RULES, provenance.KEEP_REPLACED)
  track_rules(True, keep_replaced=False)
  try: yield
  finally:
    track_rules(*was)
    forget()

@pytest.fixture
def spec2():
  """SPEC=2 for the test, with the record of which rule made each node."""
  with rules_tracked(), Context(SPEC=2): yield

@pytest.mark.optimized
def test_every_rule_fires(spec2):
  """The shared graphs (tests/rules/fires.py) checked as tensor graphs, kernelized, and each kernel lowered under SPEC=2:
  every rule of the spec allows some node (lower_kernel is called directly: no cache of programs or schedules skips it)."""
  from tensor.codegen import lower_kernel
  spec.forget()
  with firing() as counts:
    ts = graphs() + [t for t, _ in given_opts()] + [Tensor.ones(4) * Variable("n", 1, 9).bind(5)]  # a bound variable as a value
    kernelized = (Tensor.ones(4).contiguous() + 1).kernelize()
    ts.append(kernelized * 2)  # a graph over a kernelized tensor: ASSIGN(BUFFER, KERNEL)
    for t in ts: spec.check(t.uop, "tensor", "a test's tensor graph")
    for ast in kernel_asts(ts):
      lower_kernel(ast)
      lower_kernel(ast, opt=False)
    for t, opts in given_gpu_opts(): lower_kernel(kernel_asts([t])[-1], target_for("CL"), opts)  # partials with lanes
  assert_every_rule_fires(rules_of("rules/spec.rules"), counts, UNREACHABLE)

# rules of the spec no graph of the pipeline makes today (the spec allows them: a pass may make them)
UNREACHABLE = {"c@(VCONST)": "no pass makes a VCONST (vector constants are VECTORIZEs of CONSTs), the spec allows one"}

def test_a_workload_under_spec2(spec2):
  rng = np.random.default_rng(0)
  a, b = rng.standard_normal((7, 13)).astype(np.float32), rng.standard_normal((13, 5)).astype(np.float32)
  ta, tb = Tensor(a), Tensor(b)
  np.testing.assert_allclose((ta @ tb).relu().softmax(1).numpy(), _softmax(np.maximum(a @ b, 0)), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(ta.sum(0).numpy(), a.sum(0), rtol=1e-5)
  np.testing.assert_allclose(ta.max(1).numpy(), a.max(1))
  np.testing.assert_allclose(ta.pad(((1, 2), (0, 3))).flip(0).permute(1, 0)[2:9].numpy(), np.pad(a, ((1, 2), (0, 3)))[::-1].T[2:9])
  x = rng.standard_normal((1, 2, 9, 9)).astype(np.float32)
  w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
  out = Tensor(x).conv2d(Tensor(w)).numpy()
  ref = np.array([[[[(x[0, :, i:i + 3, j:j + 3] * w[o]).sum() for j in range(7)] for i in range(7)] for o in range(3)]])
  np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
  i = rng.integers(-50, 50, 17).astype(np.int32)
  ti = Tensor(i)
  np.testing.assert_array_equal((ti // 3 + ti % 5 + (ti << 2) + (ti & 6) + (ti ^ 3)).numpy(), i // 3 + i % 5 + (i << 2) + (i & 6) + (i ^ 3))
  np.testing.assert_array_equal((ti > 0).where(ti, -ti).numpy(), np.abs(i))
  h = ta.cast(dtypes.float16)
  np.testing.assert_allclose((h * h + 1).numpy(), (a.astype(np.float16) * a.astype(np.float16) + np.float16(1)), rtol=1e-3)
  np.testing.assert_array_equal(ta[Tensor([3, 0, 6])].numpy(), a[[3, 0, 6]])
  np.testing.assert_allclose(ta.exp().log().numpy(), a, rtol=1e-5, atol=1e-5)
  assert Tensor.rand(11, 3).numpy().shape == (11, 3)

def _softmax(x: np.ndarray) -> np.ndarray:
  e = np.exp(x - x.max(1, keepdims=True))
  return e / e.sum(1, keepdims=True)

BAD = """ruleset widen
# wrong: an int32 ADD whose first source becomes int64 (the ADD stays int32)
(ADD x:int32 y) if x.op is Ops.DEFINE_VAR -> {UOp(Ops.ADD, dtypes.int32, (x.cast(dtypes.int64), y))}
"""

def test_a_rule_that_breaks_the_spec_is_named(spec2):
  ns: dict = {}
  exec(compile_rules("widen.rules", source=BAD), ns)
  x = UOp.variable("x", 0, 9, dtypes.int32)
  with pytest.raises(spec.SpecError) as e: graph_rewrite(x + 1, ns["widen"])
  msg = str(e.value)
  assert "no rule of spec_any" in msg and "ADD dtype=dtypes.int" in msg and "graph_rewrite(widen)" in msg, msg
  assert "made by widen.rules:3: (ADD x:int32 y) if x.op is Ops.DEFINE_VAR -> {UOp(Ops.ADD, dtypes.int32, (x.cast(dtypes.int64), y))}" in msg, msg
  assert e.value.node.op is Ops.ADD and e.value.node.src[0].dtype is dtypes.int64

def test_spec1_names_the_rule_at_the_next_boundary():
  """SPEC=1 checks no rewrite's result: the bad node is found where the graph crosses the next stage boundary, and named
  with the rule that made it all the same (SPEC records which rule made each node)."""
  ns: dict = {}
  exec(compile_rules("widen.rules", source=BAD), ns)
  with rules_tracked(), Context(SPEC=1):
    out = graph_rewrite(UOp.variable("x", 0, 9, dtypes.int32) + 1, ns["widen"])
    with pytest.raises(spec.SpecError) as e: spec.check(out, "program", "the lowered kernel")
  msg = str(e.value)
  assert "no rule of spec_program" in msg and "in the lowered kernel" in msg and "made by widen.rules:3: (ADD x:int32 y)" in msg, msg

def test_each_stage_rejects_what_it_must_not_hold():
  g = uop(Ops.DEFINE_GLOBAL, dtypes.int32.ptr(8), (), 0)
  ok = uop(Ops.SINK, dtypes.void, (uop(Ops.STORE, dtypes.void, (g, UOp.const(dtypes.int32, 3))),))
  spec.check(ok, "kernel")
  # a float stored into an int buffer
  bad = uop(Ops.SINK, dtypes.void, (uop(Ops.STORE, dtypes.void, (g, UOp.const(dtypes.float32, 3.0))),))
  with pytest.raises(spec.SpecError) as e: spec.check(bad, "kernel")
  assert e.value.node.op is Ops.STORE and e.value.stage == "kernel"
  # a kernel AST's parameter read as a value is fine there, not in a lowered kernel
  add = uop(Ops.ADD, dtypes.int32, (g, UOp.const(dtypes.int32, 1)))
  spec.check(add, "kernel")
  with pytest.raises(spec.SpecError): spec.check(add, "program")
  # a constant whose arg is not a value of its dtype; a movement op in a lowered kernel; an AND of floats
  with pytest.raises(spec.SpecError): spec.check(uop(Ops.CONST, dtypes.int8, (), 300), "program")
  r = uop(Ops.RESHAPE, dtypes.float32, (UOp.const(dtypes.float32, 1.0),), (1,))
  spec.check(r, "kernel")
  with pytest.raises(spec.SpecError): spec.check(r, "program")
  f = UOp.variable("f", 0, 1, dtypes.float32)
  with pytest.raises(spec.SpecError): spec.check(uop(Ops.AND, dtypes.float32, (f, f)), "tensor")
