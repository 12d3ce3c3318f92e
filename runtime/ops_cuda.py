"""The CUDA device: NVIDIA's driver API through ctypes (libcuda.so.1, from the driver) and kernels compiled by NVRTC
(libnvrtc.so.12, from PyPI's nvidia-cuda-nvrtc-cu12: `pip install 'rulegrad[cuda]'`), no other Python package. Buffers
are device pointers; a kernel is CUDA C (tensor/renderer/gpu.py) compiled for the device's compute capability and launched
on the grid its source names in its first line (`// launch global=... local=...`: blocks of `local`, global / local of
them). Kernel times come from CUDA events.

`compile_cuda(src, arch)` needs NVRTC only (no GPU, no driver): the compile-only check of CI (tests/devices/test_cuda.py).
CUDA=1 or DEV=CUDA makes it the default (it is the default wherever a GPU and the driver are). CUDA:N is the N-th GPU.
"""
from __future__ import annotations
import ctypes, ctypes.util, functools, glob, os
from typing import Any, Callable
import numpy as np
from runtime.device import Allocator, AllocationError, Buffer, Compiled, CompileError, DeviceError, launch_info

NVRTC_INSTALL = "pip install 'rulegrad[cuda]' (PyPI's nvidia-cuda-nvrtc-cu12)"
DRIVER_INSTALL = "install NVIDIA's driver (libcuda.so.1) on a machine with an NVIDIA GPU"

@functools.cache
def _nvrtc() -> Any:
  """NVRTC: from the nvidia-cuda-nvrtc-cu12 package where it is installed, else the system's; None when there is none."""
  paths = []
  try:
    import nvidia.cuda_nvrtc as pkg  # type: ignore[import-not-found]  # the optional extra [cuda]
    for root in getattr(pkg, "__path__", []): paths += sorted(glob.glob(os.path.join(root, "lib", "libnvrtc.so*")))
  except ImportError: pass
  paths += [p for p in (ctypes.util.find_library("nvrtc"), "libnvrtc.so.12", "libnvrtc.so") if p]
  for p in paths:
    if "builtins" in p or ".alt." in p: continue
    try: lib = ctypes.CDLL(p)
    except OSError: continue
    vp, cp, i, sz = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_size_t
    P = ctypes.POINTER
    for name, res, args in [("nvrtcCreateProgram", i, [P(vp), cp, cp, i, P(cp), P(cp)]), ("nvrtcCompileProgram", i, [vp, i, P(cp)]),
                            ("nvrtcGetProgramLogSize", i, [vp, P(sz)]), ("nvrtcGetProgramLog", i, [vp, cp]),
                            ("nvrtcGetCUBINSize", i, [vp, P(sz)]), ("nvrtcGetCUBIN", i, [vp, cp]), ("nvrtcDestroyProgram", i, [P(vp)]),
                            ("nvrtcVersion", i, [P(i), P(i)])]:
      f = getattr(lib, name)
      f.restype, f.argtypes = res, args
    return lib
  return None

def nvrtc_version() -> tuple[int, int] | None:
  if (lib := _nvrtc()) is None: return None
  a, b = ctypes.c_int(), ctypes.c_int()
  lib.nvrtcVersion(ctypes.byref(a), ctypes.byref(b))
  return a.value, b.value

def compile_cuda(src: str, arch: str, name: str = "kernel") -> bytes:
  """The cubin of a CUDA C source for `arch` (sm_80, sm_90, ...). Raises CompileError with NVRTC's log, or naming what to
  install when NVRTC is missing."""
  lib = _nvrtc()
  if lib is None: raise CompileError(f"no NVRTC (libnvrtc.so.12) to compile CUDA kernels: {NVRTC_INSTALL}")
  prog = ctypes.c_void_p()
  if (e := lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), f"{name}.cu".encode(), 0, None, None)) != 0:
    raise CompileError(f"nvrtcCreateProgram failed ({e})")
  try:
    opts = [f"--gpu-architecture={arch}".encode(), b"--fmad=false", b"--prec-div=true", b"--prec-sqrt=true", b"-w"]
    if lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts)) != 0:
      n = ctypes.c_size_t()
      lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
      log = ctypes.create_string_buffer(n.value)
      lib.nvrtcGetProgramLog(prog, log)
      raise CompileError(f"NVRTC ({arch}) failed on kernel {name}:\n{log.value.decode(errors='replace').strip()}\n--- source ---\n{src}")
    n = ctypes.c_size_t()
    lib.nvrtcGetCUBINSize(prog, ctypes.byref(n))
    out = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetCUBIN(prog, out)
    return out.raw
  finally: lib.nvrtcDestroyProgram(ctypes.byref(prog))

@functools.cache
def _driver() -> Any:
  """libcuda.so.1, initialized; None where the driver is not installed or does not start."""
  try: lib = ctypes.CDLL("libcuda.so.1")
  except OSError: return None
  return lib if lib.cuInit(0) == 0 else None

def _check(code: int, what: str) -> None:
  if code != 0:
    s = ctypes.c_char_p()
    if (lib := _driver()) is not None: lib.cuGetErrorString(code, ctypes.byref(s))
    raise DeviceError(f"CUDA {what} failed: {s.value.decode() if s.value else 'error'} ({code})")

def device_count() -> int:
  if (lib := _driver()) is None: return 0
  n = ctypes.c_int()
  return n.value if lib.cuDeviceGetCount(ctypes.byref(n)) == 0 else 0

def available(default: bool = False) -> bool:
  """A GPU and the driver are here (NVRTC is needed too, to compile)."""
  return device_count() > 0 and _nvrtc() is not None

class CUDAAllocator(Allocator):
  def __init__(self, dev: CUDADevice): self.dev = dev
  def alloc(self, nbytes: int) -> Any:
    self.dev.activate()
    p = ctypes.c_uint64()
    if (e := self.dev.lib.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(max(nbytes, 1)))) != 0:
      raise AllocationError(f"{self.dev.name}: could not allocate {nbytes} bytes (CUDA error {e})")
    return p
  def free(self, handle: Any, nbytes: int) -> None: self.dev.lib.cuMemFree_v2(handle)
  def copyin(self, handle: Any, src: np.ndarray) -> None:
    self.dev.activate()
    _check(self.dev.lib.cuMemcpyHtoD_v2(handle, ctypes.c_void_p(src.ctypes.data), ctypes.c_size_t(src.nbytes)), "copy to the device")
  def copyout(self, dst: np.ndarray, handle: Any) -> None:
    self.dev.activate()
    _check(self.dev.lib.cuMemcpyDtoH_v2(ctypes.c_void_p(dst.ctypes.data), handle, ctypes.c_size_t(dst.nbytes)), "copy to the host")
  def view(self, handle: Any, offset: int, nbytes: int) -> Any: return ctypes.c_uint64(handle.value + offset)

class CUDADevice(Compiled):
  """One GPU: its context, allocator, and program() compiling CUDA C with NVRTC for its compute capability."""
  def __init__(self, name: str, index: int):
    lib = _driver()
    if lib is None: raise DeviceError(f"{name}: the CUDA driver is not here: {DRIVER_INSTALL}")
    if index >= (n := device_count()): raise DeviceError(f"{name}: there are {n} CUDA devices")
    if _nvrtc() is None: raise DeviceError(f"{name}: no NVRTC to compile kernels: {NVRTC_INSTALL}")
    self.lib, dev, self.ctx = lib, ctypes.c_int(), ctypes.c_void_p()
    _check(lib.cuDeviceGet(ctypes.byref(dev), index), "cuDeviceGet")
    _check(lib.cuCtxCreate_v2(ctypes.byref(self.ctx), 0, dev), "cuCtxCreate")
    major, minor = ctypes.c_int(), ctypes.c_int()
    _check(lib.cuDeviceGetAttribute(ctypes.byref(major), 75, dev), "cuDeviceGetAttribute")
    _check(lib.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev), "cuDeviceGetAttribute")
    self.arch = f"sm_{major.value}{minor.value}"
    most = ctypes.c_int()  # CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK
    _check(lib.cuDeviceGetAttribute(ctypes.byref(most), 1, dev), "cuDeviceGetAttribute")
    self.max_group = most.value
    alloc = CUDAAllocator(self)
    alloc.transfer = lambda dst, src, n: _check(lib.cuMemcpyDtoD_v2(dst, src, ctypes.c_size_t(n)), "copy on the device") if n else None
    super().__init__(name, self._build, alloc, lambda: _check(self.activate() or lib.cuCtxSynchronize(), "synchronize"))
  def activate(self) -> None: _check(self.lib.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
  def _build(self, src: str, name: str) -> Callable:
    image = compile_cuda(src, self.arch, name)
    self.activate()
    mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
    _check(self.lib.cuModuleLoadData(ctypes.byref(mod), image), f"loading kernel {name}")
    _check(self.lib.cuModuleGetFunction(ctypes.byref(fn), mod, name.encode()), f"finding kernel {name}")
    return CUDAProgram(self, mod, fn, name, *launch_info(src))

_SCALARS = {"int": ctypes.c_int32, "unsigned_int": ctypes.c_uint32, "long_long": ctypes.c_int64, "unsigned_long_long": ctypes.c_uint64,
            "float": ctypes.c_float, "double": ctypes.c_double, "short": ctypes.c_int16, "unsigned_short": ctypes.c_uint16,
            "signed_char": ctypes.c_int8, "unsigned_char": ctypes.c_uint8, "bool": ctypes.c_bool}

class CUDAProgram:
  """A loaded kernel: call it with the buffers and scalar values; it waits for the kernel and returns its time (s) from events."""
  def __init__(self, dev: CUDADevice, mod: Any, fn: Any, name: str, gsz: tuple[int, ...], lsz: tuple[int, ...], scalars: list[str]):
    self.dev, self.mod, self.fn, self.name = dev, mod, fn, name
    self.scalars = [_SCALARS[t] for t in scalars]
    g, lo = list(gsz) + [1] * (3 - len(gsz)), list(lsz) + [1] * (3 - len(lsz))
    self.grid, self.block = [a // b for a, b in zip(g, lo)], lo
  def __call__(self, bufs: list[Buffer], vals: tuple = ()) -> float:
    lib = self.dev.lib
    self.dev.activate()
    args = [b._buf if b._buf is not None else b.ensure_allocated()._buf for b in bufs] + [t(v) for t, v in zip(self.scalars, vals)]
    ptrs = (ctypes.c_void_p * len(args))(*[ctypes.cast(ctypes.byref(a), ctypes.c_void_p) for a in args])
    start, end = ctypes.c_void_p(), ctypes.c_void_p()
    lib.cuEventCreate(ctypes.byref(start), 0), lib.cuEventCreate(ctypes.byref(end), 0)
    lib.cuEventRecord(start, None)
    _check(lib.cuLaunchKernel(self.fn, *self.grid, *self.block, 0, None, ptrs, None), f"launch {self.name}")
    lib.cuEventRecord(end, None)
    _check(lib.cuEventSynchronize(end), f"kernel {self.name}")
    ms = ctypes.c_float()
    lib.cuEventElapsedTime(ctypes.byref(ms), start, end)
    lib.cuEventDestroy_v2(start), lib.cuEventDestroy_v2(end)
    return ms.value * 1e-3

def device(name: str = "CUDA") -> Compiled:
  return CUDADevice(name, int(name.partition(":")[2] or 0))
