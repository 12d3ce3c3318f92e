"""Device names and selection: canonical names (NAME, NAME:N), Device.DEFAULT's order and its overrides (DEV=NAME,
NAME=1), and the error for an unknown name, which says the name and lists the devices and what this machine has."""
import os, subprocess, sys
import numpy as np
import pytest
from runtime.device import AllocationError, Buffer, Device, DeviceError
from runtime.dtype import dtypes
from tensor import Tensor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

@pytest.mark.parametrize("name, canonical", [("cpu", "CPU"), ("CPU:0", "CPU"), ("python", "PYTHON"), ("cl", "CL"), ("CL:0", "CL"),
                                             ("cl:1", "CL:1"), ("CUDA:2", "CUDA:2"), ("CPU:03", "CPU:3")])
def test_canonical_names(name, canonical):
  assert Device.canonicalize(name) == canonical
  assert Device.kind(canonical) == canonical.split(":")[0]

@pytest.mark.parametrize("name", ["METAL", "gpu", "TPU:1"])
def test_an_unknown_device_names_itself_and_the_devices(name):
  with pytest.raises(DeviceError) as e: Device.canonicalize(name)
  msg = str(e.value)
  assert repr(name) in msg and all(k in msg for k in ("CUDA", "CL", "CPU", "PYTHON")) and "available here" in msg

def test_a_bad_device_number_is_an_error():
  with pytest.raises(DeviceError, match="number"): Device.canonicalize("CL:x")

def test_a_tensor_on_an_unknown_device_is_an_error():
  with pytest.raises(DeviceError, match="'NPU'"): Tensor([1, 2], device="NPU")

def _default(env: dict) -> str:
  code = "from runtime.device import Device; print(Device.DEFAULT)"
  clean = {k: v for k, v in os.environ.items() if k not in ("DEV", "CPU", "PYTHON", "CL", "CUDA")}
  r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**clean, **env}, capture_output=True, text=True, timeout=120)
  assert r.returncode == 0, r.stderr
  return r.stdout.strip()

def test_default_and_its_overrides():
  # no GPU here: CUDA has no driver and pocl's OpenCL device is a CPU, so the default is CPU
  from runtime import ops_cl, ops_cuda
  if not ops_cuda.available() and not ops_cl.available(default=True): assert _default({}) == "CPU"
  assert _default({"DEV": "PYTHON"}) == "PYTHON"
  assert _default({"DEV": "python:0"}) == "PYTHON"
  assert _default({"PYTHON": "1"}) == "PYTHON"
  assert _default({"PYTHON": "0"}) != "PYTHON"

def test_available_lists_what_runs_here():
  av = Device.available()
  assert "CPU" in av and "PYTHON" in av and av.index("CPU") < av.index("PYTHON")

def test_host_devices_share_the_host_allocator_and_numbered_ones_are_their_own_devices():
  assert Device.allocator("CPU") is Device.allocator("PYTHON")
  assert Device["CPU:1"] is not Device["CPU"] and Device["CPU:1"].name == "CPU:1"
  t = Tensor([1.0, 2.0], device="CPU:1")
  assert t.device == "CPU:1" and (t * 2).tolist() == [2.0, 4.0]

def test_a_buffer_too_large_for_the_host_is_a_clear_error_and_others_survive():
  keep = Buffer("CPU", 4, dtypes.float32, np.arange(4, dtype=np.float32))
  with pytest.raises(AllocationError, match="could not allocate"): Buffer("CPU", 1 << 62, dtypes.float32).ensure_allocated()
  assert keep.numpy().tolist() == [0, 1, 2, 3]

def test_to_is_lazy_and_a_transfer_is_a_scheduled_copy():
  from runtime.ops import Ops
  x = Tensor([1, 2, 3], device="CPU")
  y = x.to("PYTHON")
  assert y.device == "PYTHON" and y.uop.op is Ops.COPY   # nothing ran yet: a COPY node in the graph
  assert (y + 1).tolist() == [2, 3, 4]
