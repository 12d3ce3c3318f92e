"""The generated code of a corpus of kernels, to show that a change of the rules (a port to new constructs, a refactor of a
helper) changes no kernel: collect the kernel ASTs once, render them with the code before and after, compare.

  python -m bench.codegen_corpus collect CORPUS.pkl [TEST PATHS...] [--minutes=M]   the tests' kernels (pytest with this
      module as a plugin records every AST lowered and every Opt list it was lowered with; with M, those of the tests run
      in M minutes) and the bench's (bench/bench_codegen.py)
  python bench/codegen_corpus.py render CORPUS.pkl OUT.json.gz        each kernel's code in every variant below; run it with
      PYTHONPATH at the tree to measure (an unpacked `git archive` of the commit before), the script from this tree
      (a third argument: only the variants whose name starts with it, e.g. PYTHON)
  python -m bench.codegen_corpus compare BEFORE.json.gz AFTER.json.gz  how many kernels and variants, and the first that differ

The variants of a kernel: the CPU with the heuristic's Opts on 1 and on 2 threads, NOOPT=1, the PYTHON device's linear
program (scalar lanes: no vector caps), and each Opt list of the corpus for it (the ones the tests lowered it with, and
random legal lists drawn at collection, seeded by the kernel) on 1 or 2 threads. A variant that raises records its error.
"""
from __future__ import annotations
import gzip, hashlib, json, os, pickle, random, sys

RANDOM_LISTS = 3  # random legal Opt lists per kernel
MAX_LISTS = 6  # Opt lists per kernel at most (recorded ones first)

# ---- collection: a pytest plugin (active with CORPUS_OUT set) ----

_seen: dict = {}  # AST -> set of Opt lists it was lowered with
_current: list = [None]

def _install() -> None:
  import tensor.codegen as cg
  simplify, split = cg.rangeify_simplified, cg.split_threads
  def rangeify_simplified(ast):
    _current[0] = ast
    _seen.setdefault(ast, set())
    return simplify(ast)
  def split_threads(opts):
    if _current[0] is not None: _seen[_current[0]].add(tuple(tuple(o) for o in opts))
    return split(opts)
  cg.rangeify_simplified, cg.split_threads = rangeify_simplified, split_threads

def pytest_configure(config) -> None:
  if os.environ.get("CORPUS_OUT"):
    import tensor.engine.realize as realize
    realize.PROGRAM_DISK_CACHE = 0  # lower every kernel (in this process only: a test's child process keeps its cache)
    _install()

def _save() -> None:
  if out := os.environ.get("CORPUS_OUT"):
    with open(f"{out}.{os.getpid()}.tmp", "wb") as f: pickle.dump(list(_seen.items()), f)
    os.replace(f"{out}.{os.getpid()}.tmp", f"{out}.{os.getpid()}")

_tests = [0]
def pytest_runtest_teardown(item) -> None:
  _tests[0] += 1
  if _tests[0] % 20 == 0: _save()  # a collection stopped at its time limit keeps what it saw

def pytest_unconfigure(config) -> None: _save()

def bench_kernels() -> list:
  """The ASTs of bench/bench_codegen.py's workloads."""
  import numpy as np
  from runtime.ops import Ops
  from bench.bench_codegen import workloads
  from tensor.engine.realize import schedule_of
  out = []
  for _, _, _, t, _ in workloads(np.random.default_rng(0), None):
    t.kernelize()
    out += [k.arg.ast for k in schedule_of([t.uop.src[0] if t.uop.op is Ops.RESHAPE else t.uop]) if k.arg.ast.op is Ops.SINK]
  return out

def digest(ast) -> str:
  try: from tensor.codegen import ast_text  # type: ignore[attr-defined]
  except ImportError: from tensor.engine.program_cache import ast_text  # type: ignore[no-redef]  # a tree before issue 20
  return hashlib.sha256(ast_text(ast).encode()).hexdigest()[:16]

def random_lists(ast, n: int) -> list[tuple]:
  """n legal Opt lists for ast (as tests/codegen/test_opt_fuzz.py draws them), seeded by the kernel."""
  from runtime.ops import Ops
  from tensor.codegen import rangeify_simplified
  from tensor.codegen.opt import KINDS, Opt, OptError, apply_opts, loops, trip_count
  rng, out = random.Random(digest(ast)), []
  for _ in range(n):
    sink, ctx = rangeify_simplified(ast)
    ctx.next_range = 1 + max([u.arg for u in sink.toposort() if u.op is Ops.RANGE], default=0)
    opts: list = []
    for _ in range(rng.randint(1, 4)):
      if not (ls := loops(sink)): break
      axis, kind = rng.randrange(len(ls)), rng.choice(KINDS)
      n_iter = trip_count(ls[axis]) or 1
      amount = rng.randrange(len(ls)) if kind == "SWAP" else rng.choice([d for d in range(n_iter + 1) if d == 0 or n_iter % d == 0])
      try: sink, done = apply_opts(sink, [Opt(kind, axis, amount)], ctx.new_range)
      except OptError: continue
      opts += [tuple(o) for o in done]
    out.append(tuple(opts))
  return out

def collect(out: str, tests: list[str], minutes: float) -> None:
  import glob, subprocess
  # a failing test still leaves its kernels: the corpus is what the tests lower, not whether they pass
  cmd = [sys.executable, "-m", "pytest", "-q", "-p", "bench.codegen_corpus", "-n", "2", *tests]
  try: subprocess.run(cmd, env=dict(os.environ, CORPUS_OUT=out), timeout=minutes * 60)
  except subprocess.TimeoutExpired: print(f"stopped after {minutes} minutes: the corpus is the kernels of the tests run so far")
  seen: dict = {}
  for part in glob.glob(f"{out}.*[0-9]"):
    with open(part, "rb") as f:
      for ast, lists in pickle.load(f): seen.setdefault(digest(ast), (ast, set()))[1].update(lists)
    os.remove(part)
  for ast in bench_kernels(): seen.setdefault(digest(ast), (ast, set()))
  corpus = []
  for key in sorted(seen):
    ast, lists = seen[key]
    given = sorted(x for x in lists if x)[:MAX_LISTS - RANDOM_LISTS]
    corpus.append((key, ast, given + [x for x in random_lists(ast, RANDOM_LISTS) if x not in given]))
  with open(out, "wb") as f: pickle.dump(corpus, f)
  print(f"{len(corpus)} kernels, {sum(len(x[2]) for x in corpus)} Opt lists -> {out}")

# ---- rendering: runs against the tree on PYTHONPATH ----

def render_one(ast, device: str, opts, threads: int, noopt: int) -> str:
  from runtime.helpers import Context
  from tensor.codegen import lower_kernel, thread_cap
  from tensor.codegen.linearize import linearize
  from tensor.codegen.opt import Opt
  given = None if opts is None else [Opt(*o) for o in opts]
  try:
    with Context(NOOPT=noopt, THREADS=threads, BEAM=0):
      try: from tensor.codegen import render, target_for  # type: ignore[attr-defined]  # lowering for a Target (issue 20 on)
      except ImportError:  # a tree before: lowering for a device name, the renderer reading THREADS
        from tensor.engine.realize import render  # type: ignore[attr-defined,no-redef]
        sink, applied = lower_kernel(ast, opts=given, device=device)  # type: ignore[call-arg]
        uops = linearize(sink)
        with Context(THREADS=thread_cap(applied) or threads): src = render(device, "k", uops)  # type: ignore[call-arg,arg-type]
      else:
        target = target_for(device)
        sink, applied = lower_kernel(ast, target, given)
        src = render(target, "k", linearize(sink), applied)
    if not isinstance(src, str):  # the PYTHON device's program: its UOps, as DEBUG=5 prints them
      at = {u: i for i, u in enumerate(src)}
      src = "\n".join(f"{u.op} {u.dtype!r} {[at.get(s, '-') for s in u.src]} {u.arg!r}" for u in src)
    return f"opts {[tuple(o) for o in applied]}\n{src}"
  except Exception as e:  # noqa: BLE001 (a variant that raises is a result to compare too)
    return f"error {type(e).__name__}: {e}"

def variants(lists: list) -> list[tuple[str, str, object, int, int]]:
  base = [("heuristic t1", "CPU", None, 1, 0), ("heuristic t2", "CPU", None, 2, 0), ("NOOPT=1", "CPU", None, 2, 1),
          ("PYTHON", "PYTHON", None, 1, 0)]
  return base + [(f"opts {list(o)} t{1 + k % 2}", "CPU", o, 1 + k % 2, 0) for k, o in enumerate(lists)]

def render_all(corpus_path: str, out: str, only: str = "") -> None:
  with open(corpus_path, "rb") as f: corpus = pickle.load(f)
  result = {}
  for n, (key, ast, lists) in enumerate(corpus):
    result[key] = {name: render_one(ast, *v) for name, *v in variants(lists) if name.startswith(only)}
    if n % 100 == 99: print(f"{n + 1}/{len(corpus)} kernels", file=sys.stderr, flush=True)
  with gzip.open(out, "wt") as f: json.dump(result, f)
  print(f"{len(result)} kernels, {sum(map(len, result.values()))} variants -> {out}")

def compare(a_path: str, b_path: str) -> int:
  import difflib
  with gzip.open(a_path, "rt") as f: a = json.load(f)
  with gzip.open(b_path, "rt") as f: b = json.load(f)
  pairs = [(k, v) for k in sorted(set(a) | set(b)) for v in sorted(set(a.get(k, {})) | set(b.get(k, {})))]
  differ = [(k, v) for k, v in pairs if a.get(k, {}).get(v) != b.get(k, {}).get(v)]
  errors = sum(1 for k, v in pairs if str(b.get(k, {}).get(v, "")).startswith("error"))
  print(f"{len(set(k for k, _ in pairs))} kernels, {len(pairs)} variants ({errors} raise after), {len(differ)} differ")
  for k, v in differ[:3]:
    print(f"--- kernel {k}, {v}")
    sys.stdout.writelines(difflib.unified_diff(str(a.get(k, {}).get(v)).splitlines(True), str(b.get(k, {}).get(v)).splitlines(True), n=2))
  return 1 if differ else 0

if __name__ == "__main__":
  cmd, *args = sys.argv[1:]
  if cmd == "collect": collect(args[0], [a for a in args[1:] if not a.startswith("--minutes=")] or ["tests"],
                               float(next((a.split("=")[1] for a in args if a.startswith("--minutes=")), "inf")))
  elif cmd == "render": render_all(*args)
  elif cmd == "compare": sys.exit(compare(*args))
  else: sys.exit(__doc__)
