"""A rule alone (runtime/rule_alone.py): its generated function's opening and its block, cut from the source. Every rule of
every generated module can be cut out and reads only what its block and the opening bind; RULESTATS and blame work from it,
for modules on disk, for PatternMatchers, and (blame) for code whose source is gone."""
import dis, glob, importlib, os, sys
import pytest
from dslc import PatternMatcher, UPat
from dslc.compile import compile_rules, exec_module
from runtime import Ops, UOp, dtypes, graph_rewrite, RuleError
from runtime.helpers import Context
from runtime.rewrite import Matcher, N_OPS, rule_stats
from runtime.rule_alone import NoSource, rule_alone

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GENERATED = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(ROOT, "rules", "*.py"))
                   if open(p).readline().startswith("# Code generated"))

def matchers(module) -> list[Matcher]:
  out = [m for m in vars(module).values() if isinstance(m, Matcher)]
  # a rule set with parameters: an instance (every capability, and none)
  for name in ("vectorize", "vectorized"):
    if callable(f := vars(module).get(name)) and not isinstance(f, Matcher):
      from rules.vectorize_helpers import VectorCaps
      out += [f(VectorCaps(frozenset(Ops), frozenset(dtypes.all()))), f(VectorCaps(frozenset(), frozenset()))]
  return out

@pytest.mark.parametrize("name", GENERATED)
def test_every_rule_is_cut_out_and_reads_only_its_own_names(name):
  module = importlib.import_module(f"rules.{name}")
  n = 0
  for m in matchers(module):
    for r in m.rules:
      if r.home is not m: continue
      for op in (r.ops if r.ops is not None else [o for o in range(N_OPS) if m.table[o] is not None]):
        f = r.alone(op)
        assert f is not None, f"{r} has no block in {m.table[op].__name__}"
        # a name the block reads but no line of the rule alone binds (another rule's capture) is a global that does not exist
        for ins in dis.get_instructions(f):
          if ins.opname == "LOAD_GLOBAL":
            assert ins.argval in f.__globals__ or hasattr(sys.modules["builtins"], ins.argval), (r, ins.argval)
        n += 1
  assert n > 0

def test_a_rule_alone_fires_as_the_dispatch_does():
  from rules.symbolic import symbolic
  x = UOp.variable("x", 0, 10)
  u = (x + 3) + 4
  fired, result = symbolic.table[Ops.ADD](u, None)
  assert fired.fn(u, None) is result and fired.alone(Ops.ADD)(u, None) == (fired, result)
  # a rule of another op has no block in ADD's function
  mul_only = next(r for r in symbolic.rules if r.ops == (Ops.MUL,))
  assert rule_alone(symbolic.table[Ops.ADD], mul_only.id) is None and mul_only.fn(u, None) is None

def test_rulestats_times_a_pattern_matchers_rules():
  pm = PatternMatcher([(UPat(Ops.ADD, src=(UPat.var("x"), UPat(Ops.CONST, arg=0))), lambda x: x),
                       (UPat(Ops.MUL, src=(UPat.var("x"), UPat(Ops.CONST, arg=1))), lambda x: x)])
  x = UOp.variable("x", 0, 10)
  with Context(RULESTATS=1): assert graph_rewrite((x + 0) * 1, pm) is x
  assert [(r.attempts, r.hits) for r in pm.rules] == [(1, 1), (1, 1)] and all(r in rule_stats() for r in pm.rules)

RULES = "ruleset t\n(ADD x:ints 0) -> x\n(IDIV x:ints c@(CONST)) if x.vmax // c.arg > 100 -> x\n(MUL x 1) -> x\n"

def test_without_source_blame_still_names_the_rule():
  # exec'd from a string, no file and nothing in linecache: a rule alone can't be cut, the bytecode still names the rule
  ns: dict = {}
  exec(compile_rules("nosrc.rules", source=RULES), ns)  # noqa: S102
  x = UOp.variable("x", 0, 500, dtypes.int32)
  with pytest.raises(RuleError) as e: graph_rewrite((x * 1) // UOp.const(dtypes.int32, 0), ns["t"])
  assert e.value.rule.line == 3 and isinstance(e.value.__cause__, ZeroDivisionError)
  with pytest.raises(NoSource, match="exec generated code from a file"): ns["t"].rules[0].fn(x + 0, None)

def test_without_source_rulestats_times_the_function_whole(capsys):
  ns: dict = {}
  exec(compile_rules("nosrc2.rules", source=RULES), ns)  # noqa: S102
  x = UOp.variable("x", 0, 500, dtypes.int32)
  with Context(RULESTATS=1): assert graph_rewrite((x + 0) * 1, ns["t"]) is x
  assert [r.hits for r in ns["t"].rules] == [1, 0, 1] and "timed together" in capsys.readouterr().err

def test_exec_module_keeps_the_source():
  ns = exec_module(compile_rules("src.rules", source=RULES), "src.rules")
  x = UOp.variable("x", 0, 500, dtypes.int32)
  assert ns["t"].rules[0].fn(x + 0, None) is x and ns["t"].rules[2].fn(x + 0, None) is None
  # another module under the same name gets a name of its own: neither's rules are cut from the other's text
  other = exec_module(compile_rules("src.rules", source=RULES.replace("(MUL x 1)", "(MUL x 2)")), "src.rules")
  assert other["t"].rules[2].fn(x * 2, None) is x and ns["t"].rules[2].fn(x * 1, None) is x
