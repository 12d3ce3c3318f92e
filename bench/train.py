"""Training throughput (issue 11): steps/s of the MLP 784-128-10 + Adam at batch 512 and of examples/beautiful_mnist.py's CNN
at batch 128, ours and torch (when importable) side by side in one run, tinygrad too when given a Python that has it; and
the time of our first training step in a new process with an empty kernel cache.

  python bench/train.py                                # table and JSON lines on stdout
  python bench/train.py --models mlp --json out.json
  python bench/train.py --tinygrad-python /path/to/venv/bin/python   # runs ../shared/bench/anchors/bench_train.py there
  python bench/train.py --threads 1,2 --clock thread   # ours with THREADS=n and torch with n threads, each sample's time
                                                       # the busiest thread's CPU time (bench/kernels.py: a shared machine)
  python bench/train.py --base ../speed-base           # adds the rows of another checkout (a "before"), sampled in turn

Method (as the anchors' bench_train.py): random data, K=4 batches made before the timer and cycled; one step = zero_grad,
forward, mean softmax cross-entropy, backward, Adam(lr=1e-3). Ours is a TinyJit'd step under Tensor.train(): its first
two calls (eager, capture) are timed apart, the kernels' final builds awaited (a cold step runs quick ones meanwhile:
tensor/engine/compile_queue.py), then `samples` timers of `steps` calls each, ending with a device synchronize,
alternating with torch's samples (eager; at each --threads count, both libraries at that count, ours captured under
THREADS=n). tinygrad runs afterwards in its own process. Medians are reported; the loss must fall (the 4 batches are
memorised). The CNN's first step in a new process with an empty cache is --cold cnn (tinygrad's too with --tinygrad-python).
"""
from __future__ import annotations
import argparse, importlib.util, json, os, statistics, subprocess, sys, tempfile, time
if any(a.startswith("--clock") for a in sys.argv) and "wall" not in sys.argv:
  os.environ.setdefault("OMP_WAIT_POLICY", "passive")  # before torch and the first kernel load libgomp (bench/kernels.py says why)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
if "--serve" in sys.argv: sys.path.insert(0, sys.argv[sys.argv.index("--serve") + 1])  # another checkout's `tensor` (BaseTimed)
K = 4
TREE = ROOT  # the checkout whose `tensor` and examples run as "ours" (--serve: another one's)
BATCH = {"mlp": 512, "cnn": 128}
# the workspace's shared folder beside the checkout (or beside its worktree folder)
ANCHORS = next((p for p in (os.path.join(ROOT, *[".."] * k, "shared", "bench", "anchors", "bench_train.py") for k in (1, 2)) if os.path.exists(p)),
               os.path.join(ROOT, "..", "shared", "bench", "anchors", "bench_train.py"))

def _example_cnn():
  spec = importlib.util.spec_from_file_location("beautiful_mnist", os.path.join(TREE, "examples", "beautiful_mnist.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.Model()

def ours_setup(model: str):
  """(the TinyJit'd step taking (x, y), the K batches) for our MLP or CNN."""
  from tensor import Tensor, TinyJit, nn
  Tensor.manual_seed(0)
  if model == "mlp":
    layers = [nn.Linear(784, 128), Tensor.relu, nn.Linear(128, 10)]
    net, shape = (lambda x: x.sequential(layers)), (784,)
    params = nn.state.get_parameters(layers)
  else:
    net, shape = _example_cnn(), (1, 28, 28)
    params = nn.state.get_parameters(net)
  optim = nn.optim.Adam(params, lr=1e-3)
  batches = [(Tensor.rand(BATCH[model], *shape).realize(), Tensor.randint(BATCH[model], high=10).realize()) for _ in range(K)]

  @TinyJit
  @Tensor.train()
  def step(x: Tensor, y: Tensor) -> Tensor:
    optim.zero_grad()
    loss = net(x).sparse_categorical_crossentropy(y).backward()
    return loss.realize(*optim.schedule_step())
  return step, batches

def wall_sample(fn) -> float:
  t0 = time.perf_counter()
  fn()
  return time.perf_counter() - t0

# how a sample is timed: the wall clock, or (--clock) bench/kernels.py's process or busiest-thread CPU time
SAMPLE = wall_sample

class Timed:
  """One library's training step, warmed up: sample(steps) times `steps` calls and returns seconds per step."""
  def __init__(self, step, batches, sync, info: dict):
    self.step, self.batches, self.sync, self.info, self.i, self.times = step, batches, sync, info, 0, []
  def sample(self, steps: int) -> None:
    def run():
      for _ in range(steps):
        self.loss = self.step(*self.batches[self.i % K]); self.i += 1
      self.sync()
    self.times.append(SAMPLE(run) / steps)
  def result(self) -> dict:
    return dict(self.info, s_per_step=statistics.median(self.times), s_per_step_min=min(self.times), loss_end=float(self.loss.item()))

def ours_timed(model: str) -> Timed:
  from tensor import Device, GlobalCounters
  step, batches = ours_setup(model)
  t0 = time.perf_counter(); loss_start = step(*batches[0]).item(); first = time.perf_counter() - t0
  t0 = time.perf_counter(); step(*batches[1]).item(); capture = time.perf_counter() - t0
  try: from tensor.engine.compile_queue import wait_upgrades  # the final (-O3) builds of the quick ones, made in the background
  except ImportError: wait_upgrades = None  # an older checkout (--base): no quick builds
  if wait_upgrades is not None: wait_upgrades()
  GlobalCounters.reset(); step(*batches[2]).item(); kernels = GlobalCounters.kernel_count
  timed = Timed(step, batches, Device[Device.DEFAULT].synchronize,
                {"first_step_s": first, "capture_step_s": capture, "kernels_per_replay": kernels, "loss_start": loss_start})
  timed.i = 3
  return timed

def torch_timed(model: str) -> Timed:
  import torch, torch.nn as tnn, torch.nn.functional as F
  torch.manual_seed(0)
  if model == "mlp": net, shape = tnn.Sequential(tnn.Linear(784, 128), tnn.ReLU(), tnn.Linear(128, 10)), (784,)
  else:
    net = tnn.Sequential(tnn.Conv2d(1, 32, 5), tnn.ReLU(), tnn.Conv2d(32, 32, 5), tnn.ReLU(), tnn.BatchNorm2d(32), tnn.MaxPool2d(2),
                         tnn.Conv2d(32, 64, 3), tnn.ReLU(), tnn.Conv2d(64, 64, 3), tnn.ReLU(), tnn.BatchNorm2d(64), tnn.MaxPool2d(2),
                         tnn.Flatten(), tnn.Linear(576, 10))
    shape = (1, 28, 28)
  optim = torch.optim.Adam(net.parameters(), lr=1e-3)
  batches = [(torch.rand(BATCH[model], *shape), torch.randint(0, 10, (BATCH[model],))) for _ in range(K)]
  def step(x, y):
    optim.zero_grad(set_to_none=True)
    loss = F.cross_entropy(net(x), y)
    loss.backward()
    optim.step()
    return loss
  net.train()
  t0 = time.perf_counter(); loss_start = step(*batches[0]).item(); first = time.perf_counter() - t0
  for i in range(1, 4): step(*batches[i % K])
  timed = Timed(step, batches, lambda: None, {"first_step_s": first, "loss_start": loss_start, "threads": torch.get_num_threads()})
  timed.i = 4
  return timed

def tinygrad_run(python: str, model: str, steps: int, samples: int) -> dict:
  """The anchors' script in the given Python, with an empty tinygrad disk cache (its first step includes compiling)."""
  with tempfile.TemporaryDirectory() as d:
    out = os.path.join(d, "r.json")
    env = dict(os.environ, CACHEDB=os.path.join(d, "cache.db"))
    subprocess.run([python, ANCHORS, "--lib", "tinygrad", "--model", model, "--steps", str(steps), "--samples", str(samples), "--out", out],
                   check=True, env=env, stdout=subprocess.DEVNULL)
    with open(out) as f: r = json.loads(f.read().strip().splitlines()[-1])
  return {"s_per_step": r["s_per_step"]["median"], "s_per_step_min": r["s_per_step"]["min"], "first_step_s": r["first_step_s"],
          "loss_start": r["loss_start"], "loss_end": r["loss_end"]}

class BaseTimed:
  """Another checkout's training step (--base), in a child process of its own (`--serve`) that times a sample when asked:
  its samples alternate with ours and torch's as theirs do."""
  def __init__(self, tree: str, model: str, threads: int | None, clock: str):
    cmd = [sys.executable, os.path.abspath(__file__), "--serve", os.path.abspath(tree), "--models", model, "--clock", clock]
    if threads: cmd += ["--threads", str(threads)]
    # its own kernel cache (CACHE_DIR with -base): the two checkouts may lower one AST differently
    env = dict(os.environ, CACHE_DIR=os.environ.get("CACHE_DIR", os.path.join(tempfile.gettempdir(), "rulegrad")).rstrip("/") + "-base")
    self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    self.info = json.loads(self._line())
  def _line(self) -> str:
    line = self.proc.stdout.readline()  # type: ignore[union-attr]
    if not line: raise RuntimeError(f"the --base child exited ({self.proc.wait()})")
    return line
  def sample(self, steps: int) -> None:
    self.proc.stdin.write(f"{steps}\n"); self.proc.stdin.flush()  # type: ignore[union-attr]
    self._line()
  def result(self) -> dict:
    self.proc.stdin.close()  # type: ignore[union-attr]
    r = json.loads(self._line())
    self.proc.wait()
    return dict(r, tree=self.info["tree"])

def serve(tree: str, model: str, threads: int | None) -> None:
  """The child of BaseTimed: `tensor` and the examples from `tree`; one line of seconds per step for each line of steps."""
  global TREE
  TREE = tree
  from runtime.helpers import Context
  import runtime.threads  # noqa: F401  (registers THREADS: tensor imports it only when a kernel first runs)
  import tensor
  assert os.path.dirname(os.path.dirname(os.path.abspath(tensor.__file__))) == tree, tensor.__file__
  ctx = Context(THREADS=threads) if threads else Context()
  with ctx: timed = ours_timed(model)
  print(json.dumps({"tree": tree}), flush=True)
  for line in sys.stdin:
    with ctx: timed.sample(int(line))
    print(json.dumps(timed.times[-1]), flush=True)
  print(json.dumps(timed.result()), flush=True)

def cold_child(model: str, phases: bool = False) -> None:
  """In a new process (the parent points CACHE_DIR at an empty folder): import time and the first step, as JSON: its wall
  time and its CPU time with the compiler's (on a loaded machine the wall time is mostly waiting for a core). phases: with
  PROFILE's spans (set before the import), where the step's wall time went (phase_table)."""
  if phases: os.environ.update(PROFILE="1", PROFILE_PATH=os.devnull)
  t0 = time.perf_counter()
  import tensor  # noqa: F401
  imported = time.perf_counter() - t0
  from tensor import GlobalCounters
  step, batches = ours_setup(model)
  # the setup's final builds (its random batches ran 4 times: tensor/engine/compile_queue.py) are the setup's work, not the step's
  try: from tensor.engine.compile_queue import wait_upgrades
  except ImportError: pass  # an older checkout (--base): none
  else: wait_upgrades()
  import resource
  def cpu() -> float:  # this process's CPU time and its children's (the C compiler's)
    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)))
  if phases:
    from runtime import profile
    profile.reset()
  GlobalCounters.reset()
  c0, t0 = cpu(), time.perf_counter()
  step(*batches[0]).item()
  first, first_cpu = time.perf_counter() - t0, cpu() - c0
  out = {"import_s": imported, "first_step_s": first, "first_step_cpu_s": first_cpu, "kernels": GlobalCounters.kernel_count}
  if phases: out["phases"] = phase_table(profile.events, t0, first)
  print(json.dumps(out))

# the codegen rewrites (PROFILE spans of category "rewrite" inside a kernel's "codegen NAME" span) reported apart
REWRITES = ("rangeify", "lower", "expand", "vectorize", "decompositions", "symbolic")

def phase_table(events: list[dict], t0: float, wall: float) -> dict:
  """Seconds of a profiled step by phase, from PROFILE's spans (runtime/profile.py): on the main thread, scheduling, each
  kernel's codegen (its main rewrites, linearize and render apart; "other" is the heuristic and the smaller passes), the
  kernels' first runs (with the wait for each one's object), and the rest ("wait and rest": mostly waiting for compiles);
  on the compiler threads, the compiler runs' span time ("compile threads"); and when codegen's and the compiles' last
  span ended, since the step began."""
  from runtime import profile
  origin = profile._us(t0)
  spans = [e for e in events if e.get("ph") == "X" and e["ts"] >= origin]
  main = min((e["tid"] for e in spans if e["cat"] == "codegen"), default=1)
  total: dict[str, float] = {}
  def add(k: str, us: float) -> None: total[k] = total.get(k, 0.0) + us / 1e6
  end = {"codegen": 0.0, "compile": 0.0}
  for e in spans:
    cat, name = e["cat"], e["name"].split(" ")[0]
    if cat in end: end[cat] = max(end[cat], (e["ts"] + e["dur"] - origin) / 1e6)
    if e["tid"] != main:
      if cat == "compile" and e["name"].endswith("kernels"): add("compile threads", e["dur"])
      continue
    if cat == "schedule": add("schedule", e["dur"])
    elif cat == "codegen" and name == "codegen": add("codegen", e["dur"])
    elif cat == "codegen": add(name, e["dur"])
    elif cat == "rewrite" and name in REWRITES: add(name, e["dur"])
    elif cat in ("kernel", "copy"): add("first runs", e["dur"])
    elif cat == "compile": add("compile (main thread)", e["dur"])
    elif cat == "python": add("tensor graph", e["dur"])
  inner = sum(total.get(k, 0.0) for k in (*REWRITES, "linearize", "render"))
  if "codegen" in total: total["codegen other"] = total["codegen"] - inner
  # the rest of the main thread's time: mostly waiting for the compiler threads (and the frontend's Python between realizes)
  total["wait and rest"] = wall - sum(total.get(k, 0.0) for k in ("schedule", "codegen", "first runs", "compile (main thread)", "tensor graph"))
  total["codegen end"], total["compile end"] = end["codegen"], end["compile"]
  return {k: round(v, 3) for k, v in total.items()}

def cold_run(model: str, tree: str = ROOT, phases: bool = False) -> dict:
  with tempfile.TemporaryDirectory() as d:
    env = dict(os.environ, CACHE_DIR=d, PYTHONPATH=tree + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, os.path.abspath(__file__), "--cold-child", model, "--serve", tree] + (["--phases"] if phases else [])
    out = subprocess.run(cmd, check=True, env=env, capture_output=True, text=True)
  return json.loads(out.stdout.strip().splitlines()[-1])

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--models", default="mlp,cnn", help="comma-separated: mlp, cnn (default both)")
  ap.add_argument("--steps", type=int, default=20, help="MLP steps per timed sample (default 20; the CNN takes a tenth, at least 1)")
  ap.add_argument("--samples", type=int, default=5, help="timed samples per library and model (default 5)")
  ap.add_argument("--tinygrad-python", default=None, help="a Python with tinygrad 0.14 installed: adds its rows")
  ap.add_argument("--json", default=None, help="also write the records to this file")
  ap.add_argument("--no-cold", action="store_true", help="skip the cold-cache first step")
  ap.add_argument("--cold", default="mlp", help="comma-separated models whose cold first step is measured (default mlp)")
  ap.add_argument("--threads", default=None, help="comma-separated thread counts, ours (THREADS=n) and torch alike (default: "
                                                   "each library's default)")
  ap.add_argument("--clock", choices=("wall", "cpu", "thread"), default="wall", help="how samples are timed (bench/kernels.py)")
  ap.add_argument("--base", default=None, help="another checkout (a \"before\"): its rows too, in a child process sampled in turn")
  ap.add_argument("--phases", action="store_true", help="with --cold: each cold step's wall time by phase (PROFILE's spans; slower)")
  ap.add_argument("--cold-only", action="store_true", help="only the cold first steps (no training table)")
  ap.add_argument("--cold-child", default=None, help=argparse.SUPPRESS)
  ap.add_argument("--serve", default=None, help=argparse.SUPPRESS)
  args = ap.parse_args()
  global SAMPLE, TREE
  if args.clock != "wall":
    from bench.kernels import cpu_sample, thread_sample
    SAMPLE = cpu_sample if args.clock == "cpu" else thread_sample
  if args.cold_child:
    TREE = args.serve or ROOT
    return cold_child(args.cold_child, args.phases)
  if args.serve: return serve(args.serve, args.models, int(args.threads) if args.threads else None)
  try: import torch  # noqa: F401
  except ImportError: torch = None
  from runtime.helpers import Context
  import runtime.threads  # noqa: F401  (registers THREADS, which Context(THREADS=n) below sets: tensor imports it only when a kernel first runs)
  records = []
  for model in [] if args.cold_only else args.models.split(","):
    if model not in BATCH: ap.error(f"unknown model {model!r}: choose from {', '.join(BATCH)}")
    steps = args.steps if model == "mlp" else max(1, args.steps // 10)
    for n in [int(t) for t in args.threads.split(",")] if args.threads else [None]:
      ctx = Context(THREADS=n) if n else Context()
      if torch is not None and n: torch.set_num_threads(n)
      with ctx: timed: dict = {"ours": ours_timed(model)}
      if args.base: timed["base"] = BaseTimed(args.base, model, n, args.clock)
      if torch is not None: timed["torch"] = torch_timed(model)
      for _ in range(args.samples):  # alternate the libraries' samples: the machine's load drifts
        for lib, t in timed.items():
          with (ctx if lib == "ours" else Context()): t.sample(steps)
      results = {lib: t.result() for lib, t in timed.items()}
      if args.tinygrad_python and n in (None, min(int(t) for t in (args.threads or "1").split(","))):
        results["tinygrad"] = tinygrad_run(args.tinygrad_python, model, steps, args.samples)
      for lib, r in results.items():
        r.update(bench="train", lib=lib, model=model, batch=BATCH[model], steps_per_sample=steps, steps_per_s=1 / r["s_per_step"],
                 threads=n, clock=args.clock if lib != "tinygrad" else "wall")
        records.append(r)
        print(json.dumps(r), flush=True)
  if not args.no_cold:
    for model in args.cold.split(","):
      for lib, tree in (("ours", ROOT), ("base", args.base)) if args.base else (("ours", ROOT),):
        r = cold_run(model, os.path.abspath(tree), args.phases)
        r.update(bench="train_cold", lib=lib, model=model, batch=BATCH[model])
        records.append(r)
        print(json.dumps(r), flush=True)
  print(f"\n{'model':5s} {'batch':>5s} {'thr':>3s} {'lib':9s} {'steps/s':>9s} {'ms/step':>9s} {'vs torch':>9s} {'first step':>11s} {'loss':>15s}")
  torch_rate = {(r["model"], r["threads"]): r["steps_per_s"] for r in records if r.get("lib") == "torch" and r["bench"] == "train"}
  for r in records:
    if r["bench"] != "train": continue
    key = (r["model"], r["threads"])
    ratio = f"{r['steps_per_s'] / torch_rate[key]:.2f}x" if key in torch_rate else "-"
    print(f"{r['model']:5s} {r['batch']:5d} {r['threads'] or '-':>3} {r['lib']:9s} {r['steps_per_s']:9.2f} {1e3 * r['s_per_step']:9.1f} {ratio:>9s} "
          f"{r['first_step_s']:10.2f}s {r['loss_start']:6.3f} -> {r['loss_end']:.3f}")
  for r in records:
    if r["bench"] == "train_cold":
      print(f"cold cache, new process, {r['lib']}: import {r['import_s']:.2f} s, first {r['model']} step"
            f" {r['first_step_s']:.2f} s, CPU {r['first_step_cpu_s']:.2f} s with the compiler's ({r['kernels']} kernels)")
      if "phases" in r: print("  phases (s): " + ", ".join(f"{k} {v:.2f}" for k, v in r["phases"].items()))
  if args.json:
    with open(args.json, "w") as f: json.dump(records, f, indent=1)

if __name__ == "__main__": main()
