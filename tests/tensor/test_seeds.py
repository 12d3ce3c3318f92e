"""The seed's examples (../shared/seeds/002: lazy tensors, UOps, the rewrite engine) as tests, verbatim but for the
imports, rewritten with API.md's table (tinygrad -> tensor, runtime, dslc). The seed's printed outputs become asserts.
Only the gradient examples are skipped until Tensor.gradient exists: autograd is another issue.
DEBUG=4, DEBUG=2 and NOOPT=1 are read at import, so those examples run in a subprocess with the flag set.
"""
import os, re, subprocess, sys, textwrap
import pytest
from tensor import Tensor, Device, dtypes
from runtime import UOp, Ops, graph_rewrite

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

@pytest.fixture(autouse=True)
def cpu_default():
  """The seed sets Device.DEFAULT = "CPU" (it ran on a Mac); put back whatever was there."""
  saved = Device._default
  Device.DEFAULT = "CPU"
  yield
  Device._default = saved

def run_python(code: str, **env: str) -> str:
  """stdout of `code` run by a fresh interpreter in the repository, with extra environment variables."""
  full = {**os.environ, **env}
  full.pop("PYTHONPATH", None)
  r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=full, capture_output=True, text=True, timeout=300)
  assert r.returncode == 0, f"the example failed:\n{r.stdout}\n{r.stderr}"
  return r.stdout

# ---- The Tensor ----
def test_the_tensor():
  t = Tensor([1, 2, 3, 4])
  print(t)
  # Basic operations work as expected
  doubled = t * 2
  assert doubled.tolist() == [2, 4, 6, 8]
  # More complex operations
  result = t + 3 + 4
  assert result.tolist() == [8, 9, 10, 11]  # the seed's comment says [8, 10, 12, 14]: a slip, 1+3+4 is 8 and 2+3+4 is 9

# ---- The Devices ----
def test_devices():
  assert Device.DEFAULT in ("CPU", "PYTHON")
  Device.DEFAULT = "CPU"
  assert Device.DEFAULT == "CPU"

def test_device_from_the_environment():
  """CPU=1 (as in `DEBUG=2 CPU=1 python docs/ramp.py`) and DEV=PYTHON pick the default device."""
  code = "from tensor import Device; print(Device.DEFAULT)"
  assert run_python(code, CPU="1").strip() == "CPU"
  assert run_python(code, DEV="PYTHON").strip() == "PYTHON"

# ---- Lazy Evaluation ----
def test_lazy_evaluation():
  t = Tensor([1, 2, 3, 4])
  # Examine the tensor properties
  assert t.device == Device.DEFAULT
  assert t.dtype == dtypes.int
  assert t.shape == (4,)
  # <Tensor <UOp CPU (4,) int (<Ops.COPY: 7>, None)> on CPU with grad None>
  assert re.fullmatch(r"<Tensor <UOp CPU \(4,\) int \(<?Ops\.COPY(: \d+>)?, None\)> on CPU with grad None>", repr(t)), repr(t)

# ---- The UOP ----
SEED_UOP = """UOp(Ops.COPY, dtypes.int, arg=None, src=(
  UOp(Ops.BUFFER, dtypes.int, arg=4, src=(
    UOp(Ops.UNIQUE, dtypes.void, arg=0, src=()),
    UOp(Ops.DEVICE, dtypes.void, arg='PYTHON', src=()),)),
  UOp(Ops.DEVICE, dtypes.void, arg='CPU', src=()),))"""

def _unique_ids(text: str) -> str: return re.sub(r"(Ops\.UNIQUE, dtypes\.void, arg=)\d+", r"\g<1>N", text)

def test_the_uop():
  t = Tensor([1, 2, 3, 4])
  print(t.uop)
  # a COPY from a BUFFER on the PYTHON device (the list [1, 2, 3, 4]) onto CPU; only the UNIQUE number differs
  assert _unique_ids(repr(t.uop)) == _unique_ids(SEED_UOP)
  copy = t.uop
  assert copy.op is Ops.COPY and copy.src[0].op is Ops.BUFFER and copy.src[0].arg == 4
  assert copy.src[0].src[1].arg == "PYTHON" and copy.src[1].arg == "CPU"

def test_realization():
  t = Tensor([1, 2, 3, 4])
  before = t.uop.src[0].src[0].arg
  t.realize()
  print(t.uop)
  # After that, the COPY is gone. You are looking at a BUFFER (on CPU, with a new UNIQUE)
  u = t.uop
  assert u.op is Ops.BUFFER and u.dtype == dtypes.int and u.arg == 4
  assert [s.op for s in u.src] == [Ops.UNIQUE, Ops.DEVICE] and u.src[1].arg == "CPU"
  assert u.src[0].arg != before

def test_operations_build_graphs():
  t = Tensor([1, 2, 3, 4]).realize()
  t_times_2 = t * 2
  print(t_times_2.uop)
  # Scalar multiply becomes an explicit broadcast: MUL(BUFFER, EXPAND(RESHAPE(CONST 2)))
  m = t_times_2.uop
  assert m.op is Ops.MUL and m.src[0].op is Ops.BUFFER
  e = m.src[1]
  assert e.op is Ops.EXPAND and e.arg == (4,) and e.src[0].op is Ops.RESHAPE and e.src[0].arg == (1,)
  assert e.src[0].src[0].op is Ops.CONST and e.src[0].src[0].arg == 2
  assert t_times_2.tolist() == [2, 4, 6, 8]

# ---- Smart Deduplication ----
def test_smart_deduplication():
  t = Tensor([1, 2, 3, 4])
  A = t * 4
  B = t * 4
  # Different Python objects
  assert A is not B
  # Same computational specification
  assert A.uop is B.uop
  A.realize()
  # Both tensors now point to the same realized buffer
  assert A.uop is B.uop
  assert A.uop.op is Ops.BUFFER
  assert B.tolist() == [4, 8, 12, 16]  # no computation needed

# ---- Automatic Differentiation ----
def test_forward_of_the_gradient_examples():
  """The forward half of the seed's autograd examples (requires_grad is accepted; the values need no autograd)."""
  x = Tensor([2.0], requires_grad=True)
  y = x**2 + 3*x + 1
  loss = y.sum()
  assert x.item() == 2.0
  assert y.item() == 11.0  # 4 + 6 + 1
  assert loss.item() == 11.0
  z = (x**2 + 1).log()
  assert z.item() == pytest.approx(1.6094378232955933, rel=1e-6)  # log(5)

def test_gradients():
  x = Tensor([2.0], requires_grad=True)
  y = x**2 + 3*x + 1
  loss = y.sum()
  grad, = loss.gradient(x)
  assert grad.item() == 7.0
  x = Tensor([2.0], requires_grad=True)
  z = (x**2 + 1).log()
  loss = z.sum()
  grad, = loss.gradient(x)
  assert grad.item() == pytest.approx(0.8, rel=1e-6)

# ---- Graph Optimization and Kernel Generation ----
def test_graph_optimization_and_kernel_generation():
  t = Tensor([1, 2, 3, 4])
  t_plus_3_plus_4 = t + 3 + 4
  print(t_plus_3_plus_4.uop)  # Shows addition of 3 and 4 separately
  assert sum(1 for u in t_plus_3_plus_4.uop.toposort() if u.op is Ops.ADD) == 2
  t_plus_3_plus_4.kernelize()
  print(t_plus_3_plus_4.uop)
  # ASSIGN(BUFFER, KERNEL(BUFFER, ASSIGN(BUFFER, KERNEL <COPY>)))
  outer = t_plus_3_plus_4.uop
  assert outer.op is Ops.ASSIGN and outer.src[0].op is Ops.BUFFER and outer.src[1].op is Ops.KERNEL
  assert outer.src[1].src[0] is outer.src[0]
  inner = outer.src[1].src[1]
  assert inner.op is Ops.ASSIGN and inner.src[1].op is Ops.KERNEL and inner.src[1].arg.ast.op is Ops.COPY
  kernel_ast = t_plus_3_plus_4.uop.src[1].arg.ast
  from tensor.codegen import full_rewrite_to_sink
  rewritten_ast = full_rewrite_to_sink(kernel_ast)
  print(rewritten_ast)
  # Constant folding turns + 3 + 4 into + 7: SINK(STORE(INDEX(DEFINE_GLOBAL 0, i), ADD(LOAD(INDEX(DEFINE_GLOBAL 1, i)), CONST 7)))
  nodes = list(rewritten_ast.toposort())
  # (the other constants are index arithmetic: the upcast lanes 0..3)
  adds = [u for u in nodes if u.op is Ops.ADD and any(s.op is Ops.LOAD for s in u.src)]
  assert adds and all(any(s.op is Ops.CONST and s.arg == 7 for s in a.src) for a in adds)
  assert not any(u.op is Ops.ADD and any(s in adds for s in u.src) for u in nodes)  # no second addition
  assert all(s.src[1] in adds for s in rewritten_ast.src)
  assert rewritten_ast.op is Ops.SINK and all(s.op is Ops.STORE for s in rewritten_ast.src)
  assert {u.arg for u in nodes if u.op is Ops.DEFINE_GLOBAL} == {0, 1}
  assert t_plus_3_plus_4.tolist() == [8, 9, 10, 11]

SEED_PROGRAM = """
from tensor import Tensor
t = Tensor([1, 2, 3, 4])
print((t + 3 + 4).tolist())
"""

def test_generated_code_debug4():
  """DEBUG=4 prints the kernel: upcast by default (without NOOPT=1), four straight-line stores of val+7 (the seed's E_4n2, ours E_4n and a digest)."""
  out = run_python(SEED_PROGRAM, DEBUG="4", NOOPT="0", CPU="1")
  src = out[out.index("void E_4"):]
  src = src[:src.index("\n}") + 2]
  assert re.match(r"void E_4\w*\(int\* restrict data0, int\* restrict data1\) \{", src), src
  assert "for (" not in src
  loads = re.findall(r"int (val\d) = \(?\*\(data1\+(\d)\)\)?;", src)
  assert sorted(int(i) for _, i in loads) == [0, 1, 2, 3], src
  stores = re.findall(r"\*\(data0\+(\d)\) = \((val\d)\+7\);", src)
  assert sorted(int(i) for i, _ in stores) == [0, 1, 2, 3], src
  assert "[8, 9, 10, 11]" in out

def test_generated_code_noopt():
  """NOOPT=1 keeps the loop."""
  out = run_python(SEED_PROGRAM, DEBUG="4", NOOPT="1", CPU="1")
  src = out[out.index("void E_4"):]
  src = src[:src.index("\n}") + 2]
  assert re.search(r"for \(int (ridx0) = 0; \1 < 4; \1\+\+\) \{", src), src
  assert re.search(r"int val0 = \(?\*\(data1\+ridx0\)\)?;", src) and re.search(r"\*\(data0\+ridx0\) = \(val0\+7\);", src), src
  assert "[8, 9, 10, 11]" in out

def test_debug2():
  """DEBUG=2: a line per kernel (name, sizes, time, GFLOPS, GB/s) and the totals at exit."""
  out = run_python(SEED_PROGRAM, DEBUG="2", CPU="1")
  lines = [line for line in out.splitlines() if line.startswith("***")]
  assert len(lines) == 2 and any("E_4" in line for line in lines)
  assert all("GFLOPS" in line and "GB/s" in line for line in lines)
  assert re.search(r"total:\s+2 kernels", out.splitlines()[-1])

# ---- Advanced Topics: Low-Level UOp Construction ----
def test_low_level_uop_construction():
  # Create constant UOPs
  a = UOp(Ops.CONST, dtypes.int, arg=2)
  b = UOp(Ops.CONST, dtypes.int, arg=2)
  # Global uniqueness: same specifications = same object
  assert a is b
  # Construct computation
  a_plus_b = a + b
  print(a_plus_b)
  assert repr(a_plus_b) == "UOp(Ops.ADD, dtypes.int, arg=None, src=(\n  x0:=UOp(Ops.CONST, dtypes.int, arg=2, src=()),\n   x0,))"

# ---- Pattern Matching and Graph Rewriting ----
def test_pattern_matching_and_graph_rewriting():
  from dslc import UPat, PatternMatcher
  a = UOp(Ops.CONST, dtypes.int, arg=2)
  b = UOp(Ops.CONST, dtypes.int, arg=2)
  a_plus_b = a + b
  # Define a constant folding pattern
  simple_pm = PatternMatcher([
    (UPat(Ops.ADD, src=(UPat(Ops.CONST, name="c1"), UPat(Ops.CONST, name="c2"))),
     lambda c1,c2: UOp(Ops.CONST, dtype=c1.dtype, arg=c1.arg+c2.arg)),
  ])
  # Apply the pattern
  a_plus_b_simplified = graph_rewrite(a_plus_b, simple_pm)
  print(a_plus_b_simplified)  # UOp(Ops.CONST, dtypes.int, arg=4, src=())
  assert repr(a_plus_b_simplified) == "UOp(Ops.CONST, dtypes.int, arg=4, src=())"
  simpler_pm = PatternMatcher([
    (UPat.cvar("c1")+UPat.cvar("c2"), lambda c1,c2: c1.const_like(c1.arg+c2.arg))
  ])
  assert graph_rewrite(a_plus_b, simple_pm) is graph_rewrite(a_plus_b, simpler_pm)
