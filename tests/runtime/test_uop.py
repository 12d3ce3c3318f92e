"""runtime/uop.py: hash-consing and freeing, operator sugar, constants, toposort, substitute, variables, sym_infer, render and repr."""
import gc, math, re
import pytest
from runtime import UOp, Ops, dtypes, sym_infer
from runtime.uop import live_uops

# ---- the seed ----

SEED_OUTPUT = """UOp(Ops.ADD, dtypes.int, arg=None, src=(
  x0:=UOp(Ops.CONST, dtypes.int, arg=2, src=()),
   x0,))
"""

def test_seed_low_level_example(capsys):
  # the seed's "Low-Level UOP Construction", verbatim but for the imports
  from runtime import UOp, Ops, dtypes

  # Create constant UOPs
  a = UOp(Ops.CONST, dtypes.int, arg=2)
  b = UOp(Ops.CONST, dtypes.int, arg=2)

  # Global uniqueness: same specifications = same object
  assert a is b

  # Construct computation
  a_plus_b = a + b
  print(a_plus_b)

  assert capsys.readouterr().out == SEED_OUTPUT

def test_repr_of_a_plus_a_shares_x0():
  a = UOp(Ops.CONST, dtypes.int, arg=2)
  assert repr(a + a) == SEED_OUTPUT.rstrip("\n")
  assert repr(a) == "UOp(Ops.CONST, dtypes.int, arg=2, src=())"

def test_repr_names_every_shared_node():
  x = UOp.variable("x", 0, 10)
  y = x * 2
  text = repr((y + y) * x)
  assert text.count(":=UOp(Ops.MUL") == 1 and text.count(":=UOp(Ops.DEFINE_VAR") == 1
  for line in text.splitlines()[1:]: assert line.startswith("  ")
  assert repr(y.replace(tag="t")).count("tag='t'") == 1

def test_repr_of_a_deep_graph_does_not_recurse():
  x = UOp.variable("x", 0, 10)
  for _ in range(5_000): x = -x
  lines = repr(x).splitlines()
  assert len(lines) == 5_001 and "Ops.NEG" in lines[-1]

# ---- hash-consing ----

def test_same_fields_same_object():
  assert UOp(Ops.CONST, dtypes.int, arg=2) is UOp(Ops.CONST, dtypes.int, arg=2)
  x = UOp.variable("x", 0, 10)
  assert x + 1 is x + 1 and (x * 2) // 3 is (x * 2) // 3
  assert UOp(Ops.ADD, dtypes.int, (x, x)) is x + x
  assert UOp(Ops.SINK, src=[x]) is UOp(Ops.SINK, src=(x,))  # src given as a list is stored as a tuple

def test_threads_building_the_same_nodes_get_one_object():
  # between the cache lookup and the store another thread may make the same node: there must still be one
  import sys, threading
  x = UOp.variable("x", 0, 10)
  results: list[list[UOp]] = [[] for _ in range(8)]
  start = threading.Barrier(8)
  def build(i: int):
    start.wait()
    results[i] = [x * k + (k % 7) for k in range(10000)]  # without the fix: dozens of duplicates here
  interval = sys.getswitchinterval()
  sys.setswitchinterval(1e-6)
  try:
    ts = [threading.Thread(target=build, args=(i,)) for i in range(8)]
    for t in ts: t.start()
    for t in ts: t.join()
  finally: sys.setswitchinterval(interval)
  assert all(a is b for r in results[1:] for a, b in zip(results[0], r))

def test_device_is_cached_along_a_chain():
  # t = t * 1.0001 + 0.5 10,000 times took 139 s when every op walked the chain down to its DEVICE: now each node keeps it
  from runtime.uop import _UNSET
  dev = UOp(Ops.DEVICE, arg="CPU")
  u = base = UOp(Ops.CONST, dtypes.float, (dev,), 1.0)
  nodes = []
  for _ in range(100_000):
    u = UOp(Ops.ADD, dtypes.float, (u, base))
    nodes.append(u)
    assert u.device == "CPU"  # each lookup stops at the source's cached device
  assert all(n._device == "CPU" for n in nodes)
  lazy = UOp(Ops.MUL, dtypes.float, (UOp(Ops.MUL, dtypes.float, (nodes[-1], base)), base))
  assert lazy._device is _UNSET and lazy.device == "CPU" and lazy.src[0]._device == "CPU"
  assert UOp(Ops.COPY, dtypes.float, (base, UOp(Ops.DEVICE, arg="PYTHON"))).device == "PYTHON" and UOp(Ops.SINK, src=(base,)).device == "CPU"

def test_different_fields_different_objects():
  c = UOp(Ops.CONST, dtypes.int, arg=2)
  assert c is not UOp(Ops.CONST, dtypes.int, arg=3)
  assert c is not UOp(Ops.CONST, dtypes.int64, arg=2)
  assert c is not UOp(Ops.CONST, dtypes.int, arg=2, tag="t")
  x, y = UOp.variable("x", 0, 10), UOp.variable("y", 0, 10)
  assert x + y is not y + x and x + 1 is not x * 1 and x is not UOp.variable("x", 0, 11)

def test_signed_zeros_are_different_constants():
  neg, pos = UOp(Ops.CONST, dtypes.float, arg=-0.0), UOp(Ops.CONST, dtypes.float, arg=0.0)
  assert neg is not pos and math.copysign(1.0, neg.arg) == -1.0 and math.copysign(1.0, pos.arg) == 1.0
  assert UOp.const(dtypes.float, -0.0) is neg and UOp.const(dtypes.float, 0.0) is pos
  assert UOp(Ops.CONST, dtypes.float, arg=-0.0) is neg

def test_signed_zeros_in_vector_constants():
  v = UOp.const(dtypes.float.vec(2), (0.0, -0.0))
  w = UOp.const(dtypes.float.vec(2), (0.0, 0.0))
  assert v is not w and math.copysign(1.0, w.arg[1]) == 1.0 and math.copysign(1.0, v.arg[1]) == -1.0

def test_nan_constants_are_one_node():
  for dt in (dtypes.float16, dtypes.float32, dtypes.float64):
    assert UOp.const(dt, math.nan) is UOp.const(dt, float("nan"))
  assert UOp.const(dtypes.float.vec(2), (math.nan, 1.0)) is UOp.const(dtypes.float.vec(2), (float("nan"), 1.0))
  assert UOp.const(dtypes.float, math.nan) is not UOp.const(dtypes.float, 0.0)

def test_unreferenced_nodes_are_freed():
  gc.collect()
  before = live_uops()
  x = UOp.variable("a_variable_only_this_test_uses", 0, 1000)
  y = x
  for i in range(1000): y = (y + i) * 3
  assert live_uops() >= before + 2000
  del x, y
  gc.collect()
  assert live_uops() == before
  # and a freed node can be built again
  assert UOp.variable("a_variable_only_this_test_uses", 0, 1000).arg == ("a_variable_only_this_test_uses", 0, 1000)

def test_equality_is_identity():
  x = UOp.variable("x", 0, 10)
  assert (x == x) is True and (x + 1 == x + 1) is True and (x == x + 1) is False
  assert (x == 3) is False and (x != x + 1) is True
  assert len({x + 1, x + 1, x + 2}) == 2

def test_bool_and_len_raise():
  x = UOp.variable("x", 0, 10)
  with pytest.raises(TypeError, match="truth value"): bool(x)
  with pytest.raises(TypeError):
    if x < 3: pass
  with pytest.raises(TypeError): len(x)

# ---- operator sugar ----

X = UOp.variable("x", -20, 20)
Y = UOp.variable("y", 1, 9)

@pytest.mark.parametrize("build,op,dtype", [
  (lambda: X + Y, Ops.ADD, dtypes.int), (lambda: X - Y, Ops.SUB, dtypes.int), (lambda: X * Y, Ops.MUL, dtypes.int),
  (lambda: X // Y, Ops.IDIV, dtypes.int), (lambda: X % Y, Ops.MOD, dtypes.int), (lambda: X < Y, Ops.CMPLT, dtypes.bool),
  (lambda: X & Y, Ops.AND, dtypes.int), (lambda: X | Y, Ops.OR, dtypes.int), (lambda: X ^ Y, Ops.XOR, dtypes.int),
  (lambda: X << Y, Ops.SHL, dtypes.int), (lambda: X >> Y, Ops.SHR, dtypes.int), (lambda: X.maximum(Y), Ops.MAX, dtypes.int),
  (lambda: X.ne(Y), Ops.CMPNE, dtypes.bool), (lambda: X.eq(Y), Ops.CMPEQ, dtypes.bool)])
def test_binary_sugar(build, op, dtype):
  u = build()
  assert u.op is op and u.dtype is dtype and u.src == (X, Y) and u.arg is None

def test_constants_on_either_side():
  assert (X + 3).src == (X, UOp.const(dtypes.int, 3)) and (3 + X).src == (UOp.const(dtypes.int, 3), X)
  for u, op in [(2 - X, Ops.SUB), (2 * X, Ops.MUL), (7 // X, Ops.IDIV), (7 % X, Ops.MOD), (1 & X, Ops.AND), (1 | X, Ops.OR), (1 ^ X, Ops.XOR)]:
    assert u.op is op and u.src[1] is X and u.src[0].op is Ops.CONST and u.dtype is dtypes.int
  f = UOp.variable("f", 0, 1).cast(dtypes.float)
  assert (1 / f).op is Ops.FDIV and (f / 2).src[1] is UOp.const(dtypes.float, 2.0) and (f / 2).dtype is dtypes.float

def test_unary_and_derived_sugar():
  assert (-X).op is Ops.NEG and (-X).src == (X,) and (-X).dtype is dtypes.int
  assert (X > Y).op is Ops.CMPLT and (X > Y).src == (Y, X)
  for u in (X <= Y, X >= Y):
    assert u.dtype is dtypes.bool and u.op is Ops.CMPNE and u.src[0].op is Ops.CMPLT  # not(a < b)
  w = (X < Y).where(X, Y)
  assert w.op is Ops.WHERE and w.src == (X < Y, X, Y) and w.dtype is dtypes.int
  assert (X < 0).where(1, X).src[1] is UOp.const(dtypes.int, 1) and (X < 0).where(X, 2).src[2] is UOp.const(dtypes.int, 2)
  with pytest.raises(TypeError): (X < 0).where(1, 2)
  assert X.minimum(Y).dtype is dtypes.int
  for xv in range(-20, 21, 3):
    for yv in range(1, 10, 2):
      vals = {"x": xv, "y": yv}
      assert X.minimum(Y).sym_infer(vals) == min(xv, yv) and X.maximum(Y).sym_infer(vals) == max(xv, yv)
      assert (X <= Y).sym_infer(vals) is (xv <= yv) and (X >= Y).sym_infer(vals) is (xv >= yv) and (X > Y).sym_infer(vals) is (xv > yv)

def test_minimum_of_floats_and_unsigned():
  f, g = UOp.variable("f", 0, 1).cast(dtypes.float), UOp.variable("g", 0, 1).cast(dtypes.float)
  assert f.minimum(g).dtype is dtypes.float and f.minimum(g).sym_infer({"f": 0, "g": 1}) == 0.0
  u = UOp.variable("u", 0, 2**32 - 1, dtypes.uint32)
  assert u.minimum(5).sym_infer({"u": 2**32 - 1}) == 5 and u.minimum(5).sym_infer({"u": 0}) == 0

def test_vector_comparisons_give_bool_vectors():
  v = UOp.const(dtypes.float.vec(4), (1.0, 2.0, 3.0, 4.0))
  assert (v < v).dtype is dtypes.bool.vec(4) and v.ne(v).dtype is dtypes.bool.vec(4)

def test_mixing_dtypes_raises():
  c8 = UOp.const(dtypes.int8, 1)
  for build in (lambda: X + c8, lambda: X < c8, lambda: X.maximum(c8), lambda: X * c8, lambda: c8.eq(X)):
    with pytest.raises(TypeError) as e: build()
    assert "dtypes.int8" in str(e.value) and re.search(r"dtypes\.int\b", str(e.value)), str(e.value)  # names both dtypes
  with pytest.raises(TypeError, match="float"): X + 1.5
  with pytest.raises(TypeError): (X < 0).where(X, c8)

def test_const_and_const_like():
  assert X.const_like(3) is UOp(Ops.CONST, dtypes.int, arg=3)
  f = UOp.const(dtypes.float, 1.5)
  assert f.const_like(2).arg == 2.0 and type(f.const_like(2).arg) is float
  assert UOp.const(dtypes.int, 2.7).arg == 2 and UOp.const(dtypes.int, -2.7).arg == -2  # C's float to int: toward zero
  assert UOp.const(dtypes.int8, 200).arg == -56 and UOp.const(dtypes.bool, 3).arg is True
  v = UOp.const(dtypes.int.vec(3), 7)
  assert v.op is Ops.VECTORIZE and v.src == (UOp.const(dtypes.int, 7),) * 3 and v.const_like(1).dtype is dtypes.int.vec(3)
  vc = UOp.const(dtypes.int.vec(2), (1, 2))
  assert vc.op is Ops.VCONST and vc.arg == (1, 2)
  with pytest.raises(ValueError): UOp.const(dtypes.int.vec(2), (1, 2, 3))
  with pytest.raises(TypeError): UOp.const(dtypes.int, X)

def test_cast_and_bitcast():
  c = X.cast(dtypes.int64)
  assert c.op is Ops.CAST and c.dtype is dtypes.int64 and c.src == (X,) and X.cast(dtypes.int) is X
  b = X.bitcast(dtypes.float)
  assert b.op is Ops.BITCAST and b.dtype is dtypes.float and X.bitcast(dtypes.int) is X

def test_replace():
  assert (X + 1).replace(op=Ops.MUL) is X * 1 and X.replace(arg=("x", -20, 20)) is X

# ---- graph walks ----

def test_toposort_sources_first_each_once():
  x, y = UOp.variable("x", 0, 10), UOp.variable("y", 0, 10)
  a = x * y
  root = (a + a) * (a - x)
  order = list(root.toposort())
  assert len(order) == len(set(order)) == 6 and order[-1] is root
  pos = {u: i for i, u in enumerate(order)}
  for u in order:
    for s in u.src: assert pos[s] < pos[u]
  assert set(root.sparents()) == set(order)

def test_toposort_gate():
  x = UOp.variable("x", 0, 10)
  inner = x + 1
  root = inner * 2
  assert list(root.toposort(gate=lambda u: u is not inner)) == [inner, UOp.const(dtypes.int, 2), root]

def test_toposort_of_a_100000_deep_chain():
  x = UOp.variable("x", 0, 10)
  for _ in range(100_000): x = x + 1
  order = x.toposort()
  assert len(order) == 100_002 and next(iter(order)).op is Ops.DEFINE_VAR
  assert (x.vmin, x.vmax) == (100_000, 100_010)  # bounds are computed iteratively as well

def test_substitute():
  x, y, z = UOp.variable("x", 0, 10), UOp.variable("y", 0, 10), UOp.variable("z", 0, 10)
  assert (x + y).substitute({x: z}) is z + y
  assert (x + y).substitute({x: y, y: z}) is y + z  # replacements are not searched again
  e = (x * 2 + y) // 3
  assert e.substitute({x * 2: z}) is (z + y) // 3 and e.substitute({}) is e and e.substitute({e: x}) is x

# ---- variables, bind, sym_infer ----

def test_variable():
  v = UOp.variable("n", 1, 64)
  assert v.op is Ops.DEFINE_VAR and v.dtype is dtypes.index and v.arg == ("n", 1, 64) and v.expr == "n"
  assert (v.vmin, v.vmax) == (1, 64) and UOp.variable("n", 1, 64) is v
  assert UOp.variable("m", 0, 3, dtypes.int64).dtype is dtypes.int64
  with pytest.raises(ValueError, match="empty range"): UOp.variable("n", 5, 4)
  with pytest.raises(AttributeError): (v + 1).expr

def test_bind():
  v = UOp.variable("n", 1, 64)
  b = v.bind(10)
  assert b.op is Ops.BIND and b.src == (v, UOp.const(dtypes.index, 10)) and b.dtype is v.dtype and v.bind(10) is b
  assert (b.vmin, b.vmax) == (1, 64)  # the bound value is not a fact about the variable
  with pytest.raises(ValueError, match="outside"): v.bind(65)
  with pytest.raises(ValueError): v.bind(0)
  with pytest.raises(TypeError): (v + 1).bind(3)

def test_sym_infer():
  x, y = UOp.variable("x", -100, 100), UOp.variable("y", -100, 100)
  e = (x * 3 + y) // 4 - (x % y)
  for xv, yv in [(7, 2), (-7, 2), (7, -2), (-7, -2), (0, 5), (100, -3)]:
    want = int((xv * 3 + yv) / 4) - int(math.fmod(xv, yv))  # C's truncating / and %
    assert e.sym_infer({"x": xv, "y": yv}) == want and e.sym_infer({x: xv, y: yv}) == want and sym_infer(e, {x: xv, "y": yv}) == want
  assert sym_infer(5, {}) == 5
  assert (x < y).sym_infer({"x": 1, "y": 2}) is True
  assert (x * 2**30).sym_infer({"x": 4}) == 0  # int32 wraps
  with pytest.raises(KeyError, match="y"): e.sym_infer({"x": 1})

def test_sym_infer_uses_bound_values():
  x, y = UOp.variable("x", 0, 10), UOp.variable("y", 0, 10)
  assert (x.bind(3) * 2).sym_infer({}) == 6
  assert (x.bind(3) * 2 + y).sym_infer({"y": 4}) == 10
  assert (x.bind(3) + x).sym_infer({"x": 5}) == 8  # the unbound use takes var_vals

def test_sym_infer_casts_and_floats():
  x = UOp.variable("x", -300, 300)
  assert x.cast(dtypes.int8).sym_infer({"x": 200}) == -56 and x.cast(dtypes.bool).sym_infer({"x": 0}) is False
  f = x.cast(dtypes.float)
  assert (f / 2).sym_infer({"x": 3}) == 1.5 and (f / 2).cast(dtypes.int).sym_infer({"x": -3}) == -1
  with pytest.raises(ValueError, match="sym_infer"): UOp(Ops.SINK, src=(x,)).sym_infer({"x": 1})

# ---- render ----

def test_render():
  a, b = UOp.variable("a", 0, 10), UOp.variable("b", 0, 10)
  assert (a * 4 + b // 2).render() == "((a*4)+(b//2))"
  assert (a % 3 - b).render() == "((a%3)-b)" and (-a).render() == "(-a)" and a.maximum(b).render() == "max(a, b)"
  assert (a < b).where(a, 7).render() == "((a<b)?a:7)" and a.cast(dtypes.int64).render() == "(long long)a"
  assert (a.ne(b) & (a < 3)).render() == "((a!=b)&(a<3))" and (a << 2 | b >> 1).render() == "((a<<2)|(b>>1))"
  assert a.bind(3).render() == "a" and UOp.const(dtypes.int, -5).render() == "-5" and a.eq(b).render() == "(a==b)"
  big = a
  for i in range(50): big = big * 2 + i
  assert "\n" not in big.render()
  assert UOp(Ops.SINK, src=(a, b)).render() == "SINK(a, b)" and UOp(Ops.SINK, arg=3).render() == "SINK(, 3)"

def test_render_of_a_deep_chain_uses_memory_linear_in_its_text():
  # a string per node, each holding its sources' text: 3.1 GB for a 20,000-deep chain, killed at 100,000
  import tracemalloc
  x = UOp.variable("x", 0, 10)
  for _ in range(20_000): x = x + 1
  tracemalloc.start()
  try:
    text = x.render()
    peak = tracemalloc.get_traced_memory()[1]
  finally: tracemalloc.stop()
  assert text == "(" * 20_000 + "x" + "+1)" * 20_000
  assert peak < 40 * len(text), f"{peak} bytes at the peak for {len(text)} characters"
