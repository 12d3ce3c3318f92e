"""runtime/dtype.py: sizes, C and numpy names, interning and pickling, promotion (against numpy and torch), bfloat16 rounding.

Hypothesis: test_bfloat16_rounding runs 500 examples, test_float_rounding_is_numpys 300.
"""
import itertools, math, pickle
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from runtime import DType, PtrDType, dtypes, least_upper_dtype, least_upper_float
from runtime.dtype import DTYPE_NAMES, _promotes_to, truncate

ALL = dtypes.all()
INTS_AND_BOOL = [d for d in ALL if dtypes.is_int(d) or d is dtypes.bool]
NP_FLOATS = [dtypes.float16, dtypes.float32, dtypes.float64]  # the floats numpy has

# dtype: (itemsize, C name, numpy type or None)
EXPECTED = {dtypes.bool: (1, "bool", np.bool_), dtypes.int8: (1, "signed char", np.int8), dtypes.uint8: (1, "unsigned char", np.uint8),
            dtypes.int16: (2, "short", np.int16), dtypes.uint16: (2, "unsigned short", np.uint16), dtypes.int32: (4, "int", np.int32),
            dtypes.uint32: (4, "unsigned int", np.uint32), dtypes.int64: (8, "long long", np.int64),
            dtypes.uint64: (8, "unsigned long long", np.uint64), dtypes.float16: (2, "half", np.float16), dtypes.bfloat16: (2, "__bf16", None),
            dtypes.float32: (4, "float", np.float32), dtypes.float64: (8, "double", np.float64)}

def test_all_lists_every_scalar_dtype_once():
  assert len(set(ALL)) == len(ALL) and set(ALL) == set(EXPECTED)
  assert dtypes.void not in ALL

@pytest.mark.parametrize("d", ALL, ids=repr)
def test_itemsize_and_c_name(d):
  itemsize, cname, _ = EXPECTED[d]
  assert d.itemsize == itemsize and d.name == cname and d.count == 1 and d.scalar is d
  assert d.vec(4).itemsize == 4 * itemsize and d.vec(4).count == 4 and d.vec(4).scalar is d
  assert d.ptr().itemsize == 8 and d.ptr().base is d

@pytest.mark.parametrize("d", ALL, ids=repr)
def test_numpy_round_trip(d):
  np_type = EXPECTED[d][2]
  if np_type is None:
    with pytest.raises(TypeError, match="numpy"): dtypes.to_numpy(d)
    return
  assert dtypes.to_numpy(d) == np.dtype(np_type) and dtypes.to_numpy(d).itemsize == d.itemsize
  assert dtypes.from_numpy(dtypes.to_numpy(d)) is d and dtypes.from_numpy(np_type) is d
  assert dtypes.to_numpy(d.vec(2)) == np.dtype(np_type)  # a vector maps by its scalar

def test_from_numpy_rejects_unknown_types():
  with pytest.raises(TypeError, match="complex64"): dtypes.from_numpy(np.complex64)

def test_aliases():
  assert dtypes.int is dtypes.int32 and dtypes.float is dtypes.float32 and dtypes.double is dtypes.float64 and dtypes.half is dtypes.float16
  assert dtypes.char is dtypes.int8 and dtypes.uchar is dtypes.uint8 and dtypes.short is dtypes.int16 and dtypes.long is dtypes.int64
  assert dtypes.uint is dtypes.uint32 and dtypes.ulong is dtypes.uint64 and dtypes.ushort is dtypes.uint16
  assert dtypes.default_float is dtypes.float32 and dtypes.default_int is dtypes.int32
  assert DTYPE_NAMES["int"] is dtypes.int32 and DTYPE_NAMES["float32"] is dtypes.float32 and DTYPE_NAMES["bfloat16"] is dtypes.bfloat16

def test_repr():
  assert repr(dtypes.int32) == "dtypes.int" and repr(dtypes.float32) == "dtypes.float" and repr(dtypes.bfloat16) == "dtypes.bfloat16"
  assert repr(dtypes.float.vec(4)) == "dtypes.float.vec(4)"
  assert repr(dtypes.float.ptr()) == "dtypes.float.ptr()" and repr(dtypes.int8.ptr(16, "local")) == "dtypes.int8.ptr(16, addrspace='local')"

@pytest.mark.parametrize("d", ALL, ids=repr)
def test_vec_and_ptr_are_interned(d):
  assert d.vec(4) is d.vec(4) and d.vec(1) is d and d.vec(4) is not d.vec(8)
  assert d.ptr() is d.ptr() and d.ptr(16) is d.ptr(16) and d.ptr(16) is not d.ptr(32) and d.ptr(16, "local") is not d.ptr(16)
  assert d.vec(4).ptr() is d.vec(4).ptr() and d.vec(4).ptr().base is d.vec(4)
  assert isinstance(d.ptr(), PtrDType) and d.ptr(16).size == 16 and d.ptr().size == -1 and d.ptr(16, "local").addrspace == "local"

def test_vec_and_ptr_misuse():
  with pytest.raises(ValueError): dtypes.float.vec(4).vec(2)
  with pytest.raises(ValueError): dtypes.float.ptr().vec(2)
  with pytest.raises(ValueError): dtypes.float.ptr().ptr()
  assert dtypes.void.vec(4) is dtypes.void

@pytest.mark.parametrize("d", ALL + (dtypes.void,), ids=repr)
def test_pickle_keeps_identity(d):
  for x in (d, d.vec(3), d.ptr(), d.ptr(64, "local"), d.vec(2).ptr(8)):
    assert pickle.loads(pickle.dumps(x)) is x
  assert pickle.loads(pickle.dumps([d, d.vec(4)])) == [d, d.vec(4)]

def test_predicates_and_limits():
  for d in ALL:
    assert dtypes.is_float(d) == (d in (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64))
    assert dtypes.is_unsigned(d) == (d in (dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64))
    assert dtypes.is_int(d) == (d in INTS_AND_BOOL and d is not dtypes.bool)
    assert dtypes.is_bool(d) == (d is dtypes.bool) and dtypes.is_float(d.vec(2)) == dtypes.is_float(d)
    if dtypes.is_int(d):
      info = np.iinfo(dtypes.to_numpy(d))
      assert (dtypes.min(d), dtypes.max(d)) == (int(info.min), int(info.max))
    if dtypes.is_float(d): assert (dtypes.min(d), dtypes.max(d)) == (-math.inf, math.inf)
  assert (dtypes.min(dtypes.bool), dtypes.max(dtypes.bool)) == (False, True)

def test_from_py():
  assert dtypes.from_py(1) is dtypes.int32 and dtypes.from_py(1.0) is dtypes.float32 and dtypes.from_py(True) is dtypes.bool
  assert dtypes.from_py([1, 2.0]) is dtypes.float32 and dtypes.from_py([[True], [1]]) is dtypes.int32 and dtypes.from_py([]) is dtypes.float32
  with pytest.raises(TypeError, match="str"): dtypes.from_py("x")

# ---- promotion ----

@pytest.mark.parametrize("a,b", list(itertools.product(INTS_AND_BOOL, repeat=2)), ids=lambda d: d.name.replace(" ", "_"))
def test_promotion_of_ints_matches_numpy(a, b):
  assert dtypes.to_numpy(least_upper_dtype(a, b)) == np.result_type(dtypes.to_numpy(a), dtypes.to_numpy(b))

@pytest.mark.parametrize("a,b", list(itertools.product(NP_FLOATS, repeat=2)), ids=repr)
def test_promotion_of_floats_matches_numpy(a, b):
  assert dtypes.to_numpy(least_upper_dtype(a, b)) == np.result_type(dtypes.to_numpy(a), dtypes.to_numpy(b))

def test_half_and_bfloat16_meet_at_float32():
  assert least_upper_dtype(dtypes.float16, dtypes.bfloat16) is dtypes.float32
  assert least_upper_dtype(dtypes.bfloat16, dtypes.float64) is dtypes.float64

@pytest.mark.parametrize("f", [dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64], ids=repr)
def test_int_and_float_give_the_float(f):
  for i in INTS_AND_BOOL:
    # uint64 is the exception: it meets every signed int at float64 (as numpy), and in a lattice every float above
    # both uint64 and int8 is then above float64, so uint64 meets every float at float64
    want = dtypes.float64 if i is dtypes.uint64 else f
    assert least_upper_dtype(i, f) is want and least_upper_dtype(f, i) is want, i

def test_promotion_of_vectors_and_several_dtypes():
  assert least_upper_dtype(dtypes.int8.vec(4), dtypes.uint8) is dtypes.int16
  assert least_upper_dtype(dtypes.bool, dtypes.int8, dtypes.uint16, dtypes.float16) is dtypes.float16
  assert least_upper_dtype(dtypes.int8) is dtypes.int8
  with pytest.raises(ValueError): least_upper_dtype()
  assert least_upper_float(dtypes.int32) is dtypes.float32 and least_upper_float(dtypes.float16) is dtypes.float16
  assert least_upper_float(dtypes.bool) is dtypes.float32 and least_upper_float(dtypes.float64) is dtypes.float64

def _above() -> dict[DType, set[DType]]:
  # everything each dtype promotes to (itself included), from the lattice's edges
  out = {}
  for d in _promotes_to:
    seen, todo = {d}, [d]
    while todo:
      for p in _promotes_to[todo.pop()]:
        if p not in seen: seen.add(p); todo.append(p)
    out[d] = seen
  return out

def test_lattice_has_a_unique_least_upper_bound():
  above = _above()
  assert set(above) == set(ALL)
  for a, b in itertools.product(ALL, repeat=2):
    lub = least_upper_dtype(a, b)
    common = above[a] & above[b]
    assert lub in common, (a, b, lub)
    for c in common: assert c in above[lub], f"{a} and {b} meet at {lub}, but {c} is a common upper bound not above it"
    assert least_upper_dtype(b, a) is lub
    # the order the function sees is the lattice's: x <= y exactly when least_upper_dtype(x, y) is y
    for c in ALL: assert (least_upper_dtype(lub, c) is c) == (c in above[lub])

TORCH_NAMES = {dtypes.bool: "bool", dtypes.int8: "int8", dtypes.uint8: "uint8", dtypes.int16: "int16", dtypes.uint16: "uint16",
               dtypes.int32: "int32", dtypes.uint32: "uint32", dtypes.int64: "int64", dtypes.uint64: "uint64", dtypes.float16: "float16",
               dtypes.bfloat16: "bfloat16", dtypes.float32: "float32", dtypes.float64: "float64"}

def test_promotion_matches_torch():
  torch = pytest.importorskip("torch")
  by_torch = {getattr(torch, n): d for d, n in TORCH_NAMES.items() if hasattr(torch, n)}
  checked = 0
  for a, b in itertools.product(by_torch.values(), repeat=2):
    if dtypes.uint64 in (a, b) and (dtypes.is_float(a) or dtypes.is_float(b)): continue  # the documented exception, see above
    try: t = torch.promote_types(getattr(torch, TORCH_NAMES[a]), getattr(torch, TORCH_NAMES[b]))
    except RuntimeError: continue  # torch does not promote its "shell" uint16/32/64 with other types
    if dtypes.uint64 in (a, b) and a is not b: continue  # torch has no wider signed type either; numpy's float64 is ours
    assert least_upper_dtype(a, b) is by_torch[t], (a, b, t)
    checked += 1
  assert checked > 50

# ---- rounding to a dtype ----

def bf16_reference(x: float) -> float:
  # round a float32 to 8 significant bits, half to even, by arithmetic (dtype.py does it on the bits)
  if math.isnan(x) or math.isinf(x) or x == 0: return x
  quantum = max(math.frexp(x)[1] - 8, -133)
  r = math.copysign(round(x / 2.0**quantum) * 2.0**quantum, x)
  return math.copysign(math.inf, x) if abs(r) >= 2.0**128 else r

@settings(max_examples=500, deadline=None)
@given(st.floats(width=32))
def test_bfloat16_rounding(x):
  got = truncate(dtypes.bfloat16, x)
  want = bf16_reference(x)
  if math.isnan(want): assert math.isnan(got)
  else: assert got == want and math.copysign(1.0, got) == math.copysign(1.0, want), (x, got, want)

# just below, at and past the largest finite values, halfway cases and subnormals of float16 and float32
EDGES = [65504.0, 65519.99, 65520.0, 3.4028235e38, 3.4028236e38, 3.5e38, 2.0**-24, 1.5 * 2.0**-24, 2.0**-25, 2.0**-149, 2.0**-150, 1.0 + 2.0**-11,
         1.0 + 3 * 2.0**-11, 1.0 + 2.0**-24, 1e-46, 0.0, -0.0, math.inf, -math.inf, 10**40, 2**1023]

@settings(max_examples=300, deadline=None)
@given(st.one_of(st.floats(), st.sampled_from(EDGES), st.integers(-2**1000, 2**1000)), st.sampled_from([dtypes.float16, dtypes.float32]))
def test_float_rounding_is_numpys(x, d):
  for v in (x, -x):
    got = truncate(d, v)
    with np.errstate(all="ignore"): want = float(dtypes.to_numpy(d).type(v))
    assert (math.isnan(got) and math.isnan(want)) or (got == want and math.copysign(1.0, got) == math.copysign(1.0, want)), (v, got, want)

def test_truncate():
  assert truncate(dtypes.int8, 128) == -128 and truncate(dtypes.uint8, -1) == 255 and truncate(dtypes.int64, 2**63) == -2**63
  assert truncate(dtypes.bool, 2) is True and truncate(dtypes.bool, 0) is False
  assert truncate(dtypes.float32, 0.1) == float(np.float32(0.1)) and truncate(dtypes.float16, 1e6) == math.inf
  assert truncate(dtypes.bfloat16, 1.0 + 2**-8) == 1.0 and truncate(dtypes.bfloat16, 1.0 + 3 * 2**-8) == 1.0 + 2**-6  # ties to even
  assert truncate(dtypes.bfloat16, 3.5e38) == math.inf and truncate(dtypes.float64, 1e300) == 1e300
