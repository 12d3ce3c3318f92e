"""The CL device: OpenCL through ctypes on the ICD loader (libOpenCL.so.1), no Python package. Buffers are cl_mem handles;
a kernel is OpenCL C (tensor/renderer/gpu.py) built by the platform's compiler and launched on the grid its source
names in its first line (`// launch global=a,b,c local=x,y,z`). Kernel times come from the queue's profiling events.

CL=1 or DEV=CL makes it the default; CL:N is the N-th OpenCL device of all platforms. Debian: `apt install
ocl-icd-libopencl1 pocl-opencl-icd` gives pocl, OpenCL on the CPU (what CI runs).
"""
from __future__ import annotations
import ctypes, ctypes.util, functools
from typing import Any, Callable
import numpy as np
from runtime.device import Allocator, AllocationError, Buffer, Compiled, CompileError, DeviceError, launch_info

INSTALL = "install an OpenCL platform (Debian: apt install ocl-icd-libopencl1 pocl-opencl-icd) or a GPU vendor's driver"

_ERRORS = {-1: "DEVICE_NOT_FOUND", -2: "DEVICE_NOT_AVAILABLE", -3: "COMPILER_NOT_AVAILABLE", -4: "MEM_OBJECT_ALLOCATION_FAILURE",
           -5: "OUT_OF_RESOURCES", -6: "OUT_OF_HOST_MEMORY", -11: "BUILD_PROGRAM_FAILURE", -13: "MISALIGNED_SUB_BUFFER_OFFSET",
           -30: "INVALID_VALUE", -36: "INVALID_COMMAND_QUEUE", -38: "INVALID_MEM_OBJECT", -46: "INVALID_KERNEL_NAME",
           -48: "INVALID_KERNEL", -51: "INVALID_ARG_SIZE", -52: "INVALID_KERNEL_ARGS", -54: "INVALID_WORK_GROUP_SIZE",
           -55: "INVALID_WORK_ITEM_SIZE", -61: "INVALID_BUFFER_SIZE", -63: "INVALID_GLOBAL_WORK_SIZE", -1001: "PLATFORM_NOT_FOUND_KHR"}

CL_DEVICE_TYPE_ALL, CL_DEVICE_TYPE_GPU = 0xFFFFFFFF, 1 << 2
CL_DEVICE_TYPE, CL_DEVICE_NAME, CL_DEVICE_EXTENSIONS, CL_DEVICE_MEM_BASE_ADDR_ALIGN = 0x1000, 0x102B, 0x1030, 0x1019
CL_DEVICE_MAX_WORK_GROUP_SIZE = 0x1004
CL_MEM_READ_WRITE, CL_QUEUE_PROFILING_ENABLE, CL_PROGRAM_BUILD_LOG = 1, 1 << 1, 0x1183
CL_PROFILING_COMMAND_START, CL_PROFILING_COMMAND_END, CL_BUFFER_CREATE_TYPE_REGION = 0x1282, 0x1283, 0x1220

# OpenCL C 1.2 (what every platform builds), division and sqrt correctly rounded as on the CPU device
BUILD_OPTIONS = b"-cl-std=CL1.2 -cl-fp32-correctly-rounded-divide-sqrt"

def _check(code: int, what: str) -> None:
  if code != 0: raise DeviceError(f"OpenCL {what} failed: CL_{_ERRORS.get(code, 'ERROR')} ({code})")

@functools.cache
def _lib() -> Any:
  """The ICD loader, with the signatures we call; None where it is not installed."""
  name = ctypes.util.find_library("OpenCL") or "libOpenCL.so.1"
  try: cl = ctypes.CDLL(name)
  except OSError: return None
  p, u, sz, i, vp, u64 = ctypes.POINTER, ctypes.c_uint32, ctypes.c_size_t, ctypes.c_int32, ctypes.c_void_p, ctypes.c_uint64
  sigs = {"clGetPlatformIDs": (i, [u, p(vp), p(u)]), "clGetDeviceIDs": (i, [vp, u64, u, p(vp), p(u)]),
          "clGetDeviceInfo": (i, [vp, u, sz, vp, p(sz)]), "clCreateContext": (vp, [vp, u, p(vp), vp, vp, p(i)]),
          "clCreateCommandQueue": (vp, [vp, vp, u64, p(i)]), "clCreateBuffer": (vp, [vp, u64, sz, vp, p(i)]),
          "clCreateSubBuffer": (vp, [vp, u64, u, vp, p(i)]), "clReleaseMemObject": (i, [vp]),
          "clEnqueueWriteBuffer": (i, [vp, vp, u, sz, sz, vp, u, vp, vp]), "clEnqueueReadBuffer": (i, [vp, vp, u, sz, sz, vp, u, vp, vp]),
          "clEnqueueCopyBuffer": (i, [vp, vp, vp, sz, sz, sz, u, vp, vp]),
          "clCreateProgramWithSource": (vp, [vp, u, p(ctypes.c_char_p), p(sz), p(i)]), "clBuildProgram": (i, [vp, u, p(vp), ctypes.c_char_p, vp, vp]),
          "clGetProgramBuildInfo": (i, [vp, vp, u, sz, vp, p(sz)]), "clCreateKernel": (vp, [vp, ctypes.c_char_p, p(i)]),
          "clSetKernelArg": (i, [vp, u, sz, vp]), "clEnqueueNDRangeKernel": (i, [vp, vp, u, p(sz), p(sz), p(sz), u, vp, p(vp)]),
          "clFinish": (i, [vp]), "clGetEventProfilingInfo": (i, [vp, u, sz, vp, p(sz)]), "clReleaseEvent": (i, [vp]),
          "clReleaseKernel": (i, [vp]), "clReleaseProgram": (i, [vp]), "clGetKernelInfo": (i, [vp, u, sz, vp, p(sz)])}
  for fname, (res, args) in sigs.items():
    f = getattr(cl, fname)
    f.restype, f.argtypes = res, args
  return cl

@functools.cache
def devices() -> tuple[tuple[int, int], ...]:
  """Every OpenCL device of every platform, as (platform, device) handles: CL:N is the N-th."""
  cl = _lib()
  if cl is None: return ()
  n = ctypes.c_uint32()
  if cl.clGetPlatformIDs(0, None, ctypes.byref(n)) != 0 or n.value == 0: return ()
  plats = (ctypes.c_void_p * n.value)()
  _check(cl.clGetPlatformIDs(n.value, plats, None), "clGetPlatformIDs")
  out = []
  for plat in plats:
    nd = ctypes.c_uint32()
    if cl.clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 0, None, ctypes.byref(nd)) != 0 or nd.value == 0: continue
    devs = (ctypes.c_void_p * nd.value)()
    _check(cl.clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, nd.value, devs, None), "clGetDeviceIDs")
    out += [(plat, d) for d in devs]
  return tuple(out)

def _info(dev: int, param: int, kind: type) -> Any:
  cl = _lib()
  if kind is str:
    n = ctypes.c_size_t()
    _check(cl.clGetDeviceInfo(dev, param, 0, None, ctypes.byref(n)), "clGetDeviceInfo")
    buf = ctypes.create_string_buffer(n.value)
    _check(cl.clGetDeviceInfo(dev, param, n.value, buf, None), "clGetDeviceInfo")
    return buf.value.decode(errors="replace")
  v = kind()
  _check(cl.clGetDeviceInfo(dev, param, ctypes.sizeof(v), ctypes.byref(v), None), "clGetDeviceInfo")
  return v.value

def available(default: bool = False) -> bool:
  """Whether an OpenCL device is here; with default=True, whether one is a GPU (Device.DEFAULT prefers CL only then: an
  OpenCL CPU device such as pocl runs the same kernels slower than CPU does)."""
  devs = devices()
  if not default: return bool(devs)
  return any(_info(d, CL_DEVICE_TYPE, ctypes.c_uint64) & CL_DEVICE_TYPE_GPU for _, d in devs)

class CLAllocator(Allocator):
  """cl_mem buffers of one context; copies are blocking (the queue is in order, so they follow the kernels before them)."""
  def __init__(self, dev: CLDevice): self.dev = dev
  def alloc(self, nbytes: int) -> Any:
    err = ctypes.c_int32()
    h = _lib().clCreateBuffer(self.dev.ctx, CL_MEM_READ_WRITE, max(nbytes, 1), None, ctypes.byref(err))
    if err.value != 0:
      raise AllocationError(f"{self.dev.name}: could not allocate {nbytes} bytes (CL_{_ERRORS.get(err.value, 'ERROR')} {err.value})")
    return ctypes.c_void_p(h)
  def free(self, handle: Any, nbytes: int) -> None: _lib().clReleaseMemObject(handle)
  def copyin(self, handle: Any, src: np.ndarray) -> None:
    if src.nbytes: _check(_lib().clEnqueueWriteBuffer(self.dev.queue, handle, 1, 0, src.nbytes, src.ctypes.data, 0, None, None), "write")
  def copyout(self, dst: np.ndarray, handle: Any) -> None:
    if dst.nbytes: _check(_lib().clEnqueueReadBuffer(self.dev.queue, handle, 1, 0, dst.nbytes, dst.ctypes.data, 0, None, None), "read")
  def view(self, handle: Any, offset: int, nbytes: int) -> Any:
    if offset % self.dev.align: return None  # a sub-buffer must start on the device's alignment
    region, err = (ctypes.c_size_t * 2)(offset, max(nbytes, 1)), ctypes.c_int32()
    h = _lib().clCreateSubBuffer(handle, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, region, ctypes.byref(err))
    _check(err.value, "clCreateSubBuffer")
    return ctypes.c_void_p(h)

class CLDevice(Compiled):
  """One OpenCL device: its context, an in-order profiling queue, the allocator, and program() building OpenCL C."""
  def __init__(self, name: str, index: int):
    devs = devices()
    if not devs: raise DeviceError(f"no OpenCL platform: {INSTALL}")
    if index >= len(devs): raise DeviceError(f"{name}: there are {len(devs)} OpenCL devices (CL to CL:{len(devs) - 1})")
    cl, (_, self.dev) = _lib(), devs[index]
    err = ctypes.c_int32()
    self.ctx = cl.clCreateContext(None, 1, (ctypes.c_void_p * 1)(self.dev), None, None, ctypes.byref(err))
    _check(err.value, "clCreateContext")
    self.queue = cl.clCreateCommandQueue(self.ctx, self.dev, CL_QUEUE_PROFILING_ENABLE, ctypes.byref(err))
    _check(err.value, "clCreateCommandQueue")
    self.align = max(_info(self.dev, CL_DEVICE_MEM_BASE_ADDR_ALIGN, ctypes.c_uint32) // 8, 1)
    self.device_name = _info(self.dev, CL_DEVICE_NAME, str)
    self.extensions = set(_info(self.dev, CL_DEVICE_EXTENSIONS, str).split())
    self.max_group = _info(self.dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, ctypes.c_size_t)
    self.gpu = bool(_info(self.dev, CL_DEVICE_TYPE, ctypes.c_uint64) & CL_DEVICE_TYPE_GPU)  # pocl's is a CPU
    alloc = CLAllocator(self)
    alloc.transfer = lambda dst, src, n: _check(cl.clEnqueueCopyBuffer(self.queue, src, dst, 0, 0, n, 0, None, None), "copy") if n else None
    super().__init__(name, self._build, alloc, lambda: _check(cl.clFinish(self.queue), "clFinish"))

  def _build(self, src: str, name: str) -> Callable:
    cl, err = _lib(), ctypes.c_int32()
    data = src.encode()
    prog = cl.clCreateProgramWithSource(self.ctx, 1, (ctypes.c_char_p * 1)(data), (ctypes.c_size_t * 1)(len(data)), ctypes.byref(err))
    _check(err.value, "clCreateProgramWithSource")
    if (code := cl.clBuildProgram(prog, 1, (ctypes.c_void_p * 1)(self.dev), BUILD_OPTIONS, None, None)) != 0:
      n = ctypes.c_size_t()
      cl.clGetProgramBuildInfo(prog, self.dev, CL_PROGRAM_BUILD_LOG, 0, None, ctypes.byref(n))
      log = ctypes.create_string_buffer(n.value)
      cl.clGetProgramBuildInfo(prog, self.dev, CL_PROGRAM_BUILD_LOG, n.value, log, None)
      cl.clReleaseProgram(prog)
      raise CompileError(f"OpenCL ({self.device_name}) failed on kernel {name} (CL_{_ERRORS.get(code, 'ERROR')}):\n"
                         f"{log.value.decode(errors='replace').strip()}\n--- source ---\n{src}")
    kernel = cl.clCreateKernel(prog, name.encode(), ctypes.byref(err))
    _check(err.value, f"clCreateKernel {name}")
    gl, lo, scalars = launch_info(src)
    return CLProgram(self, prog, kernel, name, gl, None if all(x == 1 for x in lo) else lo, [_SCALARS[t] for t in scalars])

_SCALARS = {"int": ctypes.c_int32, "uint": ctypes.c_uint32, "long": ctypes.c_int64, "ulong": ctypes.c_uint64, "float": ctypes.c_float,
            "double": ctypes.c_double, "short": ctypes.c_int16, "ushort": ctypes.c_uint16, "char": ctypes.c_int8, "uchar": ctypes.c_uint8,
            "bool": ctypes.c_bool}

class CLProgram:
  """A built kernel: call it with the buffers (their cl_mem handles) and the scalar values; it waits for the kernel and
  returns its time in seconds, from the queue's profiling event."""
  def __init__(self, dev: CLDevice, prog: int, kernel: int, name: str, gsz: tuple[int, ...], lsz: tuple[int, ...] | None, scalars: list):
    self.dev, self.prog, self.kernel, self.name, self.scalars = dev, prog, kernel, name, scalars
    self.gsz, self.lsz = (ctypes.c_size_t * len(gsz))(*gsz), None if lsz is None else (ctypes.c_size_t * len(lsz))(*lsz)
    self.dims, self.lib = len(gsz), _lib()
    # buffers the kernel has a parameter for (a kernel whose last buffers it no longer reads has none for them)
    n = ctypes.c_uint32()
    _check(self.lib.clGetKernelInfo(kernel, 0x1191, 4, ctypes.byref(n), None), "clGetKernelInfo")  # CL_KERNEL_NUM_ARGS
    self.n_bufs = n.value - len(scalars)
  def __call__(self, bufs: list[Buffer], vals: tuple = ()) -> float:
    cl, k = self.lib, self.kernel
    for i, b in enumerate(bufs[:self.n_bufs]):
      h = b._buf if b._buf is not None else b.ensure_allocated()._buf
      _check(cl.clSetKernelArg(k, i, ctypes.sizeof(ctypes.c_void_p), ctypes.byref(h)), f"clSetKernelArg {i}")
    for j, (t, v) in enumerate(zip(self.scalars, vals)):
      x = t(v)
      _check(cl.clSetKernelArg(k, self.n_bufs + j, ctypes.sizeof(x), ctypes.byref(x)), f"clSetKernelArg {self.n_bufs + j}")
    ev = ctypes.c_void_p()
    _check(cl.clEnqueueNDRangeKernel(self.dev.queue, k, self.dims, None, self.gsz, self.lsz, 0, None, ctypes.byref(ev)), f"launch {self.name}")
    _check(cl.clFinish(self.dev.queue), "clFinish")
    start, end = ctypes.c_uint64(), ctypes.c_uint64()
    cl.clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, 8, ctypes.byref(start), None)
    cl.clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, 8, ctypes.byref(end), None)
    cl.clReleaseEvent(ev)
    return (end.value - start.value) * 1e-9
  def __del__(self):
    try:
      self.lib.clReleaseKernel(self.kernel)
      self.lib.clReleaseProgram(self.prog)
    except (AttributeError, TypeError): pass

def device(name: str = "CL") -> Compiled:
  index = int(name.partition(":")[2] or 0)
  return CLDevice(name, index)
