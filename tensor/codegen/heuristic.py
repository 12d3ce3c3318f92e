"""The default Opt list of a kernel, picked by its shape (tensor/codegen/opt.py applies it; NOOPT=1 skips this).

  matmul-like  a sum of products of two loads whose indices move with different output loops: a register tile of two
               output loops (rows x up to an eighth of the registers in vectors of columns), the reduction loop innermost,
               the loop over column panels outermost when a panel fits the L2; a few columns (a classifier's 10) over a
               reduction consecutive in memory: all the columns unrolled, the reduction in vectors
  reductions   over >= 64 consecutive elements: partial accumulators (one vector) instead of one serial chain; one
               outside every loop (a whole tensor's sum) over 2 MiB and more: SPLIT into partials that threads share out
  elementwise  the output loop that is consecutive in memory, as vectors of the SIMD width
  small        an innermost output loop of at most 4 iterations is unrolled (the seeds' E_4n2)
  prefetch     a kernel reading each row in several loops (layernorm; not a stashed one): the next row prefetched (PREFETCH);
               a quantized matvec (a sum over nested loops): its rows MATVEC_PREFETCH rows ahead
  across rows  a reduction whose loads are consecutive along an output loop, not along the reduction (a per-channel sum
               over batch x pixels of channels-last data, a column sum): that output loop as one vector of lanes, so the
               reduction streams through memory once
  copy order   a copy that moves runs of consecutive elements (matmul.py's packing of B into panels): the outer loops in the
               order of the source, so it reads memory once through and writes a few runs at a time
  group        (GPU-style targets) a reduction of GROUP_MIN or more elements into at most GROUP_MAX_OUT outputs: its loop
               shared by the work-items of a group (GROUP), partials through the group's memory
  local tile   (GPU targets, not an OpenCL CPU device) a matmul whose output loops and reduction a tile of LOCAL_SIZES divides: LOCAL, a group
               of work-items per output tile, its operands' tiles through the group's memory
  stash        a reduction of transcendental values that the store uses again at the output loop (softmax's exp): the
               values stored during the reduction and read back (STASH), when a row stays in the cache between the two
"""
from __future__ import annotations
import itertools, math
from runtime.dtype import dtypes
from runtime.ops import GroupOp, Ops
from runtime.uop import UOp
from runtime.threads import max_threads
from rules.vectorize_helpers import VectorCaps
from tensor.codegen.opt import MAX_LANES, Opt, OptError, apply_opt, output_loops, reduce_loops, trip_count

UPCAST_MAX = 4     # a short innermost output loop, unrolled whole
SPLIT_MIN = 64     # shorter reductions stay one loop
MAX_ROWS = 8       # rows of a matmul's register tile at most (one broadcast each per step of k)
SPLIT_BYTES = 64   # lanes of a split reduction: 64 bytes (16 floats: one AVX-512 register, two AVX2 ones)
# vectors of lanes of a long max over consecutive elements (softmax's row max): independent chains of compare-and-select.
# Softmax (4096, 1024) of random values at 1 thread on Zen 5, kernel alone: 2.28 -> 2.0 ms (the partials combined as vectors)
MAX_CHAINS = 4
# STASH when a row of the reduction is at most this (its stores are read back from the L2 cache, 256 KiB and more on x86
# CPUs); measured on softmax (4096, 1024) float32: 7.6 -> 5.2 ms on one thread, the exp2 polynomial once per element
STASH_MAX_BYTES = 256 * 1024
# SPLIT a reduction outside every loop from this size on: from about here the cost model of runtime/threads.py runs it on
# two threads (2 MiB of float32: 154 us on one, 115 on two). Into PARTIALS blocks (fewer when they don't divide it): enough
# for a few cores, and the same on any number of threads (so the same sum)
SPLIT_MIN_BYTES = 2 * 1024 * 1024
PARTIALS = 32
# GROUP (GPU-style targets): a reduction this long or longer, of a kernel with at most this many outputs (each output then
# a group of work-items; more outputs fill the device's work-items without it), into the most work-items dividing it
GROUP_MIN = 1024
GROUP_MAX_OUT = 1 << 16
GROUP_SIZES = (256, 128, 64, 32, 16, 8)
# LOCAL (GPU-style targets): a matmul's tile side, the largest whose group the target takes and that divides its loops
LOCAL_SIZES = (16, 8)
# ops worth storing instead of computing again: a polynomial or a math.h call each
EXPENSIVE = frozenset({Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.POW, Ops.SQRT})
# a matmul's column panel (the reduction's length x the tile's columns) that fits this stays in the L2 (1-2 MB per core
# on the machines measured) while the row panels stream past it: its loop then runs outermost
PANEL_BYTES = 1 << 20
# a permuting copy whose consecutive runs are at least this long is reordered to read its source in order (copy_order)
RUN_BYTES = 64
# a target without caps (the PYTHON device) gets the tiles of an AVX2 CPU: the same Opts the tests run on CPU
VECTOR_CAPS = VectorCaps(frozenset(), frozenset())
# a matmul with this many output columns or fewer, over a reduction consecutive in memory, unrolls them all (skinny_tile)
SKINNY_COLS = 16

def stride(idx: UOp, r: UOp) -> int | None:
  """How far an index moves per iteration of loop r: 0 when it does not use r, its coefficient when the index is linear
  in r (sums and products by constants: a conv window's (oh + kh) * 64 too), else None (a division, a modulo, ...)."""
  if r not in idx.toposort(): return 0
  if idx is r: return 1
  # s17/convsm: linear through nested sums and constant factors (was: r or r*c as one top-level term)
  if idx.op is Ops.ADD:
    parts = [stride(s, r) for s in idx.src]
    return None if None in parts else sum(p for p in parts if p is not None)
  if idx.op is Ops.MUL and (c := idx.src[1] if idx.src[0].op is not Ops.CONST else idx.src[0]).op is Ops.CONST:
    inner = stride(idx.src[0] if c is idx.src[1] else idx.src[1], r)
    return None if inner is None else inner * c.arg
  return None

def loads(x: UOp) -> list[UOp]: return [u for u in x.toposort() if u.op is Ops.LOAD]

def store_index(sink: UOp) -> UOp | None:
  """The index of the kernel's one store (None: several stores)."""
  return sink.src[0].src[0].src[1] if len(sink.src) == 1 and sink.src[0].op is Ops.STORE else None

def matmul_opts(sink: UOp, caps: VectorCaps | None) -> list[Opt] | None:
  """A register tile for a sum of products whose loads move with different output loops: ROWS output rows (a loop some
  load does not move with) times COLS consecutive columns in vectors (the loop the store and a load are consecutive in),
  the reduction loop innermost. Lanes are applied rows first, so the columns are the innermost lane axis (a vector). Then
  the loop over column panels (the vector load moves with it, the broadcast one does not) goes outside the loop over
  row panels when the panel fits the L2: every row panel streams past a panel read from the L2 (`panel_order`)."""
  outs = output_loops(sink)
  qs = [u for u in sink.toposort() if u.op is Ops.REDUCE]
  st = store_index(sink)
  if st is None or len(qs) != 1 or qs[0].arg is not Ops.ADD or qs[0].dtype.count != 1 or len(outs) < 2: return None
  q = qs[0]
  lds = loads(q.src[0])
  if len(lds) < 2 or q.src[0].op is not Ops.MUL: return None
  if caps is None: caps = VECTOR_CAPS
  width = max(1, caps.register_bytes // q.dtype.itemsize)
  def fits(r: UOp, n: int) -> bool: return (trip_count(r) or 0) % n == 0 and (trip_count(r) or 0) >= n
  cols = [r for r in outs if stride(st, r) == 1 and fits(r, width) and any(stride(ld.src[0].src[1], r) == 1 for ld in lds)]
  if not cols: return skinny_tile(sink, outs, st, q, lds, width) or gathered_tile(outs, st, lds, width, caps)
  col = cols[-1]
  # rows: an output loop the column vectors' loads do not move with (each vector is shared by the tile's rows) while
  # another load does (one broadcast value per row); in a matmul over packed panels the panel loop is not one
  vecs = [ld for ld in lds if stride(ld.src[0].src[1], col) == 1]
  rows = [r for r in outs if r is not col and all(stride(ld.src[0].src[1], r) == 0 for ld in vecs) and
          all(stride(ld.src[0].src[1], r) is not None for ld in lds) and any(stride(ld.src[0].src[1], r) for ld in lds)]
  if not rows: return None
  n_vectors = next(v for v in range(col_vectors(caps), 0, -1) if fits(col, v * width))
  want_rows, n_cols = register_tile(caps, q.dtype.itemsize, n_vectors)
  def best(r: UOp) -> int: return next((k for k in range(want_rows, 1, -1) if fits(r, k)), 0)
  # the row loop giving the tallest tile, the innermost of equals: a conv's output row when its width divides (its loads
  # are neighbours), else another (ResNet's layer4: 7 x 7 pixels, rows from the batch of 8: 4 rows, where none was a tile)
  row = max(reversed(rows), key=best)
  n_rows = best(row) or None
  if n_rows is None: return None
  # the row UPCAST first; when it takes the whole loop, the loop is gone and a column loop after it shifts down
  col_axis = outs.index(col) - (1 if outs.index(row) < outs.index(col) and n_rows == trip_count(row) else 0)
  opts = [Opt("UPCAST", outs.index(row), n_rows), Opt("UPCAST", col_axis, n_cols)]
  left = [r for r in outs if not (r is row and n_rows == trip_count(row)) and not (r is col and n_cols == trip_count(col))]
  return opts + panel_order(left, vecs, [ld for ld in lds if ld not in vecs], q, n_cols)

def panel_order(outs: list[UOp], vecs: list[UOp], others: list[UOp], q: UOp, n_cols: int) -> list[Opt]:
  """A SWAP bringing the loop over column panels (the vector loads move with it, the others not) outside the loop over
  row panels (the others move with it, the vector loads not) enclosing it, when one panel (the reduction's length times
  the tile's columns) fits PANEL_BYTES: the panel then stays in the L2 while every row panel streams past it, where the
  other order reads all of B from the L3 once per row panel (1.5x the kernel's speed at matmul 1024, measured in C)."""
  def moves(lds: list[UOp], r: UOp) -> bool: return any(stride(ld.src[0].src[1], r) != 0 for ld in lds)
  panels = [r for r in outs if moves(vecs, r) and not moves(others, r) and (trip_count(r) or 0) >= 2]
  if not panels: return []
  p = panels[-1]
  row_panels = [r for r in outs[:outs.index(p)] if moves(others, r) and not moves(vecs, r)]
  k = 1
  for r in q.src[1:]: k *= trip_count(r) or 0
  if not row_panels or k * n_cols * q.dtype.itemsize > PANEL_BYTES: return []
  # the outermost loop is split among the threads in equal blocks: 3 panels on 2 threads would leave one idle a third of
  # the time, where the row panels (hundreds) split evenly
  n, threads = trip_count(p) or 0, max_threads()
  if threads > 1 and n % threads and n < 8 * threads: return []
  return [Opt("SWAP", outs.index(row_panels[0]), outs.index(p))]

def col_vectors(caps: VectorCaps | None) -> int:
  """The vectors of columns a matmul's register tile takes at most: an eighth of the registers (AVX-512: 4 of 32, AVX2:
  2 of 16), so the accumulators take three quarters of them."""
  return max(1, (caps or VECTOR_CAPS).registers // 8)

def register_tile(caps: VectorCaps | None, itemsize: int, n_vectors: int | None = None) -> tuple[int, int]:
  """(rows, columns) of a matmul's register tile: `n_vectors` vectors of columns per row (default: the most,
  `col_vectors(caps)`), and as many rows as leave one register for the broadcast row value and one for a product beside
  the column vectors and the accumulators. AVX-512: 6 rows x 64 floats (24 accumulators of 32 registers: 1.15x the 8 x 32
  tile at matmul 1024, measured in C); AVX2: 6 x 16 (12 of 16; 1.75x its 4x16 tile). tensor/functional/matmul.py pads a
  matmul's rows and columns to multiples of the tile."""
  if caps is None: caps = VECTOR_CAPS
  width = max(1, caps.register_bytes // itemsize)
  nv = n_vectors if n_vectors is not None else col_vectors(caps)
  return max(1, min(MAX_ROWS, (caps.registers - nv - 2) // nv)), width * nv

def skinny_tile(sink: UOp, outs: list[UOp], st: UOp, q: UOp, lds: list[UOp], width: int) -> list[Opt] | None:
  """A matmul with a few output columns (at most SKINNY_COLS, a classifier's 10) over a reduction consecutive in memory in
  every load that moves with it: the columns unrolled whole and the reduction in vectors, so each row's operand (a fused
  ReLU of it too) is read and computed once for all the columns, where a tile of columns computed it once per column pair.
  The MLP's logits 512 x 10 over 128 with the ReLU fused: 0.33 -> 0.10 ms on one thread."""
  col, r, reds = outs[-1], q.src[-1], reduce_loops(sink)
  n, k = trip_count(col) or 0, trip_count(r) or 0
  if stride(st, col) != 1 or not 2 <= n <= SKINNY_COLS or n * width > MAX_LANES or k < width or k % width: return None
  moving = [ld for ld in lds if r in ld.src[0].toposort()]
  if not moving or any(stride(ld.src[0].src[1], r) != 1 for ld in moving): return None
  # the columns' loop, unrolled whole, is gone: the reduction's axis counts one loop fewer
  return [Opt("UPCAST", len(outs) - 1, 0), Opt("UNROLL", len(outs) - 1 + reds.index(r), width)]

def gathered_tile(outs: list[UOp], st: UOp, lds: list[UOp], width: int, caps: VectorCaps) -> list[Opt] | None:
  """A register tile when no consecutive loop divides into vectors (a convolution's 54 columns): vectors over an output
  loop some load does not move with (a conv's output channels: the input value is broadcast, the weights gathered), times
  a few lanes of the innermost output loop the store is consecutive in (the weights shared by them). 3.5x the plain loops
  on conv2d (8,64,56,56) x (64,64,3,3) on AVX2; far from an implicit GEMM with packed weights."""
  inner = [r for r in outs if stride(st, r) == 1]
  if not inner: return None
  row = inner[-1]
  # a loop of symbolic length (trip_count None) divides by nothing
  n_rows = next((k for k in (6, 4, 3, 2) if (trip_count(row) or 1) % k == 0 and k <= caps.registers // 2), None)
  vec = [r for r in outs if r is not row and (trip_count(r) or 1) % width == 0 and any(stride(ld.src[0].src[1], r) == 0 for ld in lds)
         and any(stride(ld.src[0].src[1], row) == 0 for ld in lds)]
  if n_rows is None or not vec: return None
  col = vec[-1]
  col_axis = outs.index(col) - (1 if outs.index(row) < outs.index(col) and n_rows == trip_count(row) else 0)
  return [Opt("UPCAST", outs.index(row), n_rows), Opt("UPCAST", col_axis, width)]

def reductions_over(sink: UOp, r: UOp) -> list[UOp]: return [q for q in sink.toposort() if q.op is Ops.REDUCE and r in q.src[1:]]

def applies(sink: UOp, opt: Opt) -> bool:
  """Whether an Opt applies to the kernel (apply_opt raises OptError otherwise); the kernel it makes is dropped."""
  try: apply_opt(sink, opt, itertools.count(1 << 30).__next__)
  except OptError: return False
  return True

def stash_opts(sink: UOp, outs: list[UOp], reds: list[UOp]) -> list[Opt]:
  """STASH the first reduction of expensive values (exp, log, ...) that the store computes again, when its row stays
  cached (one: the output holds one row of values)."""
  for k, r in enumerate(reds):
    q, n = reductions_over(sink, r)[0], trip_count(r)
    if n is None or n * q.dtype.itemsize > STASH_MAX_BYTES or not any(u.op in EXPENSIVE for u in q.src[0].toposort()): continue
    if applies(sink, o := Opt("STASH", len(outs) + k, 0)): return [o]
  return []

def prefetch_opts(sink: UOp, outs: list[UOp], reds: list[UOp]) -> list[Opt]:
  """PREFETCH the next row where a kernel reads each row in several loops (softmax: max, sum and output loops; layernorm):
  between those loops no new line is asked for, so the hardware prefetcher falls behind and the next row's first loop
  waits for memory. Prefetched in the reduction loop doing the most arithmetic (softmax's exp). Softmax (4096, 1024):
  5.1 -> 4.0 ms; rows of 256 to 16384 floats gain 12-22%. A row sum, read once, gains nothing."""
  readers: dict[UOp, dict[int, UOp]] = {}  # buffer -> the reduction loops (axes) reading it, each with its reduction
  for k, r in enumerate(reds):
    q = reductions_over(sink, r)[0]
    for ld in loads(q.src[0]):
      if r in ld.src[0].src[1].toposort(): readers.setdefault(ld.src[0].src[0], {})[k] = q
  # read by several reductions (not one reduction over nested loops: a quantized matvec's groups x elements)
  multi = {k for ks in readers.values() if len(set(ks.values())) > 1 for k in ks}
  if not outs or not multi: return []
  def work(k: int) -> int: return sum(1 for u in reductions_over(sink, reds[k])[0].src[0].toposort() if u.op in GroupOp.ALU)
  k = max(sorted(multi), key=work)
  return [o] if applies(sink, o := Opt("PREFETCH", len(outs) + k, 1)) else []

# a quantized matvec's rows asked for this many rows ahead (PREFETCH): Gemma 3 270M's 262,144 x 640 Q8_0 logits on one Zen 4
# core, 11.6 -> 10.8 ms; its 2048 x 640 FFN matvecs from memory, 0.20 -> 0.15 ms (distances 2 to 4 alike, 8 slower); its
# decode step, 24 -> 20.4 ms (best of 40, three alternating runs). Two accumulators per row (UNROLL of the whole group of 32)
# measured no better
MATVEC_PREFETCH = 4

def matvec_prefetch(sink: UOp, outs: list[UOp], reds: list[UOp]) -> list[Opt]:
  """PREFETCH of the rows a reduction over nested loops streams (a quantized matvec: groups x elements of each row of W,
  tensor/llm/quant.py) MATVEC_PREFETCH rows ahead: each row is a few hundred bytes of a matrix read once, and the
  hardware's prefetcher, restarting at every page, leaves each row's first lines to wait for memory."""
  qs = [u for u in sink.toposort() if u.op is Ops.REDUCE]
  if len(qs) != 1 or len(qs[0].src) < 3 or qs[0].arg is not Ops.ADD or not outs or (trip_count(outs[-1]) or 0) < 64: return []
  inner = qs[0].src[-1]
  if not any(stride(ld.src[0].src[1], inner) == 1 and stride(ld.src[0].src[1], outs[-1]) for ld in loads(qs[0].src[0])): return []
  return [o] if applies(sink, o := Opt("PREFETCH", len(outs) + reds.index(inner), MATVEC_PREFETCH)) else []

def split_opts(sink: UOp, outs: list[UOp], reds: list[UOp], unrolls: dict[int, int]) -> list[Opt]:
  """SPLIT each reduction outside every loop (a whole tensor's sum, max, mean) of SPLIT_MIN_BYTES or more, at its loop
  moving furthest in memory (the outer dimension: each partial a contiguous block), into PARTIALS blocks (fewer where
  they do not divide it, and whole vectors where that loop is UNROLLed too)."""
  from rules.lower_helpers import scope
  memo: dict = {}
  opts = []
  for q in dict.fromkeys(q for r in reds for q in reductions_over(sink, r)):
    trips = [trip_count(r) for r in q.src[1:]]
    if None in trips or scope(q, memo) or math.prod(trips) * q.dtype.itemsize < SPLIT_MIN_BYTES: continue  # type: ignore[arg-type]
    def reach(r: UOp) -> int: return max([abs(stride(ld.src[0].src[1], r) or 0) for ld in loads(q.src[0])], default=0)
    if reach(r := max(q.src[1:], key=reach)) == 0: continue  # loads nothing that moves (ones(10**12).sum() folds to n * 1)
    k, n = reds.index(r), trip_count(r) or 0
    parts = next((p for p in (PARTIALS, 16, 8, 4, 2) if p < n and n % (p * unrolls.get(k, 1)) == 0), None)
    if parts and applies(sink, o := Opt("SPLIT", len(outs) + k, parts)): opts.append(o)
  return opts

def copy_order(sink: UOp, outs: list[UOp], reds: list[UOp], caps: VectorCaps | None = None) -> list[Opt]:
  """SWAPs putting the outer loops of a permuting copy in the order of its source (largest stride outermost), when the
  innermost loop moves both the load and the store one element on over RUN_BYTES or more: each run is then read once in
  order and written to a few places. Packing B (1024, 1024) into 16 column panels of 64: 772 -> 542 us (C probe, 1 thread,
  median of 25 alternating samples)."""
  st = store_index(sink)
  if st is None or reds or len(outs) < 3 or (val := sink.src[0].src[1]).op is not Ops.LOAD: return []
  ld = val.src[0].src[1]
  # runs shorter than a cache line would be written to hundreds of places a few bytes at a time (A's row panels of 4 floats
  # in weight grad 784x128x512: 0.92x -> 0.66x torch in one bench.kernels run before this bound)
  if stride(st, outs[-1]) != 1: return []
  # a transposing copy (a conv's weight into its GEMM layout: the store consecutive in the output channels, the load 9 * cin
  # floats apart there): the innermost loop as one vector of lanes, the others in the source's order, so each lane reads
  # along its own row (ResNet's (512, 512, 3, 3) weight: 5.5 -> 1 ms)
  opts: list[Opt] = []
  strides = [stride(ld, r) for r in outs[:-1]]
  if (inner := stride(ld, outs[-1])) != 1:
    # the lanes first; the loop over the rest of the innermost one goes with the others, in the source's order (outermost:
    # each lane then reads a stretch of its row before the next block of rows, pages and lines reused)
    n = trip_count(outs[-1]) or 0
    width = max(1, (caps or VECTOR_CAPS).register_bytes // val.dtype.itemsize)
    amount = next((a for a in (width, width // 2) if a >= 4 and n % a == 0 and a < n), None)
    if amount is None and inner is not None and inner > 0: return channel_lanes(outs, ld, n, width)
    if amount is None or inner is None or inner <= 0: return []
    opts, strides = [Opt("UPCAST", len(outs) - 1, amount)], strides + [inner * amount]
  elif (trip_count(outs[-1]) or 0) * val.dtype.itemsize < RUN_BYTES: return []
  if any(s is None or s <= 0 for s in strides): return []
  order, swaps = list(range(len(strides))), []
  for i in range(len(order)):
    j = max(range(i, len(order)), key=lambda t: strides[order[t]])
    if strides[order[j]] > strides[order[i]]:
      order[i], order[j] = order[j], order[i]
      swaps.append(Opt("SWAP", i, j))
  return opts + swaps if swaps else []

def channel_lanes(outs: list[UOp], ld: UOp, n: int, width: int) -> list[Opt]:
  """A transposing copy whose innermost loop no vector divides (a conv's channels-last GEMM output of 54 x 54 pixels made
  NCHW): a vector of the loop the load is consecutive in (the channels: each lane stores to its own plane), times 2 of the
  innermost loop when it is even (each lane stores a pair). Each source line is then read once, where the plain loops read
  each line once per channel in it: conv 8x64x56x56 * 64's copy to NCHW 1.2-1.5 -> 0.45-0.5 ms on one thread."""
  o = next((r for r in outs[:-1] if stride(ld, r) == 1 and (trip_count(r) or 0) % width == 0), None)
  if o is None: return []
  whole = trip_count(o) == width  # the loop is gone: the innermost one's axis shifts down
  return [Opt("UPCAST", outs.index(o), width)] + ([Opt("UPCAST", len(outs) - 1 - whole, 2)] if n % 2 == 0 and n > 2 else [])

def across_rows_opts(sink: UOp, outs: list[UOp], reds: list[UOp], caps: VectorCaps | None) -> list[Opt]:
  """UPCAST by one vector of the output loop that a reduction's loads are consecutive in, where they are not consecutive
  in a reduction loop: a per-channel sum over batch x pixels of channels-last data (BatchNorm's statistics
  of a conv's GEMM output) read one channel per pass reads each cache line once per channel in it (32 passes over 6.5 MB:
  17 ms; one vector of channels per pass: each line once). One vector (a cache line) per iteration keeps the loop over
  the rest of the lanes for the threads."""
  st = store_index(sink)
  qs = [q for q in sink.toposort() if q.op is Ops.REDUCE]
  if st is None or not qs or not outs or any(q.arg not in (Ops.ADD, Ops.MAX) or q.dtype.count != 1 for q in qs): return []
  # the loads the reductions stream, not consecutive along any reduction loop (a load that is: its lanes read as streams)
  lds = [ld for q in qs for ld in loads(q.src[0]) if any(r in ld.src[0].toposort() for r in q.src[1:])
         and not any(stride(ld.src[0].src[1], r) == 1 for r in reds)]
  width = max(1, (caps or VECTOR_CAPS).register_bytes // qs[0].dtype.itemsize)
  for o in reversed(outs):
    n = trip_count(o) or 0
    # the store may be strided along o (a pooled NCHW output of channels-last data): its lanes store apart
    if stride(st, o) is None or not any(stride(ld.src[0].src[1], o) == 1 for ld in lds): continue
    amount = next((a for a in (width, width // 2, width // 4) if a >= 4 and n % a == 0), None)
    if amount is not None and applies(sink, opt := Opt("UPCAST", outs.index(o), amount)): return [opt]
  return []

# ops an elementwise kernel's lanes compute in vectors (rules/vectorize.rules): such a kernel's innermost loop becomes lanes
VECTOR_ELEMENTWISE = frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.NEG, Ops.MAX, Ops.MULACC, Ops.WHERE, Ops.CMPLT, Ops.CMPNE,
                                Ops.CMPEQ, Ops.AND, Ops.OR})

def elementwise_opts(sink: UOp, outs: list[UOp], caps: VectorCaps | None) -> list[Opt]:
  """UPCAST of the innermost output loop by up to two vectors when the store is consecutive along it and every value the
  kernel computes is float32 arithmetic or a select that vectorizes: the kernel is written in vector ops, where gcc left a
  loop of guarded or strided reads (a conv's channels-last gradient copies, a backward's selects) scalar: 0.9 -> 0.46 ms,
  1.65 -> 1.28 ms in the seeds' CNN step."""
  st = store_index(sink)
  if caps is None or st is None or not outs or stride(st, outs[-1]) != 1: return []
  value = sink.src[0].src[1]
  if value.dtype is not dtypes.float32: return []
  topo = value.toposort(gate=lambda u: u.op is not Ops.INDEX)
  for u in topo:
    if u.op in GroupOp.ALU and (u.op not in VECTOR_ELEMENTWISE or u.dtype not in (dtypes.float32, dtypes.bool)):
      return []
  # a plain loop of consecutive reads gcc vectorizes by itself (a*b+c: lanes were 10% slower)
  def plain(ld: UOp) -> bool: return len(ld.src[0].src) == 2 and stride(ld.src[0].src[1], outs[-1]) in (0, 1)
  if all(plain(u) for u in topo if u.op is Ops.LOAD) and not any(u.op is Ops.WHERE for u in topo): return []
  width, n = max(1, caps.register_bytes // 4), trip_count(outs[-1]) or 0
  amount = next((a for a in (2 * width, width) if n % a == 0), None)
  return [o] if amount is not None and applies(sink, o := Opt("UPCAST", len(outs) - 1, amount)) else []

def group_opts(sink: UOp, outs: list[UOp], reds: list[UOp], group_max: int) -> list[Opt]:
  """GROUP of the reduction loops of GROUP_MIN iterations or more, whose reductions sit in at most two output loops (the
  grid's other dimensions) making GROUP_MAX_OUT iterations or fewer, every reduction over the loop a sum or max of 32-bit
  scalars: a full sum of 1M floats as one group of 256 work-items, softmax's rows (max and sum) as one group per row.
  Each loop by the largest of GROUP_SIZES dividing it (none: it stays a loop), every loop grouped by the same (one group
  size)."""
  from rules.lower_helpers import scope
  memo: dict = {}
  opts: list[Opt] = []
  size = None
  for k, r in enumerate(reds):
    n = trip_count(r) or 0
    qs = reductions_over(sink, r)
    if n < GROUP_MIN or not qs or any(q.arg not in (Ops.ADD, Ops.MAX) or q.src[1:] != (r,) for q in qs): continue
    around = frozenset().union(*(scope(q, memo) for q in qs))
    trips = [trip_count(o) for o in around]
    if len(around) > 2 or any(o not in outs for o in around) or None in trips or math.prod(trips) > GROUP_MAX_OUT: continue  # type: ignore
    # a store in a loop beside the group's (softmax's row of outputs) has its iterations shared by the work-items, which
    # pocl runs 200x slower than one work-item per row (and one of its builds corrupts memory on a variant): not chosen
    if any(o not in around for st in sink.src for o in output_loops(sink) if o in st.src[0].toposort()): continue
    g = size or next((g for g in GROUP_SIZES if g <= group_max and n % g == 0 and g < n), None)
    if g is None or n % g: continue
    # a GROUP adds no loop that an axis before its own counts: the next reduction's axis stays
    if applies(sink, o := Opt("GROUP", len(outs) + k, g)): opts.append(o); size = g  # noqa: E702
  return opts

def local_opts(sink: UOp, outs: list[UOp], reds: list[UOp], group_max: int) -> list[Opt]:
  """LOCAL of a matmul's reduction loop by the largest tile of LOCAL_SIZES that applies (tensor/codegen/opt.py checks the
  shape: a sum of products of two loads moving with different output loops, lengths the tile divides)."""
  for k in range(len(reds)):
    for t in LOCAL_SIZES:
      if t * t <= group_max and applies(sink, o := Opt("LOCAL", len(outs) + k, t)): return [o]
  return []

def hand_coded_opts(sink: UOp, caps: VectorCaps | None = None, group_max: int = 0, local_tiles: bool = False) -> list[Opt]:
  """The heuristic's Opt list for a kernel; `group_max`: the most work-items of a GROUP the target takes (0: none);
  `local_tiles`: a matmul is tiled through group memory (LOCAL: the target is a GPU)."""
  outs, reds = output_loops(sink), reduce_loops(sink)
  if group_max and (gr := group_opts(sink, outs, reds, group_max)): return gr
  if group_max and local_tiles and (lo := local_opts(sink, outs, reds, group_max)): return lo
  if (mm := matmul_opts(sink, caps)) is not None: return mm
  if (co := copy_order(sink, outs, reds, caps)): return co
  if (ar := across_rows_opts(sink, outs, reds, caps)): return ar
  if not reds and (ew := elementwise_opts(sink, outs, caps)): return ew
  # a stashed kernel (softmax) is not prefetched: its exp loop gives the hardware prefetcher time to keep up, and the
  # prefetches cost more than they saved (softmax (4096, 1024) on one Zen 5 core, kernel alone: 2.7 -> 2.1 ms)
  opts = stash_opts(sink, outs, reds) or prefetch_opts(sink, outs, reds) or matvec_prefetch(sink, outs, reds)
  lanes = 1
  # a long reduction over consecutive elements: interleaved partial accumulators (gcc makes them vector adds)
  unrolls: dict[int, int] = {}
  for k, r in enumerate(reds):
    n = trip_count(r) or 0
    qs = reductions_over(sink, r)
    # a short loop counts when it is the innermost of a reduction over nested loops as long in all (a quantized matvec's
    # 32 elements of each of its groups: lanes across the elements, one accumulator across the groups)
    total = min((math.prod(trip_count(x) or 0 for x in q.src[1:]) for q in qs), default=0)
    if not qs or (n < SPLIT_MIN and (total < SPLIT_MIN or n < 16)) or any(q.arg not in (Ops.ADD, Ops.MAX) or q.src[-1] is not r for q in qs):
      continue
    # the widest lanes dividing the loop (a row of 1000: 8 lanes), no fewer than 4
    want = max(4, min(16, SPLIT_BYTES // qs[0].dtype.itemsize))
    amount = next((a for a in (want, want // 2, want // 4) if a >= 4 and n % a == 0), want)
    moving = [ld for q in qs for ld in loads(q.src[0]) if r in ld.src[0].toposort()]
    if n % amount or not moving or any(stride(ld.src[0].src[1], r) != 1 for ld in moving): continue
    # a max over a row in the cache waits on each compare-and-select in turn: MAX_CHAINS vectors, that many chains (a
    # reordered max is the same max; a sum's bits would change)
    if all(q.arg is Ops.MAX for q in qs) and n % (amount * MAX_CHAINS) == 0 and n >= amount * MAX_CHAINS * 8: amount *= MAX_CHAINS
    # nested reductions multiply their lanes: stay within what apply_opts takes
    if lanes * amount > MAX_LANES: continue
    lanes *= amount
    unrolls[k] = amount
  # SPLITs first: a reduction of vectors (UNROLLed) is no longer split
  opts += split_opts(sink, outs, reds, unrolls) + [Opt("UNROLL", len(outs) + k, a) for k, a in unrolls.items()]
  # not a loop of 0 or 1 iterations: there is nothing to split into lanes (and apply_opt refuses it)
  if outs and (n := trip_count(outs[-1])) is not None and 2 <= n <= UPCAST_MAX and lanes * n <= MAX_LANES:
    # measured on matmul: splitting a longer loop into lanes made gcc's code 1-6x slower until lanes are vectors
    opts.append(Opt("UPCAST", len(outs) - 1, 0))
  return opts
