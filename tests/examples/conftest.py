"""Loads an example script (examples/ is not a package) as a module, so a test can call its functions."""
import importlib.util, pathlib, sys
import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"

@pytest.fixture
def load_example():
  def load(name: str):
    spec = importlib.util.spec_from_file_location(f"examples_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
  return load
