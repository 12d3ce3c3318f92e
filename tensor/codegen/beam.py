"""BEAM=n: the Opt list of a kernel found by timing candidates on the device instead of taken from the heuristic.

The search starts from the empty list and the heuristic's (tensor/codegen/heuristic.py); each round extends every list of
the beam by each single Opt that applies to the kernel as that list left it (UPCAST or UNROLL of a loop by a small factor,
TILE of a loop, SWAP of neighbouring output loops, STASH, PREFETCH, SPLIT or (GPU-style targets) GROUP of a reduction
loop, (GPU-style targets) LOCAL of a matmul's reduction loop, THREADS 1: one thread),
compiles the new candidates (two at a time: the compiler is another process), runs each a few times on buffers of the
kernel's sizes filled with random values, and keeps the n fastest lists.
It stops when a round finds nothing faster. A candidate without THREADS renders with the threads runtime/threads.py's
cost model gives it, so its timing includes them; THREADS 1 (tensor/codegen's THREADS_OPT) keeps the kernel on one.

The chosen list is kept on disk (runtime/kernel_cache.py's data entries) under a key made from the kernel's AST, the
device, the compiler, its flags and what -march=native means here, THREADS, the machine (vector registers, cores), n and
the version of the code that lowers kernels: a second process on the same kind of machine with the same BEAM takes it from
there without searching. DEBUG>=1 prints each search: candidates, seconds, the list and its speed
against the heuristic's.
"""
from __future__ import annotations
import hashlib, json, math, time
from concurrent.futures import ThreadPoolExecutor
import numpy as np
from runtime import kernel_cache
from runtime.dtype import PtrDType, dtypes
from runtime.helpers import DEBUG, getenv
from runtime.ops import Ops
from runtime.threads import THREADS, max_threads
from runtime.uop import UOp
from tensor.codegen import THREADS_OPT, ast_text, base_name, float_compute, linearize, lower_kernel, rangeify_simplified, render, split_threads
from tensor.codegen.heuristic import applies
from tensor.codegen.opt import Opt, OptError, apply_opts, lanes_of, output_loops, reduce_loops, trip_count
from tensor.codegen.program_cache import code_version
from tensor.codegen.target import Target

UPCASTS = (2, 3, 4, 8, 16)   # lanes an output loop may become (those that divide it)
UNROLLS = (2, 4, 8, 16)      # partial accumulators a reduction loop may become
TILES = (8, 32, 128)         # inner loop lengths of a TILE (cache blocking)
SPLITS = (16, 32)            # partials a whole tensor's reduction may become
GROUPS = (32, 256)           # work-items a reduction's group may have (GPU-style targets)
LOCALS = (8, 16)             # sides of a matmul's LOCAL tile (GPU-style targets: a group of side x side work-items)
RUNS = 3                     # runs per candidate: its time is the fastest
EARLY_STOP = 3.0             # a candidate whose first run is this many times slower than the best is not run again
MAX_ROUNDS = getenv("BEAM_ROUNDS", 8)
# lanes of all UPCASTs and UNROLLs of a candidate: past 256 copies of the body gcc takes seconds per kernel and the
# vectors spill anyway (the heuristic's matmul tile is 128)
MAX_LANES = getenv("BEAM_MAX_LANES", 256)
FORMAT = "1"                 # part of every key: a change of the stored layout makes new entries

# what the searches of this process did, like GlobalCounters (tests count compiles: a list taken from the cache compiles
# nothing); the chosen lists themselves are kept on the target (Target.searched) and on disk
stats = {"searches": 0, "compiles": 0, "cache_hits": 0}

def beam_opts(ast: UOp, target: Target, amount: int) -> list[Opt]:
  """The fastest Opt list BEAM=amount finds for a kernel AST on a target (from the caches when a search ran before)."""
  key = cache_key(ast, target, amount)
  if (opts := target.searched.get(key)) is None and (opts := _load(key)) is not None: stats["cache_hits"] += 1
  if opts is None:
    opts = search(ast, target, amount)
    kernel_cache.store_data(key, json.dumps([list(o) for o in opts]).encode())
  target.searched[key] = opts
  return opts

def cache_key(ast: UOp, target: Target, amount: int) -> str:
  device = target.device
  parts = ["beam", FORMAT, ast_text(ast), device, str(amount), str(int(THREADS)), target.machine(), code_version()]
  if device != "PYTHON":
    from runtime.ops_cpu import cflags, compiler_version, native_target
    parts += [" ".join(cflags()), compiler_version(), native_target()]
  return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]

def _load(key: str) -> list[Opt] | None:
  data = kernel_cache.load_data(key)
  if data is None: return None
  try: return [Opt(*o) for o in json.loads(data)]
  except (ValueError, TypeError): return None  # a damaged entry: search again

def actions(sink: UOp, group_max: int = 0) -> list[Opt]:
  """The single Opts to try on a kernel as an Opt list left it (some may still fail to apply: apply_opt decides);
  `group_max`: the most work-items of a GROUP on the target (0: no GROUPs)."""
  outs, reds = output_loops(sink), reduce_loops(sink)
  room = MAX_LANES // lanes_of(sink)
  out: list[Opt] = []
  for axis, r in enumerate(outs + reds):
    n = trip_count(r)
    if n is None or n < 2: continue
    kind = "UPCAST" if axis < len(outs) else "UNROLL"
    out += [Opt(kind, axis, k) for k in (UPCASTS if kind == "UPCAST" else UNROLLS) if k <= min(n, room) and n % k == 0]
    out += [Opt("TILE", axis, k) for k in TILES if k < n and n % k == 0 and n // k >= 2]
    if kind == "UNROLL":  # a reduction's values kept for the output, the next row prefetched, partials for threads: where they apply
      out += [o for o in [Opt("STASH", axis, 0), Opt("PREFETCH", axis, 1), *(Opt("SPLIT", axis, k) for k in SPLITS if k < n and n % k == 0),
                          *(Opt("GROUP", axis, k) for k in GROUPS if k <= group_max and k < n and n % k == 0),
                          *(Opt("LOCAL", axis, k) for k in LOCALS if k * k <= group_max and n % k == 0)] if applies(sink, o)]
  out += [Opt("SWAP", a, a + 1) for a in range(len(outs) - 1)]
  if max_threads() > 1: out.append(Opt(THREADS_OPT, 0, 1))  # one thread, whatever the cost model says
  return out

def search(ast: UOp, target: Target, amount: int) -> list[Opt]:
  from tensor.codegen.heuristic import hand_coded_opts
  start = time.perf_counter()
  stats["searches"] += 1
  sink, ctx = rangeify_simplified(ast)
  sink = float_compute(sink)  # as lower_kernel sees it
  heuristic = hand_coded_opts(sink, target.caps, target.renderer.group_max, target.renderer.local_tiles)
  first_id = max([ctx.next_range] + [u.arg + 1 for u in sink.toposort() if u.op is Ops.RANGE])
  bench = _Bench(ast, target)
  beam = bench.time([[], heuristic])
  if not beam: return heuristic  # nothing compiled (a kernel the searcher can't run): the default
  for _ in range(MAX_ROUNDS):
    cands = []
    for opts, _t in beam:
      ids = iter(range(first_id + 1000, first_id + 100000))  # ids for the loops the Opts add (numbering only)
      loop_opts, threads = split_threads(opts)
      try: applied, _ = apply_opts(sink, loop_opts, lambda: next(ids))
      except OptError: continue
      cands += [opts + [a] for a in actions(applied, target.renderer.group_max) if not (threads and a.op == THREADS_OPT)]
    timed = bench.time(cands)
    best = sorted({tuple(o): (o, t) for o, t in beam + timed}.values(), key=lambda x: x[1])[:amount]
    if best[0][1] >= beam[0][1]: break
    beam = best
  opts, t = beam[0]
  if DEBUG >= 1:
    th = bench.times.get(bench.srcs.get(tuple(heuristic), ""), math.inf)
    print(f"beam: {base_name(ast)} {bench.count} candidates {time.perf_counter() - start:.1f} s -> opts {opts} "
          f"{th / t:.2f}x over heuristic ({t * 1e6:.0f} us)")
  return opts

class _Bench:
  """Lowers, compiles and times Opt lists of one kernel on buffers of its sizes (through codegen and the target's compiler);
  each distinct source is timed once."""
  def __init__(self, ast: UOp, target: Target):
    self.ast, self.target = ast, target
    self.bufs: list | None = None
    self.vals: tuple = ()
    self.srcs: dict[tuple, str] = {}     # Opt list -> its source ("" when it does not apply)
    self.times: dict[str, float] = {}    # source -> seconds per run
    self.count = 0

  def time(self, cands: list[list[Opt]]) -> list[tuple[list[Opt], float]]:
    """(list, seconds) of each candidate that applies and runs, in the order given."""
    fresh: dict[str, tuple[list[Opt], list]] = {}
    for opts in cands:
      if tuple(opts) in self.srcs: continue
      src, uops = self._render(opts)
      self.srcs[tuple(opts)] = src
      if src and src not in self.times and src not in fresh: fresh[src] = (opts, uops)
    if fresh:
      if self.bufs is None: self._buffers(next(iter(fresh.values()))[1])
      with ThreadPoolExecutor(2) as pool: progs = list(pool.map(self._compile, fresh))
      stats["compiles"] += len(fresh)
      self.count += len(fresh)
      best = min(self.times.values(), default=math.inf)
      for src, prog in zip(fresh, progs):
        self.times[src] = t = math.inf if prog is None else self._run(prog, best)
        best = min(best, t)
    return [(o, self.times[s]) for o in cands if (s := self.srcs.get(tuple(o))) and self.times.get(s, math.inf) < math.inf]

  def _render(self, opts: list[Opt]) -> tuple[str, list]:
    try: sink, _ = lower_kernel(self.ast, self.target, opts)
    except OptError: return "", []
    except Exception as e:  # noqa: BLE001  a candidate the lowering can't take is skipped, not the user's program stopped
      if DEBUG >= 2: print(f"beam: {opts} does not lower: {type(e).__name__}: {e}")
      return "", []
    uops = linearize(sink)
    return render(self.target, "beam_kernel", uops, opts), uops  # type: ignore[return-value]

  def _compile(self, src: str):
    from runtime.device import CompileError
    try: return self.target.compile(src, "beam_kernel")
    except CompileError: return None

  def _buffers(self, uops: list) -> None:
    rng = np.random.default_rng(0)
    self.bufs = []
    for u in sorted((u for u in uops if u.op is Ops.DEFINE_GLOBAL), key=lambda u: u.arg):
      assert isinstance(u.dtype, PtrDType)
      dt = u.dtype.base.scalar
      b = self.target.allocate(max(1, u.dtype.size), dt)
      a = b.host_array().copy()
      # floats in [-1, 1); integers 1 (a loaded index stays in bounds, a loaded divisor is not zero)
      if dtypes.is_float(dt) and dt is not dtypes.bfloat16: a[:] = rng.uniform(-1, 1, a.shape).astype(a.dtype)
      else: a[:] = 1 if dt is not dtypes.bfloat16 else 0x3f80
      b.copyin(a)
      self.bufs.append(b)
    # a symbolic size at its largest; a parameter (a constant passed in) 1
    self.vals = tuple(1.0 if dtypes.is_float(u.dtype) else u.arg[2] for u in uops if u.op is Ops.DEFINE_VAR)

  def _run(self, prog, best: float) -> float:
    out = math.inf
    for _ in range(RUNS):
      t0 = time.perf_counter()
      prog(self.bufs, self.vals)
      out = min(out, time.perf_counter() - t0)
      if out > EARLY_STOP * best: break
    return out
