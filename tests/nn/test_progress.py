"""tensor/nn/progress.py: the same bar redraws one line on a terminal and prints plain lines in a log."""
import io
import pytest
from tensor.nn.progress import tqdm, trange

class Terminal(io.StringIO):
  def isatty(self): return True

def test_log_gets_a_line_per_tenth_and_a_closing_line():
  log = io.StringIO()
  seen = []
  for i in (t := trange(100, file=log)):
    seen.append(i)
    t.set_description(f"loss {100 - i:.2f}")
  lines = log.getvalue().splitlines()
  assert seen == list(range(100)) and "\r" not in log.getvalue()
  assert len(lines) == 10  # 10%, 20%, ..., 90% and the closing 100%
  assert lines[0].startswith("loss 91.00:  10%|##") and " 10/100 [" in lines[0]
  assert lines[-1].startswith("loss 1.00: 100%|" + "#" * 24 + "| 100/100 [") and lines[-1].endswith("it/s]")

def test_terminal_redraws_one_line():
  term = Terminal()
  with tqdm(total=5, desc="train", file=term, min_interval=0) as t:
    for _ in range(5): t.update()
  out = term.getvalue()
  assert out.count("\n") == 1 and out.endswith("\n") and out.count("\r") >= 5
  assert out.rstrip("\n").split("\r")[-1].startswith("train: 100%|") and "5/5" in out

def test_without_total_and_disabled():
  log = io.StringIO()
  for _ in tqdm(iter(range(3)), file=log): pass
  assert log.getvalue().startswith("3 [00:00, ")
  quiet = io.StringIO()
  assert list(tqdm([1, 2], file=quiet, disable=True)) == [1, 2] and quiet.getvalue() == ""
  with pytest.raises(TypeError, match="wraps no iterable"): list(tqdm(total=3, file=io.StringIO()))
