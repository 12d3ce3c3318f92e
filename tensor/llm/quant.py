"""Quantized weights kept small in memory: a GGUF tensor's blocks unpacked once, at load, into int8 values per group
(each type's small integers: 4 to 8 bits) and a float32 scale and minimum per group of 32 (16 for Q6_K), so a matmul
reads ~9-10 bits a weight instead of 32 and dequantizes in its own loop: w = scale * q - minus, one vector of 16 int8
widened to floats at a time. Part of tensor.llm (tensor/gguf.py splits each type into groups: quant_groups).

  w = QuantizedWeight(raw, ggml_type, (out, in))
  y = w.matmul(x)          # x (..., in) -> (..., out), as x @ dequantize(raw).T up to float32 rounding
"""
from __future__ import annotations
import math
from tensor import Tensor, dtypes
from tensor.file_bytes import keep_in_memory
from tensor.gguf import GATHER_MAX_BYTES, GGML_TYPES, GROUP_SIZE, GROUPS, buffer_views, final_builds, gather_bytes, quant_groups

__all__ = ["QuantizedWeight", "DEQUANTIZE_ROWS", "quantized_weights"]

DEQUANTIZE_ROWS = 4   # a matmul of this many rows or more dequantizes W to float32 first (Gemma 3 270M, a prefill chunk of 32
                      # rows: the whole prompt's layers 2.3 s -> see docs/llm.md)

class QuantizedWeight:
  """A 2-D weight (out, in) of a quantized ggml type: from its raw bytes (a uint8 tensor) q (out, groups, size) int8,
  scale and minus (out, groups) float32 (minus None for the types without one), realized when made. The blocks' bit
  fields are unpacked here once, so the matmuls of every decode step read plain bytes, not the blocks' packed fields."""
  def __init__(self, raw: Tensor, ggml_type: int, shape: tuple[int, int]):
    self.ggml_type, self.shape = ggml_type, shape
    self.type_name = GGML_TYPES[ggml_type][0]
    q, scale, minus = quant_groups(raw, ggml_type, shape, int8=self.type_name != "Q8_0")
    if self.type_name == "Q8_0":
      # its blocks hold the int8 values whole (after each block's 2-byte scale): q is a view of the raw bytes, read in
      # place (from the file's mapped pages, tensor/file_bytes.py), not unpacked into new memory (Gemma 3 270M's tied
      # 262,144 x 640 embedding: 168 MB written at load, ~0.5 s)
      self.raw: Tensor | None = keep_in_memory(raw)
      self.q = raw.reshape(*shape[:-1], shape[-1] // 32, 34)[..., 2:].bitcast(dtypes.int8)
    else: self.raw, self.q = None, q
    self.scale = scale.contiguous()
    self.minus = None if minus is None else minus.contiguous()
    with final_builds(): Tensor.realize(*self.tensors())

  @classmethod
  def of_parts(cls, ggml_type: int, shape: tuple[int, int], q: Tensor, scale: Tensor, minus: Tensor | None) -> QuantizedWeight:
    """A weight of q (out, groups, size) int8, scale and minus (out, groups) float32 already unpacked (quantized_weights)."""
    w = cls.__new__(cls)
    w.ggml_type, w.shape, w.type_name = ggml_type, shape, GGML_TYPES[ggml_type][0]
    w.raw, w.q, w.scale, w.minus = None, q, scale, minus
    return w

  def __repr__(self) -> str: return f"QuantizedWeight({self.type_name}, {self.shape})"

  def tensors(self) -> list[Tensor]:
    """What the weight holds in memory (what a matmul reads)."""
    return ([self.q] if self.raw is None else [self.raw]) + [self.scale] + ([] if self.minus is None else [self.minus])

  def _values(self) -> Tensor:
    """The dequantized values (out, groups, size), a lazy graph a kernel computes as it reads q: scale * q - minus."""
    w = self.q.float() * self.scale.unsqueeze(-1)
    return w if self.minus is None else w - self.minus.unsqueeze(-1)

  def matmul(self, x: Tensor) -> Tensor:
    """x (..., in) @ W.T -> (..., out): one reduction over the groups and their elements of (scale * q - minus) * x, so
    the kernel's 16 lanes run along a group's elements (tensor/codegen/heuristic.py: a short innermost loop of a nested
    reduction is unrolled) and each lane widens an int8 to a float (rules/vectorize.rules). For DEQUANTIZE_ROWS rows of x
    or more (a prefill chunk) W is dequantized to a float32 buffer first, once, and multiplied as a float matrix: fused,
    each row of x dequantized W again."""
    if math.prod(x.shape[:-1]) >= DEQUANTIZE_ROWS: return x @ self.dequantized().contiguous().T
    ng, G = self.q.shape[-2], self.q.shape[-1]
    xg = x.reshape(*x.shape[:-1], 1, ng, G)                                       # (..., 1, ng, G)
    return (self._values() * xg).sum((-1, -2))

  def dequantized(self) -> Tensor:
    """The values (out, in) as float32, a lazy graph over q, scale and minus (a row lookup reads only its rows)."""
    return self._values().reshape(self.shape)

def quantized_weights(items: dict[str, tuple[Tensor, int, tuple[int, int]]]) -> dict[str, QuantizedWeight]:
  """QuantizedWeights of many 2-D weights of GGUF files ({name: (raw bytes, type, shape)}), realized: those of one type
  (Q8_0 aside, whose blocks are read in place) gathered end to end (tensor/gguf.py gather_bytes) and unpacked by one kernel
  each for q, scale and minus, each weight's a view of those buffers (Gemma 3 270M: 117 weights unpacked one by one, ~500
  kernels and 117 graphs, ~0.5 s -> 0.1 s)."""
  out: dict[str, QuantizedWeight] = {}
  by_type: dict[tuple, list[str]] = {}   # the large ones alone: unpacked from the file's bytes as they are
  for name, (raw, t, _) in items.items(): by_type.setdefault((t,) if raw.numel() <= GATHER_MAX_BYTES else (t, name), []).append(name)
  for (t, *_), names in by_type.items():
    tname, _, bsize = GGML_TYPES[t]
    gathered = gather_bytes([items[n][0] for n in names]) if tname != "Q8_0" and len(names) > 1 else None
    if gathered is None:
      for n in names: out[n] = QuantizedWeight(*items[n])
      continue
    q, scale, minus = GROUPS[tname](gathered.reshape(-1, bsize))    # (blocks, groups per block, *size), (blocks, groups per block)
    G = GROUP_SIZE[tname]
    q, scale = q.cast(dtypes.int8).contiguous(), scale.contiguous()
    minus = None if minus is None else minus.contiguous()
    with final_builds(): Tensor.realize(*[x for x in (q, scale, minus) if x is not None])
    shapes = [items[n][2] for n in names]
    qs = buffer_views(q, [(o, i // G, G) for o, i in shapes])
    scales = buffer_views(scale, [(o, i // G) for o, i in shapes])
    minuses = buffer_views(minus, [(o, i // G) for o, i in shapes]) if minus is not None else [None] * len(names)
    for n, qv, sv, mv in zip(names, qs, scales, minuses): out[n] = QuantizedWeight.of_parts(t, items[n][2], qv, sv, mv)
  return out
