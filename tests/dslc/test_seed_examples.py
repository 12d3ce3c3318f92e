"""The seed's UOp / PatternMatcher / UPat.cvar / graph_rewrite examples (../shared/seeds/002), verbatim but for the imports,
rewritten as API.md says. Each block runs as written; what it prints is compared with what the seed shows.
"""
import contextlib, io
import pytest

# ---- the seed's code blocks, in order (only the import lines differ) ----

LOW_LEVEL = '''
from runtime import dtypes
from runtime import UOp, Ops

# Create constant UOPs
a = UOp(Ops.CONST, dtypes.int, arg=2)
b = UOp(Ops.CONST, dtypes.int, arg=2)

# Global uniqueness: same specifications = same object
assert a is b

# Construct computation
a_plus_b = a + b
print(a_plus_b)
'''
LOW_LEVEL_PRINTS = '''UOp(Ops.ADD, dtypes.int, arg=None, src=(
  x0:=UOp(Ops.CONST, dtypes.int, arg=2, src=()),
   x0,))
'''

PATTERN_MATCHING = '''
from runtime import graph_rewrite
from dslc import UPat, PatternMatcher
from runtime import UOp, Ops

# Define a constant folding pattern
simple_pm = PatternMatcher([
  (UPat(Ops.ADD, src=(UPat(Ops.CONST, name="c1"), UPat(Ops.CONST, name="c2"))),
   lambda c1,c2: UOp(Ops.CONST, dtype=c1.dtype, arg=c1.arg+c2.arg)),
])

# Apply the pattern
a_plus_b_simplified = graph_rewrite(a_plus_b, simple_pm)
print(a_plus_b_simplified)  # UOp(Ops.CONST, dtypes.int, arg=4, src=())
'''
PATTERN_MATCHING_PRINTS = "UOp(Ops.CONST, dtypes.int, arg=4, src=())\n"

SUGAR = '''
simpler_pm = PatternMatcher([
  (UPat.cvar("c1")+UPat.cvar("c2"), lambda c1,c2: c1.const_like(c1.arg+c2.arg))
])

assert graph_rewrite(a_plus_b, simple_pm) is graph_rewrite(a_plus_b, simpler_pm)
'''

def run(block: str, ns: dict) -> str:
  out = io.StringIO()
  with contextlib.redirect_stdout(out): exec(compile(block, "<seed>", "exec"), ns)
  return out.getvalue()

@pytest.fixture(scope="module")
def ns() -> dict: return {}

def test_low_level_uop_construction(ns):
  assert run(LOW_LEVEL, ns) == LOW_LEVEL_PRINTS

def test_pattern_matching_and_graph_rewriting(ns):
  if "a_plus_b" not in ns: run(LOW_LEVEL, ns)
  assert run(PATTERN_MATCHING, ns) == PATTERN_MATCHING_PRINTS

def test_sugar_gives_the_very_same_uop(ns):
  if "simple_pm" not in ns: run(LOW_LEVEL, ns), run(PATTERN_MATCHING, ns)
  assert run(SUGAR, ns) == ""
  # and both are the folded constant the seed shows
  from runtime import UOp, Ops, dtypes, graph_rewrite
  assert graph_rewrite(ns["a_plus_b"], ns["simpler_pm"]) is UOp(Ops.CONST, dtypes.int, arg=4)

# ---- the same examples as plain code, for a reader (and for pytest's assertion rewriting) ----

def test_seed_examples_as_code():
  from runtime import UOp, Ops, dtypes, graph_rewrite
  from dslc import UPat, PatternMatcher
  a = UOp(Ops.CONST, dtypes.int, arg=2)
  b = UOp(Ops.CONST, dtypes.int, arg=2)
  assert a is b
  a_plus_b = a + b
  assert repr(a_plus_b) == LOW_LEVEL_PRINTS.rstrip("\n")
  simple_pm = PatternMatcher([
    (UPat(Ops.ADD, src=(UPat(Ops.CONST, name="c1"), UPat(Ops.CONST, name="c2"))),
     lambda c1, c2: UOp(Ops.CONST, dtype=c1.dtype, arg=c1.arg + c2.arg)),
  ])
  assert repr(graph_rewrite(a_plus_b, simple_pm)) == "UOp(Ops.CONST, dtypes.int, arg=4, src=())"
  simpler_pm = PatternMatcher([
    (UPat.cvar("c1") + UPat.cvar("c2"), lambda c1, c2: c1.const_like(c1.arg + c2.arg))
  ])
  assert graph_rewrite(a_plus_b, simple_pm) is graph_rewrite(a_plus_b, simpler_pm)
  # the sugar matches either order and a chain: (2 + 2) + 3 folds in two steps, to the same node either way
  three = UOp.const(dtypes.int, 3)
  assert graph_rewrite(three + a_plus_b, simpler_pm) is graph_rewrite(a_plus_b + three, simple_pm) is UOp.const(dtypes.int, 7)

def test_pattern_matcher_rules_keep_their_origin():
  # a rule built in Python knows where it was written and reads back in .rules syntax, for statistics and loop errors
  import sys
  from runtime import Ops
  from dslc import UPat, PatternMatcher
  line = sys._getframe().f_lineno + 1
  pm = PatternMatcher([(UPat(Ops.ADD, src=(UPat(Ops.CONST, name="c1"), UPat(Ops.CONST, name="c2"))), lambda c1, c2: None)])
  (rule,) = pm.rules
  assert (rule.file, rule.line) == (__file__, line)
  assert rule.text == "(ADD! c1@(CONST) c2@(CONST)) -> <lambda>"
