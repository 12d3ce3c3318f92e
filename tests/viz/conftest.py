"""Fixtures of the VIZ tests: a recording of `Tensor([1,2,3,4]) + 3 + 4` made by VIZ=1 in a fresh process, and a server for it."""
import pytest
from viz_helpers import Served, run_viz

@pytest.fixture(scope="session")
def add_3_4_recording(tmp_path_factory) -> str:
  r, path = run_viz(str(tmp_path_factory.mktemp("viz")))
  assert r.returncode == 0, r.stderr
  assert r.stdout.strip() == "[8, 9, 10, 11]"
  return path

@pytest.fixture
def served(add_3_4_recording):
  from runtime.trace import load
  s = Served(load(add_3_4_recording))
  yield s
  s.close()
