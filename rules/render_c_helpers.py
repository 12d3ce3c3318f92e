"""Helpers for rules/render_c.rules: C spellings of types, constants and math functions (hand-written; runtime only)."""
from __future__ import annotations
import math
from runtime.dtype import DType, dtypes
from runtime.uop import UOp

_CTYPES = {dtypes.bool: "bool", dtypes.int8: "signed char", dtypes.uint8: "unsigned char", dtypes.int16: "short",
           dtypes.uint16: "unsigned short", dtypes.int32: "int", dtypes.uint32: "unsigned int", dtypes.int64: "long long",
           dtypes.uint64: "unsigned long long", dtypes.float16: "_Float16", dtypes.float32: "float", dtypes.float64: "double",
           dtypes.void: "void"}
_UNSIGNED = {dtypes.int8: dtypes.uint8, dtypes.int16: dtypes.uint16, dtypes.int32: dtypes.uint32, dtypes.int64: dtypes.uint64}

_SHORT = {dtypes.int8: "i8", dtypes.uint8: "u8", dtypes.int16: "i16", dtypes.uint16: "u16", dtypes.int32: "i32", dtypes.uint32: "u32",
          dtypes.int64: "i64", dtypes.uint64: "u64", dtypes.float32: "f32", dtypes.float64: "f64"}

def ctype(d: DType, unsigned: bool = False) -> str:
  """The C type a value of d computes in: a vector type (f32x16, a typedef of the kernel: vector_typedefs) for a vector;
  bfloat16 values are floats holding bf16 numbers (every op rounds its result)."""
  if d.count > 1: return f"{_SHORT[d.scalar]}x{d.count}"
  d = d.scalar
  if d is dtypes.bfloat16: return "float"
  return _CTYPES[_UNSIGNED.get(d, d) if unsigned else d]

def mask_type(d: DType) -> DType:
  """The int vector a comparison of d's vectors gives (GCC: -1 where true, 0 where false), of the same lane width."""
  return {1: dtypes.int8, 2: dtypes.int16, 4: dtypes.int32, 8: dtypes.int64}[d.scalar.itemsize].vec(d.count)

def vector_typedefs(d: DType) -> list[str]:
  """The GCC vector types of d: the value (aligned to its size) and `_u`, its view of unaligned memory (aligned to a lane)."""
  t, b = _CTYPES[d.scalar], d.itemsize
  return [f"typedef {t} {ctype(d)} __attribute__((vector_size({b})));",
          f"typedef {t} {ctype(d)}_u __attribute__((vector_size({b}), aligned({d.scalar.itemsize})));"]

def storage_ctype(d: DType) -> str:
  """The C type of an element in memory: bfloat16 is stored as its 16 bits."""
  return "unsigned short" if d.scalar is dtypes.bfloat16 else ctype(d)

def bits(d: DType) -> int: return 8 * d.scalar.itemsize

def fn_suffix(d: DType) -> str: return ctype(d).replace(" ", "_")

def math_fn(name: str, d: DType) -> str:
  """math.h's function for a float type: sinf for float, sin for double (and bfloat16, rounded after), through float for half."""
  if d.scalar is dtypes.float64 or d.scalar is dtypes.bfloat16: return name  # bfloat16 computes in double, then rounds
  if d.scalar is dtypes.float16: return f"(_Float16){name}f"
  return name + "f"

def cconst(c: UOp) -> str:
  """A C literal of c's dtype with c's exact value."""
  v, d = c.arg, c.dtype.scalar
  if d is dtypes.bool: return "1" if v else "0"
  if dtypes.is_float(d):
    suffix = "f" if d is not dtypes.float64 else ""
    if math.isnan(v): text = "NAN"
    elif math.isinf(v): text = "INFINITY" if v > 0 else "(-INFINITY)"
    else: text = repr(float(v)) + suffix if v >= 0 else f"({float(v)!r}{suffix})"
    return text if d is not dtypes.float16 else f"((_Float16){text})"
  if d is dtypes.uint64: return f"{v}ull"
  if d is dtypes.uint32: return f"{v}u"
  if d is dtypes.int64: return f"{v}ll" if v != -2**63 else "(-9223372036854775807ll-1)"
  if d is dtypes.int32: return str(v) if v >= 0 else f"({v})" if v != -2**31 else "(-2147483647-1)"
  return f"(({ctype(d)}){v})"

def lanes_text(ctx, srcs) -> str:
  """The lanes of a vector literal: {a, b, ...} ({} is all zeros)."""
  return "{" + ", ".join(ctx[s] for s in srcs) + "}"

def without_negative_zero(d: DType, text: str) -> str:
  """A float value converted from an int, as C text that gives +0.0 for 0 even where gcc turned the conversion of a
  truncated float into trunc(x) (which keeps -0.0)."""
  t = ctype(d)
  return f"({{ {t} r_ = ({t}){text}; r_ == 0 ? ({t})0 : r_; }})"
