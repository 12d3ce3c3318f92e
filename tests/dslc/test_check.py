"""dslc/check.py and dslc/shadow.py: the shadowing check ("this rule never fires") finds what a pairwise comparison finds,
near linearly; and `dslc check` rejects everything `dslc compile` rejects.

Oracle for the index: the pairwise loop it replaced (every earlier unconditional rule, in order, through subsumes()).
"""
import subprocess, sys
from hypothesis import event, example, given, settings, strategies as st
import dslc.shadow as shadow_mod
from dslc.check import check_file
from dslc.shadow import ShadowIndex, subsumes
from dslc.ir import is_unconditional
from dslc.parse import parse_rules
from tests.dslc.many_rules import many_rules

def pairwise(rules) -> dict[int, int]:
  """rule index -> the index of the first earlier unconditional rule that subsumes it (the old quadratic check)."""
  out, uncond = {}, []
  for i, r in enumerate(rules):
    for j in uncond:
      if subsumes(rules[j].pattern, r.pattern):
        out[i] = j
        break
    if is_unconditional(r): uncond.append(i)
  return out

def indexed(rules) -> dict[int, int]:
  out, index = {}, ShadowIndex()
  pos = {id(r): i for i, r in enumerate(rules)}
  for i, r in enumerate(rules):
    for u in index.candidates(r.pattern):
      if subsumes(u.pattern, r.pattern):
        out[i] = pos[id(u)]
        break
    if is_unconditional(r): index.add(r)
  return out

OPS = ["ADD", "MUL", "SUB", "NEG", "CAST", "WHERE", "Binary", "Commutative", "ADD|MUL", "_", "Binary - ADD", "SINK"]
ARITY = {"NEG": 1, "CAST": 1, "WHERE": 3, "SINK": None, "_": None}

@st.composite
def rule_sets(draw):
  def pat(depth: int) -> str:
    k = draw(st.integers(0, 9))
    if depth > 1 or k < 3: return draw(st.sampled_from(["x", "y", "_", "0", "1", "_:int32", "x:ints"]))
    op = draw(st.sampled_from(OPS))
    n = ARITY.get(op, 2)
    if n is None:
      srcs = draw(st.sampled_from([[], ["x..."], [pat(depth + 1)], [pat(depth + 1), pat(depth + 1)]]))
      return f"({op}{''.join(' ' + s for s in srcs)})"
    body = f"{op}{draw(st.sampled_from(['', '', '!' if op in ('ADD', 'MUL') else '']))}{''.join(' ' + pat(depth + 1) for _ in range(n))}"
    if draw(st.integers(0, 5)) == 0: body = f"{body} | CAST ({body})"
    return f"({body})"
  rules = []
  for _ in range(draw(st.integers(1, 14))):
    p = pat(0)
    guard = draw(st.sampled_from(["", "", "", " if x.vmin >= 0"]))
    rules.append(f"{p}{guard if 'x' in p else ''} -> {draw(st.sampled_from(['0', '1', '2']))}")
  return "ruleset t\n" + "\n".join(rules) + "\n"

@settings(max_examples=150, deadline=None)
@given(rule_sets())
# an alternation at a source: the rule filed under CAST there covers it
@example("ruleset t\n(ADD (CAST x) (ADD y _)) -> 0\nx -> 0\n(ADD (ADD x x) (CAST x | CAST (CAST x))) -> 0\n")
def test_the_index_finds_what_the_pairwise_check_finds(text):
  rf, diags = parse_rules("t.rules", text)
  if diags or rf is None or not rf.rulesets:
    event("parse error")
    return
  rules = rf.rulesets[0].rules
  want = pairwise(rules)
  event("some rule shadowed" if want else "none shadowed")
  assert indexed(rules) == want, text

def comparisons(n: int) -> int:
  """How many pattern comparisons the shadowing check makes on n generated rules."""
  rf, diags = parse_rules("big.rules", many_rules(n))
  assert rf is not None and not diags
  calls = 0
  real = shadow_mod.covers
  def counting(p1, p2):
    nonlocal calls
    calls += 1
    return real(p1, p2)
  shadow_mod.covers = counting
  try: check_file(rf)
  finally: shadow_mod.covers = real
  return calls

def test_the_shadowing_check_is_near_linear_in_rules():
  # pairwise, 4x the rules make 16x the comparisons; indexed, about 4x
  small, large = comparisons(150), comparisons(600)
  assert large < 6 * small, (small, large)

def test_check_rejects_what_compile_rejects(tmp_path):
  # a rule set named like a Python keyword used to pass check and fail compile
  path = tmp_path / "kw.rules"
  path.write_text("ruleset class\n(ADD x 0) -> x\n")
  r = subprocess.run([sys.executable, "-m", "dslc", "check", str(path)], capture_output=True, text=True, timeout=60)
  assert r.returncode == 1 and "'class' is a Python keyword: it can't name a ruleset" in r.stderr
