"""BEAM=n (tensor/codegen/beam.py): the list it picks gives numpy's results, and a second search of the same kernel is
taken from the disk cache without compiling. Tiny kernels and a narrowed action set keep the compiles few."""
from __future__ import annotations
import numpy as np
import pytest
from runtime.helpers import Context
from runtime.ops import Ops
from runtime.ops_cpu import find_compiler
from tensor import Tensor
from tensor.codegen import beam, target_for
from tensor.engine.state import ENGINE
from tensor.codegen.opt import Opt

pytestmark = pytest.mark.skipif(find_compiler(required=False) is None, reason="no C compiler for the CPU device")
RNG = np.random.default_rng(0)

def rand(*shape) -> np.ndarray: return RNG.standard_normal(shape).astype(np.float32)

@pytest.fixture(autouse=True)
def small_search(monkeypatch, tmp_path):
  # a private cache (nothing found from earlier runs), one amount per kind and one round: a handful of compiles
  monkeypatch.setenv("CACHE_DIR", str(tmp_path))
  monkeypatch.setattr(beam, "UPCASTS", (4,))
  monkeypatch.setattr(beam, "UNROLLS", (4,))
  monkeypatch.setattr(beam, "TILES", ())
  monkeypatch.setattr(beam, "MAX_ROUNDS", 1)
  monkeypatch.setattr(ENGINE.target("CPU"), "searched", {})

def kernel_asts(t: Tensor) -> list:
  t.kernelize()
  return [n.arg.ast for n in t.uop.toposort(gate=lambda n: n.op is not Ops.BUFFER) if n.op is Ops.KERNEL and n.arg.ast.op is Ops.SINK]

@pytest.mark.parametrize("kind", ["matmul", "sum", "elementwise"])
def test_beam_matches_numpy(kind):
  a, b, c = rand(8, 16), rand(16, 8), rand(8, 16)
  work = {"matmul": (lambda x, y, z: x @ y, lambda x, y, z: x @ y),
          "sum": (lambda x, y, z: x.sum(axis=1), lambda x, y, z: x.sum(axis=1)),
          "elementwise": (lambda x, y, z: x * z + z, lambda x, y, z: x * z + z)}[kind]
  before = beam.stats["searches"]
  with Context(NOOPT=0, BEAM=2):  # the search is the optimizer's: NOOPT=1 turns it off (test_noopt_searches_nothing)
    out = work[0](Tensor(a), Tensor(b), Tensor(c)).numpy()
  assert beam.stats["searches"] == before + 1  # searched, not taken from an earlier process's program
  np.testing.assert_allclose(out, work[1](a, b, c), rtol=1e-5, atol=1e-5)

def test_noopt_searches_nothing():
  # NOOPT=1 is the empty Opt list, whoever would pick one: every loop kept, BEAM or not
  from tensor.engine.realize import get_program
  a = rand(8, 16)
  ast = kernel_asts(Tensor(a).sum(axis=1))[0]
  before = beam.stats["searches"]
  with Context(NOOPT=1, BEAM=2):
    p = get_program(ast, "CPU")
    out = Tensor(a).sum(axis=1).numpy()
  assert beam.stats["searches"] == before and p.opts == []
  np.testing.assert_allclose(out, a.sum(axis=1), rtol=1e-5)

def test_second_search_is_from_the_disk_cache():
  ast = kernel_asts(Tensor(rand(8, 16)) @ Tensor(rand(16, 8)))[0]
  first = beam.beam_opts(ast, ENGINE.target("CPU"), 2)
  assert all(isinstance(o, Opt) for o in first)
  compiles, hits = beam.stats["compiles"], beam.stats["cache_hits"]
  again = beam.beam_opts(ast, target_for("CPU"), 2)  # as a new process: only the disk knows
  assert again == first and beam.stats["compiles"] == compiles and beam.stats["cache_hits"] == hits + 1

def test_cache_key_depends_on_beam_width_and_device():
  ast = kernel_asts(Tensor(rand(4, 4)) + 1)[0]
  keys = {beam.cache_key(ast, target_for("CPU"), 2), beam.cache_key(ast, target_for("CPU"), 3), beam.cache_key(ast, target_for("PYTHON"), 2)}
  assert len(keys) == 3

def test_actions_apply_to_the_kernel():
  from tensor.codegen import rangeify_simplified
  from tensor.codegen.opt import apply_opts
  ast = kernel_asts(Tensor(rand(8, 16)) @ Tensor(rand(16, 8)))[0]
  sink, ctx = rangeify_simplified(ast)
  acts = beam.actions(sink)
  assert Opt("UPCAST", 0, 4) in acts and Opt("UNROLL", 2, 4) in acts and Opt("SWAP", 0, 1) in acts
  ids = iter(range(1000, 2000))
  for a in acts:
    if a.op != "THREADS": apply_opts(sink, [a], lambda: next(ids))  # each loop Opt applies (raises OptError otherwise)

def test_no_search_on_the_interpreter():
  # timing the PYTHON device's interpreter says nothing about any machine: the heuristic's list stays
  before = beam.stats["searches"]
  a = rand(4, 8)
  with Context(BEAM=2): out = (Tensor(a, device="PYTHON") * 2).numpy()
  assert beam.stats["searches"] == before
  np.testing.assert_array_equal(out, a * 2)

def test_threads_opt_keeps_a_kernel_on_one_thread():
  # a list with THREADS 1 (a choice BEAM can make) renders no parallel loop where the cost model would make one
  from tensor.engine.realize import get_program
  ast = kernel_asts(Tensor(rand(1024, 1024)) * 2 + 1)[0]
  with Context(THREADS=2): src = get_program(ast, "CPU").src
  assert "#pragma omp" in src
  with Context(THREADS=2, BEAM=2, NOOPT=0):
    ENGINE.target("CPU").searched[beam.cache_key(ast, target_for("CPU"), 2)] = [Opt("THREADS", 0, 1)]  # as if a search chose it
    p = get_program(ast, "CPU")
  assert "#pragma omp" not in p.src and p.opts == [Opt("THREADS", 0, 1)]
