"""The every-rule-fires checks of tests/rules/test_<file>.py: which rules of a rule file fire while some work runs.

`firing()` counts every rule that fires in its block, through graph_rewrite or one node at a time (Matcher.rewrite: the C
renderer, the gradient rules), by RULECOVERAGE's counter (runtime/trace.py), on for the block. `lowering()` is the work
the codegen rule files share: a set of tensor graphs kernelized, each kernel lowered and rendered for the CPU (the
heuristic's opts on two threads, NOOPT, Opt lists drawn at random among the legal ones, seeded) and for the PYTHON
interpreter, and a few Opt lists given. `assert_every_rule_fires` fails naming each rule that did not fire, and each rule listed as unreachable that
did (the list must stay true).
"""
from __future__ import annotations
import contextlib, functools, os, random
from typing import Iterator
import numpy as np
from runtime import trace
from runtime.dtype import dtypes
from runtime.helpers import Context
from runtime.ops import Ops
from runtime.rewrite import graph_rewrite
from tensor.codegen.spec import SpecError

def key(rule) -> str: return f"{rule.file}:{rule.id}"

@contextlib.contextmanager
def firing() -> Iterator[dict[str, int]]:
  """A dict that holds, after the block, how often each rule (by key) fired in it."""
  saved, before = trace.COVERAGE_FILE, dict(trace._coverage)
  if not saved: trace.COVERAGE_FILE = os.devnull  # counting on for the block (a RULECOVERAGE run keeps its own file)
  counts: dict[str, int] = {}
  try: yield counts
  finally:
    trace.COVERAGE_FILE = saved
    for r, n in trace._coverage.items():
      if n > before.get(r, 0): counts[key(r)] = counts.get(key(r), 0) + n - before.get(r, 0)
    if not saved:  # leave no counts behind for a run that does not save them
      trace._coverage.clear()
      trace._coverage.update(before)

def rules_of(path: str) -> list:
  """Every rule of rules/X.rules (its generated module's Rule objects), in line order."""
  from dslc.coverage import rule_tables
  return rule_tables()[path]

def assert_every_rule_fires(rules: list, counts: dict[str, int], unreachable: dict[str, str] | None = None) -> None:
  """Every rule fired, but those whose text starts with a key of `unreachable` (its value says why no test graph reaches
  it): those must not have fired."""
  unreachable = unreachable or {}
  def excused(r) -> bool: return any(r.text.startswith(t) for t in unreachable)
  cold = [f"{r.file}:{r.line}: {r.text}" for r in rules if key(r) not in counts and not excused(r)]
  stale = [f"{r.file}:{r.line}: {r.text}" for r in rules if key(r) in counts and excused(r)]
  assert not cold, "rules that never fired:\n" + "\n".join(cold)
  assert not stale, "rules listed as unreachable that fired (take them off the list):\n" + "\n".join(stale)

# ---- the codegen rule files' shared work ----

def graphs() -> list:
  """Tensor graphs that between them lower through every codegen rule file: elementwise, reductions of every kind and
  axis, softmax, matmul and conv (register tiles), half and bfloat16, ints, casts and bitcasts, movement, gathers,
  symbolic sizes, reductions over loops their value does not use."""
  from tensor import Tensor, Variable
  rng = np.random.default_rng(0)
  def R(*s, dt=np.float32): return Tensor(rng.standard_normal(s).astype(dt)).realize()
  a, b, big = R(16, 64), R(64, 32), R(4, 300)
  h = Tensor(rng.standard_normal((8, 32)).astype(np.float16)).realize()
  bf = Tensor(rng.standard_normal((8, 32)).astype(np.float32), dtype=dtypes.bfloat16).realize()
  i = Tensor(rng.integers(-50, 50, (8, 32)).astype(np.int32)).realize()
  u = Tensor(rng.integers(0, 50, (8, 32)).astype(np.uint32)).realize()
  d = Tensor(rng.standard_normal((8, 32))).realize().cast(dtypes.float64).realize()
  img, w = R(2, 4, 10, 10), R(8, 4, 3, 3)
  n = Variable("rows", 1, 16).bind(5)
  def window_write():  # cache[3:5] = v, as t[...] = v builds it: only rows 3 and 4 are looped over (tensor/codegen/window.py)
    c = R(8, 32)
    return c.assign(Tensor.ones(2, 32, dtype=dtypes.bool).pad(((3, 3), (0, 0)), value=False).where(R(2, 32).pad(((3, 3), (0, 0))), c))
  return [window_write(), a + 1, a * 2 + b.sum(), (a @ b).relu(), a.sum(1), a.sum(0), a.sum(), a.max(1), a.min(0), a.prod(1), a.softmax(1),
          big.softmax(1), big.sum(1), big.reshape(1200).sum(), R(1 << 19).sum(), (h * 2 + 1).exp(), h @ h.T, (bf * bf).sum(1), bf.exp2(),
          h.exp2(), h.log2(), a.exp2(), a.log2(), a.sin(), a.sqrt(), a ** 1.5, i // 3, i % 7, (i << 2) | 1, (i >> 1) ^ 5, u // 3, u % 5,
          u >> 2, (i > 0).where(i, -i), i.cast(dtypes.float32) * 1.5, a.cast(dtypes.int32), a.bitcast(dtypes.int32) + 1,
          bf.bitcast(dtypes.uint16) + 1, h.cast(dtypes.bool) | False, i.cast(dtypes.bool).sum(), d * d + d, (d @ d.T).sum(),
          u.cast(dtypes.uint64) * 3,
          i.cast(dtypes.int64) - 2**40, img.conv2d(w), a.pad(((1, 1), (2, 0))) + 1, a.flip(1) + 0, a.T + 1, a[:n] * 2,
          a.gather(1, Tensor(rng.integers(0, 64, (16, 4)).astype(np.int32))), a.cumsum(1), a.argmax(1), a.maximum(0.5), -a, a.abs(),
          a.reciprocal(), (a < 0.3).any(1), (a > 0).all(0), a.reshape(16, 64, 1).expand(16, 64, 8).sum(2),
          a.reshape(16, 64, 1).expand(16, 64, 8).max(2), (a > 0).reshape(16, 64, 1).expand(16, 64, 8).any(2),
          Tensor.ones(16, 64).sum(1), Tensor.full((4, 8), 3.0).reshape(4, 8, 1).expand(4, 8, 5).prod(2), a.layernorm(),
          Tensor.full((8,), 2.5, dtype=dtypes.float16).contiguous(), Tensor.full((4,), -2**63, dtype=dtypes.int64).contiguous(),
          a.cast(dtypes.int32).cast(dtypes.float32), h.cast(dtypes.int16).cast(dtypes.float16), d.cast(dtypes.int64).cast(dtypes.float64),
          a.pad(((0, 0), (16, 16))) + 1, bf.pad(((1, 1), (0, 0))) * 2,
          # a quantized matvec (tensor/llm/quant.py): int8 weights widened to float in vectors, a scale per group of 32
          (Tensor(rng.integers(-8, 8, (32, 4, 32)).astype(np.int8)).realize().float() * R(32, 4).unsqueeze(-1) * R(4, 32)).sum((-1, -2)),
          # the same reading Q8_0's int8 in place from its 34-byte blocks: a bitcast of uint8 loads, widened in vectors
          (Tensor(rng.integers(0, 256, (32, 4, 34)).astype(np.uint8)).realize()[..., 2:].bitcast(dtypes.int8).float()
           * R(32, 4).unsqueeze(-1) * R(4, 32)).sum((-1, -2))]

def given_opts() -> list[tuple]:
  """(a tensor, an Opt list for its last kernel) for what neither the heuristic nor a random list is sure to pick: a
  split bfloat16 max (its partials in a bfloat16 local array), a row-padded add in vectors (a guarded vector load)."""
  from tensor import Tensor
  from tensor.codegen.opt import Opt
  rng = np.random.default_rng(1)
  a = Tensor(rng.standard_normal((16, 64)).astype(np.float32)).realize()
  bf = Tensor(rng.standard_normal(1 << 12).astype(np.float32), dtype=dtypes.bfloat16).realize()
  return [(bf.max(), [Opt("SPLIT", 0, 16)]), (a.pad(((1, 1), (0, 0))) + 1, [Opt("UPCAST", 1, 16)])]

def given_gpu_opts() -> list[tuple]:
  """The same for a GPU-style target (rendered, not run: no OpenCL device needed): a GROUP whose rows an UPCAST then makes
  lanes, by 4 (a vector of partials per work-item) and by 3 (a store per lane, ended together); a matmul's LOCAL tiles."""
  from tensor import Tensor
  from tensor.codegen.opt import Opt
  t = Tensor.empty(12, 1024)
  return [(t.sum(1), [Opt("GROUP", 1, 32), Opt("UPCAST", 0, 4)]), (t.max(1), [Opt("GROUP", 1, 32), Opt("UPCAST", 0, 3)]),
          (Tensor.empty(32, 48) @ Tensor.empty(48, 16), [Opt("LOCAL", 2, 16)])]

def kernel_asts(ts: list) -> list:
  """The kernel ASTs of these tensors' graphs as realize compiles them (constants of a second kind as parameters, bound
  Variables as arguments: rules/kernelize.rules' parametrize)."""
  from rules.kernelize import parametrize
  from rules.kernelize_helpers import Params
  from tensor.engine.realize import schedule_of
  out = []
  for t in ts:
    t.kernelize()
    root = t.uop.src[0] if t.uop.op is Ops.RESHAPE else t.uop
    for k in schedule_of([root]):
      if k.arg.ast.op is not Ops.SINK: continue
      params = Params()
      template = graph_rewrite(k.arg.ast, parametrize, params, name="parametrize")
      out += [template] if params.bound else [k.arg.ast, template] if params.values else [k.arg.ast]
  return out

def legal_lists(ast, n: int, rng: random.Random) -> list[list]:
  """n Opt lists that apply to ast, drawn at random (as tests/codegen/test_opt_fuzz.py draws them)."""
  from tensor.codegen import rangeify_simplified
  from tensor.codegen.opt import KINDS, Opt, OptError, apply_opts, loops, trip_count
  out = []
  for _ in range(n):
    sink, ctx = rangeify_simplified(ast)
    ctx.next_range = 1 + max([u.arg for u in sink.toposort() if u.op is Ops.RANGE], default=0)
    opts: list = []
    for _ in range(rng.randint(1, 4)):
      if not (ls := loops(sink)): break
      axis, kind = rng.randrange(len(ls)), rng.choice([k for k in KINDS if k not in ("GROUP", "LOCAL")])  # GPU targets only
      trips = trip_count(ls[axis]) or 1
      amount = rng.randrange(len(ls)) if kind == "SWAP" else rng.choice([k for k in range(trips + 1) if k == 0 or trips % k == 0])
      try: sink, done = apply_opts(sink, [Opt(kind, axis, amount)], ctx.new_range)
      except OptError: continue
      opts += done
    out.append(opts)
  return out

@functools.cache
def lowering() -> dict[str, int]:
  """How often each rule fired while the shared graphs' kernels were lowered and rendered (once per process)."""
  from tensor.codegen import program, target_for
  cpu, interpreter = target_for("CPU"), target_for("PYTHON")
  rng = random.Random(0)
  with firing() as counts:
    for ast in kernel_asts(graphs()):
      with Context(NOOPT=0, THREADS=2): program(ast, cpu, "k")
      with Context(NOOPT=0): program(ast, interpreter, "k")
      with Context(NOOPT=1): program(ast, cpu, "k")
      for opts in legal_lists(ast, 3, rng):
        # a random list is work to count rules on, not a test of the list (tests/codegen/test_opt_fuzz.py is): one the C
        # renderer can't take is passed over (UPCAST 8 then SPLIT 2 of a bfloat16 sum leaves an UNROLL, on main too; under
        # SPEC the spec of a lowered kernel finds it first)
        try:
          with Context(THREADS=2): program(ast, cpu, "k", opts)
        except (NotImplementedError, SpecError): pass
    for t, opts in given_opts(): program(kernel_asts([t])[-1], cpu, "k", opts)
    for t, opts in given_gpu_opts(): program(kernel_asts([t])[-1], target_for("CL"), "k", opts)
  return counts
