"""GGUF files (llama.cpp's model format): gguf_load(path) -> (metadata, {name: Tensor}). At the frontend's level
(tensor.llm reads it; tensor.nn.state re-exports gguf_load beside safetensors), sharing safetensors' lazy file buffers
(tensor/file_bytes.py). The header, metadata and tensor table are checked as they are read (every length, count, type,
offset and alignment against the file's size: a malformed file is one GGUFError, never a read past the end); the
tensors' bytes are read when first used, and quantized blocks (Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K) are dequantized
by Tensor ops, so it runs as kernels on the tensor's device.

  meta, weights = gguf_load("model.gguf")       # meta["general.architecture"] == "llama", weights["token_embd.weight"]
"""
from __future__ import annotations
import math, os, struct, sys
from typing import Any, Callable
import numpy as np
from runtime.device import Buffer
from runtime.dtype import DType, dtypes
from runtime.helpers import Context
from tensor.engine.state import ENGINE
from tensor.engine.storage import realized_buffer
from tensor.random import iota
from tensor.file_bytes import FileBuffer, _FileBytes, _lazy_tensor, file_buffer
from tensor.tensor import Tensor, buffer_uop

__all__ = ["gguf_load", "gguf_load_blocks", "dequantize", "dequantize_many", "gather_bytes", "buffer_views", "is_quantized", "GGUFError",
           "GGML_TYPES"]

class GGUFError(ValueError):
  """A GGUF file that breaks the format (or uses a tensor type we can't read). The message names the file and the fault."""

# metadata value types: (struct code, size) for scalars; 8 is a string, 9 an array
_SCALARS = {0: ("B", 1), 1: ("b", 1), 2: ("H", 2), 3: ("h", 2), 4: ("I", 4), 5: ("i", 4), 6: ("f", 4), 7: ("?", 1), 10: ("Q", 8),
            11: ("q", 8), 12: ("d", 8)}
_NP = {0: np.uint8, 1: np.int8, 2: np.uint16, 3: np.int16, 4: np.uint32, 5: np.int32, 6: np.float32, 7: np.bool_, 10: np.uint64,
       11: np.int64, 12: np.float64}
_STRING, _ARRAY = 8, 9
_U64 = struct.Struct("<Q")
MAX_DIMS = 4  # ggml's GGML_MAX_DIMS
MAX_NESTING = 4  # arrays of arrays: no real file nests them; a deep nest is an attack on the stack

# ggml tensor types we read: id -> (name, elements per block, bytes per block)
GGML_TYPES: dict[int, tuple[str, int, int]] = {
  0: ("F32", 1, 4), 1: ("F16", 1, 2), 30: ("BF16", 1, 2),
  2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20), 6: ("Q5_0", 32, 22), 8: ("Q8_0", 32, 34),
  12: ("Q4_K", 256, 144), 13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210)}
_PLAIN: dict[str, DType] = {"F32": dtypes.float32, "F16": dtypes.float16, "BF16": dtypes.bfloat16}

def _fail(fn: Any, msg: str) -> GGUFError: return GGUFError(f"{fn}: not a valid GGUF file: {msg}")

class _Reader:
  """Reads the header front to back with positioned reads, each bounded by the file's size; the bytes come in chunks as
  needed (a vocabulary of 262,144 tokens is a few MB), never more than the file holds."""
  def __init__(self, fn: Any, size: int, pread: Callable[[int, int], bytes]):
    self.fn, self.size, self.pread, self.pos = fn, size, pread, 0
    self.buf, self.buf_at = b"", 0
  def need(self, n: int, what: str) -> memoryview:
    if n < 0 or self.pos + n > self.size:
      raise _fail(self.fn, f"{what} needs bytes [{self.pos}, {self.pos + n}) but the file has {self.size}")
    end = self.pos + n
    if end > self.buf_at + len(self.buf):  # read from pos on: at least n bytes, at least 1 MB, within the file
      want = min(self.size - self.pos, max(n, 1 << 20, 2 * len(self.buf)))
      self.buf, self.buf_at = self.pread(self.pos, want), self.pos
      if len(self.buf) < n: raise _fail(self.fn, f"{what}: the file ended early (it changed while it was read)")
    out = memoryview(self.buf)[self.pos - self.buf_at:end - self.buf_at]
    self.pos = end
    return out
  def scalar(self, t: int, what: str) -> Any:
    code, n = _SCALARS[t]
    return struct.unpack("<" + code, self.need(n, what))[0]
  def u32(self, what: str) -> int: return self.scalar(4, what)
  def u64(self, what: str) -> int: return self.scalar(10, what)
  def string(self, what: str) -> str:
    n = self.u64(f"the length of {what}")
    if n > self.size - self.pos: raise _fail(self.fn, f"{what}: a string of {n} bytes at byte {self.pos} runs past the end of the file")
    raw = self.need(n, what)
    try: return str(raw, "utf-8")
    except UnicodeDecodeError as e: raise _fail(self.fn, f"{what} is not UTF-8 ({e.reason} at byte {e.start})") from None
  def strings(self, n: int, what: str) -> list[str]:
    """n strings, as `string` reads them: those wholly in the buffered bytes sliced straight from it (a vocabulary of
    262,144 tokens took 0.45 s through `string`), any other (or a fault, to report it) through `string`."""
    out, unpack, append = [], _U64.unpack_from, list.append
    buf, at = self.buf, self.buf_at
    p, end = self.pos - at, len(buf) - 8
    for k in range(n):
      if p <= end and (e := p + 8 + unpack(buf, p)[0]) <= end + 8:
        try:
          append(out, buf[p + 8:e].decode())
          p = e
          continue
        except UnicodeDecodeError: pass
      self.pos = at + p
      out.append(self.string(f"{what}[{k}]"))
      buf, at = self.buf, self.buf_at
      p, end = self.pos - at, len(buf) - 8
    self.pos = at + p
    return out
  def value(self, t: int, what: str, depth: int = 0) -> Any:
    if t in _SCALARS: return self.scalar(t, what)
    if t == _STRING: return self.string(what)
    if t != _ARRAY: raise _fail(self.fn, f"{what} has the unknown value type {t}")
    if depth >= MAX_NESTING: raise _fail(self.fn, f"{what}: arrays nested more than {MAX_NESTING} deep")
    et, n = self.u32(f"the element type of {what}"), self.u64(f"the length of {what}")
    if et in _SCALARS:
      size = _SCALARS[et][1]
      if n > (self.size - self.pos) // size: raise _fail(self.fn, f"{what}: an array of {n} values of {size} bytes runs past the end of the file")
      return np.frombuffer(self.need(n * size, what), _NP[et]).copy().tolist() if n else []
    if et not in (_STRING, _ARRAY): raise _fail(self.fn, f"{what}: an array of the unknown value type {et}")
    if n > (self.size - self.pos) // 8:  # a string or an array takes 8 bytes at least (its length)
      raise _fail(self.fn, f"{what}: an array of {n} entries can't fit in the {self.size - self.pos} bytes left in the file")
    if et == _STRING: return self.strings(n, what)
    return [self.value(_ARRAY, f"{what}[{k}]", depth + 1) for k in range(n)]

def _read_header(fn: Any, size: int, pread: Callable[[int, int], bytes]) -> tuple[dict[str, Any], list[tuple[str, tuple[int, ...], int, int, int]]]:
  """(metadata, [(name, shape, type, begin, nbytes)] with begins in the file), every check done; pread(pos, n) reads the file."""
  r = _Reader(fn, size, pread)
  if size < 24: raise _fail(fn, f"the file has {size} bytes, fewer than the 24 of GGUF's fixed header")
  if bytes(r.need(4, "the magic")) != b"GGUF": raise _fail(fn, "it does not start with the magic b'GGUF'")
  version = r.u32("the version")
  if version not in (2, 3): raise _fail(fn, f"version {version} (we read versions 2 and 3)")
  n_tensors, n_kv = r.u64("the tensor count"), r.u64("the metadata count")
  # each metadata entry takes at least 8 + 4 + 1 bytes, each tensor entry at least 8 + 4 + 8 + 4 + 8
  if n_kv > (size - r.pos) // 13: raise _fail(fn, f"{n_kv} metadata entries can't fit in a file of {size} bytes")
  if n_tensors > (size - r.pos) // 32: raise _fail(fn, f"{n_tensors} tensors can't fit in a file of {size} bytes")
  meta: dict[str, Any] = {}
  for k in range(n_kv):
    key = r.string(f"metadata key {k}")
    if key in meta: raise _fail(fn, f"the metadata key {key!r} appears twice")
    meta[key] = r.value(r.u32(f"the type of {key!r}"), f"metadata {key!r}")
  align = meta.get("general.alignment", 32)
  if type(align) is not int or align <= 0 or align & (align - 1) or align > 1 << 20:
    raise _fail(fn, f"general.alignment {align!r} is not a power of two up to 2**20")
  table, names = [], set()
  for k in range(n_tensors):
    name = r.string(f"the name of tensor {k}")
    if name in names: raise _fail(fn, f"tensor {name!r} appears twice")
    names.add(name)
    nd = r.u32(f"the dims of tensor {name!r}")
    if nd > MAX_DIMS: raise _fail(fn, f"tensor {name!r} has {nd} dims, more than ggml's {MAX_DIMS}")
    ne = [r.u64(f"the sizes of tensor {name!r}") for _ in range(nd)]
    t, off = r.u32(f"the type of tensor {name!r}"), r.u64(f"the offset of tensor {name!r}")
    if t not in GGML_TYPES: raise GGUFError(f"{fn}: tensor {name!r} has the ggml type {t}, which we can't read (we read "
                                            f"{', '.join(v[0] for v in GGML_TYPES.values())})")
    tname, block, bsize = GGML_TYPES[t]
    if any(d >= 2**62 for d in ne) or math.prod(ne) >= 2**62: raise _fail(fn, f"tensor {name!r}: sizes {ne} are too large")
    if ne and ne[0] % block: raise _fail(fn, f"tensor {name!r} of type {tname}: its first size {ne[0]} is not a multiple of the block of {block}")
    if off % align: raise _fail(fn, f"tensor {name!r}: its offset {off} is not a multiple of the alignment {align}")
    table.append((name, tuple(reversed(ne)), t, off, math.prod(ne) // block * bsize))
  data = r.pos + (-r.pos % align)
  ranges = sorted((off, off + n, name) for name, _, _, off, n in table)
  for (b0, e0, n0), (b1, _, n1) in zip(ranges, ranges[1:]):
    if b1 < e0: raise _fail(fn, f"tensors {n0!r} and {n1!r} overlap (bytes [{b0}, {e0}) and from {b1} of the data)")
  for begin, end, name in ranges:
    if data + end > size: raise _fail(fn, f"tensor {name!r}: its bytes [{begin}, {end}) of the data run past the end of the file "
                                          f"({size - data} bytes of data)")
  return meta, [(name, shape, t, data + off, n) for name, shape, t, off, n in table]

# ---- dequantization, as Tensor ops on the raw bytes (uint8, one row per block) ----

def _u16(b: Tensor) -> Tensor:
  """(..., 2) little-endian bytes -> (...,) uint16."""
  w = b.cast(dtypes.uint16)
  return w[..., 0] | (w[..., 1] << 8)

def _f16(b: Tensor) -> Tensor: return _u16(b).bitcast(dtypes.float16).cast(dtypes.float32)   # (..., 2) bytes -> (...,) float32

def _nibbles(q: Tensor) -> Tensor:
  """(..., k) bytes -> (..., 2, k) int32: the low 4 bits of each, then the high 4 (ggml's order within a group)."""
  return _bits(q, 4)

def _bits(q: Tensor, width: int) -> Tensor:
  """(..., k) bytes -> (..., 8 // width, k) int32: fields of `width` bits from the lowest up. One shift by an arange over
  an expanded axis, not a concatenation: a kernel reading element i then computes one field, not all of them."""
  n = 8 // width
  q = q.cast(dtypes.int32).unsqueeze(-2).expand(*q.shape[:-1], n, q.shape[-1])
  shifts = (iota(Tensor, n, dtypes.int32, q.device) * width).reshape(n, 1)   # computed in the kernel, not read from memory
  return (q >> shifts) & ((1 << width) - 1)

# Each quantized type as groups: value[g, i] = scale[g] * q[g, i] - minus[g] (minus None: 0), q small integers in int32
# (tensor/llm/quant.py casts them to int8: through float32, each took a range-checked conversion). dequantize multiplies
# them out; a matmul can instead sum q * x within a group and scale once per group (tensor/llm/quant.py), reading only the
# blocks. (n, bsize) bytes -> q (n, groups, *sub) with sub the group's elements (GROUP_SIZE of them) in the shape its bytes
# give them, scale and minus (n, groups). The fields come from shifts by constants or by an index computed in the kernel
# (iota), never by a table in memory, and q is stored in that shape before it is reshaped to (n, groups, size): merged
# into one loop of 32, Q5_0's unpacking divided its index by 16 and 8 for every element, scalar (its blocks: 17 -> 0.9 ms
# for 200,000 of them at 1 thread, in vector lanes).
Groups = tuple[Tensor, Tensor, "Tensor | None"]

def _u32(b: Tensor) -> Tensor:
  """(..., 4) little-endian bytes -> (...,) int32 (the bits of the uint32)."""
  w = b.cast(dtypes.int32)
  return w[..., 0] | (w[..., 1] << 8) | (w[..., 2] << 16) | (w[..., 3] << 24)

def _g_q4_0(b: Tensor) -> Groups:  # (n, 18): d, 16 bytes of 32 nibbles
  return (_nibbles(b[:, 2:]) - 8).unsqueeze(1), _f16(b[:, 0:2]).unsqueeze(1), None

def _g_q4_1(b: Tensor) -> Groups:  # (n, 20): d, m, 32 nibbles (value d * q + m)
  return _nibbles(b[:, 4:]).unsqueeze(1), _f16(b[:, 0:2]).unsqueeze(1), -_f16(b[:, 2:4]).unsqueeze(1)

def _g_q5_0(b: Tensor) -> Groups:  # (n, 22): d, 32 high bits (element i: bit i of a little-endian uint32), 32 nibbles
  qh = _u32(b[:, 2:6]).reshape(-1, 1, 1)
  i = iota(Tensor, 32, dtypes.int32, b.device).reshape(1, 2, 16)
  return ((_nibbles(b[:, 6:]) | (((qh >> i) & 1) << 4)) - 16).unsqueeze(1), _f16(b[:, 0:2]).unsqueeze(1), None

def _g_q8_0(b: Tensor) -> Groups:  # (n, 34): d, 32 int8
  return b[:, 2:].bitcast(dtypes.int8).cast(dtypes.int32).unsqueeze(1), _f16(b[:, 0:2]).unsqueeze(1), None

def _k_scales(s: Tensor) -> tuple[Tensor, Tensor]:
  """Q4_K/Q5_K's 12 bytes of 8 6-bit scales and 8 6-bit mins -> (n, 8) each, as float."""
  s = s.cast(dtypes.int32).reshape(-1, 3, 4)
  d, m, md = s[:, 0], s[:, 1], s[:, 2]
  sc = Tensor.cat(d & 63, (md & 15) | ((d >> 2) & 48), dim=1)
  mn = Tensor.cat(m & 63, (md >> 4) | ((m >> 2) & 48), dim=1)
  return sc.float(), mn.float()

def _g_q4_k(b: Tensor) -> Groups:  # (n, 144): d, dmin, 12 bytes of scales, 128 bytes of 256 nibbles; 8 groups of 32
  sc, mn = _k_scales(b[:, 4:16])
  q = _nibbles(b[:, 16:].reshape(-1, 4, 32)).reshape(-1, 8, 32)
  return q, _f16(b[:, 0:2]).unsqueeze(-1) * sc, _f16(b[:, 2:4]).unsqueeze(-1) * mn

def _g_q5_k(b: Tensor) -> Groups:  # (n, 176): d, dmin, scales, 32 bytes of high bits, 128 bytes of nibbles
  sc, mn = _k_scales(b[:, 4:16])
  low = _nibbles(b[:, 48:].reshape(-1, 4, 32)).reshape(-1, 8, 32)
  high = _bits(b[:, 16:48], 1)                                   # (n, 8, 32): group g's high bit is bit g
  return low | (high << 4), _f16(b[:, 0:2]).unsqueeze(-1) * sc, _f16(b[:, 2:4]).unsqueeze(-1) * mn

def _g_q6_k(b: Tensor) -> Groups:  # (n, 210): 128 bytes low nibbles, 64 bytes 2-bit highs, 16 int8 scales, d; 16 groups of 16
  low = _nibbles(b[:, 0:128].reshape(-1, 2, 64)).reshape(-1, 8, 32)
  high = _bits(b[:, 128:192].reshape(-1, 2, 32), 2).reshape(-1, 8, 32)
  q = ((low | (high << 4)) - 32).reshape(-1, 16, 16)
  return q, _f16(b[:, 208:210]).unsqueeze(-1) * b[:, 192:208].bitcast(dtypes.int8).float(), None

GROUPS: dict[str, Callable[[Tensor], Groups]] = {"Q4_0": _g_q4_0, "Q4_1": _g_q4_1, "Q5_0": _g_q5_0, "Q8_0": _g_q8_0, "Q4_K": _g_q4_k,
                                                 "Q5_K": _g_q5_k, "Q6_K": _g_q6_k}
GROUP_SIZE = {"Q4_0": 32, "Q4_1": 32, "Q5_0": 32, "Q8_0": 32, "Q4_K": 32, "Q5_K": 32, "Q6_K": 16}

def quant_groups(raw: Tensor, ggml_type: int, shape: tuple[int, ...], int8: bool = False) -> Groups:
  """A quantized tensor's raw bytes as groups along its last axis: q (*shape[:-1], groups, size) int32 (int8: int8,
  stored first in its blocks' shape), scale and minus (*shape[:-1], groups); its values are scale[..., None] * q -
  minus[..., None], flattened over the last two axes."""
  name, _, bsize = GGML_TYPES[ggml_type]
  q, scale, minus = GROUPS[name](raw.reshape(-1, bsize))
  if int8: q = q.cast(dtypes.int8).contiguous()
  lead, G = shape[:-1], GROUP_SIZE[name]
  ng = shape[-1] // G
  return q.reshape(*lead, ng, G), scale.reshape(*lead, ng), None if minus is None else minus.reshape(*lead, ng)

def dequantize(raw: Tensor, ggml_type: int, shape: tuple[int, ...]) -> Tensor:
  """The raw bytes of a tensor of a ggml type (a uint8 tensor) as values of `shape`: float32 for quantized types."""
  name, block, bsize = GGML_TYPES[ggml_type]
  if name in _PLAIN:
    dt = _PLAIN[name]
    if (typed := _typed_file_bytes(raw, dt, shape)) is not None: return typed
    if dt is dtypes.float32:  # 4 bytes -> float32 through uint32
      w = raw.reshape(-1, 4).cast(dtypes.uint32)
      return (w[:, 0] | (w[:, 1] << 8) | (w[:, 2] << 16) | (w[:, 3] << 24)).bitcast(dtypes.float32).reshape(shape)
    return _u16(raw.reshape(-1, 2)).bitcast(dt).reshape(shape)
  q, scale, minus = GROUPS[name](raw.reshape(-1, bsize))
  # the scales and minimums first, one per group: fused, each value decoded its group's float16 scale again (Gemma 3
  # 270M's Q8_0 embedding: 1.46 s for 168M values)
  per_group = (*scale.shape, *[1] * (q.ndim - scale.ndim))
  w = scale.contiguous().reshape(per_group) * q
  return (w if minus is None else w - minus.contiguous().reshape(per_group)).reshape(shape)

def _typed_file_bytes(raw: Tensor, dt: DType, shape: tuple[int, ...]) -> Tensor | None:
  """Unread file bytes (gguf_load_blocks' raw tensor) of a plain type as a tensor of that type over the same bytes, on a
  little-endian host (the file's order): read or mapped as they are, no kernel (Gemma 3 270M's 109 float32 norms: 109
  kernels and their graphs, ~0.1 s at load). None for anything else."""
  if sys.byteorder != "little" or (b := file_buffer(raw)) is None or b._source is None or b.nbytes != math.prod(shape) * dt.itemsize: return None
  if b._source[1] % dt.itemsize: return None  # a file aligned to less than the item size: read as bytes
  return Tensor(buffer_uop(FileBuffer(b.device, math.prod(shape), dt, b._source))).reshape(shape)

def final_builds() -> Context:
  """A block whose new kernels are built at once with the compiler's full optimization, not a quick build first: a kernel a
  load runs once (unpacking weights) never earns its final build otherwise, so every later start ran its quick one from the
  cache (Gemma 3 270M's unpacking: not in vector lanes, ~0.3 s more at each start)."""
  return Context(QUICK_COMPILE=0)

GATHER_MAX_BYTES = 16 << 20  # a tensor larger than this is unpacked alone, from the file's bytes as they are (not copied first)

def gather_bytes(raws: list[Tensor]) -> Tensor | None:
  """The bytes of several tensors of GGUF files (gguf_load_blocks' raw tensors, not yet read), end to end in one new
  uint8 tensor, read from the files (no kernel): one kernel then unpacks the blocks of many weights of one type. None
  when any of them is not unread file bytes or they are on different devices."""
  bufs = [file_buffer(r) for r in raws]
  if not bufs or any(b is None or b._source is None or b.device != bufs[0].device for b in bufs): return None
  total = sum(b.nbytes for b in bufs)  # type: ignore[union-attr]
  out = Buffer(bufs[0].device, total, dtypes.uint8).ensure_allocated()  # type: ignore[union-attr]
  host = out.allocator.host
  arr = out.as_array() if host else np.empty(total, np.uint8)
  at = 0
  for b in bufs:
    src, begin, what = b._source  # type: ignore[union-attr,misc]
    src.read_into(memoryview(arr[at:at + b.nbytes]), begin, what)  # type: ignore[union-attr]
    at += b.nbytes  # type: ignore[union-attr]
  if not host: out.copyin(arr)
  return Tensor(buffer_uop(out))

def buffer_views(t: Tensor, shapes: list[tuple[int, ...]]) -> list[Tensor]:
  """t realized, as tensors of `shapes` over consecutive runs of its elements from the first: views of its buffer (no
  copy), each a buffer of its own to the graphs that read it (not a shrink of t, whose offset would make each a kernel of
  its own)."""
  t = t.contiguous().realize()
  u = realized_buffer(t.uop)
  assert u is not None, "a realized tensor is a buffer"
  buf = ENGINE.storage.buffers[u]
  base, offset = (buf.base, buf.offset) if buf.base is not None else (buf, 0)
  out, at = [], 0
  for shape in shapes:
    n = math.prod(shape)
    if at + n > buf.size: raise ValueError(f"views of {sum(map(math.prod, shapes))} elements of a tensor of {buf.size}")
    view = Buffer(buf.device, n, buf.dtype, base=base, offset=offset + at * buf.dtype.itemsize)
    out.append(Tensor(buffer_uop(view)).reshape(shape))
    at += n
  return out

def dequantize_many(items: list[tuple[Tensor, int, tuple[int, ...]]]) -> list[Tensor]:
  """dequantize of each (raw, type, shape), realized: the quantized ones of one type gathered (gather_bytes) and
  dequantized by one set of kernels into one buffer of which each is a view (Gemma 3 270M as float32: ~5 kernels and a
  graph for each of its 127 quantized weights -> a few for all), the others one by one."""
  out: list[Tensor | None] = [None] * len(items)
  by_type: dict[tuple, list[int]] = {}
  for k, (raw, t, _) in enumerate(items): by_type.setdefault((t,) if raw.numel() <= GATHER_MAX_BYTES else (t, k), []).append(k)
  for (t, *_), ks in by_type.items():
    gathered = gather_bytes([items[k][0] for k in ks]) if len(ks) > 1 and is_quantized(t) else None
    if gathered is None:
      for k in ks: out[k] = dequantize(*items[k]).contiguous()
      continue
    values = dequantize(gathered, t, (sum(math.prod(items[k][2]) for k in ks),))
    with final_builds(): views = buffer_views(values, [items[k][2] for k in ks])
    for k, v in zip(ks, views): out[k] = v
  with final_builds(): Tensor.realize(*[o for o in out if o is not None])
  return out  # type: ignore[return-value]

def gguf_load(fn: str | os.PathLike | Tensor, device: str | None = None) -> tuple[dict[str, Any], dict[str, Tensor]]:
  """(metadata, tensors by name) of a GGUF file, checked whole first (GGUFError on any fault). The file stays open; each
  tensor's bytes are read on first use and dequantized by kernels on `device` (quantized types give float32; F32, F16
  and BF16 keep their type). A tensor's shape is numpy's order (ggml lists sizes innermost first)."""
  if isinstance(fn, Tensor): return _load_from_tensor(fn, device)
  meta, blocks = gguf_load_blocks(fn, device)
  return meta, {name: dequantize(raw, t, shape) for name, (raw, t, shape) in blocks.items()}

def gguf_load_blocks(fn: str | os.PathLike, device: str | None = None) -> tuple[dict[str, Any], dict[str, tuple[Tensor, int, tuple[int, ...]]]]:
  """(metadata, {name: (its raw bytes as a 1-D uint8 tensor, its ggml type id, its shape)}): gguf_load before dequantizing,
  for a reader that keeps quantized weights as blocks (tensor.llm: `dequantize(raw, type, shape)` inside each matmul)."""
  if not os.path.exists(fn): raise FileNotFoundError(f"{fn}: no such GGUF file")
  f = open(fn, "rb")
  try: meta, table = _read_header(fn, os.fstat(f.fileno()).st_size, lambda pos, n: os.pread(f.fileno(), n, pos))
  except BaseException:
    f.close()
    raise
  src = _FileBytes(fn, f, GGUFError, "gguf_load", mapped=True)   # on a host device the tensors are the file's mapped pages
  return meta, {name: (_lazy_tensor(src, begin, begin + n, dtypes.uint8, (n,), device, name), t, shape) for name, shape, t, begin, n in table}

def is_quantized(ggml_type: int) -> bool: return GGML_TYPES[ggml_type][0] not in _PLAIN

def _load_from_tensor(t: Tensor, device: str | None) -> tuple[dict[str, Any], dict[str, Tensor]]:
  """A GGUF file's bytes already in a uint8 tensor (tinygrad's gguf_load(Tensor) form): the header is parsed from its host copy."""
  if t.dtype is not dtypes.uint8 or t.ndim != 1: raise GGUFError(f"gguf_load of a Tensor takes the file's bytes (1-D uint8), got {t.dtype} {t.shape}")
  data = t.numpy().tobytes()
  meta, table = _read_header("<tensor>", len(data), lambda pos, n: data[pos:pos + n])
  if device is not None: t = t.to(device)
  return meta, {name: dequantize(t[begin:begin + n], tt, shape) for name, shape, tt, begin, n in table}
