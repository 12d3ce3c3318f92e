"""Fuzzing the .rules front end with hypothesis: whatever the input, `compile_rules` returns Python that compiles, or raises
DslError whose every diagnostic has a line and column inside the file. Never any other exception.

Inputs (examples per run; FUZZ_EXAMPLES=N multiplies them all by N for a longer hunt):
  token soup     600  random sequences of the language's tokens, names and troublesome characters
  any text       200  hypothesis' unicode text, alone or after a valid rule
  random bytes   200  raw bytes in a file, alone or after a valid rule (decoding, NUL, binary)
  mutations      600  a window of lines of rules/*.rules or the golden file, with chars and lines deleted, inserted,
                      duplicated or swapped, and truncated
  whole files     30  the same mutations on whole files (slower: they are larger)
  rule-shaped    400  random rules built from the grammar (mostly valid, so checks and emitter run; splices, updates,
                      alternatives, optional nodes, named patterns, `where`, comprehensions, sequences, choices, folds,
                      tag updates, computed dtypes, capability parameters and
                      declared contexts (`ctx K: ...`, read by guards) included), a quarter of them in
                      a rule set that returns per-source tuples; a module that compiles runs on a few graphs and never fails
                      with NameError or UnboundLocalError (nor, per source, with a tuple of the wrong length)
About 5-15 s on one core.
"""
import glob, os, tempfile, warnings
from hypothesis import HealthCheck, event, given, settings, strategies as st
from runtime.ops import Ops
from dslc.compile import compile_rules, exec_module
from dslc.diagnostics import DslError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCALE = int(os.environ.get("FUZZ_EXAMPLES", "1"))
SOURCES = sorted(glob.glob(os.path.join(ROOT, "rules", "*.rules")) + glob.glob(os.path.join(ROOT, "tests", "dslc", "golden", "*.rules")))
TEXTS = [open(p, encoding="utf-8").read() for p in SOURCES]

TOKENS = ["(", ")", "[", "]", "{", "}", "(ADD", "(MUL", "(CONST", "(WHERE", "(NEG", "(ALU", "(Binary", "(SINK", "(op", "(_", "x", "y", "c",
          "u@", "c1@(CONST)", "_", "!", ":", ":ints", ":bool", ":float32", ":x.dtype", "|", "...", "0", "1", "-1", "2.5", "0x10", "inf", "nan",
          "True", "False", "None", "->", "if", "and", "or", "not", "in", "is", "==", "<", ">=", "+", "-", "*", "//", "%", "**", "~", ".",
          ",", "=", "@", "x.arg", "x.vmin", "c.arg", "Ops.ADD", "Ops.FOO", "f(", "fold_alu(u)", "x.const_like(", "{x.arg > 0}", "{",
          "ruleset", "ruleset t", "ruleset all = t + u", "for op in ADD, MUL {", "for", "let", "let P = ", "P", "from", "import",
          "from rules.symbolic_helpers import fold_alu", '"doc"', '"""', "'", '"', "#", "# comment", "\n", "\n", "\n", " ", " ", "  ",
          "\t", "\r", "\x00", "\x0c", "é", "\u2028", "\\", "$", "`", ";", "?", "03", '"\\N"', "yield", "lambda", ":=",
          "ruleset g(ctx: UOp) returns per-source", "returns", "per-source", "(ctx: UOp)", "(ctx", "ctx", "(_", "((NEG ctx)", "(ctx ctx)",
          "rest*", "*", "(LOAD x rest*)", "(CAST? x)", "?", "| CAST (", "(NEG x | CAST (NEG x))", "x:ints|bool |", "x{", "x{dtype: float32}",
          "u{arg: 1, src: (x,)}", "{op: ADD}", "dtype:", "arg:", "src:", "let Pos(x) = x if x.vmin > 0", "Pos(", "Pos(a)", "[Invalid]",
          "[Ops.ADD]", "[pi]", "from math import pi", "where", "where y = (ADD x 1)", "where y = x, z = y", "\n  where ",
          "for i in range(4)", "for s in rest", "(SINK s for s in rest)", "[i for i in x.arg]", "tuple(i for i in x.arg)", "if i > 0)",
          "ruleset late(caps)", "(caps: frozenset)", "caps", "if Ops.MAX not in caps", "ruleset both(caps) = late + t",
          "_:uint64", "(Binary - THREEFRY", "- NEG", "1<<32", "2**32 - 1", "& 1", "<<", ">>", "^", "**",
          "ctx K: f(x) -> bool, g: int, [x] -> node", "ctx K:", "ctx", "K", "f(x) -> node", "g: node", "[x] -> str", "-> None",
          "(ctx: K)", "(ctx: None)", "ruleset t(ctx: K)", "ctx.f(x)", "ctx.g", "ctx.h(x)", "ctx[x]", "ctx.",
          "else", "if x.vmin > 0 else", "]*", "[(NEG s) for s in rest]*", "where w = x if c else y", "where w = [s for s in rest]",
          "(AND rest*)", "(ADD x x x)", "(ADD x for _ in range(3))", "{tag: 1}", "x{tag: None}", "x[1:]", "rest[:2]", "()",
          ":dtypes.float32.vec(", ":wide", "reversed(", "for s in rest for t in s.src", "[(NEG t) for s in rest for t in s.src]*"]
RULE = "ruleset t\n(ADD x 0) -> x\n"

def check(text: str | None, path: str = "fuzz.rules") -> None:
  """The property: Python that compiles, or a DslError with every position inside the file; and no warning on the way."""
  try:
    with warnings.catch_warnings(record=True) as caught:
      warnings.simplefilter("always")
      code = compile_rules(path, "fuzz.rules", source=text)
    assert not caught, [str(w.message) for w in caught]
  except DslError as e:
    assert not caught, [str(w.message) for w in caught]
    assert e.diagnostics
    if text is None:
      with open(path, "rb") as f: text = f.read().decode("utf-8", "replace")
    lines = text.split("\n")
    for d in e.diagnostics:
      assert d.file == "fuzz.rules"
      assert 1 <= d.line <= len(lines), (d, len(lines))
      assert 1 <= d.col <= len(lines[d.line - 1]) + 1, (d, lines[d.line - 1])
    str(e)  # formatting every diagnostic with its line and caret works too
    return
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    compile(code, "fuzz.py", "exec")

def fuzz(n: int) -> settings:
  return settings(max_examples=n * SCALE, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

@fuzz(600)
@given(st.lists(st.sampled_from(TOKENS), max_size=40), st.sampled_from(["", " ", "\n"]))
def test_token_soup(tokens, sep):
  check(sep.join(tokens))

@fuzz(200)
@given(st.text(max_size=80), st.booleans())
def test_any_text(text, after_a_rule):
  check((RULE if after_a_rule else "") + text)

@fuzz(200)
@given(st.binary(max_size=120), st.booleans())
def test_random_bytes(data, after_a_rule):
  with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "fuzz.rules")
    with open(path, "wb") as f: f.write((RULE.encode() if after_a_rule else b"") + data)
    check(None, path)

# ---- mutations of real rule files ----

CHARS = "()[]{}->!@:|._ \n\t#\"'0123456789xyzcADDMULCONST"

@st.composite
def mutated(draw, window: bool):
  text = draw(st.sampled_from(TEXTS))
  if window:
    # a window of lines (a whole file compiles in ~0.1 s; a window in a few ms): keep the header sometimes
    lines = text.split("\n")
    start = draw(st.integers(0, max(len(lines) - 1, 0)))
    size = draw(st.integers(1, 30))
    text = "\n".join(lines[:6] + lines[start:start + size]) if draw(st.booleans()) else "\n".join(lines[start:start + size])
  for _ in range(draw(st.integers(1, 4))):
    kind = draw(st.sampled_from(["del_char", "ins_char", "dup_char", "swap_chars", "del_line", "dup_line", "swap_lines", "truncate"]))
    if kind.endswith(("char", "chars")) or kind == "truncate":
      i = draw(st.integers(0, len(text)))
      j = draw(st.integers(0, len(text)))
      if kind == "del_char": text = text[:i] + text[i + 1:]
      elif kind == "ins_char": text = text[:i] + draw(st.sampled_from(CHARS)) + text[i:]
      elif kind == "dup_char": text = text[:i] + text[i:i + 1] + text[i:]
      elif kind == "swap_chars" and i < j < len(text): text = text[:i] + text[j] + text[i + 1:j] + text[i] + text[j + 1:]
      elif kind == "truncate": text = text[:i]
    else:
      lines = text.split("\n")
      i = draw(st.integers(0, len(lines) - 1))
      j = draw(st.integers(0, len(lines) - 1))
      if kind == "del_line": del lines[i]
      elif kind == "dup_line": lines.insert(j, lines[i])
      else: lines[i], lines[j] = lines[j], lines[i]
      text = "\n".join(lines)
  return text

@fuzz(600)
@given(mutated(window=True))
def test_mutated_windows(text):
  check(text)

@fuzz(30)
@given(mutated(window=False))
def test_mutated_files(text):
  check(text)

# ---- rule-shaped input: mostly valid rules, so the checks and the emitter are reached ----

ROOT_OPS = ["ADD", "MUL", "SUB", "NEG", "WHERE", "CMPLT", "CMPNE", "MAX", "IDIV", "AND", "CAST", "CONST", "SINK", "VECTORIZE", "GEP", "LOAD",
            "STORE", "INDEX", "RANGE", "BITCAST", "RESHAPE", "NOOP", "ALU", "Binary", "Commutative", "ADD|MUL", "_", "op", "Binary - THREEFRY"]
OPEN_ARITY = ["SINK", "VECTORIZE", "LOAD", "STORE", "INDEX", "RANGE", "NOOP", "_"]  # `p...` only here (see the xfail in test_frontends)
DTYPES = ["", "", "", "", "", "", ":ints", ":bool", ":int32", ":float32", ":ints|bool", ":floats", ":index"]
LITERALS = ["0", "1", "-1", "True", "False", "2.5", "inf", "0x10", "1<<4", "2**3 - 1"]
GUARD = ["", "", " if N.arg > 0", " if N.vmin >= 0 and N.vmax < 10", " if {N.op is Ops.ADD}", " if N.dtype == dtypes.int", " if not N.src",
         " if len(N.src) > 1", " if op is Ops.ADD", " if N.vmax & 1 == 0 and N.vmin << 2 > -8"]

def _arity(op: str) -> int | None:
  from runtime.ops import ARITY, Ops
  if op in ("Binary", "Commutative", "op", "ADD|MUL", "Binary - THREEFRY", "Binary"): return 2
  return ARITY.get(Ops[op]) if op in Ops.__members__ else None

@st.composite
def rule_file(draw):
  names: list[str] = []
  def name() -> str:
    if names and draw(st.booleans()): return draw(st.sampled_from(names))
    names.append(f"v{len(names)}")
    return names[-1]
  def pattern(depth: int) -> str:
    k = draw(st.integers(0, 9))
    if k == 0 and lets: return draw(st.sampled_from([f"Pos({name()})", "Zero", f"Casted({name()})"]))
    if depth > 2 or k < 3: return name() + draw(st.sampled_from(DTYPES))
    if k == 3: return draw(st.sampled_from(["_", "_:int32"] + LITERALS))
    op = draw(st.sampled_from(ROOT_OPS))
    n = _arity(op)
    srcs = [pattern(depth + 1) for _ in range(n if n is not None else draw(st.integers(0, 3)))] if n is not None or draw(st.booleans()) else []
    if op in OPEN_ARITY and srcs and draw(st.booleans()): srcs[-1] += "..."
    elif op in OPEN_ARITY and draw(st.integers(0, 3)) == 0: srcs.append(f"s{len(names)}*")
    arg = draw(st.sampled_from(["", "", " [0]", " [(1, 2)]", " [True]"]))
    body = f"{op}{draw(st.sampled_from(DTYPES))}{arg}{''.join(' ' + x for x in srcs)}"
    alt = draw(st.integers(0, 7))
    if alt == 0 and srcs: body = f"{body} | CAST ({body})"        # alternatives binding the same names
    elif alt == 1 and srcs: body = f"{body} | {op} {srcs[0]}"     # mostly not: a diagnostic
    elif alt == 2 and len(srcs) == 1: body = f"{op.split('|')[-1]}?{body[len(op):]}"  # an optional node
    p = f"({body})"
    return f"{name()}@{p}" if draw(st.integers(0, 3)) == 0 else p
  def result(depth: int) -> str:
    k = draw(st.integers(0, 9))
    n = draw(st.sampled_from(names)) if names else "0"
    if depth > 2 or k < 3: return n
    if k == 3: return draw(st.sampled_from(LITERALS))
    if k == 4: return draw(st.sampled_from(["fold_alu(N)", "N.const_like(0)", "{None}", "{N}", "{3}", "{(N, N)}", "N{arg: 0}",
                                            "N{dtype: int32, src: (N,)}", "N{op: ADD}", "(SINK N s0*)", "(LOAD N s1* N)",
                                            "(SINK (NEG s) for s in N.src)", "(VECTORIZE N for _ in range(3))",
                                            "(RESHAPE:N.dtype [tuple(i for i in N.arg)] N)", "(SINK N [(NEG s) for s in N.src]*)",
                                            "(ADD N N N)", "(AND N N)", "(ADD (NEG s) for s in N.src)", "N{tag: None}", "N{src: N.src[1:]}",
                                            "(CAST:dtypes.float32.vec(N.dtype.count) N)", "N if N.vmin > 0 else (NEG N)",
                                            "(VECTORIZE N [s for s in reversed(N.src)]*)"])).replace("N", n)
    op = draw(st.sampled_from([o for o in ROOT_OPS if o not in ("ALU", "Binary", "Commutative", "ADD|MUL", "_", "Binary - THREEFRY")]))
    dt = draw(st.sampled_from(["", "", ":int32", ":bool", ":N.dtype", ":dtypes.float32"])).replace("N", n)
    arity = _arity(op)
    srcs = [result(depth + 1) for _ in range(arity if arity is not None else draw(st.integers(0, 3)))]
    return f"({op}{dt}{draw(st.sampled_from(['', ' [0]', ' [N.arg]'])).replace('N', n)}{''.join(' ' + x for x in srcs)})"
  def entries(p: str) -> str:
    # a per-source tuple: mostly one entry per source of the root (its arity, or the sources written), sometimes not
    head = p.split("@", 1)[-1]
    op = head[1:].split(" ")[0].split(":")[0].rstrip(")") if head.startswith("(") else ""
    n = _arity(op) if op else None
    if n is None: n = head.count(" ") if head.startswith("(") else 1
    n = n if draw(st.integers(0, 5)) else draw(st.integers(0, 3))
    one = lambda: draw(st.sampled_from(["_", "None", "ctx", "(NEG ctx)", "(MUL ctx ctx)", "0", "{ctx}", "{None}"] + [result(1)]))  # noqa: E731
    return "(" + " ".join(one() for _ in range(n)) + ")" if draw(st.integers(0, 7)) else draw(st.sampled_from(["{None}", "{(ctx, ctx)}"]))
  per_source = draw(st.integers(0, 3)) == 0
  lets = draw(st.booleans())
  caps = draw(st.integers(0, 3)) == 0
  # a declared context, read (right or wrong) by the guards
  context = not per_source and not caps and draw(st.integers(0, 3)) == 0
  rules = []
  for _ in range(draw(st.integers(1, 4))):
    names.clear()
    p = pattern(0)
    for _ in range(4 if per_source else 0):
      # mostly a root op of a fixed arity, so the tuple can be right and the rule set compiles
      if p.split("@", 1)[-1].startswith("(") and _arity(p.split("@", 1)[-1][1:].split(" ")[0].split(":")[0].rstrip(")")) is not None: break
      names.clear()
      p = pattern(0)
    guard = draw(st.sampled_from(GUARD)).replace("N", draw(st.sampled_from(names)) if names else "x")
    if caps: guard += " and Ops.MAX not in caps" if guard else " if Ops.MAX not in caps"
    if context:
      use = draw(st.sampled_from(["", "ctx.f(N)", "ctx.g > 0", "ctx[N] is N", "ctx.h(N)", "ctx.f(N, N)", "ctx.g(N)", "ctx is None"]))
      use = use.replace("N", draw(st.sampled_from(names)) if names else "x")
      if use: guard += f" and {use}" if guard else f" if {use}"
    res = entries(p) if per_source else result(0)
    if not per_source and draw(st.integers(0, 4)) == 0:
      res = draw(st.sampled_from(["(NEG w0) where w0 = R", "(NEG w1) where w0 = R, w1 = (NEG w0)", "(ADD w0 w1) where w0 = R\n  where w1 = 3",
                                  "(SINK R w0*) where w0 = [(NEG s) for s in R.src]", "(NEG w0) where w0 = R if R.vmin > 0 else (NEG R)",
                                  "(ADD w0*) where w0 = [R for _ in range(2)]", "R if R.vmax < 3 else (NEG R)",
                                  "(SINK w0*) where w0 = [s if s.op is Ops.CONST else (NEG s) for s in R.src]"]))\
        .replace("R", res)
    rules.append(f"{p}{guard} -> {res}")
  body = "\n".join(rules)
  if draw(st.booleans()): body = f"for op in {draw(st.sampled_from(['ADD, MUL', 'Binary', 'CMPLT, CMPNE', 'NEG', 'ALU']))} {{\n{body}\n}}"
  head = "ruleset t(ctx: UOp" + (", caps" if caps else "") + ") returns per-source" if per_source else "ruleset t(caps)" if caps else "ruleset t"
  if context: head = draw(st.sampled_from(["ctx K: f(x) -> bool, g: int, [x] -> node\nruleset t(ctx: K)", "ruleset t(ctx: None)",
                                           "ctx K: f(x) -> bool,\n  g: int\nruleset t(ctx: K)"]))
  let_lines = "let Pos(x) = x if x.vmin >= 0\nlet Zero = (CONST [0])\nlet Casted(x) = (CAST? Pos(x))\n" if lets else ""
  return f"from rules.symbolic_helpers import fold_alu\n{let_lines}{head}\n" + body + "\n"

def _graphs():
  from runtime import UOp, dtypes
  a, b, p = UOp.variable("a", 0, 10), UOp.variable("b", -5, 5), UOp.variable("p", 0, 1, dtypes.bool)
  return [a + b, a * 1 + 0, -(a - b), (a < b).where(a, b), a.maximum(b) // 3, (a + 1).cast(dtypes.float32), p & (a < 3), a.ne(b) | p]

@fuzz(400)
@given(rule_file())
def test_rule_shaped(text):
  check(text)
  # a module that compiles may still fail on a node (a rule can build a bad node), but never because the compiler left a
  # name unbound: NameError and UnboundLocalError are compiler bugs
  from runtime import graph_rewrite
  try: code = compile_rules("fuzz.rules", source=text)
  except DslError:
    event("diagnostics")
    return
  per_source = "returns per-source" in text
  event("compiles, per-source" if per_source else "compiles")
  ns: dict = {}
  exec_module(code, "fuzz.py", ns)
  if "caps" in text.split("\n")[-1] or ", caps)" in text or "t(caps)" in text: ns["t"] = ns["t"](frozenset({Ops.MAX}))  # an instance
  for g in _graphs():
    try:
      if not per_source: graph_rewrite(g, ns["t"])
      for u in g.toposort() if per_source else ():
        # one entry per source, whichever rule fired
        r = ns["t"].rewrite(u, u)
        assert r is None or isinstance(r, tuple) and len(r) == len(u.src), (u.op, r)
    except (NameError, UnboundLocalError, AssertionError): raise
    except Exception: pass  # noqa: S110 - the rule's own error (a bad node, a loop), not the compiler's

def test_real_files_compile():
  for text in TEXTS: check(text)
