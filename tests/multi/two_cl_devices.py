"""Run by tests/multi/test_shard.py in a process of its own with POCL_DEVICES set, so pocl (OpenCL on the CPU) shows two
devices: shards on CL and CL:1 against numpy and the one-device result. Prints 'two CL devices ok' or 'one CL device'."""
import numpy as np
from runtime.device import DeviceError
from tensor import Tensor, nn

DEVS = ("CL", "CL:1")

def main() -> None:
  try: Tensor([1.0], device="CL:1").realize()
  except DeviceError: return print("one CL device")
  rng = np.random.default_rng(0)
  a, w = rng.standard_normal((64, 48)).astype(np.float32), rng.standard_normal((48, 32)).astype(np.float32)
  s = Tensor(a).shard(DEVS, axis=0)
  assert s.device == DEVS
  np.testing.assert_allclose((s * 2 + 1).sum(0).numpy(), (a * 2 + 1).sum(0), rtol=1e-5, atol=1e-4)  # all-reduce over the split axis
  np.testing.assert_allclose((s @ Tensor(w).to(DEVS)).numpy(), a @ w, rtol=1e-5, atol=1e-4)  # sharded x replicated
  np.testing.assert_allclose((Tensor(a).shard(DEVS, axis=1) @ Tensor(w).shard(DEVS, axis=0)).numpy(), a @ w, rtol=1e-5, atol=1e-4)
  # a data-parallel SGD step on the two devices equals the step on one
  def step(devs):
    Tensor.manual_seed(0)
    layer = nn.Linear(48, 8)
    for p in (layer.weight, layer.bias): p.replace(p.to(devs or "CL"))
    opt = nn.optim.SGD([layer.weight, layer.bias], lr=0.1)
    x = Tensor(a).shard(devs, axis=0) if devs else Tensor(a, device="CL")
    with Tensor.train():
      opt.zero_grad()
      layer(x).relu().mean().backward()
      opt.step()
    return layer.weight.to("CPU").numpy()
  np.testing.assert_allclose(step(DEVS), step(None), rtol=1e-5, atol=1e-6)
  print("two CL devices ok")

if __name__ == "__main__": main()
