"""A Target: what codegen knows of a device, passed into lowering (tensor/codegen/__init__.py) and BEAM search
(tensor/codegen/beam.py). A device contributes its renderer (the language, and through it what vectors give: caps), its
cost model, and from runtime/device.py its compiler and its allocator. The engine keeps one Target per device it runs on
(Engine.target, tensor/engine/state.py); `target_for` makes one.

The devices issue adds a renderer per language (OpenCL C, CUDA C) chosen by what the device reports it can do, and a
device's own allocator; lowering reads only `caps` and `cost`, so a new target needs no change here beyond RENDERERS.
"""
from __future__ import annotations
from typing import Any, Callable
from rules.vectorize_helpers import VectorCaps
from runtime.device import Buffer, Device, DeviceError
from runtime.dtype import DType
from runtime.helpers import getenv
from runtime.threads import cores
from tensor.codegen.cost import CostModel
from tensor.codegen.grid import GridCostModel
from tensor.renderer import Renderer, UOpRenderer
from tensor.renderer.cstyle import CRenderer
from tensor.renderer.gpu import CLRenderer, CUDARenderer

class Target:
  """A device's renderer and cost model, its compiler (source, name -> callable(buffers, values)) and allocator.
  `searchable`: whether timing its programs tells anything about a machine (BEAM searches only there: not on an
  interpreter). `searched`: the Opt lists BEAM chose for its kernels in this process, by search key (the disk keeps them
  for the next processes)."""
  def __init__(self, device: str, renderer: Renderer, cost: CostModel | None = None, searchable: bool = True):
    self.device, self.renderer, self.cost, self.searchable = device, renderer, cost if cost is not None else CostModel(), searchable
    self.searched: dict[str, list] = {}

  @property
  def caps(self) -> VectorCaps | None:
    """The vector ops and widths lowering may use (None: scalars only)."""
    return self.renderer.caps

  def compile(self, src: Any, name: str) -> Callable:
    """The device's program for a rendered kernel (the C compiler for CPU; the interpreter for PYTHON's UOp list)."""
    return Device[self.device].program(src, name)

  def allocate(self, size: int, dtype: DType) -> Buffer:
    """A buffer of `size` elements on the device (allocated on first use)."""
    return Buffer(self.device, size, dtype)

  def machine(self) -> str:
    """What lowering reads of the machine, for cache keys: the vector registers (AVX-512 and AVX2 programs differ) and the
    cores a kernel's threads default to, so a cache folder shared by machines of different kinds keeps a program per kind."""
    if (caps := self.caps) is None: return f"scalar cores={cores()}"
    # names sorted: a frozenset's order follows string hashes, which differ between processes
    ops, scalars = sorted(o.name for o in caps.ops), sorted(d.name for d in caps.scalars)
    # (a GPU-style target: whether its matmuls are LOCAL tiles, an OpenCL GPU's and pocl's programs differ)
    tiles = f" tiles={int(self.renderer.local_tiles)}" if self.renderer.group_max else ""
    return f"{ops} {scalars} {caps.min_bytes} {caps.max_bytes} {caps.register_bytes} {caps.registers} cores={cores()}{tiles}"

  def __repr__(self) -> str: return f"<Target {self.device} {type(self.renderer).__name__}>"

# the renderer of each kind of device's language, and the cost model of the kinds whose loops run on a launch grid
RENDERERS: dict[str, Callable[[], Renderer]] = {"CPU": CRenderer, "PYTHON": UOpRenderer, "CL": CLRenderer, "CUDA": CUDARenderer}
GRID_KINDS = ("CL", "CUDA")

def target_for(device: str) -> Target:
  """A Target for a device name (canonical: "CPU", "PYTHON", "CL", "CL:1", ...)."""
  device = Device.canonicalize(device)
  kind = Device.kind(device)
  renderer = RENDERERS[kind](*device_group(device)) if kind in GRID_KINDS else RENDERERS[kind]()  # type: ignore[call-arg]
  return Target(device, renderer, GridCostModel() if kind in GRID_KINDS else None, searchable=kind != "PYTHON")

def device_group(device: str) -> tuple[int | None, bool]:
  """The most work-items in a group the device takes, or None where it can't be opened (CUDA C compiled without a GPU), and
  whether it is a GPU (CUDA's always; an OpenCL device says, pocl is a CPU)."""
  # LOCAL_TILES=1 (0): the heuristic tiles matmuls through group memory (or not) whatever the device is: the GPU's kernels
  # tested on pocl
  forced = getenv("LOCAL_TILES", -1)
  try: dev = Device[device]
  except DeviceError: return None, Device.kind(device) == "CUDA" if forced < 0 else bool(forced)
  return getattr(dev, "max_group", None), getattr(dev, "gpu", True) if forced < 0 else bool(forced)

__all__ = ["Target", "target_for", "RENDERERS"]
