"""A large float32 matmul on the CPU with both operands packed into panels (the layouts BLAS kernels read), so the generated
kernel's register tile (tensor/codegen/heuristic.py: `rows` output rows x `cols` columns in vectors, k innermost) reads
each step of k from two consecutive runs of memory: `rows` values of A and `cols` of B. Tensor.matmul calls it.

  A (M, K) -> row panels (Mp/rows, K, rows), B (K, N) -> column panels (Np/cols, K, cols): one copy each, O(M*K) and
  O(K*N), with M and N padded by zeros to multiples of the tile (any N takes this path; the padding is cut off after,
  a copy: the tile takes up to two rows fewer when that divides M);
  out[i*rows + r, j*cols + l] = sum_k Apanels[i, k, r] * Bpanels[j, k, l], stored as (Mp, Np).

A realized A whose rows divide into the tile is not copied: the kernel reads its `rows` rows in place, each step of k
one float further along each (`rows` sequential streams a row apart; a copy of A cost ~4% at 1024). B is always packed:
read in place, a panel's rows lie N floats apart, which at N = 1024 (4 KiB) fall into a few cache sets and evict each
other from the L2.

The heuristic runs the column panels outermost (each stays in the L2 while every row panel streams past it) and
accumulates with fused multiply-adds (rules/lower.rules). `python -m bench.kernels --clock cpu --threads 1` (AVX-512
Sapphire Rapids), GFLOP/s at 256/512/1024: B packed only, an 8x32 tile, no fma 65/69/55 (load 4); this layout
131/123/130 (load 7; torch 136/134/142 in the same runs). The two packing copies are ~10% of the time at 1024 (each
moves 8 MB at ~11 GB/s); A read in place: 1024 at 0.93x -> 0.97x torch (`--clock thread`, load 9, alternating in one
process), 2 threads 1.06x -> 1.10x.
"""
from __future__ import annotations
from typing import TYPE_CHECKING
from runtime.dtype import dtypes

if TYPE_CHECKING: from tensor.tensor import Tensor

# below this many multiply-adds the copies cost more than the faster kernel saves (a 64x64x64 matmul is 262144)
MIN_MACS = 1 << 20
# fewer rows than this (a matrix-vector product, a small batch) reuse each panel too few times to pay for packing it
MIN_ROWS = 16

# a tile with fewer vectors of columns than the most runs slower per column (fewer accumulators share each load): each
# vector fewer counts as this much more padding when picking one
NARROW_TILE_COST = 0.1

def column_vectors(n: int, width: int, most: int) -> int:
  """How many vectors of `width` columns a tile of an N-column matmul takes (at most `most`): the count that pads N the
  least, a narrower tile costing NARROW_TILE_COST per vector fewer (more vectors on a tie). On 16-float vectors N = 96
  takes 3 (no padding) where 4 would pad it to 128; N = 100 takes 4 (128)."""
  def cost(v: int) -> float: return -(-n // (v * width)) * v * width * (1 + NARROW_TILE_COST * (most - v))
  return min(range(most, 0, -1), key=cost)

def panel_tile(x: Tensor, w: Tensor) -> tuple[int, int] | None:
  """The register tile (rows, columns) a packed matmul of x (..., M, K) by w (K, N) should use, or None when it should
  not be packed: not float32 on the CPU, a batched w, fewer columns than half a vector, or too small."""
  if x.device != "CPU" or w.device != "CPU" or x.dtype is not dtypes.float32 or w.dtype is not dtypes.float32 or x.ndim < 2 or w.ndim != 2:
    return None
  if not all(isinstance(d, int) for d in (*x.shape, *w.shape)): return None
  from tensor.codegen.heuristic import col_vectors, register_tile
  from tensor.engine.state import ENGINE
  caps = ENGINE.target("CPU").caps
  width = max(1, caps.register_bytes // 4)
  k, n = w.shape
  if k == 0: return None  # an empty sum: the plain path fills zeros
  m = x.numel() // k
  if m < MIN_ROWS or 2 * n < width or m * k * n < MIN_MACS: return None
  rows, cols = register_tile(caps, 4, column_vectors(n, width, col_vectors(caps)))
  # a tile up to two rows shorter that divides M pads nothing, so the result needs no copy cutting the padding off: at
  # M = 1024 (AVX-512) 4 rows beat 6 with the copy (1024/512/256: 0.93/0.90/0.92-0.99x torch against 0.92/0.83/0.84-0.89x)
  return next((r for r in range(rows, max(1, rows - 2) - 1, -1) if m % r == 0), rows), cols

def packed_matmul(x: Tensor, w: Tensor, tile: tuple[int, int]) -> Tensor:
  """x (..., M, K) @ w (K, N) through row panels of x and column panels of w (see the module's docstring); the same values
  as the plain matmul (each output is the same sum of products in the same order of k)."""
  rows, cols = tile
  k, n = w.shape
  lead = x.shape[:-1]
  a = x.reshape(-1, k)                                                                      # (M, K)
  m = a.shape[0]
  mp, np_ = -(-m // rows) * rows, -(-n // cols) * cols
  if np_ != n: w = w.pad(((0, 0), (0, np_ - n)))                                            # zero columns
  bp = w.reshape(k, np_ // cols, cols).permute(1, 0, 2).contiguous()                        # (Np/cols, K, cols)
  # the kernel's output loops stay row panels, rows of a panel, column panels and columns of a panel (merging a pair into
  # one loop would read it through / and %, which the tile can't split); that order is the (Mp, Np) matrix in memory
  if mp == m and x.is_realized():
    av = a.reshape(mp // rows, rows, 1, 1, k)                                               # A read in place
  else:
    if mp != m: a = a.pad(((0, mp - m), (0, 0)))                                            # zero rows
    ap = a.reshape(mp // rows, rows, k).permute(0, 2, 1).contiguous()                       # (Mp/rows, K, rows)
    av = ap.permute(0, 2, 1).reshape(mp // rows, rows, 1, 1, k)
  bv = bp.permute(0, 2, 1).reshape(1, 1, np_ // cols, cols, k)
  out = (av * bv).sum(-1).contiguous().reshape(mp, np_)                                     # (Mp, Np)
  if (mp, np_) != (m, n): out = out.shrink(((0, m), (0, n)))
  return out.reshape(*lead, n)
