"""tensor.distributed: a world of one rank in this process, and the collectives, a data-parallel training run and a rank
that dies under `mpirun -np 2|4` (each a run of tests/distributed/mpi_checks.py). The mpirun tests skip, with one line
saying what to install, where there is no mpirun or mpi4py."""
import importlib.util, os, shutil, subprocess, sys
import numpy as np
import pytest
from tensor import Tensor, TinyJit
from tensor.engine.jit import JitError
from tensor import distributed as dist

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECKS = os.path.join(ROOT, "tests", "distributed", "mpi_checks.py")
HAVE_MPI = shutil.which("mpirun") is not None and importlib.util.find_spec("mpi4py") is not None
needs_mpi = pytest.mark.skipif(not HAVE_MPI, reason=f"no mpirun or mpi4py: {dist.INSTALL}")

def mpirun(n: int, *args: str, timeout: float = 240, env: dict | None = None) -> subprocess.CompletedProcess:
  e = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMPI_MCA_rmaps_base_oversubscribe": "1",
       **(env or {})}
  return subprocess.run(["mpirun", "-np", str(n), sys.executable, CHECKS, *args], cwd=ROOT, env=e, capture_output=True, text=True,
                        timeout=timeout)

# ---- one process: a world of one rank ----

def test_a_process_started_alone_is_a_world_of_one():
  assert (dist.rank(), dist.world_size()) == (0, 1)
  x = np.arange(6, dtype=np.float32).reshape(2, 3)
  for op in ("sum", "mean", "max"): np.testing.assert_array_equal(dist.all_reduce(Tensor(x), op).numpy(), x)
  assert dist.all_reduce(Tensor([1, 2]), "mean").dtype.name.startswith("float")
  np.testing.assert_array_equal(dist.broadcast(Tensor(x)).numpy(), x)
  dist.barrier()
  w = Tensor(x, requires_grad=True)
  (w * 2).sum().backward()
  dist.average_gradients([w])
  np.testing.assert_array_equal(w.grad.numpy(), np.full((2, 3), 2, np.float32))

def test_bad_arguments_are_clear_errors():
  with pytest.raises(dist.DistributedError, match="'sum', 'mean' or 'max'"): dist.all_reduce(Tensor([1.0]), "min")
  with pytest.raises(dist.DistributedError, match="root 1"): dist.broadcast(Tensor([1.0]), root=1)

# ---- under mpirun ----

@needs_mpi
@pytest.mark.parametrize("n", [2, 4])
def test_collectives(n):
  # sum, mean and max; integers, half, bool, lazy and strided inputs, empty tensors; broadcast from each root; 16 MB
  r = mpirun(n, "collectives")
  assert r.returncode == 0 and f"collectives ok on {n} ranks" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]

@needs_mpi
def test_ranks_combined_with_devices_in_each_process():
  r = mpirun(2, "shards")
  assert r.returncode == 0 and "shards ok on 2 ranks" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]

@needs_mpi
def test_ranks_that_disagree_on_a_shape_get_an_error_naming_theirs():
  r = mpirun(2, "mismatch")
  assert r.returncode == 0, r.stderr[-3000:]
  assert "rank 0 has (3,)" in r.stdout and "rank 1 has (4,)" in r.stdout

@needs_mpi
def test_a_rank_that_dies_stops_the_job_with_a_message():
  r = mpirun(2, "crashes", timeout=120)
  assert r.returncode != 0 and "rank 1 of 2 died of ValueError: stopping every rank" in r.stderr, r.stderr[-3000:]
  # a rank that leaves quietly: the one waiting in a collective gives up after TENSOR_MPI_TIMEOUT and says so
  r = mpirun(2, "dies", timeout=120, env={"TENSOR_MPI_TIMEOUT": "3"})
  assert r.returncode != 0 and "waited 3 s for the other ranks" in r.stderr, r.stderr[-3000:]

@needs_mpi
def test_data_parallel_training_equals_one_process_on_the_whole_batch(tmp_path):
  one = subprocess.run([sys.executable, CHECKS, "train", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=240)
  assert one.returncode == 0, one.stderr[-3000:]
  r = mpirun(2, "train", str(tmp_path))
  assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
  single, r0, r1 = (np.load(tmp_path / f) for f in ("rank0-of-1.npz", "rank0-of-2.npz", "rank1-of-2.npz"))
  for k in single.files:
    assert r0[k].tobytes() == r1[k].tobytes(), f"{k}: the ranks' weights differ"
    np.testing.assert_allclose(r0[k], single[k], rtol=1e-5, atol=1e-5)

def test_collectives_inside_a_capture_are_refused():
  @TinyJit
  def f(x: Tensor) -> Tensor: return dist.all_reduce(x * 2)
  with pytest.raises(JitError, match="inside a TinyJit capture"):
    for _ in range(3): f(Tensor([1.0, 2.0]))
