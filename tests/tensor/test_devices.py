"""The devices under the tensor layer: the CPU device's compile cache (hits, a corrupt entry, a read-only folder,
concurrent writers, a missing compiler) and the PYTHON device's bounds checks; CPU and PYTHON agree bit for bit on
float16 arithmetic. Every test compiles into its own CACHE_DIR.
"""
import os, subprocess, sys, uuid
from concurrent.futures import ThreadPoolExecutor
import numpy as np
import pytest
from tensor import Tensor, Device, dtypes
from runtime import ops_cpu
from runtime.device import Buffer, CompileError, DeviceError
from runtime.ops import Ops
from runtime.ops_python import KernelMemoryError
from runtime.uop import uop

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

def kernel_source(name: str, k: int) -> str:
  """A small C kernel data0[i] = data1[i] + k, unique per (name, k)."""
  return f"void {name}(int* restrict data0, int* restrict data1) {{ for (int i = 0; i < 4; i++) data0[i] = data1[i] + {k}; }}\n"

def run_kernel(prog, k: int) -> list[int]:
  out, inp = Buffer("CPU", 4, dtypes.int32), Buffer("CPU", 4, dtypes.int32, np.arange(4, dtype=np.int32))
  prog([out, inp])
  return out.numpy().tolist()

@pytest.fixture
def cache(tmp_path, monkeypatch):
  d = tmp_path / "cache"
  monkeypatch.setenv("CACHE_DIR", str(d))
  return d

@pytest.fixture
def compiles(monkeypatch):
  """The list of compiler runs (each a command line) made while the test runs."""
  calls = []
  real = ops_cpu.run_compiler
  def spy(cmd, *args, **kwargs):
    if "-shared" in cmd: calls.append(cmd)
    return real(cmd, *args, **kwargs)
  monkeypatch.setattr(ops_cpu, "run_compiler", spy)
  return calls

def test_second_compile_hits_the_cache(cache, compiles):
  name, k = f"k_{uuid.uuid4().hex[:8]}", 5
  src = kernel_source(name, k)
  path = ops_cpu.compile_c(src)
  assert os.path.dirname(path) == str(cache) and len(compiles) == 1
  stat = os.stat(path)
  assert ops_cpu.compile_c(src) == path and len(compiles) == 1          # no second compile
  assert os.stat(path).st_mtime_ns == stat.st_mtime_ns
  assert run_kernel(ops_cpu.program(src, name), k) == [5, 6, 7, 8] and len(compiles) == 1
  # other flags are another entry
  assert ops_cpu.compile_c(src, ("-O1",)) != path and len(compiles) == 2
  assert not [f for f in os.listdir(cache) if f.endswith(".tmp.so")]   # no temporary files left behind

def test_tensor_kernels_hit_the_cache_across_processes(cache):
  """A second run of the same program compiles nothing: every kernel comes from the disk cache."""
  code = "import numpy as np; from tensor import Tensor; x = Tensor(np.arange(5, dtype=np.float32), device='CPU'); print((x * 3.25 + 1).sum().item())"
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  runs, entries = [], []
  for _ in range(2):
    runs.append(subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300))
    entries.append(sorted((f, os.stat(cache / f).st_mtime_ns) for f in os.listdir(cache)))
  assert all(r.returncode == 0 for r in runs) and runs[0].stdout == runs[1].stdout == "37.5\n", [r.stderr for r in runs]
  assert entries[0] and entries[0] == entries[1]

@pytest.mark.parametrize("damage", [b"", b"not an ELF file", b"\x7fELF\x02\x01\x01" + b"\0" * 40])
def test_a_corrupt_cache_entry_is_rebuilt(cache, compiles, capsys, damage):
  name, k = f"k_{uuid.uuid4().hex[:8]}", 9
  src = kernel_source(name, k)
  path = ops_cpu.compile_c(src)
  with open(path, "wb") as f: f.write(damage)                          # a torn write, or garbage
  prog = ops_cpu.program(src, name)
  assert run_kernel(prog, k) == [9, 10, 11, 12]
  assert len(compiles) == 2
  assert "rebuilding" in capsys.readouterr().err

def test_a_read_only_cache_dir_warns_once_and_works(tmp_path, monkeypatch, recwarn, compiles):
  d = tmp_path / "ro"
  d.mkdir()
  os.chmod(d, 0o555)
  if os.access(d, os.W_OK):  # root writes anywhere: a folder that can't be made (its parent is a file) instead
    (tmp_path / "file").write_text("")
    d = tmp_path / "file" / "cache"
  monkeypatch.setenv("CACHE_DIR", str(d))
  for k in (3, 4):
    name = f"k_{uuid.uuid4().hex[:8]}"
    assert run_kernel(ops_cpu.program(kernel_source(name, k), name), k) == [k, k + 1, k + 2, k + 3]
  warned = [w for w in recwarn.list if "not writable" in str(w.message)]
  assert len(warned) == 1 and str(d) in str(warned[0].message) and "CACHE_DIR" in str(warned[0].message)
  os.chmod(tmp_path / "ro", 0o755)

def test_concurrent_writers(cache):
  """Threads compiling the same new kernel at once all get a whole shared object."""
  name, k = f"k_{uuid.uuid4().hex[:8]}", 2
  src = kernel_source(name, k)
  with ThreadPoolExecutor(4) as pool: paths = list(pool.map(lambda _: ops_cpu.compile_c(src), range(4)))
  assert len(set(paths)) == 1
  assert run_kernel(ops_cpu.load(name, paths[0]), k) == [2, 3, 4, 5]
  assert not [f for f in os.listdir(cache) if f.endswith(".tmp.so")]

@pytest.fixture
def fresh_compiler():
  """find_compiler and compiler_version read CC once: forget them before and after the test."""
  ops_cpu.find_compiler.cache_clear(); ops_cpu.compiler_version.cache_clear()  # noqa: E702
  yield
  ops_cpu.find_compiler.cache_clear(); ops_cpu.compiler_version.cache_clear()  # noqa: E702

def test_missing_compiler_names_cc(cache, monkeypatch, fresh_compiler):
  monkeypatch.setenv("CC", "/nonexistent/bin/cc-that-is-not-there")
  with pytest.raises(CompileError) as info: ops_cpu.compile_c(kernel_source("k_missing", 1))
  msg = str(info.value)
  assert "CC" in msg and "/nonexistent/bin/cc-that-is-not-there" in msg
  assert isinstance(info.value, DeviceError)
  # the same error surfaces from a tensor that needs a new kernel
  with pytest.raises(CompileError, match="CC"): (Tensor([1.0, 2.0], device="CPU") * 1.03125 + 7.5).realize()

def test_a_compiler_that_fails(cache, monkeypatch, fresh_compiler):
  monkeypatch.setenv("CC", "false")
  with pytest.raises(CompileError, match="failed on a generated kernel"): ops_cpu.compile_c(kernel_source("k_fails", 1))
  assert set(os.listdir(cache)) <= {ops_cpu.PROBES_FILE}              # nothing half-written left behind (the probes file is whole)

# the C the renderer wrote for Tensor(arange(36).reshape(3, 6, 2)).pad(((2, 0), (0, 0), (2, 0))): gcc 12.2 at -O3 -mavx2
# turned the guarded loads into masked loads and stored loaded values where the guard is false (the lanes of i <= 1)
PADDED = """
void E_5_6_4(float* restrict data0, float* restrict data1) {
  for (int ridx0 = 0; ridx0 < 5; ridx0++) {
    int alu0 = (ridx0*24);
    int alu1 = (ridx0*12);
    bool alu2 = (1<ridx0);
    for (int ridx1 = 0; ridx1 < 6; ridx1++) {
      int alu3 = (alu0+(ridx1*4));
      int alu4 = (alu1+(ridx1*2));
      float val0 = (0?*(data1+(alu4+(-26))):0.0f);
      float val1 = (0?*(data1+(alu4+(-25))):0.0f);
      float val2 = (alu2?*(data1+(alu4+(-24))):0.0f);
      float val3 = (alu2?*(data1+(alu4+(-23))):0.0f);
      *(data0+alu3) = val0;
      *(data0+(alu3+1)) = val1;
      *(data0+(alu3+2)) = val2;
      *(data0+(alu3+3)) = val3;
    }
  }
}
"""

def test_guarded_loads_compile_right(cache):
  prog = ops_cpu.program("#include <stdbool.h>\n" + PADDED, "E_5_6_4")
  out, inp = Buffer("CPU", 120, dtypes.float32), Buffer("CPU", 36, dtypes.float32, np.arange(1, 37, dtype=np.float32))
  prog([out, inp])
  expected = np.pad(np.arange(1, 37, dtype=np.float32).reshape(3, 6, 2), ((2, 0), (0, 0), (2, 0)))
  np.testing.assert_array_equal(out.numpy().reshape(5, 6, 4), expected)

# ---- the PYTHON device ----
def _program(index: int, store_at: int = 0, valid: bool | None = None):
  """A linear program: data0[store_at] = data1[index] (the load guarded by `valid` when given)."""
  g0, g1 = uop(Ops.DEFINE_GLOBAL, dtypes.int32.ptr(4), (), 0), uop(Ops.DEFINE_GLOBAL, dtypes.int32.ptr(4), (), 1)
  ci, cs = uop(Ops.CONST, dtypes.int32, (), index), uop(Ops.CONST, dtypes.int32, (), store_at)
  guard = (uop(Ops.CONST, dtypes.bool, (), valid),) if valid is not None else ()
  idx = uop(Ops.INDEX, g1.dtype, (g1, ci, *guard))
  load = uop(Ops.LOAD, dtypes.int32, (idx,))
  out = uop(Ops.INDEX, g0.dtype, (g0, cs))
  store = uop(Ops.STORE, dtypes.void, (out, load))
  return Device["PYTHON"].program(list(dict.fromkeys([g0, g1, ci, cs, *guard, idx, load, out, store])), "k")

def _buffers():
  return [Buffer("PYTHON", 4, dtypes.int32, np.zeros(4, np.int32)), Buffer("PYTHON", 4, dtypes.int32, np.arange(10, 14, dtype=np.int32))]

@pytest.mark.parametrize("index", [4, 5, -1])
def test_python_device_out_of_bounds_read_raises(index):
  bufs = _buffers()
  with pytest.raises(KernelMemoryError, match=f"reads element {index} of a buffer of 4"): _program(index)(bufs)

@pytest.mark.parametrize("at", [4, -1])
def test_python_device_out_of_bounds_write_raises(at):
  bufs = _buffers()
  with pytest.raises(KernelMemoryError, match=f"writes element {at} of a buffer of 4"): _program(0, store_at=at)(bufs)
  assert bufs[0].numpy().tolist() == [0, 0, 0, 0]

def test_python_device_in_bounds_and_guarded_loads():
  bufs = _buffers()
  _program(3, store_at=1)(bufs)
  assert bufs[0].numpy().tolist() == [0, 13, 0, 0]
  _program(7, store_at=2, valid=False)(bufs)                            # a guarded load that is not valid reads nothing
  assert bufs[0].numpy().tolist() == [0, 13, 0, 0]
  with pytest.raises(KernelMemoryError): _program(7, valid=True)(bufs)

def test_float16_agrees_bit_for_bit():
  """_Float16 on CPU rounds after every operation, as the PYTHON device does (gcc would compute it in float)."""
  a = np.array([2.5, 0.1, -3.75, 7.0, 11.1, 1e-3], np.float16)
  outs = []
  for device in ("CPU", "PYTHON"):
    t = Tensor(a, device=device)
    outs.append(np.concatenate([(t.exp() * 3 - t / 7).numpy(), (t * t * t + 1).numpy(), t.sigmoid().numpy(), t.sum(keepdim=True).numpy()]))
  assert outs[0].tobytes() == outs[1].tobytes(), (outs[0], outs[1])

def test_device_names():
  assert Device.canonicalize("cpu") == "CPU" and Device.canonicalize("python:0") == "PYTHON"
  assert Device["cpu"] is Device["CPU"]
  with pytest.raises(DeviceError, match="'TPU'"): Device.canonicalize("TPU")
  Device["CPU"].synchronize()
