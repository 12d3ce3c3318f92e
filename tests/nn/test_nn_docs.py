"""docs/nn.md can't rot: every python block in it runs (in this process, so tests/nn/conftest.py's stand-ins apply)."""
import os, re
import pytest
from tensor import Tensor

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "docs", "nn.md")
BLOCKS = [(m.start(), m.group(1)) for m in re.finditer(r"```python\n(.*?)```", open(DOC).read(), re.S)]

@pytest.mark.parametrize("pos,code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_docs_example_runs(pos, code):
  old = Tensor.training
  try: exec(compile(code, f"docs/nn.md@{pos}", "exec"), {})
  finally: Tensor.training = old
