"""A captured TinyJit pickled, then unpickled and replayed in a new process: its weights travel with it, its kernels are
rebuilt from their sources, and it still checks its inputs."""
import os, pickle, subprocess, sys, textwrap
import numpy as np
from tensor import Tensor, TinyJit, nn

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

def _run(code: str) -> str:
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
  assert r.returncode == 0, f"the subprocess failed:\n{r.stdout}\n{r.stderr}"
  return r.stdout

def test_pickled_capture_replays_in_a_new_process(tmp_path):
  rng = np.random.default_rng(0)
  layer = nn.Linear(100, 70)
  @TinyJit
  def forward(x, bias):
    h = layer(x).relu()
    return (h.sum(axis=1) + bias).realize(), (h * 2).realize()  # a reduction of 70 (split) and an elementwise output
  for _ in range(3):
    forward(Tensor(rng.standard_normal((4, 100)).astype(np.float32)).realize(), Tensor(rng.standard_normal(4).astype(np.float32)).realize())
  path = tmp_path / "forward.pkl"
  path.write_bytes(pickle.dumps(forward))
  x, b = rng.standard_normal((4, 100)).astype(np.float32), rng.standard_normal(4).astype(np.float32)
  np.save(tmp_path / "x.npy", x)
  np.save(tmp_path / "b.npy", b)
  w, bias = layer.weight.numpy(), layer.bias.numpy()
  out = _run(f"""
    import pickle, numpy as np
    from tensor import Tensor
    from tensor.engine.jit import JitError
    f = pickle.loads(open({str(path)!r}, "rb").read())
    x, b = np.load({str(tmp_path / 'x.npy')!r}), np.load({str(tmp_path / 'b.npy')!r})
    s, h = f(Tensor(x).realize(), Tensor(b).realize())
    np.save({str(tmp_path / 's.npy')!r}, s.numpy())
    np.save({str(tmp_path / 'h.npy')!r}, h.numpy())
    try: f(Tensor(x[:2]).realize(), Tensor(b).realize())
    except JitError as e: print("rejected:", e)
  """)
  h = np.maximum(x @ w.T + bias, 0)
  np.testing.assert_allclose(np.load(tmp_path / "s.npy"), h.sum(axis=1) + b, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(np.load(tmp_path / "h.npy"), h * 2, rtol=1e-5, atol=1e-5)
  assert "rejected: args mismatch in JIT: argument 0: shape (2, 100)" in out

def test_pickled_training_step_keeps_its_state_and_random_stream():
  w = Tensor([1.0, 2.0, 3.0], requires_grad=True)
  opt = nn.optim.SGD([w], lr=0.1)
  @TinyJit
  @Tensor.train()
  def step():
    opt.zero_grad()
    noise = Tensor.rand(3)
    loss = ((w - noise) ** 2).sum().backward()
    return loss.realize(*opt.schedule_step())
  for _ in range(3): step()
  copy = pickle.loads(pickle.dumps(step))
  # the copy owns copies of the weights, optimizer state and generator state: both continue the same way, apart
  a = [step().item() for _ in range(3)]
  b = [copy().item() for _ in range(3)]
  assert a == b
  assert w.numpy().tolist() != [1.0, 2.0, 3.0]
