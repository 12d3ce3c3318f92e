"""runtime/rewrite.py: graph_rewrite with hand-built Matchers: folding, memoization, fixed points, bottom-up, deep graphs, RULESTATS, loop errors."""
import atexit, collections, contextlib, io, signal, time
import pytest
from runtime import UOp, Ops, dtypes, graph_rewrite, Matcher, Rule, RewriteError, RewriteLoopError, Context, exec_alu
from runtime import rewrite as rewrite_module

# ---- building matchers by hand, the way generated rule modules do ----

def rule(line: int, text: str, ops, fn) -> Rule:
  return Rule(f"r{line}", "test.rules", line, text, tuple(ops) if ops is not None else None, fn)

def matcher(name: str, *rules: Rule) -> Matcher:
  """One function per op trying that op's rules in order, returning (rule, result) for the first that fires."""
  per_op: dict[Ops, list[Rule]] = collections.defaultdict(list)
  for r in rules:
    for op in (r.ops if r.ops is not None else Ops): per_op[op].append(r)
  def try_rules(rs: list[Rule]):
    def fn(u: UOp, ctx):
      for r in rs:
        if (n := r.fn(u, ctx)) is not None: return (r, n)
      return None
    return fn
  return Matcher(name, {op: try_rules(rs) for op, rs in per_op.items()}, list(rules))

def is_const(u: UOp) -> bool: return u.op is Ops.CONST

# ADD(c1, c2) -> c1+c2
fold_add = rule(1, "c1 + c2 -> c1+c2", [Ops.ADD], lambda u, ctx: u.const_like(exec_alu(Ops.ADD, u.dtype, [s.arg for s in u.src]))
                if is_const(u.src[0]) and is_const(u.src[1]) else None)
# MUL(x, 2) -> x + x
mul2 = rule(2, "x * 2 -> x + x", [Ops.MUL], lambda u, ctx: u.src[0] + u.src[0] if is_const(u.src[1]) and u.src[1].arg == 2 else None)
# ADD(x, x) -> x << 1
add_self = rule(3, "x + x -> x << 1", [Ops.ADD], lambda u, ctx: u.src[0] << 1 if u.src[0] is u.src[1] else None)
# MUL(x, 4) -> (x * 2) * 2
mul4 = rule(4, "x * 4 -> (x * 2) * 2", [Ops.MUL], lambda u, ctx: (u.src[0] * 2) * 2 if is_const(u.src[1]) and u.src[1].arg == 4 else None)

X = UOp.variable("x", 0, 100)
Y = UOp.variable("y", 0, 100)

@contextlib.contextmanager
def hang_guard(seconds: float):
  """Turn a hang into a TimeoutError (SIGALRM interrupts the pure-Python rewrite loop)."""
  def on_alarm(*_): raise TimeoutError(f"still rewriting after {seconds} s")
  old = signal.signal(signal.SIGALRM, on_alarm)
  signal.setitimer(signal.ITIMER_REAL, seconds)
  try: yield
  finally:
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, old)

# ---- basics ----

def test_seed_constant_folding():
  a = UOp(Ops.CONST, dtypes.int, arg=2)
  assert graph_rewrite(a + a, matcher("fold", fold_add)) is UOp(Ops.CONST, dtypes.int, arg=4)

@pytest.mark.parametrize("bottom_up", [False, True])
def test_fold_add_chain(bottom_up):
  m = matcher("fold", fold_add)
  c = UOp.const(dtypes.int, 1)
  for i in range(2, 11): c = c + i
  assert graph_rewrite(c, m, bottom_up=bottom_up) is UOp.const(dtypes.int, 55)
  # and inside a larger graph, around what can't fold
  e = (X + (UOp.const(dtypes.int, 1) + 2)) * (UOp.const(dtypes.int, 3) + 4)
  assert graph_rewrite(e, m, bottom_up=bottom_up) is (X + 3) * 7
  assert graph_rewrite(UOp.const(dtypes.int, 2**31 - 1) + 1, m, bottom_up=bottom_up).arg == -2**31

@pytest.mark.parametrize("bottom_up", [False, True])
def test_nothing_to_do_returns_the_same_graph(bottom_up):
  e = (X * 3 + Y) // 5
  assert graph_rewrite(e, matcher("fold", fold_add), bottom_up=bottom_up) is e
  assert graph_rewrite(e, matcher("empty"), bottom_up=bottom_up) is e

@pytest.mark.parametrize("bottom_up", [False, True])
def test_memoized_shared_subgraph_is_rewritten_once(bottom_up):
  calls: collections.Counter = collections.Counter()
  def count(u, ctx):
    calls[u] += 1
    return None
  m = matcher("count", rule(10, "count", None, count), mul2)
  shared = X * 2
  root = (shared + shared) * (shared - 1) + shared.maximum(Y)
  graph_rewrite(root, m, bottom_up=bottom_up)
  assert calls[shared] == 1 and calls[X] == 1
  assert max(calls.values()) == 1, [(u.render(), n) for u, n in calls.items() if n > 1]

# x*3 -> x*2 and x+0 -> x: with mul2 (x*2 -> x+x) each x*3 passes through x*2 on its way to x+x
mul3 = rule(5, "x * 3 -> x * 2", [Ops.MUL], lambda u, ctx: u.src[0] * 2 if is_const(u.src[1]) and u.src[1].arg == 3 else None)
add0 = rule(6, "x + 0 -> x", [Ops.ADD], lambda u, ctx: u.src[0] if is_const(u.src[1]) and u.src[1].arg == 0 else None)

@pytest.mark.parametrize("bottom_up", [False, True])
def test_nodes_a_rewrite_passes_through_are_remembered(bottom_up):
  # x*3 -> x*2 -> x+x: the graph holds x*2 too, met before or after the chain (sources are visited last first, bottom-up
  # first first). (x+0)*2 is rebuilt as x*2 from its final sources; bottom-up, (x+0)*3 reaches (x+0)+(x+0) by rules
  # alone, then x+x once its sources are final. Every one of those nodes met again is final at once: no rule is tried
  # on any node twice
  calls: collections.Counter = collections.Counter()
  def count(u, ctx):
    calls[u] += 1
    return None
  m = matcher("count", rule(10, "count", None, count), mul3, mul2, add0)
  x0 = X + 0
  parts = [X * 2, X * 3, x0 * 2, x0 * 3, x0 + x0, X + X]
  root = UOp(Ops.SINK, dtypes.void, tuple(parts + parts[::-1]))
  out = graph_rewrite(root, m, bottom_up=bottom_up)
  assert out is UOp(Ops.SINK, dtypes.void, (X + X,) * 12)
  assert max(calls.values()) == 1, [(u.render(), n) for u, n in calls.items() if n > 1]
  assert calls[X * 2] == 1 and (not bottom_up or calls[x0 * 2] == calls[x0 + x0] == 1)  # top-down tries rebuilt nodes only

@pytest.mark.parametrize("bottom_up", [False, True])
def test_diamond_graph_is_linear_not_exponential(bottom_up):
  # 2**60 paths from root to leaf: only memoization makes this finish
  calls = [0]
  def count(u, ctx):
    calls[0] += 1
    return None
  d = X
  for _ in range(60): d = (d + d) * 3
  graph_rewrite(d, matcher("count", rule(11, "count", None, count)), bottom_up=bottom_up)
  assert calls[0] == len(d.toposort())

@pytest.mark.parametrize("bottom_up", [False, True])
def test_fixed_point(bottom_up):
  # x*2 -> x+x, which another rule then rewrites: x+x -> x<<1
  m = matcher("fixed", mul2, add_self)
  assert graph_rewrite(X * 2, m, bottom_up=bottom_up) is X << 1
  assert graph_rewrite((X * 2) * 2, m, bottom_up=bottom_up) is (X << 1) << 1
  assert graph_rewrite((X * 2).maximum(Y * 2), m, bottom_up=bottom_up) is (X << 1).maximum(Y << 1)

@pytest.mark.parametrize("bottom_up", [False, True])
def test_results_with_new_sources_are_rewritten(bottom_up):
  # x*4 -> (x*2)*2 builds a node (x*2) that was never in the graph; it must be rewritten too
  m = matcher("new", mul4, mul2)
  assert graph_rewrite(X * 4, m, bottom_up=bottom_up) is (X + X) + (X + X)
  m = matcher("new", mul4, mul2, add_self)
  assert graph_rewrite((X * 4) + 1, m, bottom_up=bottom_up) is ((X << 1) << 1) + 1

@pytest.mark.parametrize("bottom_up", [False, True])
def test_ctx_is_passed_through(bottom_up):
  seen = []
  def bind_var(u, ctx):
    seen.append(ctx)
    return u.const_like(ctx[u.arg[0]]) if u.arg[0] in ctx else None
  m = matcher("ctx", rule(12, "var -> ctx[var]", [Ops.DEFINE_VAR], bind_var), fold_add)
  ctx = {"x": 3, "y": 4}
  assert graph_rewrite(X + Y, m, ctx=ctx, bottom_up=bottom_up) is UOp.const(dtypes.int, 7)
  assert seen and all(c is ctx for c in seen)
  assert graph_rewrite(X + Y, m, ctx={"x": 1}, bottom_up=bottom_up) is UOp.const(dtypes.int, 1) + Y

# ---- bottom_up ----

# two rules that don't commute: which one sees NEG(NEG(x)) first decides the result
neg_neg = rule(20, "-(-x) -> x", [Ops.NEG], lambda u, ctx: u.src[0].src[0] if u.src[0].op is Ops.NEG else None)
neg_var = rule(21, "-v -> 0 - v", [Ops.NEG], lambda u, ctx: u.const_like(0) - u.src[0] if u.src[0].op is Ops.DEFINE_VAR else None)

def test_default_mode_rewrites_sources_first():
  m = matcher("neg", neg_neg, neg_var)
  # the inner -x becomes 0-x first, so -(0-x) no longer matches -(-x)
  assert graph_rewrite(-(-X), m) is -(UOp.const(dtypes.int, 0) - X)

def test_bottom_up_rewrites_a_node_before_its_sources():
  m = matcher("neg", neg_neg, neg_var)
  assert graph_rewrite(-(-X), m, bottom_up=True) is X
  assert graph_rewrite(-(-(-X)), m, bottom_up=True) is UOp.const(dtypes.int, 0) - X

@pytest.mark.parametrize("bottom_up", [False, True])
def test_visit_order(bottom_up):
  order = []
  def log(u, ctx):
    order.append(u)
    return None
  root = (X + 1) * Y
  graph_rewrite(root, matcher("log", rule(22, "log", None, log)), bottom_up=bottom_up)
  pos = {u: i for i, u in enumerate(order)}
  assert set(pos) == set(root.toposort())
  for u in root.toposort():
    for s in u.src: assert (pos[u] < pos[s]) if bottom_up else (pos[s] < pos[u])

def test_bottom_up_revisits_a_node_whose_sources_changed():
  m = matcher("fold", fold_add)
  # the root does not match until its source folded to a constant
  assert graph_rewrite((UOp.const(dtypes.int, 1) + 2) + 3, m, bottom_up=True) is UOp.const(dtypes.int, 6)

# ---- deep graphs ----

@pytest.mark.parametrize("bottom_up", [False, True])
def test_100000_deep_chain(bottom_up):
  to_sub = rule(30, "x + 1 -> x - (-1)", [Ops.ADD], lambda u, ctx: u.src[0] - (-1) if is_const(u.src[1]) and u.src[1].arg == 1 else None)
  x = X
  for _ in range(100_000): x = x + 1
  out = graph_rewrite(x, matcher("deep", to_sub), bottom_up=bottom_up)
  nodes = out.toposort()
  assert len(nodes) == 100_002 and out.op is Ops.SUB and sum(u.op is Ops.SUB for u in nodes) == 100_000
  assert graph_rewrite(x, matcher("nothing"), bottom_up=bottom_up) is x

def test_100000_deep_chain_folds():
  # (x + c1) + c2 -> x + (c1+c2), all the way down the chain
  reassoc = rule(31, "(x + c1) + c2 -> x + (c1+c2)", [Ops.ADD],
                 lambda u, ctx: u.src[0].src[0] + (u.src[0].src[1].arg + u.src[1].arg)
                 if u.src[0].op is Ops.ADD and is_const(u.src[1]) and is_const(u.src[0].src[1]) else None)
  x = X
  for _ in range(100_000): x = x + 1
  assert graph_rewrite(x, matcher("deep", reassoc)) is X + 100_000

# ---- composing and single steps ----

def test_matcher_add_keeps_the_first_matchers_rules_first():
  first = rule(40, "x + 1 -> first", [Ops.ADD], lambda u, ctx: u.const_like(111) if is_const(u.src[1]) else None)
  second = rule(41, "x + 1 -> second", [Ops.ADD], lambda u, ctx: u.const_like(222) if is_const(u.src[1]) else None)
  m1, m2 = matcher("m1", first), matcher("m2", second, mul2)
  both = m1 + m2
  assert both.rules == [first, second, mul2] and (m2 + m1).rules == [second, mul2, first]
  assert both.rewrite(X + 1).arg == 111 and (m2 + m1).rewrite(X + 1).arg == 222
  assert both.rewrite(X * 2) is X + X  # an op only the second matcher has
  assert graph_rewrite(X + 1, both).arg == 111 and graph_rewrite(X + 1, m2 + m1).arg == 222
  assert "m1" in both.name and "m2" in both.name

def test_matcher_rewrite_does_one_step():
  m = matcher("fixed", mul2, add_self)
  assert m.rewrite(X * 2) is X + X  # not X << 1
  assert m.rewrite(X * 3) is None and m.rewrite(X) is None
  assert m.rewrite((X * 2) + 1) is None  # sources are not visited
  from_ctx = matcher("ctx", rule(42, "v -> ctx", [Ops.DEFINE_VAR], lambda u, ctx: ctx))
  assert from_ctx.rewrite(X, ctx=Y) is Y and from_ctx.rewrite(X) is None

# ---- RULESTATS ----

@pytest.fixture
def stats_rules():
  """Fresh rules for a RULESTATS run; afterwards they leave the table printed at exit."""
  made: list[Rule] = []
  def make(*rules: Rule):
    fresh = [Rule(r.id, r.file, r.line, r.text, r.ops, r.fn) for r in rules]
    made.extend(fresh)
    return fresh
  yield make
  for r in made: rewrite_module._tracked.pop(id(r), None)
  if not rewrite_module._tracked: atexit.unregister(rewrite_module.print_rule_stats)

@pytest.mark.parametrize("bottom_up", [False, True])
def test_rulestats_same_results_and_counts(stats_rules, bottom_up):
  graph = ((X * 4) + (UOp.const(dtypes.int, 1) + 2)) * 2 + (Y * 2)
  # the plain run, counting what each rule's function is asked and answers
  calls: collections.Counter = collections.Counter()
  hits: collections.Counter = collections.Counter()
  def counted(r: Rule) -> Rule:
    def fn(u, ctx):
      calls[r.line] += 1
      out = r.fn(u, ctx)
      if out is not None: hits[r.line] += 1
      return out
    return Rule(r.id, r.file, r.line, r.text, r.ops, fn)
  plain = graph_rewrite(graph, matcher("plain", *[counted(r) for r in (fold_add, mul4, mul2, add_self)]), bottom_up=bottom_up)
  rules = stats_rules(fold_add, mul4, mul2, add_self)
  m = matcher("stats", *rules)
  with Context(RULESTATS=1):
    stats = graph_rewrite(graph, m, bottom_up=bottom_up)
  assert stats is plain and plain is graph_rewrite(graph, m, bottom_up=bottom_up)
  for r in rules:
    assert (r.attempts, r.hits) == (calls[r.line], hits[r.line]), r
  assert sum(r.hits for r in rules) >= 5 and all(r.attempts >= r.hits for r in rules)
  assert all(r in rewrite_module.rule_stats() for r in rules)
  out = io.StringIO()
  rewrite_module.print_rule_stats(file=out)
  assert "test.rules:4" in out.getvalue() and "x * 4 -> (x * 2) * 2" in out.getvalue()

def test_rulestats_rule_for_any_op(stats_rules):
  seen = []
  (anyop,) = stats_rules(rule(50, "any", None, lambda u, ctx: seen.append(u)))
  with Context(RULESTATS=1): graph_rewrite(X + 1, matcher("any", anyop))
  assert anyop.attempts == 3 and anyop.hits == 0 and len(seen) == 3

# ---- runaway rewrites ----

# c + v -> v + c and v + c -> c + v: each undoes the other
swap_cv = rule(60, "c + v -> v + c", [Ops.ADD], lambda u, ctx: u.src[1] + u.src[0] if is_const(u.src[0]) and u.src[1].op is Ops.DEFINE_VAR else None)
swap_vc = rule(61, "v + c -> c + v", [Ops.ADD], lambda u, ctx: u.src[1] + u.src[0] if u.src[0].op is Ops.DEFINE_VAR and is_const(u.src[1]) else None)

@pytest.mark.parametrize("bottom_up", [False, True])
def test_two_rules_in_a_cycle(bottom_up):
  m = matcher("cycle", swap_cv, swap_vc)
  start = time.perf_counter()
  with pytest.raises(RewriteLoopError) as e:
    with hang_guard(30): graph_rewrite((X + 1) * 2, m, bottom_up=bottom_up, name="cycling")
  assert time.perf_counter() - start < 5  # a hang guard, not a speed test
  msg = str(e.value)
  assert "test.rules:60" in msg and "test.rules:61" in msg and "cycling" in msg
  assert set(e.value.rules) == {swap_cv, swap_vc} and isinstance(e.value, RewriteError)

@pytest.mark.parametrize("bottom_up", [False, True])
def test_one_rule_in_a_cycle(bottom_up):
  # x + y -> y + x for any x, y: the first rewrite's result is rewritten back
  swap = rule(62, "x + y -> y + x", [Ops.ADD], lambda u, ctx: u.src[1] + u.src[0] if u.src[0] is not u.src[1] else None)
  start = time.perf_counter()
  with pytest.raises(RewriteLoopError, match="test.rules:62"):
    with hang_guard(30): graph_rewrite(X + Y, matcher("swap", swap), bottom_up=bottom_up)
  assert time.perf_counter() - start < 5

@pytest.mark.parametrize("bottom_up", [False, True])
def test_rule_returning_its_input(bottom_up):
  same = rule(63, "x -> x", [Ops.MUL], lambda u, ctx: u)
  with pytest.raises(RewriteLoopError, match="test.rules:63"):
    with hang_guard(30): graph_rewrite(X * 3 + 1, matcher("same", same), bottom_up=bottom_up)

wrap = rule(64, "v -> v + 0", [Ops.DEFINE_VAR], lambda u, ctx: u + 0)

@pytest.mark.parametrize("bottom_up", [False, True])
def test_rule_wrapping_a_node_in_itself(bottom_up):
  start = time.perf_counter()
  with pytest.raises(RewriteLoopError, match="test.rules:64") as e:
    with hang_guard(30): graph_rewrite(X * 3, matcher("wrap", wrap), bottom_up=bottom_up)
  assert time.perf_counter() - start < 5 and e.value.rules == [wrap]

wrap_deep = rule(66, "v -> (v + 0) * 1", [Ops.DEFINE_VAR], lambda u, ctx: (u + 0) * 1)

@pytest.mark.parametrize("bottom_up", [False, True])
def test_rule_wrapping_a_node_deeper_in_itself(bottom_up):
  with pytest.raises(RewriteLoopError, match="test.rules:66"):
    with hang_guard(30): graph_rewrite(X * 3 + Y, matcher("wrap", wrap_deep), bottom_up=bottom_up)

# x -> y + 1 and y -> x + 1: each rule's result contains the node the other rewrites
x_to_y = rule(67, "x -> y + 1", [Ops.DEFINE_VAR], lambda u, ctx: Y + 1 if u is X else None)
y_to_x = rule(68, "y -> x + 1", [Ops.DEFINE_VAR], lambda u, ctx: X + 1 if u is Y else None)

@pytest.mark.parametrize("bottom_up", [False, True])
def test_two_rules_wrapping_each_other(bottom_up):
  with pytest.raises(RewriteLoopError) as e:
    with hang_guard(30): graph_rewrite(X * 2, matcher("mutual", x_to_y, y_to_x), bottom_up=bottom_up)
  assert "test.rules:67" in str(e.value) and "test.rules:68" in str(e.value)
  assert set(e.value.rules) == {x_to_y, y_to_x}

@pytest.mark.parametrize("bottom_up", [False, True])
def test_growing_rewrite_stops_at_the_limit(bottom_up):
  # x + c -> x + (c+1): a new constant every time, so no node ever repeats
  calls = [0]
  def grow(u, ctx):
    if not is_const(u.src[1]): return None
    calls[0] += 1
    return u.src[0] + (u.src[1].arg + 1)
  g = rule(65, "x + c -> x + (c+1)", [Ops.ADD], grow)
  for limit in (200, 10_000):
    calls[0] = 0
    with Context(REWRITE_LIMIT=limit):
      with pytest.raises(RewriteLoopError, match="test.rules:65"):
        with hang_guard(30): graph_rewrite((X + 1) * 2, matcher("grow", g), bottom_up=bottom_up)
    assert limit <= calls[0] <= limit + 10

def test_a_long_graph_may_nest_deeper_than_the_limit():
  # -(x + 1 + 1 ... + 1) pushed down the chain nests one pending rewrite per level, as rangeify does on a chain of tensor ops:
  # three times REWRITE_LIMIT levels used to raise "over N nested rewrites" though the rewrite ends. The limit now scales with
  # the graph (a 10,000-op tensor chain failed so under the default limit)
  def push(u, ctx):
    a = u.src[0]
    return -a.src[0] + (-a.src[1]) if a.op is Ops.ADD else None
  neg = rule(70, "-(a + b) -> -a + -b", [Ops.NEG], push)
  chain = X
  for _ in range(3_000): chain = chain + 1
  with Context(REWRITE_LIMIT=1_000), hang_guard(60): out = graph_rewrite(-chain, matcher("push", neg))
  assert out.sym_infer({"x": 7}) == -(7 + 3_000)
  # a rewrite that grows a small graph still stops at the limit (test_growing_rewrite_stops_at_the_limit)
