"""bench/hops.py: the path a realize takes. A realize of a graph whose shape was scheduled before goes through the schedule
cache and never into codegen, lowering or rendering."""
import importlib.util
import os

from tensor import Tensor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location("hops", os.path.join(ROOT, "bench", "hops.py"))
hops = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hops)

def test_module_of_names_only_our_modules():
  assert hops.module_of(os.path.join(ROOT, "tensor", "engine", "realize.py")) == "tensor.engine.realize"
  assert hops.module_of(os.path.join(ROOT, "tensor", "__init__.py")) == "tensor"
  assert hops.module_of(os.__file__) is None

def test_a_warm_realize_skips_codegen():
  build = lambda: (Tensor([1.0, 2.0, 3.0, 4.0]) + 3 + 4).reshape(2, 2)  # noqa: E731
  cold = hops.trace(lambda: build().realize())
  warm = hops.trace(lambda: build().realize())
  assert "tensor.engine.realize" in cold and "tensor.engine.realize" in warm
  assert not any(m.startswith(("tensor.codegen", "tensor.renderer", "rules.lower", "rules.render_c")) for m in warm), warm
  assert build().tolist() == [[8.0, 9.0], [10.0, 11.0]]
