"""Batched native replay for TinyJit (tensor/jit.py) on the CPU device: one generated C function calls a captured
sequence of kernels (each rendered kernel exports `name_call(bufs, ivals, fvals)`, runtime/ops_cpu.py) and copies, so a
replay is one ctypes call whatever the number of kernels.

The C source holds only the structure (which table entries each call reads); the pointers and scalar values live in
tables the caller owns, so captures with the same structure share one compiled object (runtime/kernel_cache.py).
"""
from __future__ import annotations
import ctypes, hashlib
from dataclasses import dataclass

@dataclass(frozen=True)
class VarArg:
  """A kernel's scalar argument that is the replay's variable number `index` (a Variable's value, set per replay)."""
  index: int

@dataclass(frozen=True)
class KernelCall:
  """Call the kernel at address `fn` (its `name_call`) on the pointer-table slots `bufs`, with int and float arguments
  (constants, or VarArg for an int the replay sets)."""
  fn: int
  bufs: tuple[int, ...]
  ints: tuple[int | VarArg, ...] = ()
  floats: tuple[float, ...] = ()

@dataclass(frozen=True)
class MemCopy:
  """Copy `nbytes` from slot `src` to slot `dst` (a COPY between host-memory devices)."""
  dst: int
  src: int
  nbytes: int

Step = KernelCall | MemCopy

def render(name: str, steps: list[Step]) -> tuple[str, list[int], list[float], list[tuple[int, int]]]:
  """The C source of one replay function, the initial int and float tables, and the (int slot, variable) pairs it fills.
  `void name(void* const* t)` takes one argument (each one more costs a ctypes call about 0.05 us), the table of tables:
  t[0] the buffer pointers by slot, t[1] and t[2] the int and float scalars, t[3] the kernel addresses in call order,
  t[4] the variables' values."""
  lines, ivals, fvals, var_slots = [], [], [], []
  nk = 0
  for s in steps:
    if isinstance(s, MemCopy):
      lines.append(f"  memcpy(p[{s.dst}], p[{s.src}], {s.nbytes}ull);")
      continue
    io, fo = len(ivals), len(fvals)
    for a in s.ints:
      if isinstance(a, VarArg):
        var_slots.append((len(ivals), a.index))
        ivals.append(0)
      else: ivals.append(a if a < 2**63 else a - 2**64)  # a uint64 value passes as its bits
    fvals.extend(s.floats)
    ptrs = ", ".join(f"p[{b}]" for b in s.bufs) or "0"
    lines.append(f"  {{ void* b[] = {{{ptrs}}}; ((kernel_t)f[{nk}])(b, iv + {io}, fv + {fo}); }}")
    nk += 1
  head = ["#include <string.h>", "typedef void (*kernel_t)(void* const*, const long long*, const double*);",
          f"void {name}(void* const* t) {{",
          "  void* const* p = t[0]; long long* iv = t[1]; const double* fv = t[2]; void* const* f = t[3]; const long long* v = t[4];"]
  fill = [f"  iv[{slot}] = v[{k}];" for slot, k in var_slots]
  return "\n".join(head + fill + lines + ["}"]) + "\n", ivals, fvals, var_slots

class NativeReplay:
  """A compiled replay of `steps` over a pointer table of `n_slots` entries. Set the pointers with set_ptr (fixed ones once,
  inputs before each call), then call it with the variables' values."""
  def __init__(self, steps: list[Step], n_slots: int, n_vars: int = 0):
    from runtime.ops_cpu import program  # the CPU device's compiler and kernel cache
    body, ivals, fvals, _ = render("replay", steps)
    name = f"jit_replay_{hashlib.sha256(body.encode()).hexdigest()[:16]}"
    src = body.replace("void replay(", f"void {name}(", 1)
    prog = program(src, name)
    self._lib = prog.lib  # type: ignore[attr-defined]  # keeps the object loaded
    self._fn = getattr(self._lib, name)
    self._fn.restype, self._fn.argtypes = None, None
    self.steps = steps
    self.ptrs = (ctypes.c_void_p * max(n_slots, 1))()
    self.ivals = (ctypes.c_longlong * max(len(ivals), 1))(*ivals)
    self.fvals = (ctypes.c_double * max(len(fvals), 1))(*fvals)
    fns = [s.fn for s in steps if isinstance(s, KernelCall)]
    self.fns = (ctypes.c_void_p * max(len(fns), 1))(*fns)
    self.vars = (ctypes.c_longlong * max(n_vars, 1))()
    self._tables = (ctypes.c_void_p * 5)(*(ctypes.addressof(a) for a in (self.ptrs, self.ivals, self.fvals, self.fns, self.vars)))

  def __call__(self) -> None: self._fn(self._tables)

def kernel_address(prog, name: str) -> int | None:
  """The address of `name_call` in a loaded CPU kernel (runtime/ops_cpu.load's prog), or None when it has none."""
  lib = getattr(prog, "lib", None)
  if lib is None or not hasattr(lib, f"{name}_call"): return None
  return ctypes.cast(getattr(lib, f"{name}_call"), ctypes.c_void_p).value

__all__ = ["NativeReplay", "KernelCall", "MemCopy", "VarArg", "kernel_address"]
