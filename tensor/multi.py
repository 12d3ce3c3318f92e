"""Multi-device tensors in one process, as the frontend makes them: `Tensor.shard(devices, axis)` splits a tensor on an axis
over several devices (axis=None: the whole tensor on each), `.to(devices)` replicates, `.to(device)` gathers. They are
MULTI nodes in the ordinary tensor graph (autograd differentiates it as it is); the engine lowers them to per-device
graphs before scheduling (tensor/engine/multi.py, rules/multi.rules). docs/distributed.md says how to use them.
"""
from __future__ import annotations
from runtime.device import Device
from runtime.ops import Ops
from runtime.uop import SPLIT_AXIS, UOp, uop, shape_str
from rules.multi import multi
from rules.multi_helpers import MultiDeviceError
from runtime.rewrite import graph_rewrite
from tensor.engine.multi import USED
from tensor.engine.storage import device_node, realized_buffer
from tensor.errors import AxisError

def canonical_devices(devices) -> tuple[str, ...]:
  """A tuple of device names in canonical form; at least two, all different."""
  devs = tuple(Device.canonicalize(d) for d in devices)
  if len(devs) < 2: raise MultiDeviceError(f"a multi-device tensor needs at least two devices, got {devs}")
  if len(set(devs)) != len(devs): raise MultiDeviceError(f"the devices of a multi-device tensor must differ, got {devs}")
  USED[0] = True
  return devs

def shard(x: UOp, devices, axis: int | None) -> UOp:
  """x (on one device) split on `axis` over devices, an equal piece on each; axis=None: the whole of x on each."""
  if x.device.__class__ is tuple: raise MultiDeviceError(f"shard of a tensor on several devices already ({x.device}): .to(one device) first")
  devs = canonical_devices(devices)
  if axis is None: return to_devices(x, devs)
  shape, n = x.shape, len(devs)
  if not -len(shape) <= axis < len(shape): raise AxisError(f"shard axis {axis} out of range for shape {shape_str(shape)}")
  axis %= len(shape)
  if shape[axis].__class__ is not int or shape[axis] % n:
    raise MultiDeviceError(f"shard of shape {shape_str(shape)} on axis {axis}: its size {shape[axis]} does not split evenly over {n} devices")
  size = shape[axis] // n
  pieces = []
  for i, d in enumerate(devs):
    p = uop(Ops.SHRINK, x.dtype, (x,), tuple((i * size, (i + 1) * size) if a == axis else (0, s) for a, s in enumerate(shape)))
    pieces.append(p if x.device == d else uop(Ops.COPY, x.dtype, (p, device_node(d))))
  return uop(Ops.MULTI, x.dtype, tuple(pieces), axis)

def to_devices(x: UOp, devices) -> UOp:
  """x whole on each of devices (a COPY to them all, lowered per device)."""
  devs = canonical_devices(devices)
  if x.device == devs: return x
  return uop(Ops.COPY, x.dtype, (x, device_node(devs)))  # type: ignore[arg-type]

def stored(x: UOp) -> bool:
  """Whether a tensor over several devices is in memory: a MULTI of realized buffers (what an assign writes into)."""
  return x.op is Ops.MULTI and all(realized_buffer(s) is not None for s in x.src)

def axis_of(x: UOp) -> int | None:
  """The axis a tensor over several devices is split on (None: whole on each), found by lowering its graph (nothing runs)."""
  if x.op is not Ops.MULTI: x = graph_rewrite(x, multi, name="multi")
  return x.arg if x.op is Ops.MULTI else None

SPLIT_AXIS.append(axis_of)  # UOp.axis

def shard_like(x: UOp, y: UOp) -> UOp:
  """x laid out as y: on y's device, or split over y's devices on y's axis."""
  if y.device.__class__ is not tuple: return x if x.device == y.device else uop(Ops.COPY, x.dtype, (x, device_node(y.device)))
  axis = axis_of(y)
  if x.device.__class__ is tuple:
    if x.device == y.device and axis_of(x) == axis: return x
    x = uop(Ops.COPY, x.dtype, (x, device_node(x.device[0])))  # gathered, then split as y
  return shard(x, y.device, axis)

__all__ = ["MultiDeviceError", "canonical_devices", "shard", "to_devices", "shard_like", "axis_of", "stored"]
