"""Tensors whose bytes come from an open file, read into their device buffer when first used: the lazy loading under
safe_load (tensor/nn/state.py) and gguf_load (tensor/gguf.py). At the frontend's level, so tensor.llm can read GGUF
files without importing tensor.nn."""
from __future__ import annotations
import math, mmap, os
from typing import Any
import numpy as np
from runtime.device import _BORROWED, Buffer, Device
from runtime.dtype import DType, dtypes
from runtime.helpers import GlobalCounters
from tensor.engine.state import ENGINE
from tensor.engine.storage import realized_buffer
from tensor.tensor import Tensor, buffer_uop

class _FileBytes:
  """An open file that loaded tensors read their bytes from (closed when the last of them is gone). By default read with
  positioned reads: a file truncated after loading (`cp` over it) is a short read and an error, where a mapped page past
  the new end kills the process with SIGBUS on first use. With `mapped` (gguf_load: model files of hundreds of MB that
  nobody rewrites while they run) a host device's buffers are the file's pages themselves, mapped copy-on-write: no copy
  into new memory (Gemma 3 270M: 253 MB read and first touched, ~0.4 s), and a kernel writing into one changes this
  process's copy only."""
  def __init__(self, fn: Any, f, error: type[ValueError], loader: str, mapped: bool = False):
    self.fn, self.f, self.error, self.loader = fn, f, error, loader  # the reader's error class and name (tensor/gguf.py's too)
    self.mapped, self._map = mapped, None

  def map_range(self, begin: int, n: int, what: str) -> np.ndarray:
    """Bytes [begin, begin + n) of the file as a writable array over its copy-on-write mapping (made on first use, of the
    file as it is then: a range past its end is the reader's error, never an access past the mapping)."""
    if self._map is None:
      size = os.fstat(self.f.fileno()).st_size
      self._map = np.frombuffer(mmap.mmap(self.f.fileno(), size, access=mmap.ACCESS_COPY), np.uint8) if size else np.empty(0, np.uint8)
    if begin < 0 or begin + n > len(self._map):
      raise self.error(f"{self.fn}: {what} needs bytes [{begin}, {begin + n}) of the file but it now has {len(self._map)}: it "
                       f"changed after {self.loader} (overwritten or truncated); load it again")
    return self._map[begin:begin + n]

  def read_into(self, out: memoryview, begin: int, what: str) -> None:
    # pread: at a position, from the file as it is now (a buffered reader could answer from bytes it read ahead earlier)
    fd, got = self.f.fileno(), 0
    while got < len(out):
      if hasattr(os, "preadv"): k = os.preadv(fd, [out[got:]], begin + got)
      else:
        chunk = os.pread(fd, min(len(out) - got, 1 << 24), begin + got)
        out[got:got + len(chunk)] = chunk
        k = len(chunk)
      if k == 0: break
      got += k
    if got != len(out):
      size = os.fstat(self.f.fileno()).st_size
      raise self.error(f"{self.fn}: {what} needs bytes [{begin}, {begin + len(out)}) of the file but it now has {size}: it changed "
                       f"after {self.loader} (overwritten or truncated); load it again")

  def __del__(self) -> None:
    try: self.f.close()
    except Exception: pass  # noqa: BLE001 - at interpreter exit anything may be gone

class FileBuffer(Buffer):
  """A device buffer whose first contents are bytes of a file (safetensors, GGUF), read in when the buffer is first allocated."""
  __slots__ = ("_source", "own_memory")
  def __init__(self, device: str, size: int, dtype: DType, source: tuple[_FileBytes, int, str] | None):
    super().__init__(device, size, dtype)
    self._source = source
    # read into memory of its own even from a mapped file: bytes that every decode step streams through run ~20% faster
    # from anonymous memory (numpy's large allocations get transparent huge pages; the file's pages are 4 KB: TLB misses)
    self.own_memory = False
  def ensure_allocated(self) -> Buffer:
    if self.is_allocated(): return self
    if self._source is not None and self._source[0].mapped and not self.own_memory and self.nbytes and self.allocator.host and self.base is None:
      # the file's pages as this buffer's memory: a view of an owner that is never freed or pooled (Buffer.borrow's way)
      src, begin, what = self._source
      owner = Buffer(self.device, self.nbytes, dtypes.uint8)
      owner._buf, owner._allocator = src.map_range(begin, self.nbytes, what), _BORROWED
      GlobalCounters.mem_used += self.nbytes  # counted out again when the owner goes
      self.base, self.offset, self._source = owner, 0, None
      return super().ensure_allocated()
    super().ensure_allocated()
    if self._source is not None and self.nbytes:
      src, begin, what = self._source
      try:
        if self._array is not None: src.read_into(memoryview(self._array.view(np.uint8)), begin, what)
        else:  # device memory: read on the host, then copy in
          staging = np.empty(self.nbytes, dtype=np.uint8)
          src.read_into(memoryview(staging), begin, what)
          self.allocator.copyin(self._buf, staging)
      except BaseException:  # not allocated after all: a later use must not see the bytes that were not read
        if not self.allocator.host: self.allocator.free(self._buf, self.nbytes)
        self._buf, self._array, self._ptr = None, None, 0
        GlobalCounters.mem_used -= self.nbytes
        raise
    self._source = None  # the file can close once every tensor of it is in memory
    return self
  def is_loaded(self) -> bool:
    """Whether the file's bytes have been copied in yet."""
    return self._source is None

def _lazy_tensor(src: _FileBytes, begin: int, end: int, dtype: DType, shape: tuple[int, ...], device: str | None, name: str = "") -> Tensor:
  n = math.prod(shape)
  what = f"tensor {name!r}" if name else "the file's bytes"
  u = buffer_uop(FileBuffer(Device.canonicalize(device), n, dtype, (src, begin, what)))
  t = Tensor(u)
  return t.reshape(shape) if shape != (n,) else t

def keep_in_memory(t: Tensor) -> Tensor:
  """t (a tensor of a file's bytes, gguf_load's) read into memory of its own when first used, not left on the file's
  mapped pages: for bytes that are read again and again (a quantized weight a matmul reads in place). Returns t."""
  if (b := file_buffer(t)) is not None and not b.is_allocated(): b.own_memory = True
  return t

def file_buffer(t: Tensor) -> FileBuffer | None:
  """The FileBuffer behind a tensor safe_load or gguf_load returned (None for any other tensor): tells whether it was
  copied in yet."""
  b = ENGINE.storage.buffers.get(u) if (u := realized_buffer(t.uop)) is not None else None
  return b if isinstance(b, FileBuffer) else None
