"""docs/distributed.md's section on multi-device tensors in one process can't rot: its example runs."""
import os, re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

def test_the_shard_example_runs():
  section = open(os.path.join(ROOT, "docs", "distributed.md")).read().split("## Many devices in one process", 1)[1]
  block = re.findall(r"```python\n(.*?)```", section, re.S)[0]
  exec(compile(block, "docs/distributed.md", "exec"), {})
