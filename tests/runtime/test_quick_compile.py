"""Quick builds (tensor/engine/compile_queue.py, runtime/ops_cpu.py): a cold schedule's new kernels are built at -O1 and
run as Provisional programs; a kernel run again, or captured by TinyJit, gets its -O3 build from a background thread, which
every holder takes (the runner, TinyJit's replay, prepared launches) with the same results; a cached -O3 object is never
built quick; QUICK_COMPILE=0 builds the final ones at once."""
import shutil
import numpy as np
import pytest
from runtime import ops_cpu
from runtime.device import Buffer, CompileError
from runtime.dtype import dtypes
from runtime.helpers import Context

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler (cc)")

def kernel_source(name: str, k: int) -> str:
  return (f"void {name}(int* restrict data0, int* restrict data1) {{ for (int i = 0; i < 4; i++) data0[i] = 2 * data1[i] + {k}; }}\n"
          f"void {name}_call(void* const* bufs, const long long* ivals, const double* fvals) {{ {name}((int*)bufs[0], (int*)bufs[1]); }}\n")

def run(prog) -> list[int]:
  out, inp = Buffer("CPU", 4, dtypes.int32), Buffer("CPU", 4, dtypes.int32, np.arange(4, dtype=np.int32))
  prog([out, inp])
  return out.numpy().tolist()

@pytest.fixture
def runs(monkeypatch):
  """The flags of each compiler run (from any thread), in order."""
  seen: list[list[str]] = []
  real = ops_cpu._run_compiler
  def counted(cc, flags, src, out, what="a generated kernel"):
    seen.append(list(flags))
    return real(cc, flags, src, out, what)
  monkeypatch.setattr(ops_cpu, "_run_compiler", counted)
  return seen

def test_quick_builds_are_O1_and_a_cached_final_build_is_taken_instead(cache, runs):
  items = [(kernel_source(f"quick_{k}", k), f"quick_{k}") for k in range(3)]
  progs = ops_cpu.programs(items, quick=True)
  assert [run(p) for p in progs] == [[2 * i + k for i in range(4)] for k in range(3)]
  assert all(p.provisional for p in progs) and len(runs) == 1 and all(f in runs[0] for f in ops_cpu.QUICK_OPT) and "-O3" not in runs[0]
  finals = ops_cpu.programs(items)  # the final builds: one more run, at -O3
  assert not any(getattr(p, "provisional", False) for p in finals) and len(runs) == 2 and "-O3" in runs[1]
  again = ops_cpu.programs(items, quick=True)  # a later process: the cache has the final objects, no quick build is made
  assert not any(getattr(p, "provisional", False) for p in again) and len(runs) == 2
  assert [run(p) for p in again] == [run(p) for p in progs]

def test_a_provisional_asks_for_its_final_build_on_its_second_call(cache, runs):
  from tensor.engine.compile_queue import UPGRADES, Provisional, final_program, wait_upgrades
  src, name = kernel_source("upgraded", 5), "upgraded"
  p = Provisional(ops_cpu.program(src, name, quick=True), "CPU", src, name)
  version = UPGRADES.version
  assert run(p) == [5, 7, 9, 11] and not p.asked and len(runs) == 1  # run once (a weight's initialisation): never built again
  assert run(p) == [5, 7, 9, 11] and p.asked
  assert wait_upgrades(60) and p.final is not None and p.current is p.final and final_program(p) is p.final
  assert UPGRADES.version > version and len(runs) == 2 and "-O3" in runs[1]
  assert run(p) == [5, 7, 9, 11] and not getattr(p.final, "provisional", False)

def test_a_background_compile_is_stopped_at_exit(monkeypatch):
  import threading
  monkeypatch.setattr(ops_cpu._Background, "stopped", True)  # as stop_background leaves it
  errors: list[BaseException] = []
  def worker():
    ops_cpu.background_thread()
    try: ops_cpu.run_compiler([ops_cpu.find_compiler(), "--version"])
    except CompileError as e: errors.append(e)
  t = threading.Thread(target=worker)
  t.start()
  t.join()
  assert errors and "exiting" in str(errors[0])
  assert ops_cpu.run_compiler([ops_cpu.find_compiler(), "--version"])[0] == 0  # a foreground run is not stopped

def _graphs(Tensor, x):
  return [(x * 2 + 1).sum(1), (x - 3).max(1), x.exp2().sum(0), (x * x).relu()]

def test_runners_and_jit_replays_take_the_final_builds_with_the_same_results(cache, monkeypatch):
  from tensor import Tensor, TinyJit
  from tensor.engine.compile_queue import UPGRADES, Provisional, wait_upgrades
  a = np.random.default_rng(1).standard_normal((33, 17)).astype(np.float32)
  x = Tensor(a).realize()
  asked: list[Provisional] = []
  monkeypatch.setattr(UPGRADES, "ask", asked.append)  # held back until the capture is made (then asked for below)

  @TinyJit
  def f(t: Tensor) -> list[Tensor]:
    outs = _graphs(Tensor, t * 1.5)
    outs[0].realize(*outs[1:])
    return outs
  with Context(QUICK_COMPILE=1):
    outs = [[o.numpy() for o in f(x)] for _ in range(2)]  # the first call builds quick; the second captures
  captured = f.captured
  assert captured is not None and asked and all(s.fn.__class__ is Provisional for s in captured.steps)
  assert {id(p) for p in asked} == {id(s.fn) for s in captured.steps}  # each captured kernel's final build is asked for
  monkeypatch.undo()
  for p in asked: UPGRADES.ask(p)
  assert wait_upgrades(120) and all(p.final is not None for p in asked)
  replayed = [o.numpy() for o in f(x)]
  assert not any(s.fn.__class__ is Provisional for s in captured.steps)  # the replay took the final builds
  for got in [outs[1], replayed]:
    for g, want in zip(got, outs[0]): np.testing.assert_array_equal(g, want)  # the same bits from either build
  np.testing.assert_allclose(outs[0][0], (a * 1.5 * 2 + 1).sum(1), rtol=1e-5)

def test_QUICK_COMPILE_0_builds_the_final_programs_at_once(cache):
  from tensor import Tensor
  from tensor.engine.compile_queue import Provisional
  from tensor.engine.state import ENGINE
  x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4)).realize()
  before = set(ENGINE.programs)
  with Context(QUICK_COMPILE=0):
    outs = [(x + 7).sum(1), (x * 3).max(0)]
    outs[0].realize(outs[1])
  assert [o.tolist() for o in outs] == [[34.0, 50.0, 66.0], [24.0, 27.0, 30.0, 33.0]]
  new = [r for k, r in ENGINE.programs.items() if k not in before and hasattr(r, "_fn")]
  assert len(new) >= 2 and not any(r.fn.__class__ is Provisional for r in new)

def test_the_compile_queue_runs_after_on_its_thread_before_the_result(monkeypatch):
  import threading
  from runtime.device import Device
  from tensor.engine.compile_queue import CompileQueue
  monkeypatch.setattr(Device["CPU"], "programs", lambda items: [(lambda: n) for _, n in items], raising=False)
  order: list[tuple[str, str]] = []
  q = CompileQueue(threads=1)
  f = q.submit("CPU", "src", "k0", after=lambda: order.append(("after", threading.current_thread().name)))
  f.add_done_callback(lambda _: order.append(("done", "")))
  q.close(wait=False)  # the thread builds what waits and ends
  assert f.result(timeout=30)() == "k0"
  q.threads[0].join(30)
  assert order == [("after", "rulegrad-compile-0"), ("done", "")] and not q.threads[0].is_alive()
