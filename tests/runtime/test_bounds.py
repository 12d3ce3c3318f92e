"""Soundness of range analysis (UOp.vmin/vmax): every value sym_infer gives a sub-expression lies within its bounds.

Hypothesis builds random integer expression trees (ADD SUB MUL NEG IDIV MOD MAX CMPLT CMPNE CMPEQ WHERE AND OR XOR SHL SHR
and CASTs between int8/int16/int32/int64/bool) over UOp.variables with random, possibly negative ranges, and checks
every sub-expression at every corner of the variables' box and at random points inside it.
Example counts: 1,000 int32 trees and 1,000 int8 trees (int8 wraps often), 2,000 in all.
"""
import itertools
from hypothesis import HealthCheck, given, settings, strategies as st
from runtime import UOp, dtypes, sym_infer

EXAMPLES = 1_000
INT_DTYPES = (dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64)
BINARY = ("add", "sub", "mul", "idiv", "mod", "max", "and", "or", "xor", "shl", "shr")

def _lo(dt): return dtypes.min(dt)
def _hi(dt): return dtypes.max(dt)

@st.composite
def expressions(draw, root_dtype, max_depth: int = 5):
  """(expression, variables): a random tree of root_dtype over at most two variables per integer dtype."""
  variables: dict[str, UOp] = {}

  def variable(dt) -> UOp:
    name = f"v{dt.itemsize}_{draw(st.integers(0, 1))}"
    if name not in variables:
      # small ranges around zero mostly, sometimes anywhere in the dtype (including its extremes)
      span = st.one_of(st.integers(-20, 20), st.integers(_lo(dt), _hi(dt)), st.sampled_from([_lo(dt), _hi(dt), 0, -1]))
      a, b = draw(span), draw(span)
      variables[name] = UOp.variable(name, min(a, b), max(a, b), dt)
    return variables[name]

  def const(dt) -> UOp:
    return UOp.const(dt, draw(st.one_of(st.sampled_from([0, 1, -1, 2, -2, 3, 7, -8, 100, _lo(dt), _hi(dt)]), st.integers(_lo(dt), _hi(dt)))))

  def boolean(depth: int) -> UOp:
    kind = draw(st.sampled_from(["cmp", "cmp", "cast", "logic", "where"] if depth > 0 else ["cmp"]))
    if kind == "cmp":
      dt = draw(st.sampled_from(INT_DTYPES))
      a, b = integer(dt, depth - 1), integer(dt, depth - 1)
      return draw(st.sampled_from([a < b, a.ne(b), a.eq(b)]))
    if kind == "cast": return integer(draw(st.sampled_from(INT_DTYPES)), depth - 1).cast(dtypes.bool)
    if kind == "logic":
      a, b = boolean(depth - 1), boolean(depth - 1)
      return draw(st.sampled_from([a & b, a | b, a ^ b]))
    return boolean(depth - 1).where(boolean(depth - 1), boolean(depth - 1))

  def integer(dt, depth: int, root: bool = False) -> UOp:
    if depth <= 0 or (not root and draw(st.integers(0, 3)) == 0): return variable(dt) if draw(st.booleans()) else const(dt)
    kind = draw(st.sampled_from(BINARY + ("neg", "where", "cast")))
    if kind == "neg": return -integer(dt, depth - 1)
    if kind == "where": return boolean(depth - 1).where(integer(dt, depth - 1), integer(dt, depth - 1))
    if kind == "cast":
      src = draw(st.sampled_from([d for d in INT_DTYPES if d is not dt] + [dtypes.bool]))
      return (boolean(depth - 1) if src is dtypes.bool else integer(src, depth - 1)).cast(dt)
    a = integer(dt, depth - 1)
    if kind in ("shl", "shr") and draw(st.booleans()):
      b = UOp.const(dt, draw(st.integers(0, 8 * dt.itemsize)))  # a constant shift: the precise case of the analysis
    else: b = integer(dt, depth - 1)
    return {"add": a + b, "sub": a - b, "mul": a * b, "idiv": a // b, "mod": a % b, "max": a.maximum(b), "and": a & b, "or": a | b,
            "xor": a ^ b, "shl": a << b, "shr": a >> b}[kind]

  return integer(root_dtype, draw(st.integers(1, max_depth)), root=True), list(variables.values())

def check_bounds(root: UOp, variables: list[UOp], points: list[dict]):
  nodes = list(root.toposort())
  for point in points:
    for u in nodes:
      v = sym_infer(u, point)
      assert u.vmin <= v <= u.vmax, f"{u.render()} = {v} at {point}, outside [{u.vmin}, {u.vmax}]"

def corners_and_points(draw, variables: list[UOp]) -> list[dict]:
  names = [v.arg[0] for v in variables]
  corners = [dict(zip(names, c)) for c in itertools.product(*[(v.arg[1], v.arg[2]) for v in variables])]
  inside = [{v.arg[0]: draw(st.integers(v.arg[1], v.arg[2])) for v in variables} for _ in range(3)]
  return (corners if len(corners) <= 16 else corners[:8] + corners[-8:]) + inside  # all-min and all-max always

@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_bounds_are_sound_int32(data):
  root, variables = data.draw(expressions(dtypes.int32))
  check_bounds(root, variables, corners_and_points(data.draw, variables))

@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_bounds_are_sound_int8(data):
  root, variables = data.draw(expressions(dtypes.int8))
  check_bounds(root, variables, corners_and_points(data.draw, variables))

# ---- hand-picked cases: exact bounds where the analysis can know them, and the wrapping it must not miss ----

def test_exact_bounds():
  x, y = UOp.variable("x", -10, 20), UOp.variable("y", 3, 5)
  assert ((x + y).vmin, (x + y).vmax) == (-7, 25) and ((x - y).vmin, (x - y).vmax) == (-15, 17)
  assert ((x * y).vmin, (x * y).vmax) == (-50, 100) and ((-x).vmin, (-x).vmax) == (-20, 10)
  assert ((x // y).vmin, (x // y).vmax) == (-3, 6) and ((x % y).vmin, (x % y).vmax) == (-4, 4)
  assert ((y % 7).vmin, (y % 7).vmax) == (3, 5) and (x.maximum(y).vmin, x.maximum(y).vmax) == (3, 20)
  assert ((x < 30).vmin, (x < 30).vmax) == (True, True) and ((x < -10).vmin, (x < -10).vmax) == (False, False)
  assert ((y << 2).vmin, (y << 2).vmax) == (12, 20) and ((x >> 1).vmin, (x >> 1).vmax) == (-5, 10)
  assert ((y & 6).vmin, (y & 6).vmax) == (0, 5) and ((y | 8).vmax, (y ^ 8).vmax) == (15, 15)
  assert (y.bind(4).vmin, y.bind(4).vmax) == (3, 5) and (UOp.const(dtypes.int, 7).vmin, UOp.const(dtypes.int, 7).vmax) == (7, 7)

def test_wrapping_widens_to_the_dtype():
  x = UOp.variable("x", 0, 100, dtypes.int8)
  assert ((x + 100).vmin, (x + 100).vmax) == (-128, 127)
  assert ((x * 2).vmin, (x * 2).vmax) == (-128, 127) and ((x << 1).vmin, (x << 1).vmax) == (-128, 127)
  m = UOp.variable("m", -128, -1, dtypes.int8)
  assert ((-m).vmin, (-m).vmax) == (-128, 127) and ((m // -1).vmin, (m // -1).vmax) == (-128, 127)
  assert (UOp.variable("w", 0, 300).cast(dtypes.int8).vmin, UOp.variable("w", 0, 300).cast(dtypes.int8).vmax) == (-128, 127)
  u = UOp.variable("u", 0, 10, dtypes.uint32)
  assert ((u - 1).vmin, (u - 1).vmax) == (0, 2**32 - 1)
