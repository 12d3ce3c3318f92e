"""Threads in CPU kernels (runtime/threads.py, runtime/ops_cpu.py): hand-written C kernels with `#pragma omp` on their
outermost loop, run through the CPU device. The oracle: the same source built without OpenMP (the pragma ignored), bit
for bit, and numpy. Also the cost model's choices, THREADS, and a process forked after a parallel kernel ran.
"""
import os, subprocess, sys
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from runtime import ops_cpu, threads
from runtime.device import Buffer
from runtime.dtype import dtypes
from runtime.helpers import Context

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

def row_sums_source(name: str, pragma: str) -> str:
  """out[r] = a float sum over row r of x (rows x cols, from ivals), in one serial order per row; who[r] = the thread that
  ran row r. A kernel of the form the renderer writes, with `pragma` above the outer loop."""
  return f"""#ifdef _OPENMP
#include <omp.h>
#define THREAD_ID() omp_get_thread_num()
#else
#define THREAD_ID() 0
#endif
void {name}(float* restrict data0, int* restrict data1, const float* restrict data2, long long rows, long long cols) {{
{pragma}
  for (long long r = 0; r < rows; r++) {{
    float acc = 0.0f;
    for (long long c = 0; c < cols; c++) acc = acc + data2[r * cols + c] * (1.0f + 0.001f * (float)c);
    data0[r] = acc;
    data1[r] = THREAD_ID();
  }}
}}
void {name}_call(void* const* bufs, const long long* ivals, const double* fvals) {{
  {name}((float*)bufs[0], (int*)bufs[1], (const float*)bufs[2], ivals[0], ivals[1]);
}}
"""

@pytest.fixture(scope="module")
def kernels():
  """(parallel on 2 threads, the same source built serial)."""
  src = row_sums_source("row_sums", threads.parallel_pragma(2))
  return ops_cpu.program(src, "row_sums"), ops_cpu._build_and_load(src, "row_sums", openmp=False)

def run(prog, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  rows, cols = x.shape
  out, who, inp = Buffer("CPU", rows, dtypes.float32), Buffer("CPU", rows, dtypes.int32), Buffer("CPU", x.size, dtypes.float32, x.ravel())
  prog([out, who, inp], (rows, cols))
  return out.numpy(), who.numpy()

needs_openmp = pytest.mark.skipif(not ops_cpu.openmp_flags(), reason="the C compiler builds no OpenMP code: kernels run serial")

@settings(max_examples=25, deadline=None)
@given(st.integers(1, 300), st.integers(1, 700), st.integers(0, 2**32 - 1))
def test_threaded_results_equal_one_thread_bit_for_bit(kernels, rows, cols, seed):
  parallel, serial = kernels
  x = np.random.default_rng(seed).standard_normal((rows, cols)).astype(np.float32) * 1e3
  got, _ = run(parallel, x)
  want, who = run(serial, x)
  assert got.view(np.uint32).tolist() == want.view(np.uint32).tolist()
  assert (who == 0).all()  # the serial build ignores the pragma
  terms = x.astype(np.float64) * (1 + 0.001 * np.arange(cols, dtype=np.float32))
  # a float32 running sum of n terms is within about n * eps * sum|terms| of the exact sum (cancellation makes a relative
  # bound useless: rows that sum to almost 0)
  assert (np.abs(got - terms.sum(1)) <= cols * 2.0**-23 * np.abs(terms).sum(1) + 1e-6).all()

@needs_openmp
def test_a_parallel_loop_runs_on_two_threads(kernels):
  parallel, _ = kernels
  x = np.ones((256, 64), np.float32)
  _, who = run(parallel, x)
  # static schedule: the first half of the rows on thread 0, the second half on thread 1, whatever the machine's load
  assert who[:128].tolist() == [0] * 128 and who[128:].tolist() == [1] * 128

def test_source_without_openmp_is_built_as_before():
  src = "void plain(float* restrict data0) { data0[0] = 1.0f; }\n"
  assert not ops_cpu.uses_openmp(src)
  assert ops_cpu.compile_c(src) == ops_cpu.compile_c(src, openmp=False)

@needs_openmp
def test_openmp_build_is_another_cache_entry():
  src = row_sums_source("row_sums", threads.parallel_pragma(2))
  assert ops_cpu.compile_c(src) != ops_cpu.compile_c(src, openmp=False)

FORK_SCRIPT = """
import os, sys
import numpy as np
sys.path.insert(0, {root!r})
sys.path.insert(0, {here!r})
from test_threads import row_sums_source, run
from runtime import ops_cpu, threads
prog = ops_cpu.program(row_sums_source("row_sums", threads.parallel_pragma(2)), "row_sums")
x = np.arange(512 * 33, dtype=np.float32).reshape(512, 33) / 7
parent, who = run(prog, x)
assert ops_cpu._omp_started
pid = os.fork()
if pid == 0:
  child, cwho = run(prog, x)  # libgomp's pool did not survive the fork: this runs the serial build
  os._exit(0 if child.tobytes() == parent.tobytes() and (cwho == 0).all() else 3)
_, status = os.waitpid(pid, 0)
print("child exit", os.waitstatus_to_exitcode(status), "threads seen in parent", sorted(set(who.tolist())))
"""

@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_child_forked_after_a_parallel_kernel_runs_it_serially():
  code = FORK_SCRIPT.format(root=ROOT, here=os.path.dirname(os.path.abspath(__file__)))
  r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
  assert r.returncode == 0, r.stderr
  assert "child exit 0" in r.stdout, r.stdout + r.stderr
  if ops_cpu.openmp_flags(): assert "threads seen in parent [0, 1]" in r.stdout

# ---- the cost model ----

def test_small_kernels_stay_on_one_thread():
  with Context(THREADS=2):
    assert threads.threads_for(ops=1000, mem_bytes=16 * 1024) == 1          # a few microseconds: the region costs more
    assert threads.threads_for(ops=64 ** 3 * 2, mem_bytes=3 * 64 * 64 * 4) == 1

def test_large_kernels_use_the_threads_they_may():
  with Context(THREADS=2):
    assert threads.threads_for(ops=16 << 20, mem_bytes=256 << 20) == 2      # a*b+c on 16M floats: memory bound, still faster
    assert threads.threads_for(ops=2 * 1024 ** 3, mem_bytes=12 << 20) == 2   # matmul 1024
    assert threads.threads_for(ops=2 * 1024 ** 3, iterations=1) == 1        # one iteration to share: nothing to split
  with Context(THREADS=4):
    assert threads.threads_for(ops=2 * 1024 ** 3, iterations=3) <= 3

def test_threads_caps_and_defaults():
  with Context(THREADS=1): assert threads.max_threads() == 1 and threads.threads_for(ops=10 ** 12) == 1
  with Context(THREADS=0): assert threads.max_threads() == threads.cores() >= 1
  with Context(THREADS=-2), pytest.raises(ValueError, match="THREADS=-2"): threads.max_threads()

def test_the_pragma_form():
  assert threads.parallel_pragma(1) == ""
  assert threads.parallel_pragma(2) == "#pragma omp parallel for schedule(static) num_threads(2)"
  assert threads.parallel_pragma(4, collapse=2).endswith("num_threads(4) collapse(2)")

def test_modelled_time_falls_with_threads_for_compute_bound_work():
  t1, t2 = threads.serial_ns(10 ** 10, 0), threads.parallel_ns(10 ** 10, 0, 2)
  assert t2 < 0.6 * t1
