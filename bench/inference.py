"""Inference against torch (issue 27): ResNet-18 at batch 8 on 224x224 images (one forward, eval-mode BatchNorm) and GPT-2
small greedy decoding at batch 1 (ms per token, its KV cache realized in every layer as tinygrad writes it), with our ports
of tinygrad's model files (examples/resnet.py, examples/gpt2.py) holding the weights of a randomly initialised torch model
of the same layout. Outputs are compared first (logits, then the decoded tokens); then samples alternate between the two
libraries in one process, at each thread count (ours with THREADS=n, torch with set_num_threads(n)).

  python -m bench.inference [--models resnet18,gpt2] [--threads 1,2] [--clock wall|cpu|thread] [--samples 5] [--layers 12]

Prints a table and the records as JSON. Needs torch (pip install torch==2.13.0).
"""
from __future__ import annotations
import argparse, json, os, statistics, sys, time
if any(a.startswith("--clock") for a in sys.argv) and "wall" not in sys.argv: os.environ.setdefault("OMP_WAIT_POLICY", "passive")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples"))
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as tnn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from runtime.helpers import Context  # noqa: E402
from tensor import Tensor, Variable, GlobalCounters  # noqa: E402
from tensor.nn.state import get_state_dict  # noqa: E402

# ---- torch references with the ports' parameter names ----

class TorchBlock(tnn.Module):
  def __init__(self, cin: int, planes: int, stride: int):
    super().__init__()
    self.conv1, self.bn1 = tnn.Conv2d(cin, planes, 3, stride, 1, bias=False), tnn.BatchNorm2d(planes)
    self.conv2, self.bn2 = tnn.Conv2d(planes, planes, 3, 1, 1, bias=False), tnn.BatchNorm2d(planes)
    self.downsample = tnn.Sequential(tnn.Conv2d(cin, planes, 1, stride, bias=False), tnn.BatchNorm2d(planes)) \
      if stride != 1 or cin != planes else tnn.Sequential()
  def forward(self, x):
    return F.relu(self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))) + self.downsample(x))

class TorchResNet18(tnn.Module):
  def __init__(self):
    super().__init__()
    self.conv1, self.bn1 = tnn.Conv2d(3, 64, 7, 2, 3, bias=False), tnn.BatchNorm2d(64)
    cin, layers = 64, []
    for planes, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
      layers.append(tnn.Sequential(TorchBlock(cin, planes, stride), TorchBlock(planes, planes, 1)))
      cin = planes
    self.layer1, self.layer2, self.layer3, self.layer4 = layers
    self.fc = tnn.Linear(512, 1000)
  def forward(self, x):
    x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, 2, 1)
    x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
    return self.fc(x.mean((2, 3)))

class TorchGPT2(tnn.Module):
  """GPT-2 with a preallocated key/value cache written in place (the fastest way to decode in eager torch)."""
  def __init__(self, n_layers: int, dim: int = 768, heads: int = 12, vocab: int = 50257, ctx: int = 128):
    super().__init__()
    self.heads, self.dim = heads, dim
    self.wte, self.wpe = tnn.Embedding(vocab, dim), tnn.Embedding(1024, dim)
    self.h = tnn.ModuleList()
    for _ in range(n_layers):
      b = tnn.Module()
      b.ln_1, b.ln_2 = tnn.LayerNorm(dim), tnn.LayerNorm(dim)
      b.attn, b.mlp = tnn.Module(), tnn.Module()
      b.attn.c_attn, b.attn.c_proj = tnn.Linear(dim, 3 * dim), tnn.Linear(dim, dim)
      b.mlp.c_fc, b.mlp.c_proj = tnn.Linear(dim, 4 * dim), tnn.Linear(4 * dim, dim)
      self.h.append(b)
    self.ln_f, self.lm_head = tnn.LayerNorm(dim), tnn.Linear(dim, vocab, bias=False)
    self.cache = torch.zeros(n_layers, 2, 1, heads, ctx, dim // heads)
  @torch.no_grad()
  def forward(self, tokens: torch.Tensor, start: int) -> int:
    n = tokens.shape[1]
    h = self.wte(tokens) + self.wpe(torch.arange(start, start + n))
    for i, b in enumerate(self.h):
      q, k, v = b.attn.c_attn(b.ln_1(h)).view(1, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
      self.cache[i, 0, :, :, start:start + n], self.cache[i, 1, :, :, start:start + n] = k, v
      keys, values = self.cache[i, 0, :, :, :start + n], self.cache[i, 1, :, :, :start + n]
      a = F.scaled_dot_product_attention(q, keys, values, is_causal=n > 1).transpose(1, 2).reshape(1, n, self.dim)
      h = h + b.attn.c_proj(a)
      h = h + b.mlp.c_proj(F.gelu(b.mlp.c_fc(b.ln_2(h)), approximate="tanh"))
    return int(self.lm_head(self.ln_f(h))[0, -1].argmax())

def load_from_torch(ours, theirs: tnn.Module) -> None:
  """Copy every parameter and buffer of the torch model into ours, by name (realized)."""
  mine = get_state_dict(ours)
  for t in mine.values(): t.realize()  # whole buffers, to assign into
  for name, value in theirs.state_dict().items():
    if name in mine: mine[name].assign(Tensor(value.detach().numpy()).cast(mine[name].dtype))
  for t in mine.values(): t.realize()

# ---- timing ----

def make_sampler(clock: str):
  if clock == "wall":
    def wall(fn):
      t0 = time.perf_counter()
      fn()
      return time.perf_counter() - t0
    return wall
  from bench.kernels import cpu_sample, thread_sample
  return cpu_sample if clock == "cpu" else thread_sample

def alternate(sample, fns: dict, samples: int) -> dict:
  times = {k: [] for k in fns}
  for _ in range(samples):
    for k, fn in fns.items(): times[k].append(sample(fn))
  return {k: statistics.median(v) for k, v in times.items()}

def resnet(threads: int, samples: int, sample) -> dict:
  from resnet import ResNet
  torch.manual_seed(0)
  theirs = TorchResNet18().eval()
  for m in theirs.modules():  # running statistics away from (0, 1), so eval-mode BatchNorm does something
    if isinstance(m, tnn.BatchNorm2d):
      m.running_mean.uniform_(-0.1, 0.1)
      m.running_var.uniform_(0.5, 1.5)
  ours = ResNet(18)
  load_from_torch(ours, theirs)
  x = np.random.default_rng(0).standard_normal((8, 3, 224, 224)).astype(np.float32)
  X, tx = Tensor(x).realize(), torch.from_numpy(x)
  from tensor import TinyJit
  fwd = TinyJit(lambda x: ours(x).realize())
  with Tensor.test(): logits = [fwd(X).numpy() for _ in range(3)][-1]
  with torch.no_grad(): ref = theirs(tx).numpy()
  err = float(np.abs(logits - ref).max() / np.abs(ref).max())
  def run_ours():
    with Tensor.test(): fwd(X)
  def run_torch():
    with torch.no_grad(): theirs(tx)
  GlobalCounters.reset(); run_ours(); kernels = GlobalCounters.kernel_count
  t = alternate(sample, {"ours": run_ours, "torch": run_torch}, samples)
  return {"model": "resnet18 b8", "unit": "ms/forward", "ours": 1e3 * t["ours"], "torch": 1e3 * t["torch"], "kernels": kernels, "rel_err": err}

def gpt2(threads: int, samples: int, sample, layers: int, steps: int = 8) -> dict:
  import gpt2 as G
  torch.manual_seed(0)
  theirs = TorchGPT2(layers)
  ours = G.Transformer(n_layers=layers)
  load_from_torch(ours, theirs)
  prompt = [464, 3280, 318, 262]
  toks, _ = G.decode(ours, prompt, 4)  # the prompt, then three decode steps (eager, capture, replay)
  ref, start = list(prompt), 0
  for _ in range(4):
    ref.append(theirs(torch.tensor([ref[start:]]), start))
    start = len(ref) - 1
  state = {"ours": (list(toks), len(toks) - 1), "torch": (list(ref), len(ref) - 1)}
  def step_ours():
    seq, pos = state["ours"]
    for _ in range(steps):
      nxt = ours(Variable("tokens", 0, ours.vocab_size - 1).bind(seq[-1]), Variable("start_pos", 1, G.MAX_CONTEXT - 1).bind(pos))
      seq.append(nxt.tolist()[0]); pos += 1  # noqa: E702
    state["ours"] = (seq[:len(prompt) + 4], len(prompt) + 3)  # back to the same position: every sample decodes the same steps
  def step_torch():
    seq, pos = state["torch"]
    for _ in range(steps):
      seq.append(theirs(torch.tensor([[seq[-1]]]), pos)); pos += 1  # noqa: E702
    state["torch"] = (seq[:len(prompt) + 4], len(prompt) + 3)
  GlobalCounters.reset()
  ours(Variable("tokens", 0, ours.vocab_size - 1).bind(toks[-1]), Variable("start_pos", 1, G.MAX_CONTEXT - 1).bind(len(toks) - 1)).tolist()
  kernels = GlobalCounters.kernel_count
  t = alternate(sample, {"ours": step_ours, "torch": step_torch}, samples)
  return {"model": f"gpt2 {layers} layers", "unit": "ms/token", "ours": 1e3 * t["ours"] / steps, "torch": 1e3 * t["torch"] / steps,
          "kernels": kernels, "same_tokens": toks == ref}

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--models", default="resnet18,gpt2")
  ap.add_argument("--threads", default="1,2")
  ap.add_argument("--samples", type=int, default=5)
  ap.add_argument("--layers", type=int, default=12, help="GPT-2's layers (12: gpt2 small)")
  ap.add_argument("--clock", choices=("wall", "cpu", "thread"), default="wall")
  args = ap.parse_args()
  sample, rows = make_sampler(args.clock), []
  for n in (int(t) for t in args.threads.split(",")):
    torch.set_num_threads(n)
    with Context(THREADS=n):
      for m in args.models.split(","):
        r = resnet(n, args.samples, sample) if m == "resnet18" else gpt2(n, args.samples, sample, args.layers)
        rows.append(r := {**r, "threads": n, "clock": args.clock})
        print(json.dumps(r), flush=True)
  print(f"\n{'model':18s} {'thr':>3s} {'ours':>9s} {'torch':>9s} {'torch/ours':>10s} {'kernels':>8s}")
  for r in rows:
    print(f"{r['model']:18s} {r['threads']:3d} {r['ours']:9.1f} {r['torch']:9.1f} {r['torch'] / r['ours']:9.2f}x {r['kernels']:8d}  [{r['unit']}]")

if __name__ == "__main__": main()
