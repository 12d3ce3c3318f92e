"""docs/llm.md can't rot: every python block in it runs (from the repository's root, as the doc's paths assume)."""
import os, re
import pytest
pytest.importorskip("gguf", reason="pip install gguf: docs/llm.md's examples write GGUF files with it")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(ROOT, "docs", "llm.md")
BLOCKS = [(m.start(), m.group(1)) for m in re.finditer(r"```python\n(.*?)```", open(DOC).read(), re.S)]

@pytest.mark.parametrize("pos,code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_docs_example_runs(pos, code, monkeypatch):
  if "import openai" in code: pytest.importorskip("openai", reason="pip install openai: the server example's client")
  monkeypatch.chdir(ROOT)
  monkeypatch.setattr("sys.path", list(__import__("sys").path))
  exec(compile(code, f"docs/llm.md@{pos}", "exec"), {})
