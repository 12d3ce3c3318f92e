"""Devices and buffers: where tensors live and where kernels run.

`Device[name]` is a device (CPU compiles C, PYTHON interprets); `Device.DEFAULT` picks the best available (override
with DEV=NAME, or CPU=1 / PYTHON=1). A `Buffer` is a typed block of device memory; both devices keep it in host memory.
"""
from __future__ import annotations
import importlib, os, sys, warnings
from typing import Any, Callable
import numpy as np
from runtime.dtype import DType, dtypes
from runtime.helpers import GlobalCounters

class DeviceError(Exception):
  """Root of the errors a device raises."""

class CompileError(DeviceError):
  """A kernel did not compile, or there is no compiler."""

# SANITIZE=1 (kernels built with AddressSanitizer, see runtime/ops_cpu.py): buffers get no slack around them
_SANITIZE = os.environ.get("SANITIZE", "") not in ("", "0")

def _storage(dtype: DType) -> np.dtype:
  # bfloat16 has no numpy type: its bits live in uint16
  return np.dtype(np.uint16) if dtype.scalar is dtypes.bfloat16 else dtypes.to_numpy(dtype.scalar)

class Buffer:
  """`size` elements of `dtype` on `device`, allocated on first use. Host memory on every device we have.
  With `base`, a typed view of the base buffer's bytes from `offset` (memory planning puts buffers in shared blocks)."""
  __slots__ = ("device", "size", "dtype", "nbytes", "base", "offset", "_array", "_ptr", "__weakref__")
  def __init__(self, device: str, size: int, dtype: DType, initial: np.ndarray | None = None, base: Buffer | None = None, offset: int = 0):
    self.device, self.size, self.dtype, self.base, self.offset = device, size, dtype, base, offset
    self.nbytes: int = size * dtype.itemsize  # an attribute, not a property: allocating and freeing read it several times
    if base is not None and offset + self.nbytes > base.nbytes:
      raise DeviceError(f"a view of {self.nbytes} bytes at offset {offset} does not fit its base of {base.nbytes} bytes")
    self._array: np.ndarray | None = None
    self._ptr = 0
    if initial is not None: self.copyin(initial)

  def is_allocated(self) -> bool: return self._array is not None
  def ensure_allocated(self) -> Buffer:
    if self._array is None and self.base is not None:
      raw = self.base.as_array().view(np.uint8)
      self._array = raw[self.offset:self.offset + self.nbytes].view(_storage(self.dtype))
      self._ptr = self._array.ctypes.data
    elif self._array is None:
      if (free := _pool.get((self.nbytes, self.dtype))):  # a freed buffer of this size and dtype: no allocation
        self._array, self._ptr = free.pop()
        _pooled[0] -= 1
      elif _SANITIZE:  # exactly the buffer's bytes, so AddressSanitizer sees any access past either end
        self._array = np.empty(self.nbytes, dtype=np.uint8).view(_storage(self.dtype))
        self._ptr = self._array.ctypes.data
      else:
        # 64-byte aligned, so vector loads in kernels never straddle cache lines
        raw = np.empty(self.nbytes + 64, dtype=np.uint8)
        off = (-(p := raw.ctypes.data)) % 64
        self._array = raw[off:off + self.nbytes].view(_storage(self.dtype))
        self._ptr = p + off  # ctypes.data costs a microsecond and a half: read once
      GlobalCounters.mem_used += self.nbytes
    return self

  def as_array(self) -> np.ndarray:
    """The buffer's memory as a 1-D numpy array (a view: writes go to the buffer)."""
    return self.ensure_allocated()._array  # type: ignore[return-value]
  @property
  def ptr(self) -> int: return self.ensure_allocated()._ptr

  def copyin(self, data: np.ndarray) -> Buffer:
    src = np.ascontiguousarray(data).reshape(-1)
    if src.size != self.size: raise DeviceError(f"copyin of {src.size} elements into a buffer of {self.size}")
    self.as_array()[:] = src.view(_storage(self.dtype)) if src.dtype != _storage(self.dtype) and src.itemsize == self.dtype.itemsize else src
    return self
  def numpy(self) -> np.ndarray:
    """A copy of the contents, as numpy's type for the dtype (bfloat16 comes out as float32)."""
    a = self.as_array().copy()
    if self.dtype.scalar is dtypes.bfloat16: return (a.astype(np.uint32) << 16).view(np.float32)
    return a

  def __del__(self):
    # a view's memory is its base's, counted once there
    if self._array is not None and self.base is None:
      try:
        GlobalCounters.mem_used -= self.nbytes
        _recycle(self)
      except (AttributeError, TypeError): pass
  def __repr__(self) -> str: return f"<Buffer {self.device} {self.size} {self.dtype}>"

# small freed buffers by (nbytes, dtype): eager code frees a result and makes one of the same kind on every op, and numpy's
# allocation plus reading the pointer costs ~10 us; at most POOL_BUFFERS kept, each at most POOL_BYTES. The host allocator's
# free list: one for the process, as the host memory it recycles is
POOL_BUFFERS, POOL_BYTES = 64, 1 << 16
_pool: dict[tuple[int, DType], list[tuple[np.ndarray, int]]] = {}
_pooled = [0]

def _recycle(b: Buffer) -> None:
  """Keep a dying buffer's memory for the next one of its kind, unless a view of it may be alive elsewhere (anything holding
  the array, or another view of its raw block, shows in the reference counts)."""
  a = b._array
  if _SANITIZE or _pooled[0] >= POOL_BUFFERS or b.nbytes > POOL_BYTES or a is None: return
  # references: b._array, `a`, getrefcount's argument; the raw block: a.base and the argument
  if sys.getrefcount(a) != 3 or a.base is None or sys.getrefcount(a.base) != 2: return
  _pool.setdefault((b.nbytes, b.dtype), []).append((a, b._ptr))
  _pooled[0] += 1

class Compiled:
  """A device: `program(source, name)` turns a kernel's source (rendered for this device by the tensor layer) into a
  callable prog(buffers, var_vals)."""
  def __init__(self, name: str, program: Callable[[Any, str], Callable]):
    self.name, self.program = name, program
  def synchronize(self) -> None:
    """Wait for queued work: our devices run kernels synchronously, so there is none."""
  def __repr__(self) -> str: return f"<Device {self.name}>"

# each device's module, loaded by name on first use (so this module imports none of them): it gives device(), the device,
# and available(), whether this machine can run it; the best first (Device.DEFAULT is the first available)
_BACKENDS = {"CPU": "runtime.ops_cpu", "PYTHON": "runtime.ops_python"}

class _DeviceRegistry:
  def __init__(self):
    self._devices: dict[str, Compiled] = {}
    self._default: str | None = None

  def canonicalize(self, name: str | None) -> str:
    if name is None: return self.DEFAULT
    n = name.split(":")[0].upper()
    if n not in _BACKENDS: raise DeviceError(f"unknown device {name!r}; the devices are {', '.join(_BACKENDS)}")
    return n

  def __getitem__(self, name: str) -> Compiled:
    n = self.canonicalize(name)
    if n not in self._devices: self._devices[n] = importlib.import_module(_BACKENDS[n]).device()
    return self._devices[n]

  @property
  def DEFAULT(self) -> str:
    if self._default is None:
      if (d := os.environ.get("DEV")): self._default = self.canonicalize(d)
      else: self._default = next((n for n in _BACKENDS if os.environ.get(n, "") not in ("", "0")), None) or self._best()
    return self._default
  @DEFAULT.setter
  def DEFAULT(self, name: str) -> None: self._default = self.canonicalize(name)

  def _best(self) -> str:
    if importlib.import_module(_BACKENDS["CPU"]).available(): return "CPU"
    warnings.warn(f"no C compiler ('{os.environ.get('CC', 'cc')}' is not on PATH): running on the PYTHON interpreter, which is slow. "
                  "Install gcc or clang, or set CC to a C compiler", stacklevel=3)
    return "PYTHON"

Device = _DeviceRegistry()
