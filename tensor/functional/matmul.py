"""A large float32 matmul on the CPU with its right operand packed into column panels (the layout BLAS kernels read), so
the generated kernel's register tile (tensor/codegen/heuristic.py: rows x one or two vectors of columns, k innermost)
reads B at consecutive addresses instead of one row of B (a new page at N=1024) per step of k. Tensor.matmul calls it.

  B (K, N) -> panels (N/cols, K, cols), one copy of O(K*N); A's rows padded to a multiple of the tile's rows (a copy of
  O(M*K) when they are not one already); out[m, j*cols + l] = sum_k A[m, k] * panels[j, k, l], its padding cut off.

`python -m bench.kernels --clock cpu --threads 1` (AVX2 Zen 3, load ~16), GFLOP/s at 256/512/1024: plain 45/38/23,
packed with the 6x16 tile 63/71/78, torch 77/82/87 in the same runs.
"""
from __future__ import annotations
from typing import TYPE_CHECKING
from runtime.dtype import dtypes

if TYPE_CHECKING: from tensor.tensor import Tensor

# below this many multiply-adds the copies cost more than the faster kernel saves (a 64x64x64 matmul is 262144)
MIN_MACS = 1 << 20
# fewer rows than this (a matrix-vector product, a small batch) reuse each panel too few times to pay for packing it
MIN_ROWS = 16

def panel_tile(x: Tensor, w: Tensor) -> tuple[int, int] | None:
  """The register tile (rows, columns) a packed matmul of x (..., M, K) by w (K, N) should use, or None when it should
  not be packed: not float32 on the CPU, a batched w, or too small."""
  if x.device != "CPU" or w.device != "CPU" or x.dtype is not dtypes.float32 or w.dtype is not dtypes.float32 or x.ndim < 2 or w.ndim != 2:
    return None
  if not all(isinstance(d, int) for d in (*x.shape, *w.shape)): return None
  from tensor.codegen import vector_caps
  from tensor.codegen.heuristic import register_tile
  rows, cols = register_tile(vector_caps("CPU"), 4)
  k, n = w.shape
  if k == 0: return None  # an empty sum: the plain path fills zeros
  m = x.numel() // k
  if m < MIN_ROWS or n % cols or m * k * n < MIN_MACS: return None
  return rows, cols

def packed_matmul(x: Tensor, w: Tensor, tile: tuple[int, int]) -> Tensor:
  """x (..., M, K) @ w (K, N) through column panels of w (see the module's docstring); the same values as the plain
  matmul (each output is the same sum of products in the same order of k)."""
  rows, cols = tile
  k, n = w.shape
  lead = x.shape[:-1]
  a = x.reshape(-1, k)                                                          # (M, K)
  m = a.shape[0]
  mp = -(-m // rows) * rows
  if mp != m: a = a.pad(((0, mp - m), (0, 0))).contiguous()                     # (Mp, K), zero rows
  panels = w.reshape(k, n // cols, cols).permute(1, 0, 2).contiguous()          # (N/cols, K, cols)
  b = panels.permute(0, 2, 1).reshape(1, n // cols, cols, k)                    # (1, N/cols, cols, K)
  # a buffer of (Mp, N/cols, cols): the kernel's loops stay rows, panels and the columns of one panel (a reshape to
  # (Mp, N) first would merge the last two into one loop read through / and %, which the tile can't split)
  out = (a.reshape(mp, 1, 1, k) * b).sum(-1).contiguous().reshape(mp, n)        # (Mp, N)
  if mp != m: out = out.shrink(((0, m), (0, n)))
  return out.reshape(*lead, n)
