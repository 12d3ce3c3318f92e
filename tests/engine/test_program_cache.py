"""Lowered programs on disk (tensor/codegen/program_cache.py): a new process that meets a kernel an earlier process compiled
takes its program from the kernel cache and doesn't lower or render it; the key changes with the AST, NOOPT and the
codegen's code; a damaged entry is rebuilt."""
from __future__ import annotations
import os, subprocess, sys, textwrap
import numpy as np
from runtime import kernel_cache
from tensor import Tensor
from tensor.codegen import program_cache
from tensor.codegen.target import Target, target_for
from tensor.engine import realize
from tensor.renderer.cstyle import CRenderer
from tensor.engine.realize import schedule_of
from tensor.engine.schedule import kernelize_map

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = textwrap.dedent("""
  import numpy as np, tensor.codegen as codegen, tensor.engine.realize as realize
  from tensor import Tensor
  lowered = []
  real = realize.get_program
  realize.get_program = lambda *args, **kwargs: lowered.append(1) or real(*args, **kwargs)
  x = Tensor(np.arange(24, dtype=np.float32).reshape(4, 6))
  out = ((x * 0.5 + 1.25).exp2().sum(1) + x.max(1)).numpy()
  print(len(lowered), ' '.join(repr(float(v)) for v in out))
""")

def run_child(cache_dir: str, **env) -> tuple[int, list[float]]:
  e = {**os.environ, "CACHE_DIR": cache_dir, "PYTHONPATH": ROOT, **env}
  e.pop("RULECOVERAGE", None)  # CI's rule coverage turns the program cache off (a program from disk fires no rules)
  r = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=e, cwd=ROOT, timeout=300)
  assert r.returncode == 0, r.stderr
  n, *vals = r.stdout.split()
  return int(n), [float(v) for v in vals]

def want() -> np.ndarray:
  x = np.arange(24, dtype=np.float32).reshape(4, 6)
  return np.exp2(x * 0.5 + 1.25).sum(1) + x.max(1)

def test_a_new_process_skips_lowering_a_cached_kernel(tmp_path):
  d = str(tmp_path / "cache")
  n1, v1 = run_child(d, NOOPT="0")  # the optimizer on, whatever this process runs with: NOOPT=1 comes third
  n2, v2 = run_child(d, NOOPT="0")
  assert n1 >= 1 and n2 == 0, (n1, n2)
  np.testing.assert_allclose(v1, want(), rtol=1e-5)
  assert v2 == v1
  assert any(n.startswith("p_") and n.endswith(".bin") for n in os.listdir(d))
  # NOOPT=1 lowers into another program: its own entries
  n3, v3 = run_child(d, NOOPT="1")
  assert n3 >= 1
  np.testing.assert_allclose(v3, want(), rtol=1e-5)
  # and the cache can be turned off
  assert run_child(d, PROGRAM_DISK_CACHE="0")[0] >= 1

def test_a_damaged_entry_is_rebuilt(tmp_path):
  d = str(tmp_path / "cache")
  run_child(d)
  for n in os.listdir(d):
    if n.startswith("p_"):
      with open(os.path.join(d, n), "r+b") as f:
        f.seek(5)
        f.write(b"XXXX")
  n, v = run_child(d)
  assert n >= 1
  np.testing.assert_allclose(v, want(), rtol=1e-5)
  assert run_child(d)[0] == 0  # rebuilt entries serve the next process

def test_the_key_covers_ast_device_noopt_and_code(monkeypatch):
  a = Tensor(np.ones(8, np.float32)).realize()
  asts = [ast_of(t) for t in (a * 2.0, a * 3.0, a + 2.0)]
  cpu = target_for("CPU")
  keys = {program_cache.program_key(ast, cpu, False) for ast in asts}
  assert len(keys) == 3
  k = program_cache.program_key(asts[0], cpu, False)
  assert k == program_cache.program_key(asts[0], target_for("CPU"), False)
  assert k != program_cache.program_key(asts[0], cpu, True)
  assert k != program_cache.program_key(asts[0], Target("CLANG", CRenderer()), False)
  monkeypatch.setattr(program_cache, "code_version", lambda: "another version of the codegen")
  assert k != program_cache.program_key(asts[0], cpu, False)

def test_encode_decode_round_trip():
  a = Tensor(np.arange(8, dtype=np.float32)).realize()
  p = realize.get_program(ast_of((a * 1.5).sum() + 2), "CPU")
  q = program_cache.decode(program_cache.encode(p))  # type: ignore[arg-type]
  for f in ("name", "src", "device", "n_params", "global_size", "ops", "mem", "opts"): assert getattr(q, f) == getattr(p, f), f
  assert [v is w for v, w in zip(q.vars, p.vars)] == [True] * len(p.vars)

def test_python_device_programs_are_not_stored():
  # its programs are UOp lists, not source text
  a = Tensor(np.ones(4, np.float32), device="PYTHON").realize()
  assert program_cache.encode(realize.get_program(ast_of(a + 1), "PYTHON")) is None

def ast_of(t: Tensor):
  """The AST of the one kernel t is scheduled into (nothing runs)."""
  _, becomes = kernelize_map([t.uop])
  (k,) = schedule_of([becomes[t.uop]])
  return k.arg.ast

def test_data_entries_are_verified(tmp_path, monkeypatch):
  monkeypatch.setenv("CACHE_DIR", str(tmp_path))
  kernel_cache.store_data("abc123", b"hello")
  assert kernel_cache.load_data("abc123") == b"hello"
  path = kernel_cache.data_path(str(tmp_path), "abc123")
  with open(path, "r+b") as f: f.write(b"J")
  assert kernel_cache.load_data("abc123") is None
  assert not os.path.exists(path)  # a damaged entry is deleted
  assert kernel_cache.load_data("missing") is None
  kernel_cache.store_data("abc123", b"again")
  os.rename(kernel_cache.data_path(str(tmp_path), "abc123"), kernel_cache.data_path(str(tmp_path), "def456"))
  assert kernel_cache.load_data("def456") is None  # an entry under another key's name is not that key's
