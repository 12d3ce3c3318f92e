"""dslc verify (dslc/verify.py): each rule proved, a counterexample (replayed through the generated rule, with the values
and the rule's file:line:col), unsupported with its reason, or a timeout; and symbolic.rules and decompositions.rules as
CI checks them: no counterexample, and no fewer rules proved than tests/dslc/verify_baseline.json records."""
import json, os, re, subprocess, sys
import pytest
from runtime.dtype import dtypes
from runtime.ops import Ops, exec_alu
pytest.importorskip("z3", reason="dslc verify needs z3: pip install -e '.[verify]'")
from dslc.verify import verify_file  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BASELINE = os.path.join(ROOT, "tests", "dslc", "verify_baseline.json")

def outcomes(tmp_path, src: str) -> dict[int, tuple[str, str]]:
  path = tmp_path / "t.rules"
  path.write_text(src)
  return {o.rule.span.line: (o.status, o.detail) for o in verify_file(str(path), "t.rules")}

def test_proved_and_counterexamples(tmp_path):
  out = outcomes(tmp_path, """ruleset t
(ADD! x:ints 0) -> x
(MUL x 1) -> x
(IDIV x:sints -1) -> (MUL x -1)
(IDIV x:ints x) -> 1
(ADD x:floats 0) -> x
(SHR x:sints 1) -> (IDIV x 2)
(MOD x:ints c@(CONST)) if c.arg > 0 and x.vmin >= 0 and x.vmax < c.arg -> x
""")
  # x * 1 is exact on every dtype, nan and -0.0 included; INT_MIN // -1 wraps as INT_MIN * -1 does
  assert [out[i][0] for i in (2, 3, 4, 8)] == ["proved"] * 4, out
  # x // x is 0 at x == 0 (our definition of division by zero), not 1
  status, detail = out[5]
  assert status == "counterexample" and "x = 0:" in detail and "the node is 0, the result 1" in detail, detail
  # -0.0 + 0 is 0.0
  status, detail = out[6]
  assert status == "counterexample" and "x = -0.0:" in detail, detail
  # an arithmetic shift rounds down, truncating division toward zero (-1 >> 1 is -1, -1 // 2 is 0): the values given are
  # exec_alu's on both sides
  status, detail = out[7]
  m = re.match(r"x = (-?\d+):(\w+): the node is (-?\d+), the result (-?\d+)", detail)
  assert status == "counterexample" and m, detail
  x, d = int(m.group(1)), getattr(dtypes, m.group(2))
  assert x < 0 and x % 2 and exec_alu(Ops.SHR, d, [x, 1]) == int(m.group(3)) and exec_alu(Ops.IDIV, d, [x, 2]) == int(m.group(4))

def test_unsupported_says_why(tmp_path):
  out = outcomes(tmp_path, """from rules.symbolic_helpers import fold_divmod
ruleset t
u@(IDIV x:ints c@(CONST)) -> fold_divmod(u, x, c.arg)
(ADD x:ints y) if x.dtype.count > 1 -> x
(EXP2 (LOG2 x:floats)) -> x
ruleset c(ctx: dict)
(NEG x) if ctx.get(x) is not None -> x
""")
  assert out[3] == ("unsupported", "helper fold_divmod has no SMT meaning (for int8)"), out[3]
  assert out[4][0] == "unsupported" and "no scalar node" in out[4][1]
  # exp2 and log2 have no SMT meaning: whatever z3 finds, exec_alu's exp2(log2(x)) is not x on every float
  assert out[5][0] in ("counterexample", "unsupported"), out[5]
  assert out[7][0] == "unsupported" and out[7][1].startswith("reads ctx"), out[7]

def test_a_guard_that_raises(tmp_path):
  out = outcomes(tmp_path, "ruleset t\n(IDIV x:int32 c@(CONST)) if 100 // c.arg > 1 -> x\n")
  status, detail = out[2]
  assert status == "counterexample" and "ZeroDivisionError" in detail and "c = 0" in detail, detail

def test_cli_table_and_exit_code(tmp_path):
  path = tmp_path / "t.rules"
  path.write_text("ruleset t\n(ADD! x:ints 0) -> x\n(IDIV x:ints x) -> 1\n")
  r = subprocess.run([sys.executable, "-m", "dslc", "verify", str(path), "-j", "1"], capture_output=True, text=True, cwd=ROOT)
  assert r.returncode == 1, r.stderr
  assert ":3:1: counterexample" in r.stdout and "t.rules" in r.stdout
  row = next(line for line in r.stdout.splitlines() if line.split()[:1] and line.split()[0].endswith("t.rules") and len(line.split()) == 6)
  assert row.split()[1:] == ["2", "1", "1", "0", "0"], r.stdout

@pytest.mark.parametrize("path", ["rules/symbolic.rules", "rules/decompositions.rules"])
def test_rule_files_as_ci_checks_them(path):
  """No counterexample, and at least as many rules proved as the baseline records (raise it when more are proved). The
  baseline's rlimit is a third of the CLI's: the rules that time out give up sooner (symbolic.rules proves one rule fewer,
  in half the time); z3's rlimit is deterministic, so the count is the same on any machine with the same z3."""
  with open(BASELINE) as f: base = json.load(f)
  outs = verify_file(os.path.join(ROOT, path), path, rlimit=base["rlimit"], jobs=2)
  bad = [f"{o.where}: {o.detail}" for o in outs if o.status == "counterexample"]
  assert not bad, "\n".join(bad)
  proved, want = sum(o.status == "proved" for o in outs), base["proved"][path]
  assert proved >= want, f"{path}: {proved} rules proved, the baseline says {want}: " + \
    "; ".join(f"{o.where} {o.status}" for o in outs if o.status != "proved")

def test_the_guards_of_symbolic_rules_are_needed(tmp_path):
  """symbolic.rules' rules with one guard taken out: each gets a counterexample, the values checked here with exec_alu."""
  out = outcomes(tmp_path, """from rules.symbolic_helpers import int_min, int_max, exact
ruleset t
# without c.arg != int_min[c.dtype]: -INT_MIN wraps to INT_MIN
(IDIV x:ints c@(CONST)) if c.arg < 0 -> (MUL (IDIV x (CONST [-c.arg])) -1)
# without c1.arg * c2.arg <= int_max[x.dtype]: the product wraps
(IDIV (IDIV x:ints c1@(CONST)) c2@(CONST)) if c1.arg > 0 and c2.arg > 0 -> (IDIV x (CONST [c1.arg * c2.arg]))
# without exact(s): x*y wraps
(IDIV s@(MUL x:ints y) y) if y.vmin > 0 or y.vmax < 0 -> x
""")
  assert all(out[line][0] == "counterexample" for line in (4, 6, 8)), out
  m = re.match(r"x = (-?\d+):(\w+), c = (-?\d+):\w+: the node is (-?\d+), the result (-?\d+)", out[4][1])
  assert m, out[4][1]
  x, d, c = int(m[1]), getattr(dtypes, m[2]), int(m[3])
  assert c == dtypes.min(d) and exec_alu(Ops.IDIV, d, [x, c]) == int(m[4])
  assert exec_alu(Ops.MUL, d, [exec_alu(Ops.IDIV, d, [x, exec_alu(Ops.NEG, d, [c])]), -1]) == int(m[5]) != int(m[4])

def test_float32_exhaustive_check(monkeypatch):
  """An approximate float32 rule: unsupported unless asked (2^32 inputs), checked chunk by chunk with --all-float32; here
  one chunk, the one that held exp2's worst input before its Horner steps were fused multiply-adds (1.227 ulp at
  x = -0.49871447682380676; fused, that chunk's worst is 0.952 ulp at x = -0.4960096776485443), against two bounds."""
  import math
  import numpy as np
  from runtime.uop import uop
  from dslc import verify, verify_exhaustive as E
  path = os.path.join(ROOT, "rules", "decompositions.rules")
  monkeypatch.delenv("DSLC_VERIFY_ALL32", raising=False)
  out = {o.rule.span.line: o for o in verify_file(path, "rules/decompositions.rules")}
  exp2 = next(o for o in out.values() if "EXP2 x:float32)" in o.rule.text)
  assert exp2.status == "unsupported" and "--all-float32" in exp2.detail, exp2.detail
  _, _, replay = verify._load(path, "rules/decompositions.rules")
  var = uop(Ops.DEFINE_VAR, dtypes.float32, (), ("x", -math.inf, math.inf))
  result = replay.rules_by_line[exp2.rule.span.line](uop(Ops.EXP2, dtypes.float32, (var,)), None)
  bits = int(np.float32(-0.49871447682380676).view(np.uint32))
  span = (bits & ~(E.CHUNK - 1), (bits & ~(E.CHUNK - 1)) + E.CHUNK)
  status, detail = E.check_all32(result, var, "exp2", 0.9, E.scalar, progress=False, span=span)
  assert status == "counterexample" and "x = -0.4960096776485443:float32" in detail and "0.952 ulp" in detail, detail
  status, detail = E.check_all32(result, var, "exp2", 0.96, E.scalar, progress=False, span=span)
  assert status == "proved" and "within 0.952 ulp" in detail, detail
