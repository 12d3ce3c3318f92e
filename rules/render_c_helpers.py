"""Helpers for rules/render_c.rules: the pieces a rule's result is made of, and C spellings of types, constants and math
functions (hand-written; runtime only).

A rule gives a node's C text as pieces, joined by tensor/renderer/cstyle.py: a str is text, a UOp is that node's text
(its variable or its inlined expression), a DType is its C type name (a vector type is declared in the kernel), an int
is its digits, a Fn the name of a small C function the kernel then defines, a tuple its pieces in order."""
from __future__ import annotations
import math
from typing import NamedTuple
from runtime.dtype import DType, dtypes

class Fn(NamedTuple):
  """A piece naming a C helper function with exec_alu's semantics (ruleset c_function of render_c.rules defines it)."""
  kind: str
  dtype: DType
  src: DType | None = None

class Line(NamedTuple):
  """A statement: its pieces, the name the node it renders gets (a loop's counter), and how it moves the indent."""
  pieces: tuple
  name: tuple | None = None
  indent: int = 0

class Param(NamedTuple):
  """A kernel parameter: its name, its C type, the array of the CPU entry point it comes from, and its slot there."""
  name: tuple
  ctype: tuple
  array: str
  slot: int | None = None

def fn(kind: str, dtype: DType, src: DType | None = None) -> Fn: return Fn(kind, dtype, src)
def c(*pieces) -> tuple: return pieces
def line(*pieces) -> Line: return Line(pieces)
def named(name: tuple, *pieces) -> Line: return Line(pieces, name)
def loop(name: tuple, *pieces) -> Line: return Line(pieces, name, 1)
def close(*pieces) -> Line: return Line(pieces, None, -1)
def param(name: tuple, ctype: tuple, array: str, slot: int | None = None) -> Param: return Param(name, ctype, array, slot)
def binary(f, name: str, body: tuple) -> tuple: return ("static inline ", f.dtype, " ", name, "(", f.dtype, " a, ", f.dtype, " b) { ", body, " }")
def vmax_select(d: DType) -> tuple: return ("return (", d, ")((m & (", mask_type(d), ")a) | (~m & (", mask_type(d), ")b));")
def plain_constant(v) -> bool:
  """v is one float constant in every lane, neither nan nor zero (a max with it has no nan in b, nor a signed-zero tie)."""
  x = v.src[0] if v.op.name == "VECTORIZE" and all(s is v.src[0] for s in v.src) else v
  return x.op.name == "CONST" and x.arg == x.arg and x.arg != 0
# the x86 instruction of a vector fma (gcc's and clang's builtins behind _mm*_fmadd_p*), by lanes and scalar type, and the
# macro saying the target has it
_FMA_BUILTINS = {(16, "float"): ("__AVX512F__", "__builtin_ia32_vfmaddps512_mask(a, b, c, (unsigned short)-1, 4)"),
                 (8, "double"): ("__AVX512F__", "__builtin_ia32_vfmaddpd512_mask(a, b, c, (unsigned char)-1, 4)"),
                 (8, "float"): ("__FMA__", "__builtin_ia32_vfmaddps256(a, b, c)"), (4, "double"): ("__FMA__", "__builtin_ia32_vfmaddpd256(a, b, c)"),
                 (4, "float"): ("__FMA__", "__builtin_ia32_vfmaddps(a, b, c)"), (2, "double"): ("__FMA__", "__builtin_ia32_vfmaddpd(a, b, c)")}

def fma_body(d: DType) -> str:
  """The body of a vector fma of a, b and c: the target's FMA instruction where it has one (gcc vectorizes a vector of
  fma calls only when their operands are simple, and a softmax's sum of exponentials is not), else one fma per lane."""
  lanes = "(" + ctype(d) + "){" + ", ".join(f"{math_fn('__builtin_fma', d)}(a[{i}], b[{i}], c[{i}])" for i in range(d.count)) + "}"
  if (k := _FMA_BUILTINS.get((d.count, ctype(d.scalar)))) is None: return f"return {lanes};"
  return f"\n#if defined({k[0]}) && defined(__x86_64__)\n  return {k[1]};\n#else\n  return {lanes};\n#endif\n"
# AVX-512's widening of 16 small ints to 16 int32 (vpmovsx/zx), by the source's C lane type
# and the lane type its builtin takes (gcc's __v16qi is of char, __v16hi of short)
_WIDEN_BUILTINS = {"signed char": ("__builtin_ia32_pmovsxbd512_mask", "char"), "unsigned char": ("__builtin_ia32_pmovzxbd512_mask", "char"),
                   "short": ("__builtin_ia32_pmovsxwd512_mask", "short"), "unsigned short": ("__builtin_ia32_pmovzxwd512_mask", "short")}

def cvt_body(d: DType, s: DType) -> str:
  """The body of a lane-by-lane conversion of vector a (lanes s) to d: 16 floats from 16 8- or 16-bit ints by AVX-512's
  widening and int-to-float instructions (what _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(a)) is), else convertvector."""
  plain = f"return __builtin_convertvector(a, {ctype(d)});"
  if d.count != 16 or ctype(d.scalar) != "float" or (w := _WIDEN_BUILTINS.get(ctype(s.scalar))) is None: return plain
  return (f"\n#if defined(__AVX512F__) && defined(__x86_64__)\n  typedef int i32x16_w __attribute__((vector_size(64)));\n"
          f"  typedef {w[1]} src_w __attribute__((vector_size({16 * s.scalar.itemsize})));\n"
          f"  return __builtin_ia32_cvtdq2ps512_mask({w[0]}((src_w)a, (i32x16_w){{0}}, (unsigned short)-1), ({ctype(d)}){{0}}, "
          f"(unsigned short)-1, 4);"
          f"\n#else\n  {plain}\n#endif\n")
def lanes(srcs: tuple) -> tuple: return ("{", *(p for i, s in enumerate(srcs) for p in ((", ", s) if i else (s,))), "}")
def args(srcs: tuple, cast: str = "") -> tuple:
  """(a, b, ...): the lanes of an OpenCL vector literal, each behind `cast` (bools: "(int)", as a vector has no bool lanes)."""
  return ("(", *(p for i, s in enumerate(srcs) for p in ((", " if i else "", cast, s))), ")")
def lane_name(i: int) -> str: return "s" + "0123456789abcdef"[i]  # OpenCL's name of a vector's lane i (.s0 .. .sf)

_CTYPES = {dtypes.bool: "bool", dtypes.int8: "signed char", dtypes.uint8: "unsigned char", dtypes.int16: "short",
           dtypes.uint16: "unsigned short", dtypes.int32: "int", dtypes.uint32: "unsigned int", dtypes.int64: "long long",
           dtypes.uint64: "unsigned long long", dtypes.float16: "_Float16", dtypes.float32: "float", dtypes.float64: "double",
           dtypes.void: "void"}
# a vector of bools is the int mask of a comparison of 32-bit vectors (rules/vectorize.rules makes no other)
_MASK = {dtypes.bool: dtypes.int32}
_UNSIGNED = {dtypes.int8: dtypes.uint8, dtypes.int16: dtypes.uint16, dtypes.int32: dtypes.uint32, dtypes.int64: dtypes.uint64}

_SHORT = {dtypes.int8: "i8", dtypes.uint8: "u8", dtypes.int16: "i16", dtypes.uint16: "u16", dtypes.int32: "i32", dtypes.uint32: "u32",
          dtypes.int64: "i64", dtypes.uint64: "u64", dtypes.float32: "f32", dtypes.float64: "f64"}

def unsigned(d: DType) -> DType:
  u = _UNSIGNED.get(d.scalar, d.scalar)
  return u.vec(d.count) if d.count > 1 else u

def ctype(d: DType, unsigned: bool = False) -> str:
  """The C type a value of d computes in: a vector type (f32x16, a typedef of the kernel: vector_typedefs) for a vector;
  bfloat16 values are floats holding bf16 numbers (every op rounds its result)."""
  if d.count > 1: return f"{_SHORT[_MASK.get(d.scalar, d.scalar)]}x{d.count}"
  d = d.scalar
  if d is dtypes.bfloat16: return "float"
  return _CTYPES[_UNSIGNED.get(d, d) if unsigned else d]

def mask_type(d: DType) -> DType:
  """The int vector a comparison of d's vectors gives (GCC: -1 where true, 0 where false), of the same lane width."""
  if d.scalar is dtypes.bool: return dtypes.int32.vec(d.count)  # bool vectors are 32-bit masks (vector_typedefs)
  return {1: dtypes.int8, 2: dtypes.int16, 4: dtypes.int32, 8: dtypes.int64}[d.scalar.itemsize].vec(d.count)

def vector_typedefs(d: DType) -> list[str]:
  """The GCC vector types of d: the value (aligned to its size) and `_u`, its view of unaligned memory (aligned to a lane)."""
  if d.scalar is dtypes.bool: d = dtypes.int32.vec(d.count)  # the mask a comparison of 32-bit vectors gives
  t, b = _CTYPES[d.scalar], d.itemsize
  return [f"typedef {t} {ctype(d)} __attribute__((vector_size({b})));",
          f"typedef {t} {ctype(d)}_u __attribute__((vector_size({b}), aligned({d.scalar.itemsize})));"]

def bits(d: DType) -> int: return 8 * d.scalar.itemsize

def math_fn(name: str, d: DType) -> str:
  """math.h's function for a float type: sinf for float, sin for double (and bfloat16, rounded after), through float for half."""
  if d.scalar is dtypes.float64 or d.scalar is dtypes.bfloat16: return name  # bfloat16 computes in double, then rounds
  if d.scalar is dtypes.float16: return f"(_Float16){name}f"
  return name + "f"

def float_text(v: float, d: DType) -> str:
  """A C float literal of v (f suffix but for double), parenthesized when negative."""
  if math.isnan(v): return "NAN"
  if math.isinf(v): return "INFINITY" if v > 0 else "(-INFINITY)"
  suffix = "f" if d.scalar is not dtypes.float64 else ""
  return repr(float(v)) + suffix if v >= 0 else f"({float(v)!r}{suffix})"
