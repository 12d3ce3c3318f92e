"""Data parallelism across processes and machines on MPI (mpi4py, the optional extra [mpi]; any MPI implementation):
rank(), world_size(), barrier(), all_reduce, broadcast, and average_gradients (a list of parameters' gradients in one
message). A process started without mpirun is a world of one rank, so one script runs both ways. docs/distributed.md.

A collective waits at most TIMEOUT seconds (env TENSOR_MPI_TIMEOUT, default 300) for the other ranks; past it, or when a
rank dies of an exception, the job is stopped (MPI_Abort) with a message saying why, rather than left hanging.
"""
from __future__ import annotations
import os, sys, threading, time, zlib
from typing import Any, Iterable
import numpy as np
from runtime.device import Buffer, pooled
from runtime.dtype import DType, dtypes
from runtime.ops import Ops
from tensor.engine.jit import JitError
from tensor.engine.state import ENGINE
from tensor.engine.storage import realized_buffer
from tensor.tensor import Tensor, buffer_uop

TIMEOUT = float(os.environ.get("TENSOR_MPI_TIMEOUT", "300"))
# what a launcher sets in each process it starts: Open MPI, MPICH/Hydra and Intel MPI, PMIx, Slurm's srun with PMI
_LAUNCHER_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS", "HYDI_CONTROL_FD")
INSTALL = "pip install 'rulegrad[mpi]' (mpi4py) and an MPI implementation (Debian: apt-get install openmpi-bin libopenmpi-dev)"

class DistributedError(RuntimeError):
  """A collective that can't run: ranks that disagree on a tensor's shape or dtype, an op MPI has no reduction for, a
  collective inside a TinyJit capture, mpirun without mpi4py."""

_world: list = []  # [communicator or None], set on first use

def _comm() -> Any:
  """MPI.COMM_WORLD under a launcher (mpirun, srun), None for a process started alone (a world of one)."""
  if _world: return _world[0]
  comm = None
  if any(v in os.environ for v in _LAUNCHER_VARS):
    try: from mpi4py import MPI
    except ImportError as e: raise DistributedError(f"started by an MPI launcher but mpi4py can't be imported ({e}): {INSTALL}") from None
    comm = MPI.COMM_WORLD
    if comm.Get_size() > 1: _abort_on_uncaught_exceptions(comm)
  _world.append(comm)
  return comm

def _abort_on_uncaught_exceptions(comm: Any) -> None:
  # a rank that dies of an exception stops the job: the others would otherwise wait in their next collective forever
  previous = sys.excepthook
  def hook(kind, value, tb):
    previous(kind, value, tb)
    sys.stderr.write(f"rank {comm.Get_rank()} of {comm.Get_size()} died of {kind.__name__}: stopping every rank\n")
    sys.stderr.flush()
    comm.Abort(1)
  sys.excepthook = hook

def rank() -> int:
  """This process's rank, 0 to world_size() - 1 (0 without mpirun)."""
  return 0 if (c := _comm()) is None else c.Get_rank()

def world_size() -> int:
  """The number of processes in the job (1 without mpirun)."""
  return 1 if (c := _comm()) is None else c.Get_size()

class _Watchdog:
  """Stops the job when a collective has waited TIMEOUT seconds: a thread that looks at the current collective's deadline
  twice a second. (Collectives themselves block in MPI, which drives them fastest; mpi4py lets go of the GIL meanwhile.)"""
  def __init__(self, comm: Any):
    self.comm, self.what, self.deadline = comm, "", 0.0
    threading.Thread(target=self._watch, name="tensor.distributed watchdog", daemon=True).start()

  def _watch(self) -> None:
    while True:
      time.sleep(0.5)
      if self.deadline and time.monotonic() > self.deadline:
        sys.stderr.write(f"rank {self.comm.Get_rank()}: {self.what} waited {TIMEOUT:.0f} s for the other ranks (TENSOR_MPI_TIMEOUT); "
                         "one of them has died or stopped calling collectives: stopping the job\n")
        sys.stderr.flush()
        self.comm.Abort(1)

  def run(self, what: str, call, *args) -> None:
    self.what, self.deadline = what, time.monotonic() + TIMEOUT
    try: call(*args)
    finally: self.deadline = 0.0

def _run(comm: Any, what: str, call, *args) -> None:
  """call(*args), a blocking collective of comm, under the watchdog."""
  if not _watchdog: _watchdog.append(_Watchdog(comm))
  _watchdog[0].run(what, call, *args)

_watchdog: list[_Watchdog] = []

def barrier() -> None:
  """Wait until every rank gets here."""
  _outside_capture("barrier")
  if (comm := _comm()) is not None and comm.Get_size() > 1: _run(comm, "barrier()", comm.Barrier)

# MPI reduces numpy's standard types; half, bfloat16 and bool travel as a type it has and come back
_CARRIER = {dtypes.float16: dtypes.float32, dtypes.bfloat16: dtypes.float32, dtypes.bool: dtypes.int32}

def _same_everywhere(comm: Any, what: str, shape: tuple, dtype: DType, extra: str = "") -> None:
  # every rank must pass the same shape and dtype: a mismatch would read or write past a buffer on some rank. (The
  # signature is a CRC, not hash(): string hashes differ between processes.)
  sig = zlib.crc32(repr((shape, dtype.name, extra)).encode())
  mine, out = np.array([sig, -sig], np.int64), np.empty(2, np.int64)
  from mpi4py import MPI
  _run(comm, what, comm.Allreduce, mine, out, MPI.MAX)
  if out[0] != sig or out[1] != -sig:
    raise DistributedError(f"{what}: the ranks passed tensors of different shapes or dtypes (rank {comm.Get_rank()} has "
                           f"{shape} {dtype}): every rank must pass the same")

def _outside_capture(what: str) -> None:
  # refused in a world of one rank too, so a script that works alone works under mpirun
  if ENGINE.capturing:
    raise JitError(f"{what} inside a TinyJit capture: the replay would not call MPI; run it between two jitted functions "
                   "(docs/distributed.md)")

def _host_source(t: Tensor) -> tuple[np.ndarray, Tensor]:
  """t's values in host memory (the buffer's own memory on a host device, no copy) and the realized tensor holding them
  (a tensor on several devices: gathered on the first)."""
  if t.device.__class__ is tuple: t = t.to(t.device[0])
  t = t.contiguous().realize() if not t.is_realized() else t.realize()
  buf, _ = t._buffer()
  return buf.host_array(), t

# MPI is slow into memory the process has just mapped: Open MPI's shared-memory transport took 2.4x as long for a 1 MB
# message (4 MB: 4x, 16 MB: 1.3x) into a new tensor's memory as into memory used before. A result therefore receives in
# place only when its buffer gets a freed buffer's memory (runtime/device.py's pool: a loop that drops each result); else
# into one staging block kept for the process, grown to the largest message so far, then copied (1 MB: ~25 us).
_staging: list[np.ndarray] = [np.empty(0, np.uint8)]

def _staged(n: int, np_dtype: np.dtype) -> np.ndarray:
  """n elements of np_dtype in the process's staging block (valid until the next collective)."""
  nbytes = n * np_dtype.itemsize
  if _staging[0].nbytes < nbytes: _staging[0] = np.empty(nbytes, np.uint8)
  return _staging[0][:nbytes].view(np_dtype)

def _tensor_from(device: str | tuple, dtype: DType, shape: tuple, fill) -> Tensor:
  """A new realized tensor on `device` whose values `fill(array)` writes: into its own memory where that was used before,
  else into the staging block and copied; on a tuple of devices, made on the first and laid out whole on each."""
  if device.__class__ is tuple: return _tensor_from(device[0], dtype, shape, fill).to(device).realize()
  n = int(np.prod(shape, dtype=np.int64))
  buf = Buffer(device, n, dtype)
  if buf.allocator.host and pooled(buf.nbytes, dtype): fill(buf.as_array())
  else:
    staging = _staged(n, np.dtype(dtypes.to_numpy(dtype)))  # half, bfloat16 and bool never get here (_CARRIER)
    fill(staging)
    if buf.allocator.host: np.copyto(buf.as_array(), staging)
    else: buf.copyin(staging)
  out = Tensor(buffer_uop(buf))
  return out.reshape(shape) if shape != (n,) else out

def all_reduce(t: Tensor, op: str = "sum") -> Tensor:
  """The elementwise sum, mean or max of `t` over every rank, as a new Tensor on t's device (t's values without mpirun).
  Every rank must call it with the same shape and dtype; a mean of integers is a float tensor."""
  if op not in ("sum", "mean", "max"): raise DistributedError(f"all_reduce: op must be 'sum', 'mean' or 'max', not {op!r}")
  _outside_capture("all_reduce")
  comm = _comm()
  if comm is None or comm.Get_size() == 1:
    return t.float() if op == "mean" and not dtypes.is_float(t.dtype) else t.contiguous()
  if (carrier := _CARRIER.get(t.dtype)) is not None: return all_reduce(t.cast(carrier), op).cast(t.dtype if op != "mean" else carrier)
  from mpi4py import MPI
  _same_everywhere(comm, f"all_reduce({op})", t.shape, t.dtype, op)
  device, (src, t) = t.device, _host_source(t)
  def fill(dst: np.ndarray) -> None:
    if t.numel(): _run(comm, f"all_reduce({op})", comm.Allreduce, src, dst, MPI.MAX if op == "max" else MPI.SUM)
  out = _tensor_from(device, t.dtype, t.shape, fill)
  return out / comm.Get_size() if op == "mean" else out

def broadcast(t: Tensor, root: int = 0) -> Tensor:
  """Rank `root`'s `t` on every rank, as a new Tensor on each rank's device. Every rank passes a tensor of the same shape
  and dtype (the others' values are not read)."""
  _outside_capture("broadcast")
  comm = _comm()
  if comm is None or comm.Get_size() == 1:
    if root != 0: raise DistributedError(f"broadcast: root {root} in a world of 1 rank")
    return t.contiguous()
  if not 0 <= root < comm.Get_size(): raise DistributedError(f"broadcast: root {root} is not a rank (0 to {comm.Get_size() - 1})")
  if (carrier := _CARRIER.get(t.dtype)) is not None and t.dtype is not dtypes.bool: return broadcast(t.cast(carrier), root).cast(t.dtype)
  _same_everywhere(comm, "broadcast", t.shape, t.dtype, str(root))
  device, (src, t) = t.device, _host_source(t)
  def fill(dst: np.ndarray) -> None:
    if comm.Get_rank() == root: dst[:] = src
    if t.numel(): _run(comm, "broadcast", comm.Bcast, dst.view(np.uint8), root)
  return _tensor_from(device, t.dtype, t.shape, fill)

def average_gradients(params: Iterable[Tensor]) -> None:
  """Replace each parameter's gradient by its mean over every rank, in place (the gradient keeps its buffer, so a TinyJit
  that computed it and one that reads it stay valid), sending all of them as one message. Parameters without a gradient
  are skipped (every rank must skip the same ones). Call it between backward() and the optimizer's step."""
  _outside_capture("average_gradients")
  comm = _comm()
  if comm is None or comm.Get_size() == 1: return
  grads = [p.grad for p in params if p.grad is not None]
  if not grads: return
  if any(g.dtype not in (dtypes.float32, dtypes.float64) for g in grads):
    raise DistributedError(f"average_gradients: gradients of {sorted({g.dtype.name for g in grads})}; float32 or float64 only")
  wide = dtypes.float64 if any(g.dtype is dtypes.float64 for g in grads) else dtypes.float32
  Tensor.realize(*grads)
  for i, g in enumerate(grads):  # a gradient that is not a buffer of its own (a broadcast constant) becomes one
    if not g.is_realized() and g.uop.op is not Ops.MULTI: grads[i] = g.replace(g.contiguous().realize())
  bufs = [_shard_buffers(g) if g.uop.op is Ops.MULTI else g._buffer()[0] for g in grads]
  parts = [_host_whole(g, b) for g, b in zip(grads, bufs)]
  flat = _staged(sum(p.size for p in parts), np.dtype(dtypes.to_numpy(wide)))  # one message, in the staging block
  np.concatenate(parts, out=flat, casting="same_kind")
  _same_everywhere(comm, "average_gradients", tuple(g.shape for g in grads), wide)
  from mpi4py import MPI
  _run(comm, "average_gradients", comm.Allreduce, MPI.IN_PLACE, flat, MPI.SUM)
  flat /= comm.Get_size()
  at = 0
  for g, b in zip(grads, bufs):
    n = int(np.prod(g.shape, dtype=np.int64)) if isinstance(b, list) else b.size
    if isinstance(b, list): _copyin_shards(g, b, flat[at:at + n])
    else: b.copyin(flat[at:at + n])
    at += n

# a gradient on several devices (tensor/multi.py): the message carries the whole of it; each device's buffer gets its part back

def _shard_buffers(g: Tensor) -> list:
  """The buffers of a multi-device tensor's shards (made buffers of their own first where they are not)."""
  if not all(realized_buffer(s) is not None for s in g.uop.src): g.replace(g.contiguous().realize())
  return [ENGINE.storage.buffers[realized_buffer(s)] for s in g.uop.src]

def _host_whole(g: Tensor, b) -> np.ndarray:
  if not isinstance(b, list): return b.host_array()
  if g.uop.arg is None: return b[0].host_array()
  return np.concatenate([x.host_array().reshape(s.shape) for x, s in zip(b, g.uop.src)], axis=g.uop.arg).ravel()

def _copyin_shards(g: Tensor, bufs: list, whole: np.ndarray) -> None:
  if g.uop.arg is None:
    for b in bufs: b.copyin(np.ascontiguousarray(whole))
    return
  for b, part in zip(bufs, np.split(whole.reshape(g.shape), len(bufs), axis=g.uop.arg)): b.copyin(np.ascontiguousarray(part).ravel())

__all__ = ["rank", "world_size", "barrier", "all_reduce", "broadcast", "average_gradients", "DistributedError", "TIMEOUT"]
