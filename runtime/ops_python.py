"""The PYTHON device: interprets a linear kernel program one scalar at a time with exec_alu, so its results are the
exact semantics every other device must match. Slow by design: the reference in tests. Reads and writes outside a
buffer raise instead of corrupting memory.
"""
from __future__ import annotations
import struct
from typing import Any, Callable
import numpy as np
from runtime.device import Buffer, Compiled, DeviceError
from runtime.dtype import dtypes, truncate
from runtime.ops import GroupOp, Ops, cast_value, exec_alu
from runtime.uop import UOp

class KernelMemoryError(DeviceError):
  """A kernel read or wrote outside a buffer."""

def _nest(uops: list[UOp]) -> list:
  """The program as a tree: a RANGE becomes (range, body) up to its END."""
  root: list = []
  stack = [root]
  for u in uops:
    if u.op is Ops.RANGE:
      body: list = []
      stack[-1].append((u, body))
      stack.append(body)
    elif u.op is Ops.END: stack.pop()
    else: stack[-1].append(u)
  return root

def _to_bits_bf16(x: float) -> int: return int(np.float32(truncate(dtypes.bfloat16, x)).view(np.uint32)) >> 16
def _from_bits_bf16(b: int) -> float: return float(np.uint32(int(b) << 16).view(np.float32))

def program(uops: list[UOp], name: str) -> Callable:
  tree = _nest(uops)
  def run(bufs: list[Buffer], var_vals: tuple[int, ...] = ()) -> None:
    env: dict[UOp, Any] = {}
    vars_ = iter(var_vals)
    for u in uops:
      if u.op is Ops.DEFINE_GLOBAL: env[u] = bufs[u.arg]
      elif u.op is Ops.DEFINE_VAR: env[u] = next(vars_)
    _exec(tree, env, name)
  return run

def _exec(block: list, env: dict, name: str) -> None:
  for item in block:
    if isinstance(item, tuple):
      rng, body = item
      for i in range(env[rng.src[0]]):
        env[rng] = i
        _exec(body, env, name)
      continue
    u: UOp = item
    op = u.op
    if op in (Ops.DEFINE_GLOBAL, Ops.DEFINE_VAR): continue
    if op is Ops.CONST: env[u] = u.arg
    elif op is Ops.INDEX: env[u] = (env[u.src[0]], env[u.src[1]], env[u.src[2]] if len(u.src) > 2 else True)
    elif op is Ops.LOAD:
      buf, i, valid = env[u.src[0]]
      env[u] = _load(buf, i, u, name) if valid else cast_value(0, u.dtype)
    elif op is Ops.STORE:
      buf, i, valid = env[u.src[0]]
      if valid: _store(buf, i, env[u.src[1]], name)
    elif op is Ops.DEFINE_REG: env[u] = env[u.src[0]]
    elif op is Ops.DEFINE_LOCAL: env[u] = Buffer("PYTHON", u.dtype.size, u.dtype.base)  # type: ignore[attr-defined]
    elif op is Ops.ASSIGN: env[u.src[0]] = env[u.src[1]]
    elif op is Ops.AFTER: env[u] = env[u.src[0]]
    elif op is Ops.CAST: env[u] = cast_value(env[u.src[0]], u.dtype)
    elif op is Ops.BITCAST: env[u] = _bitcast(env[u.src[0]], u.src[0].dtype, u.dtype)
    elif op in GroupOp.ALU: env[u] = exec_alu(op, u.dtype, [env[s] for s in u.src])
    elif op is Ops.END or op is Ops.CUSTOM and u.arg == "prefetch": continue  # a prefetch is a hint to a cache
    else: raise NotImplementedError(f"the PYTHON device can't run {op}")

def _check(buf: Buffer, i: int, name: str, what: str) -> None:
  if not 0 <= i < buf.size: raise KernelMemoryError(f"kernel {name} {what} element {i} of a buffer of {buf.size}")

def _load(buf: Buffer, i: int, u: UOp, name: str) -> Any:
  _check(buf, i, name, "reads")
  v = buf.as_array()[i]
  if buf.dtype is dtypes.bfloat16: return _from_bits_bf16(v)
  return v.item() if not isinstance(v, bool) else v

def _store(buf: Buffer, i: int, v: Any, name: str) -> None:
  _check(buf, i, name, "writes")
  buf.as_array()[i] = _to_bits_bf16(v) if buf.dtype is dtypes.bfloat16 else v

def _bitcast(v: Any, src, dst) -> Any:
  if src.scalar is dtypes.bfloat16: raw = struct.pack("<H", _to_bits_bf16(v))
  else: raw = np.array([v], dtype=dtypes.to_numpy(src)).tobytes()
  if dst.scalar is dtypes.bfloat16: return _from_bits_bf16(struct.unpack("<H", raw)[0])
  return np.frombuffer(raw, dtype=dtypes.to_numpy(dst))[0].item()

def device(name: str = "PYTHON") -> Compiled: return Compiled(name, program)
def available(default: bool = False) -> bool: return True  # the interpreter runs wherever Python does
