"""`python -m dslc verify FILE.rules`: each rule proved with the z3 SMT solver, for every node it matches, its result has the
value of the node it replaces. A rule's pattern is instantiated once per choice of ops, source orders and scalar dtypes;
each instance asks z3 for values of its captures (and their range-analysis bounds) where the guard holds and the two values
differ. None: proved. One: a counterexample, replayed on real UOps through the generated rule and exec_alu before it is
reported. Meanings are dslc/smt.py's (exec_alu's, bit for bit); what has none makes the rule unsupported, with the reason.
"""
from __future__ import annotations
import itertools, json, os, re, time
from dataclasses import dataclass
from typing import Any
import z3
from runtime.dtype import DType
from dslc import smt, verify_exhaustive
from dslc.ir import Rule, RuleFile
from dslc.smt import NoMeaning, Unsupported
from dslc.verify_eval import globals_for
from dslc.verify_nodes import Helper
from dslc.verify_pattern import MAX_INSTANCES, Instance, Shape, dtype_choices, expand
from dslc.verify_replay import Replayer, Verdict

# z3's resource limit per query, deterministic unlike a time limit (1M is about a second): an instance is tried in the
# bit-vector encoding with RLIMIT/4, then the integer encodings with RLIMIT each, then bit-vectors again with 3*RLIMIT
RLIMIT = 3_000_000
STATUSES = ("proved", "counterexample", "unsupported", "timeout")
@dataclass
class Outcome:
  rule: Rule
  status: str
  detail: str = ""
  instances: int = 0
  seconds: float = 0.0
  @property
  def where(self) -> str: return f"{self.rule.span.file}:{self.rule.span.line}:{self.rule.span.col}"

# ---- queries ----

def solver(rlimit: int) -> z3.Solver:
  s = z3.Solver()
  s.set("rlimit", rlimit)
  return s

def check_instance(inst: Instance, rlimit: int, replay) -> Verdict:
  if inst.result.dtype is not inst.root.dtype:
    # the result has another dtype: a finding only if the real rule makes it on a node some values reach
    s = solver(rlimit)
    s.add(*inst.pre())
    r = s.check()
    if r == z3.unsat: return Verdict("vacuous")
    if r == z3.unknown: return Verdict("timeout", "whether the guard can hold")
    return replay(inst, s.model(), None)
  for cond, what in inst.sym.raises:
    s = solver(rlimit)
    s.add(*inst.sym.facts, cond)
    r = s.check()
    if r == z3.sat: return replay(inst, s.model(), what)
    if r == z3.unknown: return Verdict("timeout", f"whether {what} can happen")
  goal = smt.same(inst.result.value, inst.root.value, inst.root.dtype)
  if inst.result.value.eq(inst.root.value) or z3.is_true(z3.simplify(goal)): return Verdict("proved")
  s = solver(rlimit)
  s.add(*inst.pre())
  s.add(z3.Not(goal))
  r = s.check()
  if r == z3.unsat: return Verdict("proved")
  if r == z3.unknown:
    query = [*inst.pre(), z3.Not(goal)]
    if smt.int_mode() and decided_cases(inst.pre(), query, rlimit): return Verdict("proved")
    if split_cases(query, rlimit): return Verdict("proved")
    return Verdict("timeout", s.reason_unknown())
  return replay(inst, s.model(), None)

# ---- a query with its case tests decided ----

TEST_RLIMIT = 20_000  # per case test: what the facts imply is found fast, or not worth the wait
_CMP = (z3.Z3_OP_EQ, z3.Z3_OP_DISTINCT, z3.Z3_OP_LE, z3.Z3_OP_GE, z3.Z3_OP_LT, z3.Z3_OP_GT)

def case_tests(fs: list) -> list:
  """The comparisons of ints a query branches on: in an If's condition or an Implies' premise (C's `x // 0 == 0`, a
  divisor's sign, INT_MIN // -1, whether a sum fits its dtype), not those that state a fact."""
  out: dict[int, z3.ExprRef] = {}
  seen: set = set()
  def go(e, test: bool) -> None:
    if (e.get_id(), test) in seen or not z3.is_app(e): return
    seen.add((e.get_id(), test))
    k = e.decl().kind()
    if test and k in _CMP and not z3.is_bool(e.arg(0)):
      out[e.get_id()] = e
      return
    if k == z3.Z3_OP_ITE:
      go(e.arg(0), True); go(e.arg(1), test); go(e.arg(2), test)
    elif k == z3.Z3_OP_IMPLIES:
      go(e.arg(0), True); go(e.arg(1), test)
    else:
      for ch in e.children(): go(ch, test and k in (z3.Z3_OP_AND, z3.Z3_OP_OR, z3.Z3_OP_NOT))
  for f in fs: go(f, False)
  return list(out.values())

def decided_cases(pre: list, query: list, rlimit: int, rounds: int = 2) -> bool:
  """The query is unsatisfiable, shown by deciding its case tests first: each test the facts `pre` imply true (or false)
  is replaced by that value everywhere, and what is left simplified (a guard's `c.arg > 0` makes `c == 0 ? x : x % c`
  plain `x % c`, which z3's arithmetic then reasons about). Sound for proofs only: every model of the query gives each test
  the value `pre` implies, so it is a model of the rewritten query too; unsat there is unsat here. A model of the rewritten
  query proves nothing (a fact that was itself a test may be gone), so only unsat counts."""
  q = list(query)
  check = solver(TEST_RLIMIT)
  check.add(*pre)
  for _ in range(rounds):
    subs = []
    for t in case_tests(q):
      for value in (True, False):
        check.push()
        check.add(z3.Not(t) if value else t)
        implied = check.check() == z3.unsat
        check.pop()
        if implied:
          subs.append((t, z3.BoolVal(value)))
          break
    if not subs: break
    q = [z3.simplify(z3.substitute(f, *subs)) for f in q]
  # first without the captures' dtype ranges (fewer facts: unsat without them is unsat with them; z3 then does not enumerate
  # the small ranges of 8-bit values), then with them; asked only where the plain query in an integer encoding ran out
  for facts, limit in (([f for f in q if not _is_range(f)], rlimit), (q, rlimit)):
    s = solver(limit)
    s.add(*facts)
    if s.check() == z3.unsat: return True
  return False

def split_cases(query: list, rlimit: int, most: int = 2) -> bool:
  """The query is unsatisfiable in each case of its free boolean choices (a WHERE's condition the pattern leaves open:
  `c ? t >> k : f >> k`), up to `most` of them: each case has them replaced by True or False and simplified, and needs a
  quarter of the budget. Sound and complete for these: a model gives each choice one value, so it is a model of that case."""
  conds: dict[int, z3.ExprRef] = {}
  def go(e, seen: set) -> None:
    if e.get_id() in seen or not z3.is_app(e): return
    seen.add(e.get_id())
    c = e.arg(0) if e.decl().kind() == z3.Z3_OP_ITE else None
    if c is not None and z3.is_const(c) and c.decl().kind() == z3.Z3_OP_UNINTERPRETED: conds[c.get_id()] = c
    for ch in e.children(): go(ch, seen)
  seen: set = set()
  for f in query: go(f, seen)
  if not conds or len(conds) > most: return False
  cs = list(conds.values())
  for values in itertools.product((True, False), repeat=len(cs)):
    s = solver(max(rlimit // 4, 1))
    s.add(*[z3.simplify(z3.substitute(f, *[(c, z3.BoolVal(v)) for c, v in zip(cs, values)])) for f in query])
    if s.check() != z3.unsat: return False
  return True

def _is_range(f: z3.ExprRef) -> bool:
  """`lo <= v <= hi` of a variable and two numbers: a capture's dtype range in the "int" encoding (smt.in_range)."""
  return z3.is_and(f) and f.num_args() == 2 and all(z3.is_app(a) and a.decl().kind() in (z3.Z3_OP_GE, z3.Z3_OP_LE) and z3.is_const(a.arg(0))
                                                     and z3.is_int_value(a.arg(1)) for a in f.children())

def satisfiable(inst: Instance, rlimit: int) -> bool:
  s = solver(rlimit)
  s.add(*inst.pre())
  return s.check() != z3.unsat

# ---- a rule, a file ----

def rule_namespace(rf: RuleFile, shown: str) -> dict[int, Any]:
  """line -> the generated standalone function of the rule there (`Rule.fn`), from the module the file compiles to."""
  from dslc.compile import compile_rules, exec_module
  from runtime.rewrite import Matcher, Rule as RuntimeRule
  # exec_module keeps the text in linecache: a rule alone (Rule.fn) is cut from the generated source
  ns = exec_module(compile_rules(rf.path, shown, source=rf.source), shown.replace(".rules", ".py"))
  rules = [v for v in ns.values() if isinstance(v, RuntimeRule)] + [r for v in ns.values() if isinstance(v, Matcher) for r in v.rules]
  return {r.line: r.fn for r in rules}

def file_globals(rf: RuleFile) -> dict[str, Any]:
  """The file's imports: a function as a Helper (called by its SMT meaning, if it has one), data as itself."""
  import importlib
  out: dict[str, Any] = {}
  for module, names, _ in rf.imports:
    mod = importlib.import_module(module)
    for n in names:
      obj = getattr(mod, n)
      out[n] = Helper(f"{module}.{n}", obj) if callable(obj) and not isinstance(obj, type) else obj
  return out

def verify_rule(rule: Rule, params: list[str], glob: dict, rlimit: int, replay: Replayer, returns: str, source: str | None = None) -> Outcome:
  t0 = time.perf_counter()
  smt.fresh_context()
  def done(status: str, detail: str = "", n: int = 0) -> Outcome: return Outcome(rule, status, detail, n, time.perf_counter() - t0)
  if returns != "node": return done("unsupported", "its rule set returns one entry per source: not a node of the same value")
  if source is not None and (approx := verify_exhaustive.annotation(rule, source)) is not None:
    return done(*approximate(rule, approx, replay))
  g = globals_for(glob, params)
  # division and remainder: the integer encoding first (z3 proves // and % identities there)
  n_inst, proved, firing, prefer = 0, 0, False, "int" if re.search(r"IDIV|MOD|//|%", rule.text) else "bv"
  timeouts: list[str] = []
  unsupported: str | None = None
  try:
    opvar_sets = [[(v, o) for o in sorted(ops, key=lambda o: o.value)] for v, ops in rule.opvars.items()]
    for choice in itertools.product(*opvar_sets):
      opvars = dict(choice)
      for shape in expand(rule.pattern, opvars):
        choices = dtype_choices(shape)
        if choices is None: return done("unsupported", f"more than {MAX_INSTANCES} dtype choices")
        for dt in choices:
          try: v, prefer = prove(rule, shape, dt, g, opvars, rlimit, replay, prefer, not firing, bool(timeouts))
          except Unsupported as e:
            unsupported = unsupported or f"{e}{_for(opvars, dt)}"
            continue
          if v is not None and v.status == "proved" and not firing: firing = v.detail == "fires"
          if v is None: continue
          n_inst += 1
          what = _for(opvars, dt)
          if v.status == "counterexample": return done("counterexample", f"{v.detail}{what}", n_inst)
          if v.status == "unsupported": unsupported = unsupported or f"{v.detail}{what}"
          elif v.status == "timeout": timeouts.append(what.strip(" ()").removeprefix("for ") or "it")
          else: proved += 1
  except Unsupported as e: return done("unsupported", str(e), n_inst)
  if unsupported is not None: return done("unsupported", unsupported, n_inst)
  if timeouts:
    which = ", ".join(timeouts[:6]) + (" ..." if len(timeouts) > 6 else "")
    return done("timeout", f"z3 gave up on {len(timeouts)} of {n_inst} instances: {which}", n_inst)
  if not firing: return done("unsupported", "no scalar node satisfies its pattern and guard (vectors only?)", n_inst)
  return done("proved", f"{n_inst} instance{'s' if n_inst != 1 else ''}", n_inst)

def approximate(rule: Rule, approx: tuple[str, float], replay: Replayer) -> tuple[str, str, int]:
  """An approximate rule (`# verify: FN within K ulp`), checked on every value of its input, per dtype it matches."""
  fn, tolerance = approx
  rule_fn = replay.rules_by_line.get(rule.span.line)
  if rule_fn is None: return "unsupported", "no generated rule to run", 0
  dts = sorted({dt[id(shape)] for shape in expand(rule.pattern, {}) for dt in dtype_choices(shape) or []}, key=lambda d: d.priority)
  results = [(d, *verify_exhaustive.check(rule, fn, tolerance, d, rule_fn, verify_exhaustive.scalar)) for d in dts]
  for want in ("counterexample", "unsupported"):
    bad = [detail for d, status, detail in results if status == want]
    if bad: return want, "; ".join(bad + [detail for d, status, detail in results if status == "proved"]), len(dts)
  return "proved", "; ".join(detail for _, _, detail in results), len(dts)

def prove(rule: Rule, shape: Shape, dt: dict, g: dict, opvars: dict, rlimit: int, replay: Replayer, prefer: str,
          check_fires: bool, quick: bool = False) -> tuple[Verdict | None, str]:
  """One instance, in the encoding that last worked first: a small bit-vector budget, the integer encodings, then a large
  bit-vector budget (quick: the first only: the rule timed out already, only a counterexample could change its outcome, and
  one is found fast). None: no node of the instance can match. Proved verdicts say "fires" when some node satisfies the guard."""
  tiers = [("bv", rlimit // 4), ("int", rlimit), ("intq", rlimit), ("bv", rlimit * 3)]
  first = next(i for i, t in enumerate(tiers) if t[0] == prefer)
  tiers.insert(0, tiers.pop(first))
  if quick: tiers = [("bv", rlimit // 4)]
  v = None
  for mode, limit in tiers:
    with smt.encoding(mode):
      try:
        inst = Instance(rule, shape, dt, g, opvars)
        if not inst.evaluate(): return None, prefer
      except NoMeaning: return None, prefer
      except (TypeError, AttributeError, KeyError, IndexError, ValueError, z3.Z3Exception) as e:
        # Python the evaluator does not follow (a guard on a value it models differently): not a finding, a limit
        raise Unsupported(f"dslc verify can't evaluate it ({type(e).__name__}: {e})") from e
      v = check_instance(inst, limit, replay)
      if v.status == "vacuous": return None, prefer
      if v.status == "proved" and check_fires and satisfiable(inst, limit): v = Verdict("proved", "fires")
    if v.status != "timeout": return v, mode
  return v, prefer

def _for(opvars: dict, dt: dict[int, DType]) -> str:
  """Which instance: its op variables' ops and its dtypes, `(for ADD int8 bool)`."""
  ds = sorted(set(dt.values()), key=lambda d: d.priority)
  return f" (for {' '.join([o.name for o in opvars.values()] + [smt.dname(d) for d in ds])})"

def verify_file(path: str, shown: str | None = None, rlimit: int = RLIMIT, lines: set[int] | None = None, report=None,
                jobs: int = 1, source: str | None = None) -> list[Outcome]:
  """Every rule of a .rules file (or of `source`, named path) verified, in file order; report(outcome) is called as each one
  is done. jobs > 1 verifies rules in that many processes (each rule's outcome is the same either way: a fresh z3 context
  per rule)."""
  shown = shown or path
  loaded = _load(path, shown, source)
  rf = loaded[0]
  todo = [(rs, r) for rs in rf.rulesets if rs.compose is None for r in rs.rules if lines is None or r.span.line in lines]
  tasks = [(path, shown, source, rlimit, r.span.line, r.span.col) for _, r in todo]
  if jobs > 1 and len(tasks) > 1:
    import multiprocessing
    pool = multiprocessing.get_context("spawn").Pool(min(jobs, len(tasks)))
    results = pool.imap(_verify_task, tasks)
  else: pool, results = None, map(_verify_task, tasks)
  out = []
  try:
    for (_, r), res in zip(todo, results):
      o = Outcome(r, *res)
      out.append(o)
      if report is not None: report(o)
  finally:
    if pool is not None: pool.terminate()
  return out

_LOADED: dict[tuple, tuple] = {}
def _load(path: str, shown: str, source: str | None = None) -> tuple:
  """The checked rule file, its imports and the replayer of its generated rules (once per process)."""
  key = (path, shown, source)
  if key not in _LOADED:
    from dslc.compile import load_rules
    rf = load_rules(path, shown, source)
    _LOADED[key] = (rf, file_globals(rf), Replayer(rule_namespace(rf, shown)))
  return _LOADED[key]

def _verify_task(task: tuple) -> tuple:
  path, shown, source, rlimit, line, col = task
  rf, glob, replay = _load(path, shown, source)
  rs, r = next((rs, r) for rs in rf.rulesets if rs.compose is None for r in rs.rules if (r.span.line, r.span.col) == (line, col))
  if "ctx" in rs.params and rs.params["ctx"] not in (None, "None") and _reads_ctx(r): o = Outcome(r, "unsupported", "reads ctx")
  else: o = verify_rule(r, rs.caps, glob, rlimit, replay, rs.returns, rf.source)
  return o.status, o.detail, o.instances, o.seconds

def _reads_ctx(r: Rule) -> bool:
  return bool(re.search(r"\bctx\b", r.text))

# ---- reports ----

def summary(outcomes: list[Outcome]) -> dict[str, int]:
  out = {s: 0 for s in STATUSES}
  for o in outcomes: out[o.status] += 1
  return out

def table(by_file: dict[str, list[Outcome]]) -> str:
  rows = [f"{'file':<30}{'rules':>6}{'proved':>8}{'counterexample':>16}{'unsupported':>13}{'timeout':>9}"]
  tot = {s: 0 for s in STATUSES}
  for path, outs in by_file.items():
    s = summary(outs)
    for k in tot: tot[k] += s[k]
    rows.append(f"{path:<30}{len(outs):>6}{s['proved']:>8}{s['counterexample']:>16}{s['unsupported']:>13}{s['timeout']:>9}")
  if len(by_file) > 1:
    rows.append(f"{'total':<30}{sum(tot.values()):>6}{tot['proved']:>8}{tot['counterexample']:>16}{tot['unsupported']:>13}{tot['timeout']:>9}")
  return "\n".join(rows)

def line(o: Outcome) -> str:
  return f"{o.where}: {o.status} ({o.seconds:.1f} s): {o.rule.text}" + (f"\n    {o.detail}" if o.detail and o.status != "proved" else "")

def run(args) -> int:
  """The CLI: every rule of each file with its outcome (-q: only those not proved), then the table; exit 1 on a counterexample."""
  import sys
  from dslc.diagnostics import DslError
  by_file: dict[str, list[Outcome]] = {}
  t0 = time.perf_counter()
  for path in args.files:
    shown = os.path.relpath(os.path.abspath(path)).replace(os.sep, "/")
    shown = path if shown.startswith("..") else shown
    def report(o: Outcome) -> None:
      if not (args.quiet and o.status == "proved"): print(line(o), flush=True)
    try: outs = verify_file(path, shown, args.rlimit, set(args.line) if args.line else None, report, args.jobs)
    except DslError as e:
      print(str(e), file=sys.stderr)
      return 1
    by_file[shown] = outs
  print()
  print(table(by_file))
  print(f"{time.perf_counter() - t0:.1f} s")
  if args.json:
    with open(args.json, "w") as f:
      def entry(x: Outcome) -> dict: return {"line": x.rule.span.line, "status": x.status, "detail": x.detail, "seconds": round(x.seconds, 2)}
      json.dump({p: {"summary": summary(o), "rules": [entry(x) for x in o]} for p, o in by_file.items()}, f, indent=1)
  return 1 if any(o.status == "counterexample" for outs in by_file.values() for o in outs) else 0
