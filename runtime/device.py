"""Devices and buffers: where tensors live and where kernels run.

A device (`Compiled`) is an allocator (device memory, copies in and out), a compiler and program runner (`program`), and a
`synchronize`. `Device[name]` gives one: CPU (C through the system compiler), PYTHON (the interpreter), CL (OpenCL), CUDA
(the driver API and NVRTC); `NAME:N` is the N-th device of a kind, with buffers of its own.
`Device.DEFAULT` picks CUDA, then CL (a GPU), then CPU, then PYTHON; DEV=NAME or NAME=1 overrides it. A `Buffer` holds the
allocator's handle: host memory (a numpy array) on CPU and PYTHON, device memory elsewhere, copied to the host only by
`numpy()`, `copyin` and transfers (`copy`).
"""
from __future__ import annotations
import ctypes, importlib, os, sys, warnings
from typing import Any, Callable
import numpy as np
from runtime.dtype import DType, dtypes
from runtime.helpers import GlobalCounters

class DeviceError(Exception):
  """Root of the errors a device raises."""

class CompileError(DeviceError):
  """A kernel did not compile, or there is no compiler."""

class AllocationError(DeviceError, MemoryError):
  """A device could not allocate a buffer (out of memory, or a size it does not take)."""

# SANITIZE=1 (kernels built with AddressSanitizer, see runtime/ops_cpu.py): buffers get no slack around them
_SANITIZE = os.environ.get("SANITIZE", "") not in ("", "0")

def _storage(dtype: DType) -> np.dtype:
  # bfloat16 has no numpy type: its bits live in uint16
  return np.dtype(np.uint16) if dtype.scalar is dtypes.bfloat16 else dtypes.to_numpy(dtype.scalar)

# ---- allocators ----

class Allocator:
  """A device's memory: `alloc(nbytes)` gives a handle, `free` returns it; `copyin`/`copyout` move bytes between a handle
  and host memory (a uint8 numpy array); `view` is a handle `offset` bytes into another (None: the device has none there);
  `transfer` copies between two handles of this allocator's devices (None: through the host)."""
  host = False
  def alloc(self, nbytes: int) -> Any: raise NotImplementedError
  def free(self, handle: Any, nbytes: int) -> None: pass
  def copyin(self, handle: Any, src: np.ndarray) -> None: raise NotImplementedError
  def copyout(self, dst: np.ndarray, handle: Any) -> None: raise NotImplementedError
  def view(self, handle: Any, offset: int, nbytes: int) -> Any: return None
  transfer: Callable[[Any, Any, int], None] | None = None

class HostAllocator(Allocator):
  """Host memory for the devices that compute in it (CPU, PYTHON): a handle is a numpy array of the buffer's bytes."""
  host = True
  def alloc(self, nbytes: int) -> Any:
    try:
      if _SANITIZE: return np.empty(nbytes, dtype=np.uint8)  # exactly the buffer's bytes: AddressSanitizer sees any access past either end
      # 64-byte aligned, so vector loads in kernels never straddle cache lines
      raw = np.empty(nbytes + 64, dtype=np.uint8)
    except (MemoryError, ValueError) as e: raise AllocationError(f"host memory: could not allocate {nbytes} bytes ({e})") from None
    off = (-raw.ctypes.data) % 64
    return raw[off:off + nbytes]
  def copyin(self, handle: Any, src: np.ndarray) -> None: handle[:] = src
  def copyout(self, dst: np.ndarray, handle: Any) -> None: dst[:] = handle
  def view(self, handle: Any, offset: int, nbytes: int) -> Any: return handle[offset:offset + nbytes]

HOST = HostAllocator()

class _Borrowed(Allocator):
  """The allocator of memory someone else owns (Buffer.borrow): nothing to allocate, and never freed or pooled here."""
  host = False  # so Buffer.__del__ hands it to free(), which leaves it alone, instead of pooling it for reuse
  def free(self, handle: Any, nbytes: int) -> None: pass

_BORROWED = _Borrowed()

class Buffer:
  """`size` elements of `dtype` on `device`, allocated on first use by the device's allocator. `_buf` is its handle;
  on a host device `_array` is the same memory as a numpy array of the dtype and `_ptr` its address (kernels read them).
  With `base`, a typed view of the base buffer's bytes from `offset` (memory planning puts buffers in shared blocks)."""
  __slots__ = ("device", "size", "dtype", "nbytes", "base", "offset", "_buf", "_array", "_ptr", "_allocator", "__weakref__")
  def __init__(self, device: str, size: int, dtype: DType, initial: np.ndarray | None = None, base: Buffer | None = None, offset: int = 0):
    self.device, self.size, self.dtype, self.base, self.offset = device, size, dtype, base, offset
    self.nbytes: int = size * dtype.itemsize  # an attribute, not a property: allocating and freeing read it several times
    if base is not None and offset + self.nbytes > base.nbytes:
      raise DeviceError(f"a view of {self.nbytes} bytes at offset {offset} does not fit its base of {base.nbytes} bytes")
    self._buf: Any = None
    self._array: np.ndarray | None = None
    self._ptr = 0
    self._allocator: Allocator | None = None
    if initial is not None: self.copyin(initial)

  @staticmethod
  def fresh(device: str, size: int, dtype: DType, nbytes: int, allocator: Allocator) -> Buffer:
    """Buffer(device, size, dtype).ensure_allocated() on `allocator` (Device.allocator(device), nbytes the buffer's), made
    without __init__'s checks: what every eager op's output is (tensor/engine/prepared.py), from the free list when it holds
    memory of this kind."""
    b = _new_buffer(Buffer)
    b.device, b.size, b.dtype, b.nbytes, b.base, b.offset, b._allocator = device, size, dtype, nbytes, None, 0, allocator
    if allocator is HOST and (free := _pool.get((nbytes, dtype))): return _from_pool(b, free)
    b._buf, b._array, b._ptr = None, None, 0
    return b.ensure_allocated()

  @staticmethod
  def borrow(device: str, address: int, size: int, dtype: DType) -> Buffer:
    """`size` elements of `dtype` at `address`, memory the caller owns and keeps alive (tinygrad's from_blob): kernels read
    and write it in place; it is never freed or reused here. Host devices only."""
    if not Device.allocator(device).host:
      raise DeviceError(f"a buffer at a host address on {device}, which computes in its own memory: use a host device (CPU)")
    nbytes = size * dtype.itemsize
    owner = Buffer(device, nbytes, dtypes.uint8)
    owner._buf = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(address)) if nbytes else np.empty(0, np.uint8)
    owner._allocator = _BORROWED
    GlobalCounters.mem_used += nbytes  # counted out again when the owner goes
    return Buffer(device, size, dtype, base=owner)

  @property
  def allocator(self) -> Allocator:
    if (a := self._allocator) is None: a = self._allocator = Device.allocator(self.device)
    return a
  def is_allocated(self) -> bool: return self._buf is not None
  def ensure_allocated(self) -> Buffer:
    if self._buf is not None: return self
    alloc = self.allocator
    if self.base is not None:
      self._buf = alloc.view(self.base.ensure_allocated()._buf, self.offset, self.nbytes)
      if self._buf is None: raise DeviceError(f"{self.device} can't make a view {self.offset} bytes into a buffer")
    elif alloc is HOST and (free := _pool.get((self.nbytes, self.dtype))): return _from_pool(self, free)  # no allocation
    else:
      self._buf = alloc.alloc(self.nbytes)
      GlobalCounters.mem_used += self.nbytes
    if alloc.host:
      self._array = self._buf.view(_storage(self.dtype))
      self._ptr = self._array.ctypes.data  # ctypes.data costs a microsecond and a half: read once
    return self

  def as_array(self) -> np.ndarray:
    """The buffer's memory as a 1-D numpy array (a view: writes go to the buffer). Host devices only."""
    if not self.allocator.host:
      raise DeviceError(f"a buffer on {self.device} lives in device memory: read it with numpy(), write it with copyin()")
    return self.ensure_allocated()._array  # type: ignore[return-value]
  @property
  def ptr(self) -> int: return self.ensure_allocated()._ptr

  def _host_bytes(self, data: np.ndarray) -> np.ndarray:
    src = np.ascontiguousarray(data).reshape(-1)
    if src.size != self.size: raise DeviceError(f"copyin of {src.size} elements into a buffer of {self.size}")
    st = _storage(self.dtype)
    if src.dtype != st: src = src.view(st) if src.itemsize == self.dtype.itemsize else src.astype(st)
    return src.view(np.uint8)
  def copyin(self, data: np.ndarray) -> Buffer:
    """Write host data (size elements) into the buffer."""
    src = self._host_bytes(data)
    self.ensure_allocated()
    if self._array is not None: self._array.view(np.uint8)[:] = src
    else: self.allocator.copyin(self._buf, src)
    return self
  def copyin_bytes(self, raw) -> Buffer:
    """Write nbytes of raw bytes (a buffer object) into the buffer."""
    return self.copyin(np.frombuffer(raw, dtype=np.uint8, count=self.nbytes).view(_storage(self.dtype)))
  def host_array(self) -> np.ndarray:
    """The contents in host memory as the dtype's storage type (bfloat16 as its 16 bits): the buffer's own memory on a host
    device (a view: do not write to it), a copy read from device memory elsewhere."""
    self.ensure_allocated()
    if self._array is not None: return self._array
    raw = np.empty(self.nbytes, dtype=np.uint8)
    self.allocator.copyout(raw, self._buf)
    return raw.view(_storage(self.dtype))
  def numpy(self) -> np.ndarray:
    """A copy of the contents in host memory, as numpy's type for the dtype (bfloat16 comes out as float32)."""
    a = self._array.copy() if self.ensure_allocated()._array is not None else self.host_array()
    if self.dtype.scalar is dtypes.bfloat16: return (a.astype(np.uint32) << 16).view(np.float32)
    return a

  def __del__(self):
    # a view's memory is its base's, counted once there
    if (raw := self._buf) is None or self.base is not None: return
    try:
      GlobalCounters.mem_used -= (nbytes := self.nbytes)
      if (alloc := self._allocator) is not None and not alloc.host: alloc.free(raw, nbytes)
      elif (a := self._array) is not None and not _SANITIZE:
        # host memory, kept for the next buffer of its kind (the free list) unless the list is full or a view of it may be alive
        if (large := nbytes > POOL_BYTES):
          if _pooled[1] >= POOL_LARGE_BUFFERS or _pooled_large_bytes[0] + nbytes > POOL_LARGE_BYTES: return
        elif _pooled[0] >= POOL_BUFFERS: return
        if not unviewed(a, raw): return
        if (free := _pool.get(key := (nbytes, self.dtype))) is None: free = _pool[key] = []
        free.append((raw, a, self._ptr))
        _pooled[large] += 1
        if large: _pooled_large_bytes[0] += nbytes
    except (AttributeError, TypeError, ImportError): pass
  def __repr__(self) -> str: return f"<Buffer {self.device} {self.size} {self.dtype}>"

_new_buffer, _refcount = object.__new__, sys.getrefcount

def unviewed(a, raw) -> bool:
  """Whether nothing outside a host Buffer views its memory, for a caller holding the Buffer's array and its bytes in locals
  `a` and `raw` (Buffer.__del__ before it recycles the memory, Storage.spare before it reuses a spare output): anything
  holding the array or its bytes, or another view of its raw block, shows in the reference counts. Of the array: the
  Buffer's _array, the caller's local, this parameter and getrefcount's argument; of its bytes the same; of the block both
  view (numpy points every view at the owner): raw.base, a.base, `block` and the argument."""
  return _refcount(a) == 4 and _refcount(raw) == 4 and (block := raw.base) is not None and a.base is block and _refcount(block) == 4

def copy(dst: Buffer, src: Buffer) -> None:
  """dst's contents become src's (same size in bytes): within host memory a numpy copy, between two devices of one
  allocator its transfer where it has one, else through the host (copyout then copyin)."""
  if dst.nbytes != src.nbytes: raise DeviceError(f"a copy of {src.nbytes} bytes into a buffer of {dst.nbytes}")
  dst.ensure_allocated(), src.ensure_allocated()
  if dst._array is not None and src._array is not None:
    dst._array.view(np.uint8)[:] = src._array.view(np.uint8)
    return
  da, sa = dst.allocator, src.allocator
  if dst._array is not None: sa.copyout(dst._array.view(np.uint8), src._buf)
  elif src._array is not None: da.copyin(dst._buf, src._array.view(np.uint8))
  elif da is sa and da.transfer is not None: da.transfer(dst._buf, src._buf, dst.nbytes)
  else:
    staging = np.empty(src.nbytes, dtype=np.uint8)
    sa.copyout(staging, src._buf)
    da.copyin(dst._buf, staging)

# freed host buffers by (nbytes, dtype), for the next one of their kind: eager code frees a result and makes one of the same
# kind on every op, and numpy's allocation plus reading the pointer costs ~10 us; a large buffer's new memory costs a page
# fault per 4 KB on first write (16 MB: ~3 ms), and MPI is slower into memory just mapped (tensor/distributed.py). Kept: at
# most POOL_BUFFERS small ones (up to POOL_BYTES each) and, apart, so they never crowd those out, POOL_LARGE_BUFFERS larger
# ones of POOL_LARGE_BYTES in all. The host allocator's free list: one for the process, as the host memory it recycles is
POOL_BUFFERS, POOL_BYTES, POOL_LARGE_BUFFERS, POOL_LARGE_BYTES = 64, 1 << 16, 8, 64 << 20
_pool: dict[tuple[int, DType], list[tuple[np.ndarray, np.ndarray, int]]] = {}
_pooled = [0, 0]  # small buffers kept, large buffers kept
_pooled_large_bytes = [0]

def pooled(nbytes: int, dtype: DType) -> bool:
  """Whether the next host buffer of nbytes and dtype gets memory a freed one left (used before: no page faults)."""
  return bool(_pool.get((nbytes, dtype)))

def _from_pool(b: Buffer, free: list) -> Buffer:
  """b given the memory of a freed buffer of its size and dtype (`free`, its pool list): no allocation; live again."""
  b._buf, b._array, b._ptr = free.pop()
  _pooled[b.nbytes > POOL_BYTES] -= 1
  if b.nbytes > POOL_BYTES: _pooled_large_bytes[0] -= b.nbytes
  GlobalCounters.mem_used += b.nbytes  # live memory, as __del__ counts it out
  return b

def launch_info(src: str) -> tuple[tuple[int, ...], tuple[int, ...], list[str]]:
  """What a GPU-style kernel's source says of its launch (tensor/renderer/gpu.py writes it): the global sizes, the local
  sizes (all 1: the platform's choice) and the types of its scalar parameters; one work-item without the lines."""
  lines = src.split("\n", 2)
  gl, lo, scalars = (1,), (1,), []
  if lines[0].startswith("// launch global="):
    g, _, l_ = lines[0][len("// launch global="):].partition(" local=")
    gl, lo = tuple(int(x) for x in g.split(",")), tuple(int(x) for x in l_.split(","))
  if len(lines) > 1 and lines[1].startswith("// scalars:"): scalars = lines[1][len("// scalars:"):].split()
  return gl, lo, scalars

class Compiled:
  """A device: its allocator, `program(source, name, launch)` turning a kernel's source (rendered for this device by the
  tensor layer) into a callable prog(buffers, var_vals) (it may return the kernel's time in seconds, from device events),
  and `synchronize`. `launch`: the grid and work-group sizes of a GPU-style kernel (None on CPU and PYTHON)."""
  def __init__(self, name: str, program: Callable[..., Callable], allocator: Allocator = HOST, synchronize: Callable[[], None] | None = None):
    self.name, self._program, self.allocator, self._sync = name, program, allocator, synchronize
  def program(self, src: Any, name: str, launch: Any = None) -> Callable:
    return self._program(src, name) if launch is None else self._program(src, name, launch)
  def synchronize(self) -> None:
    """Wait for queued work (CPU and PYTHON run kernels synchronously: there is none)."""
    if self._sync is not None: self._sync()
  def __repr__(self) -> str: return f"<Device {self.name}>"

# each device's module, loaded by name on first use (so this module imports none of them): it gives device(name), the
# device, and available(), whether this machine can run it; in the order Device.DEFAULT tries them
_BACKENDS = {"CUDA": "runtime.ops_cuda", "CL": "runtime.ops_cl", "CPU": "runtime.ops_cpu", "PYTHON": "runtime.ops_python"}

def _module(kind: str):
  return importlib.import_module(_BACKENDS[kind])

class _DeviceRegistry:
  def __init__(self):
    self._devices: dict[str, Compiled] = {}
    self._allocators: dict[str, Allocator] = {}
    self._default: str | None = None

  def canonicalize(self, name: str | None) -> str:
    """The canonical name: the kind in capitals, `:0` dropped (CL:0 is CL), `:N` kept. Raises DeviceError naming the
    devices for an unknown kind."""
    if name is None: return self.DEFAULT
    kind, sep, rest = str(name).partition(":")
    kind = kind.upper()
    if kind not in _BACKENDS:
      raise DeviceError(f"unknown device {name!r}; the devices are {', '.join(_BACKENDS)} (NAME:N for the N-th of a kind; "
                        f"available here: {', '.join(self.available())})")
    if not sep or rest in ("", "0"): return kind
    if not rest.isdigit(): raise DeviceError(f"device {name!r}: the part after ':' is the device's number (CL:1), not {rest!r}")
    return f"{kind}:{int(rest)}"

  @staticmethod
  def kind(name: str) -> str:
    """The kind of a canonical name: CL of CL:1."""
    return name.split(":", 1)[0]

  def __getitem__(self, name: str) -> Compiled:
    n = self.canonicalize(name)
    if (d := self._devices.get(n)) is None: d = self._devices[n] = _module(self.kind(n)).device(n)
    return d

  def allocator(self, name: str) -> Allocator:
    """The allocator of a device (the host's for CPU and PYTHON without loading the device)."""
    if (a := self._allocators.get(name)) is None:
      a = self._allocators[name] = HOST if self.kind(name) in ("CPU", "PYTHON") else self[name].allocator
    return a

  def available(self) -> list[str]:
    """The kinds this machine can run (a kind whose module can't tell is left out)."""
    out = []
    for k in _BACKENDS:
      try:
        if _module(k).available(): out.append(k)
      except Exception: pass  # noqa: BLE001 (a broken driver is an unavailable device)
    return out

  @property
  def DEFAULT(self) -> str:
    if self._default is None:
      if (d := os.environ.get("DEV")): self._default = self.canonicalize(d)
      else: self._default = next((n for n in _BACKENDS if os.environ.get(n, "") not in ("", "0")), None) or self._best()
    return self._default
  @DEFAULT.setter
  def DEFAULT(self, name: str) -> None: self._default = self.canonicalize(name)

  def _best(self) -> str:
    # CUDA, then CL where it is a GPU (an OpenCL CPU device such as pocl is not faster than CPU: use it with DEV=CL)
    for kind in ("CUDA", "CL"):
      try:
        if _module(kind).available(default=True): return kind
      except Exception: pass  # noqa: BLE001
    if _module("CPU").available(): return "CPU"
    warnings.warn(f"no C compiler ('{os.environ.get('CC', 'cc')}' is not on PATH): running on the PYTHON interpreter, which is slow. "
                  "Install gcc or clang, or set CC to a C compiler", stacklevel=3)
    return "PYTHON"

Device = _DeviceRegistry()
