"""scaled_dot_product_attention as torch defines it: softmax(q @ k^T * scale + mask) @ v, with a causal or given
mask (bool: where to attend; float: added), grouped-query heads (enable_gqa), and dropout_p applied by Tensor.dropout
while Tensor.training only, as tinygrad (torch's functional drops whenever dropout_p > 0)."""
from __future__ import annotations
import math
from typing import TYPE_CHECKING
from runtime.dtype import dtypes, least_upper_float
from tensor.functional.args import shape_error, value_error
from tensor.functional.conv import windows

if TYPE_CHECKING: from tensor.tensor import Tensor

def _repeat_heads(x: Tensor, n: int) -> Tensor:
  """(..., H, S, E) -> (..., H*n, S, E), each head n times in a row (torch's repeat_interleave on dim -3)."""
  *lead, h, s, e = x.shape
  return x.reshape(*lead, h, 1, s, e).expand(*lead, h, n, s, e).reshape(*lead, h * n, s, e)

def _causal(T: type, L: int, S: int, device: str) -> Tensor:
  """(L, S) bool, True where key j <= query i, made of movement ops on a constant (no data): window o of a vector
  of L trues then S-1 falses holds trues at t < L - o, which is row i = L-1-o."""
  v = T.ones(L, dtype=dtypes.bool, device=device).pad([(0, S - 1)])
  return windows(v, (S,), (1,), (1,)).flip(0)

class AttentionMixin:
  __slots__ = ()
  def scaled_dot_product_attention(self: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                                   is_causal: bool = False, scale: float | None = None, enable_gqa: bool = False) -> Tensor:
    """Attention of queries self (..., L, E) over key (..., S, E) and value (..., S, Ev) -> (..., L, Ev), as torch's
    F.scaled_dot_product_attention. is_causal: position i attends to keys 0..i (top-left aligned, as torch)."""
    q = self
    if q.ndim < 2 or key.ndim < 2 or value.ndim < 2:
      raise shape_error(f"scaled_dot_product_attention: query {q.shape}, key {key.shape} and value {value.shape} need (..., seq, dim)")
    if q.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
      raise shape_error(f"scaled_dot_product_attention: query {q.shape}, key {key.shape} and value {value.shape} don't fit: "
                        "query and key need the same last dim, key and value the same sequence length")
    if enable_gqa and q.ndim >= 3 and key.shape[-3] != q.shape[-3]:
      if key.ndim < 3 or q.shape[-3] % key.shape[-3] or key.shape[-3] != value.shape[-3]:
        raise shape_error(f"scaled_dot_product_attention: {q.shape[-3]} query heads don't split into groups over key {key.shape} "
                          f"and value {value.shape}")
      key, value = _repeat_heads(key, q.shape[-3] // key.shape[-3]), _repeat_heads(value, q.shape[-3] // value.shape[-3])
    if not 0.0 <= dropout_p <= 1.0: raise value_error(f"scaled_dot_product_attention: dropout_p={dropout_p} must be in [0, 1]")
    dt = least_upper_float(q.dtype)
    scores = (q.cast(dt) @ key.cast(dt).transpose(-1, -2)) * (scale if scale is not None else 1 / math.sqrt(q.shape[-1]))  # (..., L, S)
    L, S = scores.shape[-2:]
    if is_causal:
      if attn_mask is not None: raise value_error("scaled_dot_product_attention: give attn_mask or is_causal, not both")
      attn_mask = _causal(type(q), L, S, q.device)
    if attn_mask is not None:
      m, sc = attn_mask.shape, scores.shape
      if len(m) > len(sc) or any(a not in (1, b) for a, b in zip(m[::-1], sc[::-1])):
        raise shape_error(f"scaled_dot_product_attention: attn_mask of shape {m} does not broadcast to the scores {sc} of query {q.shape} "
                          f"and key {key.shape}")
      scores = scores + (attn_mask.where(0, -math.inf) if attn_mask.dtype is dtypes.bool else attn_mask)
    # softmax fused into the matmul after it recomputes its row max and sum for every output column (7x slower at
    # L = S = 128, E = 64), so the weights are computed once
    weights = scores.softmax(-1).contiguous()
    if dropout_p > 0 and type(q).training: weights = weights.dropout(dropout_p)  # as tinygrad: dropout only while training
    return weights @ value.cast(dt)
