"""Quantized weights kept as their GGUF blocks in memory: a matmul sums q * x within each group of the blocks and scales
once per group, so it reads the blocks (~4.5-8.5 bits a weight), not float32. Part of tensor.llm (tensor/gguf.py
splits each type into groups: quant_groups).

  w = QuantizedWeight(raw, ggml_type, (out, in))
  y = w.matmul(x)          # x (..., in) -> (..., out), as x @ dequantize(raw).T up to float32 rounding
"""
from __future__ import annotations
from tensor import Tensor
from tensor.gguf import GGML_TYPES, dequantize, quant_groups

__all__ = ["QuantizedWeight"]

class QuantizedWeight:
  """A 2-D weight (out, in) of a quantized ggml type, its raw bytes a realized uint8 tensor."""
  def __init__(self, raw: Tensor, ggml_type: int, shape: tuple[int, int]):
    self.raw, self.ggml_type, self.shape = raw, ggml_type, shape
    self.type_name = GGML_TYPES[ggml_type][0]

  def __repr__(self) -> str: return f"QuantizedWeight({self.type_name}, {self.shape})"

  def matmul(self, x: Tensor) -> Tensor:
    """x (..., in) @ W.T -> (..., out): per group g of the `in` axis, scale[o, g] * sum_i q[o, g, i] x[g, i] (minus
    minus[o, g] * sum_i x[g, i] for the types with a minimum), summed over the groups."""
    q, scale, minus = quant_groups(self.raw, self.ggml_type, self.shape)         # (out, ng, G), (out, ng)
    ng, G = q.shape[-2], q.shape[-1]
    xg = x.reshape(*x.shape[:-1], 1, ng, G)                                       # (..., 1, ng, G)
    # the sums within groups are one kernel (reading the blocks once), the scaled sum over groups another: fused, the
    # scheduler's walk of the two nested reductions over the dequantizing graph took minutes for an 18-layer model
    y = ((xg * q).sum(-1).contiguous() * scale).sum(-1)
    return y if minus is None else y - (xg.sum(-1) * minus).sum(-1)

  def dequantized(self) -> Tensor:
    """The values (out, in) as float32, a lazy graph over the blocks (a row lookup reads only its rows' blocks)."""
    return dequantize(self.raw, self.ggml_type, self.shape)
