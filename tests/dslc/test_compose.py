"""`ruleset a = b + c` is merged at build time: one dispatch function per op over b's rules then c's, no chained calls at
run time. The oracle: the same parts added at run time (Matcher.__add__), which must rewrite every node alike."""
import itertools
import pytest
from dslc.compile import compile_rules, exec_module
from runtime import UOp, dtypes, graph_rewrite
from runtime.rewrite import _chain

RULES = """
ruleset add_zero
(ADD x:ints 0) -> x
(ADD x:ints x) -> (MUL x 2)
ruleset mul
(MUL x:ints 1) -> x
(MUL x:ints 0) -> 0
(ADD (MUL x:ints c1@(CONST)) (MUL x c2@(CONST))) -> (MUL x (CONST [c1.arg + c2.arg]))
ruleset anyop
u@(_ x:ints (CONST)) if u.op is not Ops.CONST and x.vmin == x.vmax and len(u.src) == 2 -> (CONST [u.vmin])
ruleset both = add_zero + mul
ruleset three = both + anyop + add_zero
ruleset alias = both
"""

@pytest.fixture(scope="module")
def ns():
  out: dict = {}
  exec_module(compile_rules("compose.rules", "compose.rules", source=RULES), "compose.rules", out)
  return out

X, Y = UOp.variable("x", 0, 9, dtypes.int), UOp.variable("y", 3, 3, dtypes.int)
def c(v): return UOp.const(dtypes.int, v)
LEAVES = [X, Y, c(0), c(1), c(2)]
NODES = [f(a, b) for a, b in itertools.product(LEAVES, LEAVES) for f in (lambda a, b: a + b, lambda a, b: a * b)]
NODES += [a * c(2) + a * c(3) for a in LEAVES] + [(a + c(0)) * (b + c(1)) for a, b in itertools.product(LEAVES, LEAVES)]

def test_merged_sets_have_one_dispatch(ns):
  for name in ("both", "three"):
    m = ns[name]
    fns = [fn for fn in m.table if fn is not None]
    # generated functions of the composed set itself, not run-time chains of the parts'
    assert fns and all(fn.__name__.startswith(f"{name}_") and fn.__code__ is not _chain(fn, fn).__code__ for fn in fns)
  assert [r.text for r in ns["both"].rules] == [r.text for r in ns["add_zero"].rules + ns["mul"].rules]
  # a rule met twice (add_zero in both and again at the end) is kept once, in its first place
  assert ns["three"].rules == ns["add_zero"].rules + ns["mul"].rules + ns["anyop"].rules
  assert ns["alias"] is ns["both"]

@pytest.mark.parametrize("bottom_up", [False, True])
def test_merged_agrees_with_adding_at_run_time(ns, bottom_up):
  chained = {"both": ns["add_zero"] + ns["mul"], "three": ns["add_zero"] + ns["mul"] + ns["anyop"] + ns["add_zero"]}
  for name, oracle in chained.items():
    fired = 0
    for n in NODES:
      got, want = graph_rewrite(n, ns[name], bottom_up=bottom_up), graph_rewrite(n, oracle, bottom_up=bottom_up)
      assert got is want, (name, n)
      # one step too: the same rule fires first
      a, b = ns[name].table[n.op], oracle.table[n.op]
      ra, rb = a(n, None) if a else None, b(n, None) if b else None
      assert (ra is None) == (rb is None) and (ra is None or (ra[0] is rb[0] and ra[1] is rb[1])), (name, n)
      fired += ra is not None
    assert fired > 10

def test_imported_or_parametrised_parts_add_at_import_time():
  text = "from rules.symbolic import symbolic\nruleset mine\n(ADD x:ints 0) -> x\nruleset s = mine + symbolic\n"
  code = compile_rules("imp.rules", "imp.rules", source=text)
  assert "s = mine + symbolic" in code
  text = "ruleset late(caps)\n(MAX x:ints y) if Ops.MAX not in caps -> (WHERE (CMPLT x y) y x)\nruleset plain\n(ADD x:ints 0) -> x\n" \
         "ruleset both(caps) = plain + late\n"
  assert "return plain + late(caps)" in compile_rules("caps.rules", "caps.rules", source=text)
