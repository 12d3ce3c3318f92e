"""docs/distributed.md can't rot: its API example runs (a world of one rank), and its training-step excerpt is
examples/train_digits.py's code, line for line."""
import os, re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = open(os.path.join(ROOT, "docs", "distributed.md")).read()
BLOCKS = re.findall(r"```python\n(.*?)```", DOC, re.S)

def test_the_api_example_runs(): exec(compile(BLOCKS[0], "docs/distributed.md", "exec"), {})

def test_the_training_step_is_the_examples():
  example = [line.strip() for line in open(os.path.join(ROOT, "examples", "train_digits.py"))]
  excerpt = [line.strip() for line in BLOCKS[1].splitlines() if line.strip()]
  missing = [line for line in excerpt if line.split("  #")[0].strip() not in [e.split("  #")[0].strip() for e in example]]
  assert not missing, f"docs/distributed.md shows lines examples/train_digits.py no longer has: {missing}"
