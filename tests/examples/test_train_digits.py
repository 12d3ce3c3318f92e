"""examples/train_digits.py, the README's first command: trained as it ships (default steps and seed), it reaches at least
97% on the held-out digits and says so on its last line."""
import re, sys

def test_train_digits_reaches_97_percent(load_example, monkeypatch, capsys):
  example = load_example("train_digits")
  monkeypatch.setattr(sys, "argv", ["train_digits.py"])
  example.main()
  out = capsys.readouterr()
  last = out.out.strip().splitlines()[-1]
  m = re.fullmatch(r"test accuracy: (\d+\.\d)%", last)
  assert m, f"the last line should report the accuracy, got {last!r}"
  assert float(m.group(1)) >= 97.0
  assert "loss " in out.err  # the progress bar shows the running loss
