"""A name alias that lets tinygrad's own test files import our modules: `tinygrad.X` resolves to our module(s) for X.
Loaded as a pytest plugin by bench/tinygrad_parity.py (`-p bench.tinygrad_alias`); it maps names and implements nothing.

- MODULES: each tinygrad module and the modules of ours that hold its names (looked up in order), as API.md's table.
- RENAMES: a tinygrad name that ours spells differently (`_to_np_dtype` is `dtypes.to_numpy`).
- ENVIRONMENT: the few names tinygrad's tests read only to pick which hardware or backend they run on (`DEV.renderer`,
  `IMAGE`, `isinstance(renderer, PTXRenderer)`), answered as what this machine is: a CPU with a C renderer, no images, no
  other renderer. No feature is behind them. `Ops` is ours, with tinygrad's members that ours lacks (CUSTOM_FUNCTION, the
  graph and HCQ batches) answering as ops no node is.
- Any other tinygrad name has no counterpart: it imports as a placeholder that raises `NoCounterpart` when a test uses it,
  so only the tests that use it fail, with the name in the message.

PARITY_ALIAS=0 turns the alias off (the reference run on tinygrad itself); PARITY_TIMEOUT (seconds, default 300) bounds one
test in both runs, so a hang fails that test instead of the run.
"""
from __future__ import annotations
import importlib, importlib.abc, importlib.machinery, os, signal, sys, types
from typing import Any

# tinygrad module -> our modules holding its names (first hit wins)
MODULES: dict[str, tuple[str, ...]] = {
  "tinygrad": ("tensor", "runtime"),
  "tinygrad.tensor": ("tensor.tensor", "tensor"),
  "tinygrad.dtype": ("runtime.dtype",),
  "tinygrad.helpers": ("tensor.helpers", "runtime.helpers"),
  "tinygrad.device": ("runtime.device",),
  "tinygrad.uop": ("runtime",),
  "tinygrad.uop.ops": ("runtime", "runtime.uop", "runtime.ops", "dslc"),
  "tinygrad.nn": ("tensor.nn",),
  "tinygrad.nn.state": ("tensor.nn.state",),
  "tinygrad.nn.optim": ("tensor.nn.optim",),
  "tinygrad.nn.datasets": ("tensor.nn.datasets",),
  "tinygrad.engine": ("tensor.engine",),
  "tinygrad.engine.jit": ("tensor.jit", "tensor.engine.jit"),
  "tinygrad.engine.realize": ("tensor.engine.realize",),
  "tinygrad.engine.schedule": ("tensor.engine.schedule",),
  "tinygrad.codegen": ("tensor.codegen",),
  "tinygrad.renderer": ("tensor.renderer",),
  "tinygrad.renderer.cstyle": ("tensor.renderer.cstyle",),
  "tinygrad.runtime": ("runtime",),
  "tinygrad.runtime.ops_cpu": ("runtime.ops_cpu",),
  "tinygrad.runtime.ops_python": ("runtime.ops_python",),
}
# (tinygrad module, name) -> (our module, attribute path)
RENAMES: dict[tuple[str, str], tuple[str, str]] = {
  ("tinygrad.tensor", "_to_np_dtype"): ("runtime.dtype", "dtypes.to_numpy"),
  ("tinygrad.dtype", "_to_np_dtype"): ("runtime.dtype", "dtypes.to_numpy"),
}

class _NotThisBackend:
  """A renderer class of tinygrad's that this machine does not have: nothing is an instance of it."""
  def __init__(self, *args, **kwargs): raise NoCounterpart("this renderer does not exist here")

class _RendererFacts:
  """What tinygrad's tests read of `Device[d].renderer` to pick their inputs: the dtypes it renders (ours renders all)."""
  def __init__(self, device: str):
    from tensor.codegen.target import RENDERERS
    self.device, self.renderer = device, RENDERERS[device]()
  def supported_dtypes(self) -> list:
    from runtime.dtype import dtypes
    return list(dtypes.all())
  def __getattr__(self, name: str) -> Any: return getattr(self.renderer, name)

class _DeviceFacts:
  """`Device[d]` as tinygrad's tests read it: our device, plus its renderer (a Target's here, not the device's)."""
  def __init__(self, device: Any): self._device = device
  @property
  def renderer(self) -> _RendererFacts: return _RendererFacts(self._device.name)
  graph = None  # no graph executor: the tests that need one skip
  def __getattr__(self, name: str) -> Any: return getattr(self._device, name)

class _DeviceView:
  """tinygrad's `Device` registry over ours: the same names and DEFAULT; items are _DeviceFacts."""
  def __getitem__(self, name: str) -> _DeviceFacts:
    from runtime.device import Device
    return _DeviceFacts(Device[name])
  def __getattr__(self, name: str) -> Any:
    from runtime.device import Device
    return getattr(Device, name)

class _AbsentOp:
  """A member of tinygrad's Ops that ours has no counterpart of (CUSTOM_FUNCTION: graph and HCQ batches): no node is one."""
  def __init__(self, name: str): self.name = name
  def __repr__(self) -> str: return f"Ops.{self.name} (no such op here)"

class _OpsMeta(type):
  """tinygrad's `Ops` over ours: the same members, isinstance and iteration; a name ours lacks is an _AbsentOp, so a test
  asking `op is Ops.CUSTOM_FUNCTION` gets False (no op of that kind runs here) instead of an AttributeError."""
  def __getattr__(cls, name: str) -> Any:
    from runtime.ops import Ops
    if name.startswith("_"): raise AttributeError(name)
    if hasattr(Ops, name): return getattr(Ops, name)
    return cls._absent.setdefault(name, _AbsentOp(name))
  def __iter__(cls): from runtime.ops import Ops; return iter(Ops)  # noqa: E702
  def __len__(cls): from runtime.ops import Ops; return len(Ops)  # noqa: E702
  def __getitem__(cls, name: str): from runtime.ops import Ops; return Ops[name]  # noqa: E702
  def __instancecheck__(cls, x: Any) -> bool: from runtime.ops import Ops; return isinstance(x, Ops)  # noqa: E702

class _OpsView(metaclass=_OpsMeta):
  _absent: dict[str, _AbsentOp] = {}

def _environment() -> dict[tuple[str, str], Any]:
  from runtime.device import Device
  dev = types.SimpleNamespace(device=Device.DEFAULT, renderer="C", interface="", arch="")
  view = _DeviceView()
  ops = {(m, "Ops"): _OpsView for m in ("tinygrad", "tinygrad.uop", "tinygrad.uop.ops")}
  return {("tinygrad.helpers", "DEV"): dev, **ops, ("tinygrad.helpers", "IMAGE"): 0, ("tinygrad", "Device"): view,
          ("tinygrad.device", "Device"): view,
          **{(m, n): _NotThisBackend for m, n in [("tinygrad.renderer.nir", "NIRRenderer"), ("tinygrad.renderer.ptx", "PTXRenderer"),
                                                   ("tinygrad.renderer.isa.x86", "X86Renderer")]}}

class NoCounterpart(NotImplementedError):
  """A tinygrad name with no counterpart here was used."""

class _MissingMeta(type):
  """The placeholder's class: any use of the placeholder (call, attribute, arithmetic, truth) raises NoCounterpart."""
  def _fail(cls, *args, **kwargs): raise NoCounterpart(f"{cls.__qualname__} has no counterpart in this library")
  __call__ = __bool__ = __int__ = __float__ = __len__ = __iter__ = __getitem__ = _fail
  __lt__ = __le__ = __gt__ = __ge__ = __add__ = __radd__ = __sub__ = __mul__ = __rmul__ = __truediv__ = _fail
  def __getattr__(cls, name):
    if name.startswith("__"): raise AttributeError(name)
    cls._fail()
  def __eq__(cls, other): return cls is other
  def __hash__(cls): return id(cls)

def missing(qualname: str) -> type:
  return _MissingMeta(qualname.rsplit(".", 1)[-1], (), {"__qualname__": qualname, "__module__": qualname.rsplit(".", 1)[0]})

class AliasModule(types.ModuleType):
  """tinygrad.X, its names looked up in our modules for X."""
  def __init__(self, name: str, sources: tuple[str, ...]):
    super().__init__(name)
    self.__path__: list[str] = []  # a package: tinygrad.X.Y imports through the finder too
    self._sources = sources
  def __getattr__(self, attr: str) -> Any:
    if attr.startswith("__"): raise AttributeError(attr)
    name = self.__name__
    if (name, attr) in RENAMES:
      mod, path = RENAMES[(name, attr)]
      value: Any = importlib.import_module(mod)
      for part in path.split("."): value = getattr(value, part)
      return value
    if (name, attr) in (env := _environment()): return env[(name, attr)]
    for src in self._sources:
      try: mod = importlib.import_module(src)
      except ImportError: continue
      if hasattr(mod, attr): return getattr(mod, attr)
    if f"{name}.{attr}" in MODULES or f"{name}.{attr}" in sys.modules: return importlib.import_module(f"{name}.{attr}")
    return missing(f"{name}.{attr}")

class AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
  """Finds every tinygrad.* module (ahead of a tinygrad checkout on sys.path) and makes it an AliasModule."""
  def find_spec(self, fullname, path=None, target=None):
    if fullname != "tinygrad" and not fullname.startswith("tinygrad."): return None
    return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
  def create_module(self, spec): return AliasModule(spec.name, MODULES.get(spec.name, ()))
  def exec_module(self, module): pass

def install() -> None:
  if not any(isinstance(f, AliasFinder) for f in sys.meta_path): sys.meta_path.insert(0, AliasFinder())

# ---- the pytest plugin ----

def pytest_configure(config) -> None:
  sys.dont_write_bytecode = True  # the checkout is someone else's: no __pycache__ in it
  if os.environ.get("PARITY_ALIAS", "1") != "0": install()

class TestTimeout(Exception):
  """A test ran longer than PARITY_TIMEOUT seconds."""

def _alarm(signum, frame): raise TestTimeout(f"the test ran longer than {os.environ.get('PARITY_TIMEOUT', '300')} s")

import pytest  # noqa: E402  (the plugin half of the module needs pytest; the alias half does not)

@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item) -> None:
  if hasattr(signal, "SIGALRM"):
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(int(os.environ.get("PARITY_TIMEOUT", "300")))

@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item) -> None:
  if hasattr(signal, "SIGALRM"): signal.alarm(0)
