"""examples/beautiful_mnist_multi.py: data-parallel training on two devices of one process (CPU and CPU:1) runs a few
jitted steps, learns (the held-out accuracy is far above chance), and keeps every copy of the model on both devices; its
command line prints the accuracy and the devices."""
import re, sys
from runtime.ops import Ops

def test_a_few_steps_on_two_devices_learn(load_example, monkeypatch, capsys):
  example = load_example("beautiful_mnist_multi")
  monkeypatch.setattr(sys, "argv", ["beautiful_mnist_multi.py", "--steps", "40", "--batch", "64"])
  example.main()
  last = capsys.readouterr().out.strip().splitlines()[-1]
  m = re.fullmatch(r"test accuracy: (\d+\.\d)% \(2 devices: CPU, CPU:1\)", last)
  assert m, f"the last line should report the accuracy and the devices, got {last!r}"
  assert float(m.group(1)) >= 60.0  # 10 classes: chance is 10%

def test_the_model_stays_on_both_devices(load_example):
  example = load_example("beautiful_mnist_multi")
  from tensor import Tensor, nn
  model = example.Model()
  for p in nn.state.get_parameters(model): p.replace(p.to(("CPU", "CPU:1")))
  out = model(Tensor.zeros(4, 1, 8, 8).shard(("CPU", "CPU:1"), axis=0)).realize()
  assert out.uop.op is Ops.MULTI and out.uop.arg == 0 and out.device == ("CPU", "CPU:1")
