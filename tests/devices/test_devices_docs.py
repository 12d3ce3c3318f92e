"""docs/devices.md can't rot: every python block in it runs."""
import os, re
import pytest

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "docs", "devices.md")
BLOCKS = [(m.start(), m.group(1)) for m in re.finditer(r"```python\n(.*?)```", open(DOC).read(), re.S)]

def test_the_page_has_examples(): assert len(BLOCKS) >= 4

@pytest.mark.optimized
@pytest.mark.parametrize("pos,code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_docs_example_runs(pos, code): exec(compile(code, f"docs/devices.md@{pos}", "exec"), {})

@pytest.mark.optimized
def test_the_generated_sources_are_current():
  """docs/devices.md's OpenCL and CUDA sources are what codegen makes now (`python -m bench.devices --write-docs`)."""
  from bench.devices import BEGIN, END, sources_markdown
  text = open(DOC).read()
  assert text[text.index(BEGIN):text.index(END) + len(END)] == sources_markdown(), "run `python -m bench.devices --write-docs`"
