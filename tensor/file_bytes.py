"""Tensors whose bytes come from an open file, read into their device buffer when first used: the lazy loading under
safe_load (tensor/nn/state.py) and gguf_load (tensor/gguf.py). At the frontend's level, so tensor.llm can read GGUF
files without importing tensor.nn."""
from __future__ import annotations
import math, os
from typing import Any
import numpy as np
from runtime.device import Buffer, Device
from runtime.dtype import DType
from runtime.helpers import GlobalCounters
from tensor.tensor import Tensor, buffer_uop

class _FileBytes:
  """An open file that loaded tensors read their bytes from (closed when the last of them is gone). Read with positioned
  reads, not a memory map: a file truncated after loading (`cp` over it) is a short read and an error, where a mapped page
  past the new end killed the process with SIGBUS on first use."""
  def __init__(self, fn: Any, f, error: type[ValueError], loader: str):
    self.fn, self.f, self.error, self.loader = fn, f, error, loader  # the reader's error class and name (tensor/gguf.py's too)

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
  __slots__ = ("_source",)
  def __init__(self, device: str, size: int, dtype: DType, source: tuple[_FileBytes, int, str] | None):
    super().__init__(device, size, dtype)
    self._source = source
  def ensure_allocated(self) -> Buffer:
    if self.is_allocated(): return self
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
