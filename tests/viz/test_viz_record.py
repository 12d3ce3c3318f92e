"""VIZ recording (runtime/trace.py) and replay (tensor/viz/graphs.py): what each graph_rewrite did, rule by rule, and the graph
after every step rebuilt from the steps alone; the oracle is graph_rewrite's own output."""
import os, pickle, random, sys
import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st
from runtime import Context, UOp, graph_rewrite, trace
from runtime.rewrite import RewriteLoopError
from rules.symbolic import symbolic
from tensor import Tensor
from tensor.viz.graphs import Replay, layout, reachable, svg

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from bench import expr_gen  # noqa: E402
from bench.bench_symbolic import build_ours  # noqa: E402

@pytest.fixture
def rec():
  trace.reset()
  with Context(VIZ=1): yield trace.recording()
  trace.reset()

def replay_all(rec, i: int) -> int:
  rw = rec.rewrites[i]
  return Replay(rec, i).root(len(rw["steps"]))

def test_nothing_is_recorded_when_viz_is_off(monkeypatch):
  trace.reset()
  called = []
  monkeypatch.setattr(trace, "traced_rewrite", lambda *a: called.append(a))
  monkeypatch.setattr(trace, "COVERAGE_FILE", "")  # CI counts rule coverage over the whole suite
  x = UOp.variable("x", 0, 10)
  assert graph_rewrite(x + 3 + 4, symbolic).render() == "(x+7)"
  assert called == [] and trace._recording is None

def test_each_rule_that_fired_is_recorded_with_its_rule_line(rec):
  x = UOp.variable("x", 0, 10)
  out = graph_rewrite((x + 3 + 4) * 1, symbolic, name="demo")
  rw = rec.rewrites[-1]
  assert rw["name"] == "demo" and rw["group"] == "(no kernel)" and rw["error"] is None
  assert rw["output"] == rec.node(out) and rw["input"] == rec.node((x + 3 + 4) * 1)
  assert len(rw["steps"]) >= 2
  for rule, before, after in rw["steps"]:
    file, line, text, rid = rec.rules[rule]
    assert file == "rules/symbolic.rules" and rid.startswith("r")
    # the rule text is the rule as written at that line of the file (a `for` block's rules are written once)
    src = open(os.path.join(ROOT, file)).read().split("\n")
    assert text.split(" ")[0] in src[line - 1], (text, src[line - 1])
    assert before != after

def test_the_recorded_graph_is_the_uop_graph(rec):
  x = UOp.variable("x", 0, 10)
  e = (x * 2 + x * 3) // 5
  graph_rewrite(e, symbolic)
  n = rec.rewrites[-1]["input"]
  assert len(reachable(rec, n)) == len(e.toposort())
  op, dtype, arg = rec.heads[rec.nodes[n][0]]
  assert (op, dtype) == ("IDIV", "dtypes.int")

@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1))
# the engine fires a rule again on a node an earlier step rewrote (it remembers the node it met and the final one, not the
# ones rebuilt in between): (b%32)+(...((b*1)%32)...) rewrites (b*1)%32 -> b%32 -> b, then meets the first b%32 and fires
# again; the replay took the repeated step for a bottom-up key inside another and rebuilt the input wrong (154, not 21)
@example(1654)
@example(1240)
def test_replaying_every_step_gives_the_output(seed):
  # random index expressions (bench/expr_gen.py), simplified under VIZ: rebuilt from the steps, the last graph is the output
  trace.reset()
  corpus = [build_ours(t) for t in expr_gen.make_corpus(seed=seed, n=4, min_nodes=10, max_nodes=60)]
  with Context(VIZ=1):
    outs = [graph_rewrite(e, symbolic) for e in corpus]
  rec = trace.recording()
  top = [i for i, rw in enumerate(rec.rewrites) if rw["depth"] == 0]  # helpers may run nested rewrites too
  assert len(top) == len(corpus)
  for i, out in zip(top, outs):
    assert replay_all(rec, i) == rec.node(out)
  for i, rw in enumerate(rec.rewrites): assert replay_all(rec, i) == rw["output"]
  trace.reset()

def test_a_step_that_repeats_an_earlier_one_changes_nothing(rec):
  # (x%32) + ((x*1)%32): the right side becomes x%32 then x; the left x%32 is then met and rewritten again, the same way
  x = UOp.variable("x", 0, 20)
  out = graph_rewrite(x % 32 + (x * 1) % 32, symbolic)
  rw = rec.rewrites[-1]
  befores = [b for _, b, _ in rw["steps"]]
  assert out.render() == "(x*2)" and len(befores) > len(set(befores)), "the case no longer repeats a step"
  replay = Replay(rec, len(rec.rewrites) - 1)
  roots = [replay.root(k) for k in range(len(befores) + 1)]
  assert roots[-1] == rw["output"]
  for k in range(1, len(befores)):
    if befores[k] in befores[:k]: assert roots[k + 1] == roots[k]

def test_kernels_group_their_rewrites_and_replay(rec):
  a = Tensor(np.arange(96, dtype=np.float32).reshape(8, 12))
  out = (a.softmax(axis=1) + (a @ Tensor.ones(12, 3)).sum()).numpy()
  ref = np.arange(96, dtype=np.float32).reshape(8, 12)
  e = np.exp(ref - ref.max(axis=1, keepdims=True))
  np.testing.assert_allclose(out, e / e.sum(axis=1, keepdims=True) + (ref @ np.ones((12, 3), np.float32)).sum(), rtol=1e-5)
  groups = {rw["group"] for rw in rec.rewrites}
  assert "schedule" in groups and any(g.startswith(("E_", "r_")) for g in groups)
  names = {rw["name"] for rw in rec.rewrites}
  assert {"tensor_cleanup", "to_kernel_ast", "rangeify", "symbolic", "lower"} <= names
  for i, rw in enumerate(rec.rewrites):
    assert rw["error"] is None and rw["output"] is not None
    assert replay_all(rec, i) == rw["output"], f"rewrite {i} ({rw['group']}/{rw['name']}) does not replay to its output"

def test_a_rewrite_that_fails_is_recorded_with_its_error(rec):
  from dslc import UPat, PatternMatcher
  from runtime import Ops
  # a -> a + 0 for every ADD: a rule that keeps growing the graph
  pm = PatternMatcher([(UPat(Ops.ADD, name="a"), lambda a: a + 0)])
  with pytest.raises(RewriteLoopError):
    with Context(REWRITE_LIMIT=50): graph_rewrite(UOp.variable("x", 0, 3) + 1, pm)
  rw = rec.rewrites[-1]
  assert rw["output"] is None and rw["error"].startswith("RewriteLoopError") and rw["steps"]

@pytest.mark.parametrize("bottom_up", [False, True])
def test_every_step_of_a_rewrite_in_a_cycle_replays(rec, bottom_up):
  # x+1 -> x*1 -> x+1 ...: the steps as rules cycle too; the replay stops where a node comes back instead of looping
  from dslc import UPat, PatternMatcher
  from runtime import Ops
  pm = PatternMatcher([(UPat(Ops.ADD, name="a"), lambda a: a.src[0] * a.src[1]), (UPat(Ops.MUL, name="m"), lambda m: m.src[0] + m.src[1])])
  with pytest.raises(RewriteLoopError, match="cycle"):
    with Context(REWRITE_LIMIT=50): graph_rewrite(UOp.variable("x", 0, 3) + 1, pm, bottom_up=bottom_up)
  rw = rec.rewrites[-1]
  replay = Replay(rec, len(rec.rewrites) - 1)
  ops = {rec.heads[rec.nodes[replay.root(k)][0]][0] for k in range(len(rw["steps"]) + 1)}
  assert len(rw["steps"]) >= 2 and ops <= {"ADD", "MUL"} and "MUL" in ops

def test_a_recording_pickles_and_keeps_its_rule_files(rec, tmp_path):
  x = UOp.variable("x", 0, 10)
  graph_rewrite(x + 3 + 4, symbolic)
  path = rec.save(str(tmp_path / "t.pkl"))
  again = trace.load(path)
  assert again.rewrites == rec.rewrites and again.nodes == rec.nodes and again.heads == rec.heads
  assert "rules/symbolic.rules" in again.sources and "(ADD! x:ints 0) -> x" in again.sources["rules/symbolic.rules"]
  assert os.listdir(tmp_path) == ["t.pkl"], "no temporary file left behind"
  with open(tmp_path / "other.pkl", "wb") as f: pickle.dump({"not": "a recording"}, f)
  with pytest.raises(ValueError, match="not a VIZ recording"): trace.load(str(tmp_path / "other.pkl"))

def test_deep_graphs_are_recorded_and_laid_out_without_recursion(rec):
  x = UOp.variable("x", 0, 10)
  e = x
  for i in range(3000): e = e + (i % 3)  # 6000 nodes deep: no Python recursion anywhere
  graph_rewrite(e, symbolic)
  rw = rec.rewrites[-1]
  pos, order = layout(rec, rw["input"])
  assert len(order) == len(e.toposort()) and len(pos) == len(order)
  doc, labels, n = svg(rec, rw["input"])
  assert n == len(order) and labels is not None and len(labels) == n  # too big for inline text: the page labels what is in view
  assert doc.count('class="n ') == n

def test_layout_puts_each_node_below_its_users_and_sources_in_order(rec):
  rng = random.Random(0)
  xs = [UOp.variable(f"v{i}", 0, 9) for i in range(5)]
  e = xs[0]
  for _ in range(40): e = (e + rng.choice(xs)) * rng.randint(2, 5) if rng.random() < 0.5 else e.maximum(rng.choice(xs))
  graph_rewrite(e, symbolic)
  root = rec.rewrites[-1]["input"]
  pos, order = layout(rec, root)
  for n in order:
    for s in rec.nodes[n][1]: assert pos[s][1] > pos[n][1]
  doc, labels, n = svg(rec, root, highlight=root)
  assert labels is None and doc.count("<text") == 2 * n and doc.count(" changed") == 1
