"""`python -m dslc explain FILE --on EXPR`: for one node, each rule whose root op matches it, in order, and why it did not
fire (the first test that failed) or what it fired with.

The pattern IR (dslc.ir.Pat) is interpreted against the node here, test by test, in the order of the rule's concrete forms
(alternatives, commutative orders) as the emitter lists them; guards and results are the emitter's own Python text,
evaluated in the generated module's namespace with the captures the interpreter bound. Nothing in the generated code is
instrumented, so a test can cross-check the two (tests/dslc/test_explain.py).

EXPR, the node to explain, is written as a pattern is: `(ADD (MUL x 2) 0)`.
  (OP[:dtype] [arg] src...)   a node; its dtype, when not written, is bool for a comparison, else its first typed source's
  x, x:int64, x[-4:8]         a variable (DEFINE_VAR, int32 unless written) named x, in [0, 16] unless bounds are written;
                              the same name is the same node (write its dtype and bounds once, or the same each time)
  3, -1, 2.5, True            a constant of the dtype of its node's other sources (int32 / float32 / bool when alone)
"""
from __future__ import annotations
import re
from dataclasses import dataclass
from typing import Any, Iterator
from runtime.dtype import DTYPE_NAMES, DType, dtypes
from runtime.ops import GroupOp, Ops
from runtime.uop import UOp, uop
from dslc.diagnostics import did_you_mean
from dslc.emit import Consts, HELPERS, loops_pay, variants
from dslc.emit_result import ROOT, ResultBuilder
from dslc.ir import CallResult, Pat, Rule, RuleFile, has_repeated_names, is_unconditional, root_ops
from dslc.lang import DTYPE_CLASSES
from dslc.typecheck import dtype_name

class ExprError(ValueError):
  """A bad --on expression: the message names the token and its column."""

# ---- EXPR -> UOp ----

_TOKEN = re.compile(r"\s*(?:(?P<open>\()|(?P<close>\))|(?P<arg>\[[^\]]*\])|(?P<num>-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?|-?inf\b|nan\b)"
                    r"|(?P<word>[A-Za-z_]\w*(?::[a-z]\w*)?))")
DEFAULT_BOUNDS = (0, 16)

def parse_on(text: str) -> UOp:
  """The UOp an --on expression describes (see the module docstring)."""
  toks: list[tuple[str, str, int]] = []
  i = 0
  while i < len(text):
    if text[i:].strip() == "": break
    m = _TOKEN.match(text, i)
    if m is None or m.end() == i: raise ExprError(f"--on: unexpected {text[i:].strip()[:10]!r} at column {i + 1} of {text!r}")
    kind = m.lastgroup
    assert kind is not None
    toks.append((kind, m.group(kind), m.start(kind) + 1))
    i = m.end()
  pos = 0
  variables: dict[str, UOp] = {}

  def peek() -> tuple[str, str, int] | None: return toks[pos] if pos < len(toks) else None
  def take() -> tuple[str, str, int]:
    nonlocal pos
    if pos >= len(toks): raise ExprError(f"--on: {text!r} ends early (a ')' missing?)")
    pos += 1
    return toks[pos - 1]

  def term() -> UOp | tuple[str, Any]:
    kind, val, col = take()
    if kind == "num": return ("lit", float(val) if re.search(r"[.eEn]", val) else int(val))
    if kind == "word" and val in ("True", "False"): return ("lit", val == "True")
    if kind == "word":
      name, _, dt = val.partition(":")
      dtype = _dtype(dt, col) if dt else dtypes.int32
      lo, hi = DEFAULT_BOUNDS
      bounded = (n := peek()) is not None and n[0] == "arg"
      if name in variables and not dt and not bounded: return variables[name]  # x[-4:8] once, then x: the same variable
      if bounded:
        assert n is not None
        take()
        m = re.fullmatch(r"\[\s*(-?\d+)\s*:\s*(-?\d+)\s*\]", n[1])
        if m is None: raise ExprError(f"--on: the bounds of {name} at column {n[2]} must read [lo:hi], not {n[1]}")
        lo, hi = int(m[1]), int(m[2])
      v = UOp.variable(name, lo, hi, dtype)
      if name in variables and variables[name] is not v: raise ExprError(f"--on: variable {name} is written twice with different bounds or dtypes")
      return variables.setdefault(name, v)
    if kind != "open": raise ExprError(f"--on: unexpected {val!r} at column {col} (a node is written (OP src...))")
    kind, val, col = take()
    name, _, dt = val.partition(":")
    if kind != "word" or name not in Ops.__members__:
      raise ExprError(f"--on: {val!r} at column {col} is not an op{did_you_mean(name, list(Ops.__members__)) if kind == 'word' else ''}")
    op, dtype = Ops[name], _dtype(dt, col) if dt else None
    arg = None
    if (n := peek()) is not None and n[0] == "arg":
      take()
      arg = eval(n[1][1:-1], {"Ops": Ops, "dtypes": dtypes, **Ops.__members__})  # a Python literal: 0, (Ops.ADD, (0,)), ...
    parts: list[UOp | tuple[str, Any]] = []
    while (n := peek()) is not None and n[0] != "close": parts.append(term())
    take()
    typed = next((p.dtype for p in parts if isinstance(p, UOp)), None)
    lit_dt = typed or next((_lit_dtype(p[1]) for p in parts if not isinstance(p, UOp)), dtypes.int32)
    if op is Ops.WHERE: lit_dt = next((p.dtype for p in parts[1:] if isinstance(p, UOp)), lit_dt)
    srcs = tuple(p if isinstance(p, UOp) else UOp.const(dtypes.bool if op is Ops.WHERE and i == 0 else lit_dt, p[1]) for i, p in enumerate(parts))
    if op is Ops.CONST: return UOp.const(dtype or lit_dt, arg)
    if dtype is None: dtype = dtypes.bool if op in GroupOp.Comparison else lit_dt
    return uop(op, dtype, srcs, arg)

  t = term()
  if pos != len(toks): raise ExprError(f"--on: unexpected {toks[pos][1]!r} at column {toks[pos][2]} after the expression")
  return t if isinstance(t, UOp) else UOp.const(_lit_dtype(t[1]), t[1])

def _dtype(name: str, col: int) -> DType:
  if name not in DTYPE_NAMES:
    raise ExprError(f"--on: unknown dtype {name!r} at column {col}{did_you_mean(name, list(DTYPE_NAMES))}")
  return DTYPE_NAMES[name]

def _lit_dtype(v: Any) -> DType: return dtypes.bool if isinstance(v, bool) else dtypes.float32 if isinstance(v, float) else dtypes.int32

def show(u: UOp, depth: int = 6) -> str:
  """A node as an --on expression would write it (dtypes left out)."""
  if u.op is Ops.DEFINE_VAR: return u.arg[0]
  if u.op is Ops.CONST: return repr(u.arg)
  if depth == 0: return f"({u.op.name} ...)"
  arg = f" [{u.arg!r}]" if u.arg is not None else ""
  return f"({u.op.name}{arg}" + "".join(" " + show(s, depth - 1) for s in u.src) + ")"

# ---- the pattern IR against a node ----

class NoMatch(Exception):
  """A test failed: the message says which, and where in the node."""

@dataclass
class Outcome:
  rule: Rule
  fired: bool
  why: str                                   # the failed test, or "FIRES -> result"
  result: Any = None

class Interpreter:
  """Runs one rule set's rules (from the IR) on one node, in rule order; `ns` is the generated module's namespace."""
  def __init__(self, ns: dict[str, Any], ctx: Any = None):
    self.ns = {**ns, **Ops.__members__, "ctx": ctx}
    self._root: UOp | None = None
    self.consts = Consts(hoist=False)  # results are evaluated here, in the module's namespace: no constants of its own
    for h in HELPERS.values(): exec(h, self.ns)  # noqa: S102 -- the emitter's own helpers, for results that use them

  def run(self, rules: list[Rule], u: UOp) -> list[Outcome]:
    """Each rule whose root ops include u's op, until (and with) the first that fires."""
    self._root = u
    out: list[Outcome] = []
    for r in rules:
      ops = root_ops(r)
      if ops is not None and u.op not in ops: continue
      out.append(self.try_rule(r, u))
      if out[-1].fired: break
    return out

  def try_rule(self, r: Rule, u: UOp) -> Outcome:
    # the rule's forms and their order as the emitter makes them: commutative orders unrolled, or (where that is shorter)
    # tried in a loop nested as the generated code nests it (see matches)
    forms = variants(r.pattern, swap_free=not is_unconditional(r) or has_repeated_names(r.pattern), loops=loops_pay(r, self.consts))
    reasons: list[str] = []
    for v in forms:
      if v.ops is not None and u.op not in v.ops: continue
      fails: list[str] = []
      for env in self.matches(v, u, fails):
        try:
          for g in r.guards:
            value = self.eval(self.consts.op_aliases(g.text), env)
            if g.binds is not None:
              # `d := f(x)`: bound for the guards after it and the result; None means the rule does not fire
              if value is None: raise NoMatch(f"`{g.binds} := {g.text}` is None")
              env[g.binds] = value
            elif not value: raise NoMatch(f"guard `{g.text}` is false")
          result = self.result(r, v, env)
        except NoMatch as e:
          fails.append(str(e))
          continue
        except Exception as e:  # noqa: BLE001 -- a guard, helper or result raised: say so, as a reason
          fails.append(f"raised {type(e).__name__}: {e}")
          continue
        return Outcome(r, True, f"FIRES -> {_shown(result)}", result)
      reasons += [x for x in fails if x not in reasons]
    if not reasons: reasons = [f"no form of the pattern has root op {u.op.name}"]
    return Outcome(r, False, reasons[0] if len(reasons) == 1 else " | ".join(f"order {i + 1}: {x}" for i, x in enumerate(reasons)))

  def eval(self, text: str, env: dict[str, Any]) -> Any:
    # the captures as globals beside the module's names: a comprehension in the text (a sequence, a guard's any(...)) runs in
    # a scope of its own, which sees globals but not the locals of eval
    return eval(text, {**self.ns, **env})  # noqa: S307 -- a guard or result of the .rules file, as the generated module runs it

  def matches(self, v: Pat, u: UOp, fails: list[str]) -> Iterator[dict[str, Any]]:
    """Every way the form v matches at u, in the order the generated code tries them: nodes level by level (as the
    emitter's steps), and a commutative node kept whole (`any_order`) tries its two orders there, nesting what follows."""
    def go(queue: list[tuple[Pat, UOp, str]], env: dict[str, Any]) -> Iterator[dict[str, Any]]:
      if not queue:
        yield env
        return
      (p, n, where), later = queue[0], queue[1:]
      env = dict(env)
      try: self.test(p, n, env, where)
      except NoMatch as e:
        fails.append(str(e))
        return
      src = p.src or ()
      def child(i: int, j: int) -> tuple[Pat, UOp, str]:
        return (src[i], n.src[j], f"source {j} of {where}" if where != "the node" else f"source {j}")
      if p.any_order and len(src) == 2 and p.rest is None:
        for order in ((0, 1), (1, 0)):
          if where == "the node": env["_perm"] = order
          yield from go(later + [child(i, order[i]) for i in range(2)], env)
        return
      yield from go(later + [child(i, i) for i in range(len(src))], env)
    yield from go([(v, u, "the node")], {"_perm": v.perm})

  def test(self, p: Pat, u: UOp, env: dict[str, Any], where: str) -> None:
    """The tests of one node (not its sources) and the names it binds (splices and repeated sources included)."""
    if p.opvar is not None and p.opvar in env:
      if u.op is not env[p.opvar]: raise NoMatch(f"{where} is {u.op.name}, not {env[p.opvar].name} (the op of {p.opvar})")
    elif p.ops is not None and u.op not in p.ops: raise NoMatch(f"{where} is {u.op.name}, not {_ops(p.ops)}")
    if p.dtypes is not None or p.dtype_classes is not None:
      ok = (p.dtypes is not None and u.dtype in p.dtypes) or \
           (p.dtype_classes is not None and any(u.dtype.scalar in DTYPE_CLASSES[k] for k in p.dtype_classes))
      if not ok:
        want = sorted(p.dtype_classes or ()) + sorted(dtype_name(d) for d in p.dtypes or ())
        raise NoMatch(f"{where} has dtype {_dt(u.dtype)}, not {'|'.join(want)}")
    if p.has_arg_eq and not (u.arg is p.arg_eq if p.arg_eq is None or isinstance(p.arg_eq, bool) else u.arg == p.arg_eq):
      raise NoMatch(f"{where} is {show(u, 1)}, not {p.arg_eq!r}" if u.op is Ops.CONST else f"the arg of {where} is {u.arg!r}, not {p.arg_eq!r}")
    if p.arg_name is not None and p.arg_name in env and u.arg != env[p.arg_name]:
      raise NoMatch(f"the arg of {where} is {u.arg!r}, not {env[p.arg_name]!r} (bound to {p.arg_name})")
    if p.arg_expr is not None and u.arg != (want := self.eval(self.consts.op_aliases(p.arg_expr.text), env)):
      raise NoMatch(f"the arg of {where} is {u.arg!r}, not {p.arg_expr.text} = {want!r}")
    src = p.src or ()
    if p.src is not None and p.rest is None and len(u.src) != len(src):
      raise NoMatch(f"{where} has {len(u.src)} sources, not {len(src)}")
    if p.rest is not None and len(u.src) < len(src): raise NoMatch(f"{where} has {len(u.src)} sources, not {len(src)} or more")
    if p.name is not None and p.name in env and u is not env[p.name]:
      raise NoMatch(f"{where} is {show(u, 2)}, not the node bound to {p.name}, {show(env[p.name], 2)}")
    if p.opvar is not None: env.setdefault(p.opvar, u.op)
    if p.arg_name is not None: env.setdefault(p.arg_name, u.arg)
    if p.name is not None: env.setdefault(p.name, u)
    if p.splice is not None: env[p.splice] = u.src[len(src):]
    if p.rest is not None and not (p.rest.is_wildcard() and p.rest.name is None): self.rest(p.rest, u.src[len(src):], env, where)

  def node(self, p: Pat, u: UOp, env: dict[str, Any], where: str) -> None:
    """Match a pattern at u depth first, its first form that matches (as a repeated pattern's function does); NoMatch says why."""
    if p.alternatives is not None or p.any_order:
      fails = []
      for a in variants(p, swap_free=True):
        trial = dict(env)
        try: self.node(a, u, trial, where)
        except NoMatch as e:
          fails.append(str(e))
          continue
        env.update(trial)
        return
      raise NoMatch(" and ".join(fails))
    self.test(p, u, env, where)
    for i, s in enumerate(p.src or ()): self.node(s, u.src[i], env, f"source {i} of {where}")

  def rest(self, p: Pat, srcs: tuple[UOp, ...], env: dict[str, Any], where: str) -> None:
    # every source after those written matches p, each with the same captures (zero sources: the captures are None)
    names = sorted(p.names())
    first = None
    for i, s in enumerate(srcs):
      trial: dict[str, Any] = {}
      self.node(p, s, trial, f"a repeated source of {where}")
      got = tuple(trial.get(n) for n in names)
      if first is None: first = got
      elif got != first: raise NoMatch(f"the repeated sources of {where} bind {', '.join(names)} differently")
    env.update(zip(names, first if first is not None else (None,) * len(names)))

  def result(self, r: Rule, v: Pat, env: dict[str, Any]) -> Any:
    """The rule's result, as the generated code builds it (the emitter's expression text); NoMatch when it declines."""
    plain = {x for q in v.walk() for x in (q.opvar, q.arg_name, q.splice) if x}
    maybe_none = set().union(*(q.rest.names() for q in v.walk(rest=False) if q.rest is not None))
    perm = env.pop("_perm", None)
    rb = ResultBuilder(self.consts, r, plain, maybe_none, perm)
    env = {**env, ROOT: self._root}
    if isinstance(r.result, CallResult):
      for name in r.result.params: env.setdefault(name, None)
      env[self.consts.fn_name(r.result.fn)] = r.result.fn
    # the `where` lines as the emitter writes them: `name = value`, and `if name is not None:` after a value that may decline
    for line in rb.bindings():
      stripped = line.strip()
      if stripped.startswith("if ") and stripped.endswith(" is not None:"):
        if env.get(stripped[3:-len(" is not None:")]) is None: raise NoMatch("a `where` value is None: the rule declines")
        continue
      name, _, value = stripped.partition(" = ")
      env[name] = self.eval(self.consts.op_aliases(value), env)
    text, conditional = rb.top()
    out = self.eval(self.consts.op_aliases(text), env)
    if conditional:
      if out is None: raise NoMatch("its result is None: the rule declines")
      if r.returns == "per-source": out = self.ns["_per_source"](out, self._root, _FakeRule(r))
      elif out.__class__ in (int, float, bool): out = UOp.const(self._root.dtype, out)
    return out

class _FakeRule:
  # what _per_source reads of a runtime Rule, for its message
  def __init__(self, r: Rule): self.origin, self.text = f"{r.span.file}:{r.span.line}", r.text

def _shown(x: Any) -> str:
  # a node, a tuple of them (`_` for no value, as a per-source result is written), or a renderer's string
  if isinstance(x, UOp): return show(x)
  if isinstance(x, tuple): return "(" + " ".join("_" if e is None else _shown(e) for e in x) + ")"
  return repr(x)

def _dt(d: DType) -> str:
  try: return dtype_name(d)
  except StopIteration: return str(d)  # a pointer or vector dtype

def _ops(ops: frozenset[Ops]) -> str:
  names = sorted(o.name for o in ops)
  return "|".join(names) if len(names) <= 4 else f"one of {len(names)} ops ({', '.join(names[:4])}, ...)"

# ---- the command ----

def module_namespace(rf: RuleFile, code: str) -> dict[str, Any]:
  """The generated module of rf, run in a fresh namespace (so explain reads the .rules file as it is now, built or not)."""
  from dslc.compile import exec_module
  return exec_module(code, f"<{rf.path} as built now>", {"__name__": "dslc_explain_" + re.sub(r"\W", "_", rf.path)})

def explain_on(rf: RuleFile, ns: dict[str, Any], u: UOp, ruleset: str | None = None, ctx: Any = None) -> list[str]:
  """The lines `explain --on` prints: per rule set, each rule tried on u and what happened."""
  out = [f"node: {show(u)}  dtype {_dt(u.dtype)}"]
  interp = Interpreter(ns, ctx)
  for rs in rf.rulesets:
    if rs.compose is not None or (ruleset is not None and rs.name != ruleset): continue
    if rs.caps:
      out.append(f"ruleset {rs.name}: takes parameters ({', '.join(rs.caps)}): not tried")
      continue
    outcomes = interp.run(rs.rules, u)
    fired = next((o for o in outcomes if o.fired), None)
    out.append(f"ruleset {rs.name}: {len(outcomes)} rule{'s' if len(outcomes) != 1 else ''} for {u.op.name}"
               + (f", rule {fired.rule.id} fires" if fired else ", none fires"))
    for o in outcomes: out += [f"  {o.rule.span.file}:{o.rule.span.line:<4} {o.rule.text}", f"      {o.why}"]
  return out

def fired_rule(rf: RuleFile, ns: dict[str, Any], ruleset: str, u: UOp, ctx: Any = None) -> Outcome | None:
  """The outcome of the rule that fires on u in one rule set (None: none does), as explain finds it."""
  rs = next(x for x in rf.rulesets if x.name == ruleset)
  return next((o for o in Interpreter(ns, ctx).run(rs.rules, u) if o.fired), None)

