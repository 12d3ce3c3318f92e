"""Importing runtime pulls in no other package of the project (dslc, rules, tensor) and never lark; its public names import.
(tests/test_layering.py checks the layers of the whole import graph.)"""
import json, subprocess, sys

FORBIDDEN = ("dslc", "rules", "tensor", "lark")

def run_python(code: str) -> str:
  # a fresh interpreter, so modules other tests imported don't count
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
  assert out.returncode == 0, out.stderr
  return out.stdout

def test_import_runtime_imports_no_other_package():
  code = ("import sys, json\nimport runtime\nimport runtime.dtype, runtime.ops, runtime.uop, runtime.rewrite, runtime.helpers\n"
          f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})))")
  assert json.loads(run_python(code)) == []

def test_no_runtime_module_imports_another_package():
  # every module of the package, devices included, not only what `import runtime` loads
  code = ("import sys, json, pkgutil, importlib\nimport runtime\n"
          "for m in pkgutil.iter_modules(runtime.__path__): importlib.import_module('runtime.' + m.name)\n"
          f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})))")
  assert json.loads(run_python(code)) == []

def test_public_names_import():
  code = ("from runtime import UOp, Ops, dtypes, graph_rewrite\n"
          "a = UOp(Ops.CONST, dtypes.int, arg=2)\nassert a is UOp(Ops.CONST, dtypes.int, arg=2)\nprint(graph_rewrite.__name__)")
  assert run_python(code).strip() == "graph_rewrite"

def test_all_is_importable():
  import runtime
  for name in runtime.__all__: assert hasattr(runtime, name), name
