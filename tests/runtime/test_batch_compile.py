"""Kernels compiled in batches (runtime/c_batch.py, runtime/ops_cpu.py `programs`, tensor/engine/compile_queue.py): one compiler
run builds many kernels, each gives the results it gives alone, a later lookup finds it without the compiler, a kernel the
compiler rejects is named, and the cache's trust rules (issue 22) hold for the entries that point at a batch.
"""
import os, shutil
import numpy as np
import pytest
from runtime import c_batch, kernel_cache, ops_cpu
from runtime.device import Buffer, CompileError
from runtime.dtype import dtypes

HELPER = ("static inline int twice_int(int a) { \n#if defined(__x86_64__)\n  return a + a;\n#else\n  return 2 * a;\n#endif\n }")

def kernel_source(name: str, k: int) -> str:
  """data0[i] = 2 * data1[i] + k for 4 ints, in the renderer's shape: includes, a typedef and a helper, then the functions."""
  return "\n".join(["#include <math.h>", "#include <stdbool.h>", "typedef int i32x4 __attribute__((vector_size(16)));", HELPER,
                    f"void {name}(int* restrict data0, int* restrict data1) {{ for (int i = 0; i < 4; i++) data0[i] = twice_int(data1[i]) + {k}; }}",
                    f"void {name}_call(void* const* bufs, const long long* ivals, const double* fvals) "
                    f"{{ {name}((int*)bufs[0], (int*)bufs[1]); }}"]) + "\n"

def run(prog) -> list[int]:
  out, inp = Buffer("CPU", 4, dtypes.int32), Buffer("CPU", 4, dtypes.int32, np.arange(4, dtype=np.int32))
  prog([out, inp])
  return out.numpy().tolist()

def want(k: int) -> list[int]: return [2 * i + k for i in range(4)]

@pytest.fixture
def runs(monkeypatch):
  """What each compiler run built ("the generated kernel NAME" or "a batch of N ..."), in order."""
  seen: list[str] = []
  real = ops_cpu._run_compiler
  def counted(cc, flags, src, out, what="a generated kernel"):
    seen.append(what)
    return real(cc, flags, src, out, what)
  monkeypatch.setattr(ops_cpu, "_run_compiler", counted)
  return seen

def test_merge_keeps_each_preamble_item_once_and_every_kernel():
  a, b = kernel_source("ka", 1), kernel_source("kb", 2)
  unit = c_batch.merge([a, b])
  assert unit is not None
  assert unit.count("#include <math.h>") == 1 and unit.count("typedef int i32x4") == 1 and unit.count("twice_int(int a)") == 1
  assert unit.count("#else") == 1  # the helper's lines after its first stay with it
  assert "void ka(" in unit and "void kb(" in unit and unit.index("twice_int(int a)") < unit.index("void ka(")
  items, body = c_batch.split(a)  # type: ignore[misc]
  assert len(items) == 4 and body.startswith("void ka(")
  # not the renderer's shape: no kernel function, or text before any preamble item
  assert c_batch.split("int x;\n") is None and c_batch.merge([a, "int y = 1;\nvoid f(void) {}\n"]) is None

def test_a_batch_is_one_compiler_run_and_later_lookups_find_it(cache, runs):
  items = [(kernel_source(f"batched_{k}", k), f"batched_{k}") for k in range(5)]
  progs = ops_cpu.programs(items)
  assert runs == ["a batch of 5 generated kernels (batched_0, batched_1, batched_2, batched_3, ...)"]
  assert [run(p) for p in progs] == [want(k) for k in range(5)]
  # a later lookup (a new process would do the same): each kernel's key leads to the batch's entry, no compiler run
  paths = {ops_cpu.compile_c(src) for src, _ in items}
  assert len(paths) == 1 and runs == runs[:1]
  assert [run(ops_cpu.program(src, name)) for src, name in items] == [want(k) for k in range(5)]
  # and programs() of kernels all cached runs nothing
  assert [run(p) for p in ops_cpu.programs(items)] == [want(k) for k in range(5)] and len(runs) == 1

def test_a_kernel_the_compiler_rejects_is_named_and_the_others_run(cache, runs):
  bad = kernel_source("broken_one", 3).replace("twice_int(data1[i])", "twice_int(data1[i]")
  items = [(kernel_source("fine_a", 1), "fine_a"), (bad, "broken_one"), (kernel_source("fine_b", 2), "fine_b")]
  a, err, b = ops_cpu.programs(items)
  assert isinstance(err, CompileError) and "the generated kernel broken_one" in str(err)
  assert run(a) == want(1) and run(b) == want(2)
  assert runs[0].startswith("a batch of 3") and sorted(runs[1:]) == ["the generated kernel broken_one", "the generated kernel fine_a",
                                                                     "the generated kernel fine_b"]

def test_two_kernels_of_one_name_do_not_share_a_unit(cache, runs):
  items = [(kernel_source("same_name", 1), "same_name"), (kernel_source("same_name", 2), "same_name"), (kernel_source("other", 3), "other")]
  assert [run(p) for p in ops_cpu.programs(items)] == [want(1), want(2), want(3)]
  assert runs[0].startswith("a batch of 2") and runs[1:] == ["the generated kernel same_name"]

def test_a_damaged_batch_is_rebuilt_kernel_by_kernel(cache, runs, capsys):
  items = [(kernel_source(f"damaged_{k}", k), f"damaged_{k}") for k in range(3)]
  ops_cpu.programs(items)
  path = ops_cpu.compile_c(items[0][0])
  with open(path, "rb") as f: data = f.read()
  with open(path + ".new", "wb") as f: f.write(data[: len(data) // 2])  # truncated, replaced by rename as another process would
  os.chmod(path + ".new", 0o700)
  os.replace(path + ".new", path)
  assert run(ops_cpu.program(*items[1])) == want(1)
  assert "not usable" in capsys.readouterr().err and runs[1:] == ["the generated kernel damaged_1"]

def test_a_batch_pointer_others_may_write_is_not_followed(cache, runs):
  items = [(kernel_source(f"pointed_{k}", k), f"pointed_{k}") for k in range(2)]
  ops_cpu.programs(items)
  src = items[0][0]
  pointer = kernel_cache.data_path(str(cache), ops_cpu._batch_key(ops_cpu.cache_key(src, ops_cpu.kernel_flags(src))))
  os.chmod(pointer, 0o666)  # another user could have pointed it at their own shared object: not read
  assert ops_cpu._batch_entry(ops_cpu.cache_key(src, ops_cpu.kernel_flags(src))) is None
  assert run(ops_cpu.program(*items[0])) == want(0) and runs[1:] == ["the generated kernel pointed_0"]
  assert ops_cpu.compile_c(src) == kernel_cache.entry_path(str(cache), ops_cpu.cache_key(src, ops_cpu.kernel_flags(src)))

def test_a_pointer_to_a_missing_batch_builds_the_kernel_alone(cache, runs):
  items = [(kernel_source(f"evicted_{k}", k), f"evicted_{k}") for k in range(2)]
  ops_cpu.programs(items)
  os.unlink(ops_cpu.compile_c(items[1][0]))  # evicted by the size cap
  assert run(ops_cpu.program(*items[1])) == want(1) and runs[1:] == ["the generated kernel evicted_1"]
  assert not [f for f in os.listdir(cache) if ".tmp." in f]  # nothing half-written left

@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler (cc)")
def test_a_realize_of_new_kernels_compiles_them_in_batches(cache, runs):
  from tensor import Tensor
  from tensor.engine import compile_queue
  a = np.random.default_rng(0).standard_normal((16, 24)).astype(np.float32)
  x = Tensor(a).realize()
  runs.clear()
  fns = [lambda t: t.sum(1), lambda t: t.max(1), lambda t: t.exp(), lambda t: t.abs().sqrt(), lambda t: t.relu(), lambda t: t.sum(0),
         lambda t: t.max(0), lambda t: (t * t).sum(), lambda t: t.sigmoid(), lambda t: t.neg().exp2()]
  refs = [a.sum(1), a.max(1), np.exp(a), np.sqrt(np.abs(a)), np.maximum(a, 0), a.sum(0), a.max(0), (a * a).sum(), 1 / (1 + np.exp(-a)),
          np.exp2(-a)]
  outs = [f(x) for f in fns]
  Tensor.realize(*outs)
  assert len(runs) < len(fns) and any(r.startswith("a batch of") for r in runs), runs
  assert compile_queue.MIN_BATCH > 1
  for t, ref in zip(outs, refs): np.testing.assert_allclose(t.numpy(), ref, rtol=1e-5, atol=1e-5)

def test_the_compile_queue_hands_out_batches_and_each_kernel_gets_its_own_result(monkeypatch):
  from runtime.device import Device
  from tensor.engine.compile_queue import MAX_BATCH, CompileQueue
  calls: list[list[str]] = []
  def programs(items):
    calls.append([name for _, name in items])
    return [CompileError(f"no {name}") if name == "k3" else (lambda name=name: name) for _, name in items]
  monkeypatch.setattr(Device["CPU"], "programs", programs, raising=False)
  q = CompileQueue(threads=2)
  futures = [q.submit("CPU", f"src{i}", f"k{i}") for i in range(40)]
  q.close()
  assert sorted(n for c in calls for n in c) == sorted(f"k{i}" for i in range(40))  # each once
  assert len(calls) < 40 and max(len(c) for c in calls) <= MAX_BATCH
  for i, f in enumerate(futures):
    if i == 3:
      with pytest.raises(CompileError, match="no k3"): f.result()
    else: assert f.result()() == f"k{i}"
  assert not any(t.is_alive() for t in q.threads)
