"""bench/kernels.py's busiest-thread clock (`--clock thread`): it counts the CPU time of whichever thread worked, not the
caller's, and not time spent waiting (compared with the threads' own CPU clocks, never with the wall clock)."""
from __future__ import annotations
import threading, time
from bench.kernels import thread_sample

def burn(seconds: float) -> float:
  """Spin until this thread has used `seconds` of CPU time; that time, by its own clock."""
  t0 = time.thread_time()
  while time.thread_time() - t0 < seconds: pass
  return time.thread_time() - t0

def test_a_worker_threads_time_counts_and_the_waiting_callers_does_not():
  # a worker alive before and after the sample, as an OpenMP pool's threads are (one ending inside it is not counted)
  used: list[float] = []
  go, done, leave = threading.Event(), threading.Event(), threading.Event()
  def work() -> None:
    go.wait()
    used.append(burn(0.05))
    done.set()
    leave.wait()  # alive until the sample has read its clock
  t = threading.Thread(target=work)
  t.start()
  def run() -> None:
    go.set()
    done.wait()  # the caller sleeps: no CPU time
  got = thread_sample(run)
  leave.set()
  t.join()
  assert used and got >= 0.95 * used[0]
  assert got < 2 * used[0] + 0.05

def test_the_callers_own_work_counts():
  used: list[float] = []
  got = thread_sample(lambda: used.append(burn(0.03)))
  assert got >= 0.95 * used[0]
