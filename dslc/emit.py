"""The emitter: rule IR -> Python source of a matcher module, last phase of dslc.

Per rule set, one function per root op tries that op's rules in file order. The function opens with what every rule of it
may use (its node's sources, when the op has a fixed number), then each rule's code in one block, under a comment with its
`file:line` and its whole text (`# match:`, `# cond:`, `# result:`), as Go's generated rewrite rules do. A block uses only
the opening's names and its own, so the block alone is the rule alone: runtime/rule_alone.py cuts a dispatch function down
to one rule for RULESTATS, explain and tests, with no second copy of the rule in the module. Commutative sources become
explicit orders, or a loop over both.
"""
from __future__ import annotations
import dataclasses, itertools, re
from dataclasses import dataclass, field
from typing import Any
from runtime.dtype import DTYPE_NAMES, DType
from runtime.ops import ARITY, Ops
from dslc.ir import CallResult, Pat, Rule, RuleFile, RuleSet, TupleResult, has_repeated_names, is_unconditional, root_ops
from dslc.lang import BUILTINS, DTYPE_CLASSES, GROUPS, PRELUDE_NAMES
from dslc.shadow import pattern_key
from dslc.stamp import import_digest, source_digest
from dslc.emit_result import HELPERS, RAISING, ROOT, ResultBuilder, _result_names

MAX_COLS = 150
_STATIC_DTYPE = re.compile(r"dtypes\.[a-z][a-z0-9_]*")
_LITERAL = re.compile(r"-?(\d+|\d*\.\d+(e[-+]?\d+)?|\d+e[-+]?\d+|inf|nan)|True|False")
_OPS_REF = re.compile(r"(?<![\w.])Ops\.([A-Z][A-Z0-9_]*)\b")
_ASSIGN = re.compile(r"\s*(?:if \()?([A-Za-z_]\w*) :?= ")
_ALIAS = re.compile(r"([a-z]\w*) = (_u[_0-9]*)")   # a capture bound to the variable holding its node


@dataclass(eq=False)
class Step:
  kind: str       # "test", "bind", or "loop" (the text names two sources: what follows runs for each order of them)
  text: str
  def key(self) -> tuple:
    # a loop is never shared with another rule's: one rule's orders both run before the next rule's (first-match order)
    return (self.kind, self.text) if self.kind != "loop" else (self.kind, self.text, id(self))

@dataclass
class Alt:
  """One way a rule can match: its steps, then its result lines."""
  rule: Rule
  steps: list[Step]
  result: list[str]
  loop_var: str = "_"   # the variable of its loops over source orders (`_k` when the result depends on the order)

@dataclass
class Consts:
  """Module-level names the generated code uses: op aliases, op and dtype sets, rest-pattern functions."""
  ops: set[Ops] = field(default_factory=set)
  sets: dict[frozenset, str] = field(default_factory=dict)
  dts: dict[DType, str] = field(default_factory=dict)
  rest_fns: list[str] = field(default_factory=list)
  rest_names: dict[str, str] = field(default_factory=dict)
  n_rest: int = 0
  fns: dict[Any, str] = field(default_factory=dict)
  helpers: set[str] = field(default_factory=set)   # module-level helper functions the code uses (HELPERS)
  loops: bool = False                               # some rule tries two source orders in a loop (_ORDERS)
  loop_choice: dict[str, bool] = field(default_factory=dict)  # rule id -> whether it tries its orders in loops
  literals: dict[tuple[str, str], str] = field(default_factory=dict)  # (dtype text, value text) -> a module constant's name
  hoist: bool = True                                # make those module constants (explain, which evaluates results, does not)

  def const(self, dt: str, value: str) -> str:
    """A constant of a literal value: made once at import as a module global when its dtype is written (`dtypes.bool`),
    else built where it is needed, as UOp.const builds it."""
    if not (self.hoist and _STATIC_DTYPE.fullmatch(dt) and _LITERAL.fullmatch(value)): return f"_const({dt}, {value})"
    if (dt, value) not in self.literals: self.literals[(dt, value)] = f"_K{len(self.literals)}"
    return self.literals[(dt, value)]

  def op(self, o: Ops) -> str:
    self.ops.add(o)
    return o.name
  def op_aliases(self, text: str) -> str:
    """Python text with each `Ops.X` read through the module's alias X (a global load instead of a lookup on Ops)."""
    def alias(m: re.Match) -> str: return self.op(Ops[m.group(1)]) if m.group(1) in Ops.__members__ else m.group(0)
    return _OPS_REF.sub(alias, text)
  def opset(self, s: frozenset[Ops]) -> str:
    if s not in self.sets:
      group = next((k for k, v in GROUPS.items() if v == s), None)
      self.sets[s] = f"G_{group}" if group else f"OPS_{len(self.sets)}"
    return self.sets[s]
  def dtype(self, d: DType) -> str:
    if d not in self.dts: self.dts[d] = "DT_" + _dtype_name(d)
    return self.dts[d]
  def dtset(self, s: frozenset) -> str:
    if s not in self.sets: self.sets[s] = f"DTS_{len(self.sets)}"
    return self.sets[s]
  def fn_name(self, f: Any) -> str:
    """The module-level name of a Python function a UPat rule calls (the exec'd module gets them under these names)."""
    return self.fns.get(f, "f")
  def rest_function(self, p: Pat, names: list[str]) -> str:
    """The name of a module-level function matching one repeated pattern `p...` (returns its captures or None)."""
    key = pattern_key(p)
    if key in self.rest_names: return self.rest_names[key]
    name = self.rest_names[key] = f"_rest_{self.n_rest}"
    self.n_rest += 1
    alts = []
    # every concrete form: alternatives, and both orders of a commutative node
    for v in variants(p, True):
      sb = StepBuilder(self, root_dispatched=False)
      sb.build(v)
      alts.append(Alt(None, sb.steps, [f"return ({''.join(sb.node_vars.get(x, x) + ', ' for x in names)})"]))  # type: ignore[arg-type]
    body = Block()
    emit_alts(alts, body, 1)
    self.rest_fns.append(f"def {name}({ROOT}):\n" + body.text() + _final_return(body))
    return name

def _dtype_name(d: DType) -> str:
  return next(k for k, v in DTYPE_NAMES.items() if v is d and k not in ("default_float", "default_int", "index"))

# ---- patterns -> steps ----

class StepBuilder:
  """The steps that match one concrete pattern (no alternatives, no any-order) at ROOT, in breadth-first order."""
  def __init__(self, consts: Consts, root_dispatched: bool, root_op: Ops | None = None):
    # root_op: the op the dispatch function is for (None: several, or any)
    self.c, self.root_dispatched, self.root_op = consts, root_dispatched, root_op
    self.steps: list[Step] = []
    self.node_vars: dict[str, str] = {}     # capture name -> variable holding the node
    self.bound_at: dict[str, int] = {}      # a name usable after this many steps
    self.plain: set[str] = set()            # names bound by a step directly (opvars, args, rest captures)
    self.rest_names: set[str] = set()       # captures of a repeated pattern: None when it repeats zero times
    self.splices: set[str] = set()          # `rest*` names: a tuple of sources
    self.deferred: list[tuple[str, str]] = []  # their bindings, made after the structural tests

  def test(self, text: str) -> None: self.steps.append(Step("test", text))
  def bind(self, text: str, *names: str) -> None:
    self.steps.append(Step("bind", text))
    for n in names:
      self.bound_at[n] = len(self.steps)
      self.plain.add(n)

  def build(self, pat: Pat) -> None:
    # level by level: the tests of every node of a level, then their sources unpacked (so siblings' cheap tests come first).
    # Within a level, the op tests first, then the arg tests: the cheapest and the likeliest to fail (a dtype class test,
    # `x:ints`, almost never fails on index math), so a node no rule can match is rejected after one or two loads
    level: list[tuple[Pat, str, bool]] = [(pat, ROOT, True)]
    while level:
      for p, v, is_root in level:
        if p.ops is not None and not (is_root and self.root_dispatched) and not (p.opvar is not None and p.opvar in self.bound_at):
          self.test(f"{v}.op is {self.c.op(next(iter(p.ops)))}" if len(p.ops) == 1 else f"{v}.op in {self.c.opset(p.ops)}")
      for p, v, _ in level:
        if p.has_arg_eq: self.test(f"{v}.arg {'is' if p.arg_eq is None or p.arg_eq is True or p.arg_eq is False else '=='} {p.arg_eq!r}")
        if p.arg_expr is not None: self.test(f"{v}.arg == {p.arg_expr.text}")
      tested = [self.node(p, v, is_root) for p, v, is_root in level]
      level = [child for p, v, n_written in tested for child in self.unpack(p, v, n_written)]
    for text, name in self.deferred: self.bind(text, name)

  def node(self, p: Pat, v: str, is_root: bool) -> tuple[Pat, str, int]:
    """The tests of one node (after its op and arg tests: build) and the names it binds itself (its op, arg, name); returns
    what unpack needs."""
    c = self.c
    n_written = len(p.src or ())
    # tests: the op variable, the dtype, the arg bound before, the number of sources
    if p.opvar is not None and p.opvar in self.bound_at: self.test(f"{v}.op is {p.opvar}")
    tests = []
    if p.dtypes is not None:
      tests.append(f"{v}.dtype is {c.dtype(next(iter(p.dtypes)))}" if len(p.dtypes) == 1 else f"{v}.dtype in {c.dtset(p.dtypes)}")
    if p.dtype_classes is not None:
      tests.append(f"{v}.dtype.scalar in {c.dtset(frozenset().union(*(DTYPE_CLASSES[k] for k in p.dtype_classes)))}")
    if tests: self.test(tests[0] if len(tests) == 1 else "(" + " or ".join(tests) + ")")
    if p.arg_name is not None and p.arg_name in self.bound_at: self.test(f"{v}.arg == {p.arg_name}")
    src = p.src or ()
    ops = frozenset({self.root_op}) if is_root and self.root_op is not None else p.ops
    arities = {ARITY.get(o) for o in ops} if ops is not None else {None}
    if p.rest is not None and len(arities) == 1 and (k := arities.pop()) is not None and len(variants(p.rest, True)) == 1:
      # a repeated pattern over a fixed number of sources: unrolled (a repeated name is the same node, as in match_all)
      if k < len(src): self.test("False")
      if k <= len(src):
        # zero repeats: the pattern's captures are None, as match_all gives them
        for name in sorted(p.rest.names()):
          self.bind(f"{name} = None", name)
          self.rest_names.add(name)
          self.plain.discard(name)
      src = src + (p.rest,) * max(k - len(src), 0)
      p = _with(p, src=src, rest=None, any_order=False, alternatives=None)
    n = len(src)
    has_src = p.src is not None or p.rest is not None
    if has_src:
      fixed = ops is not None and p.rest is None and all(ARITY.get(o) == n for o in ops)
      if p.rest is None and not fixed: self.test(f"len({v}.src) == {n}" if n else f"not {v}.src")
      if p.rest is not None and n: self.test(f"len({v}.src) >= {n}")
    if p.name is not None and p.name in self.node_vars: self.test(f"{v} is {self.node_vars[p.name]}")
    # bindings: the op variable, the arg, the node's name
    if p.opvar is not None and p.opvar not in self.bound_at: self.bind(f"{p.opvar} = {v}.op", p.opvar)
    if p.arg_name is not None and p.arg_name not in self.bound_at: self.bind(f"{p.arg_name} = {v}.arg", p.arg_name)
    if p.name is not None and p.name not in self.node_vars:
      self.node_vars[p.name] = v
      self.bound_at[p.name] = len(self.steps)
    return p, v, n_written

  def unpack(self, p: Pat, v: str, n_written: int) -> list[tuple[Pat, str, bool]]:
    """A tested node's sources: bound (`_u_0, _u_1 = _u.src`), spliced or matched by a repeated pattern; returns its children."""
    src = p.src or ()
    n = len(src)
    if (p.src is not None or p.rest is not None) and n:
      if p.rest is None: self.bind(", ".join(f"{v}_{i}" for i in range(n)) + ("," if n == 1 else "") + f" = {v}.src")
      else:
        for i in range(n): self.bind(f"{v}_{i} = {v}.src[{i}]")
    if p.splice is not None:
      # bound after every structural test (build): a node that fails one never pays for the slice
      self.deferred.append((f"{p.splice} = {v}.src[{n_written}:]" if n_written else f"{p.splice} = {v}.src", p.splice))
      self.splices.add(p.splice)
    # an any-order node (variants keeps one only when its two orders differ): what follows runs for each order
    if p.any_order and n == 2 and p.rest is None:
      self.steps.append(Step("loop", f"{v}_0, {v}_1"))
      self.c.loops = True
    if p.rest is not None and not (p.rest.is_wildcard() and p.rest.name is None): self.rest(p.rest, v, n)
    return [(s, f"{v}_{i}", False) for i, s in enumerate(src)]

  def rest(self, p: Pat, v: str, n: int) -> None:
    names = sorted(p.names())
    fn = self.c.rest_function(p, names)
    m = f"{v}_rest"
    srcs = f"{v}.src[{n}:]" if n else f"{v}.src"
    self.bind(f"{m} = match_all({fn}, {srcs}, {len(names)})")
    self.test(f"{m} is not None")
    if names: self.bind(", ".join(names) + ("," if len(names) == 1 else "") + f" = {m}", *names)
    self.rest_names |= set(names)
    self.plain -= self.rest_names


def variants(p: Pat, swap_free: bool, loops: bool = False) -> list[Pat]:
  """Every concrete form of p: alternatives expanded, any-order sources as each distinct order.
  swap_free=False drops the second order where both sources are bare unconstrained captures (it can't matter).
  loops=True keeps a two-source node whose orders differ any-order (the emitter tries both orders in a loop)."""
  if p.alternatives is not None:
    out = []
    for a in p.alternatives:
      for v in variants(a, swap_free, loops):
        if p.name is not None and v.name is None: v.name = p.name
        out.append(v)
    return out
  if p.src is None: src_variants: list[tuple[Pat, ...]] = [()]
  else:
    per_src = [variants(s, swap_free, loops) for s in p.src]
    src_variants = [tuple(c) for c in itertools.product(*per_src)]
  # a repeated pattern stays whole: each source picks its own alternative and order (match_all tries every form per source)
  rest_variants = [p.rest]
  out = []
  for sv in src_variants:
    # each order is a permutation of the written sources: perm[i] is the node's source the written source i matches
    orders: list[tuple[int, ...]] = [tuple(range(len(sv)))]
    if p.any_order and p.src is not None and len(sv) >= 2:
      orders = list(itertools.permutations(range(len(sv))))
      if not swap_free and len(sv) == 2 and all(_is_free(s) for s in sv): orders = orders[:1]
      # (ADD x:ints x): both sources are the one node x, so the other order tests the same things
      if len(sv) == 2 and all(_is_capture(s) for s in sv) and sv[0].name == sv[1].name: orders = orders[:1]
      uniq, seen = [], set()
      for o in orders:
        # an unconditional rule fires on the first order that matches: orders differing only in names add nothing
        k = tuple(pattern_key(sv[i], names=swap_free) for i in o)
        if k in seen: continue
        seen.add(k)
        uniq.append(o)
      orders = uniq
      if loops and len(orders) == 2 and len(sv) == 2:
        # both orders in one block: a loop over them in the generated code
        for rv in rest_variants: out.append(_with(p, src=sv, rest=rv, any_order=True, alternatives=None, perm=(0, 1)))
        continue
    for o in orders:
      for rv in rest_variants:
        q = _with(p, src=tuple(sv[i] for i in o) if p.src is not None else None, rest=rv, any_order=False, alternatives=None,
                                perm=tuple(o.index(i) for i in range(len(o))))
        out.append(q)
  return out

def _with(p: Pat, **fields) -> Pat:
  """A copy of p with some fields changed (dataclasses.replace runs __init__: this is several times faster, and variants
  makes many copies)."""
  q = object.__new__(Pat)
  q.__dict__.update(p.__dict__, **fields)
  return q

def _is_capture(p: Pat) -> bool:
  """A name, maybe with a dtype, and nothing else: `x`, `x:ints`."""
  return p.name is not None and _is_free(_with(p, name=None, dtypes=None, dtype_classes=None))

def _is_free(p: Pat) -> bool:
  return p.is_wildcard() and p.alternatives is None

# ---- code blocks and the decision tree ----

class Block:
  def __init__(self): self.lines: list[str] = []
  def add(self, depth: int, line: str) -> None: self.lines.extend(_wrap("  " * depth, line))
  def text(self) -> str: return "".join(x + "\n" for x in self.lines)

def _wrap(indent: str, line: str) -> list[str]:
  full = indent + line
  if len(full) <= MAX_COLS: return [full]
  if line.startswith("# "):  # a long comment: cut into words, the lines after the first indented under its text
    head = re.match(r"# (?:\w+: +)?", line)[0]  # type: ignore[index]
    out, cur = [], indent + line[:len(head) - 1]
    for w in line[len(head):].split(" "):
      if len(cur) + 1 + len(w) > MAX_COLS and cur.strip() != head.strip(): out.append(cur); cur = indent + "#" + " " * (len(head) - 1) + w  # noqa: E702
      else: cur += " " + w
    return out + [cur]
  if line.startswith("if ") and line.endswith(":") and " and " in line:  # a long condition: one test per line
    parts = line[3:-1].split(" and ")
    return [indent + "if (" + parts[0]] + [indent + "    and " + p for p in parts[1:-1]] + [indent + "    and " + parts[-1] + "):"]
  return [full]

def emit_alts(alts: list[Alt], out: Block, depth: int, done: dict[str, str] | None = None) -> set[str]:
  """Emit alternatives in order (the orders and alternatives of one rule); consecutive ones that start with the same step share it.
  `done` maps each variable assigned earlier at this depth to its assignment, so an alternative skips a repeat of it.
  Returns the names assigned here or in nested blocks: Python variables are function-wide, so after a nested block
  the caller can no longer trust what it knew of them."""
  done = {} if done is None else done
  assigned: set[str] = set()
  i = 0
  while i < len(alts):
    a = alts[i]
    while a.steps and a.steps[0].kind == "bind" and _already(a.steps[0].text, done): a.steps.pop(0)
    if not a.steps:
      for line in a.result:
        out.add(depth, line)
        # `_r = ...` and `where` names: later alternatives can't trust what they knew of these variables
        if (m := _ASSIGN.match(line)) is not None:
          assigned.add(m[1])
          done.pop(m[1], None)
      i += 1
      continue
    first = a.steps[0].key()
    j = i + 1
    while j < len(alts) and alts[j].steps and alts[j].steps[0].key() == first: j += 1
    group = alts[i:j]
    kind, text = first[0], first[1]
    if kind == "loop":
      # each order of two sources in turn: swapped at the end of the first pass, swapped back at the end of the second
      x, y = text.split(", ")
      out.add(depth, f"for {a.loop_var if x == ROOT + '_0' else '_'} in _ORDERS:")
      a.steps.pop(0)
      # what was bound from x or y (or their sources) before the loop is not what they hold in the second pass
      inside = {k: v for k, v in done.items() if not _mentions(v, (x, y))}
      inner = emit_alts([a], out, depth + 1, inside)
      out.add(depth + 1, f"{x}, {y} = {y}, {x}")
      for name in inner: done.pop(name, None)
      assigned |= inner
    elif kind == "test":
      if len(group) == 1:
        # a path only this alternative takes: its consecutive tests become one condition
        tests = []
        while a.steps and a.steps[0].kind == "test": tests.append(a.steps.pop(0).text)
        if (line := _one_line(tests, a, done, depth)) is not None:
          # and when nothing follows but captures and a return: one line, `if TESTS: x = _u_0; return (r1, x)`
          out.add(depth, line)
          assigned |= {_ALIAS.fullmatch(st.text)[1] for st in a.steps}  # type: ignore[index]
          i = j
          continue
        out.add(depth, f"if {' and '.join(tests)}:")
      else:
        out.add(depth, f"if {text}:")
        for g in group: g.steps = g.steps[1:]
      inner = emit_alts(group, out, depth + 1, dict(done))
      for name in inner: done.pop(name, None)
      assigned |= inner
    elif len(group) == 1 and _ALIAS.fullmatch(text):
      # captures named on a path only this alternative takes: one line, `c, x = _u_1, _u_0_0`
      run = []
      while a.steps and a.steps[0].kind == "bind" and _ALIAS.fullmatch(a.steps[0].text):
        stmt = a.steps.pop(0).text
        if not _already(stmt, done): run.append(stmt)
      pairs = [stmt.split(" = ") for stmt in run]
      out.add(depth, f"{', '.join(n for n, _ in pairs)} = {', '.join(v for _, v in pairs)}")
      for stmt, (name, _) in zip(run, pairs): done[name] = stmt
      assigned |= {name for name, _ in pairs}
      assigned |= emit_alts(group, out, depth, done)
    else:
      out.add(depth, text)
      names = _assigned(text)
      for name in names: done[name] = text
      assigned |= set(names)
      for g in group: g.steps = g.steps[1:]
      assigned |= emit_alts(group, out, depth, done)
    i = j
  return assigned

def _one_line(tests: list[str], a: Alt, done: dict[str, str], depth: int) -> str | None:
  """`if TESTS: c, x = _u_1, _u_0; return (...)` when the rest of an alternative is captures and one return, and it fits."""
  if len(a.result) != 1 or not a.result[0].startswith("return ") or any(not _ALIAS.fullmatch(st.text) for st in a.steps): return None
  pairs = [st.text.split(" = ") for st in a.steps if not _already(st.text, done)]
  binds = f"{', '.join(n for n, _ in pairs)} = {', '.join(v for _, v in pairs)}; " if pairs else ""
  line = f"if {' and '.join(tests)}: {binds}{a.result[0]}"
  return line if len(line) + 2 * depth <= MAX_COLS else None

def _mentions(stmt: str, names: tuple[str, ...]) -> bool:
  """Whether a statement reads one of the variables `names` or a source bound from them (`_u_0` -> `_u_0_1`, ...)."""
  return re.search(r"\b(?:" + "|".join(map(re.escape, names)) + r")(?:_\d+)*\b", stmt) is not None

def _assigned(stmt: str) -> list[str]: return [n.strip() for n in stmt.split(" = ", 1)[0].split(",") if n.strip()]
def _already(stmt: str, done: dict[str, str]) -> bool: return all(done.get(n) == stmt for n in _assigned(stmt))

def rule_header(rule: Rule) -> list[str]:
  """The comment lines above a rule's code: its id and `file:line` (runtime/rule_alone.py finds a rule's block by this line),
  then its whole text, one line per part (`# match:`, `# cond:`, `# result:`, `# where:`)."""
  parts = rule_parts(rule.text) + ([("priority", str(rule.priority))] if rule.priority else [])
  return [f"# rule {rule.id}, {rule.span.file}:{rule.span.line}"] + [f"# {k}: {' ' * max(6 - len(k), 0)}{v}" for k, v in parts]

def rule_parts(text: str) -> list[tuple[str, str]]:
  """A rule's one-line text cut where its pattern, guard, result and `where` bindings meet (outside brackets and strings)."""
  cuts: list[tuple[int, str, int]] = []   # (where the part starts, its name, the length of the word that opens it)
  depth, quote, arrow = 0, "", False
  for i, ch in enumerate(text):
    if quote:
      if ch == quote: quote = ""
    elif ch in "\"'": quote = ch
    elif ch in "([{": depth += 1
    elif ch in ")]}": depth -= 1
    elif depth == 0 and not arrow and text.startswith(" if ", i) and not cuts: cuts.append((i + 1, "cond", 3))
    elif depth == 0 and not arrow and text.startswith(" -> ", i):
      cuts.append((i + 1, "result", 3))
      arrow = True
    elif depth == 0 and arrow and text.startswith(" where ", i): cuts.append((i + 1, "where", 6))
  if not arrow: return [("rule", text)]
  bounds = [(0, "match", 0)] + cuts + [(len(text), "", 0)]
  return [(name, text[start + skip:end].strip()) for (start, name, skip), (end, _, _) in zip(bounds, bounds[1:])]

# ---- rules -> alternatives ----

def loops_pay(rule: Rule, consts: Consts) -> bool:
  """Whether a rule's commutative nodes try their two orders in a loop: when that is shorter than a copy per order (a
  small rule's two copies, `(ADD x 0)` and `(ADD 0 x)`, are shorter than a loop and cost nothing to try)."""
  if rule.id not in consts.loop_choice:
    sizes = []
    for loops in (False, True):
      body = Block()
      emit_alts(rule_alts(rule, Consts(), dispatched=True, loops=loops), body, 1)
      sizes.append(len(body.lines))
    consts.loop_choice[rule.id] = sizes[1] < sizes[0]
  return consts.loop_choice[rule.id]

def rule_alts(rule: Rule, consts: Consts, dispatched: Ops | bool | None, loops: bool | None = None) -> list[Alt]:
  """dispatched: the op the calling function is for (its root op test is skipped), True for "one of the rule's root ops",
  None when the function must test the root op itself. loops: try commutative orders in a loop (None: when that pays)."""
  if loops is None: loops = loops_pay(rule, consts)
  # a guard binding a name (`d := f(x)`) and every guard reading one run in the order written, after the structural tests
  bound = {g.binds for g in rule.guards if g.binds}
  ordered = [g for g in rule.guards if g.binds or g.names & bound]
  guards_cheap = sorted([g for g in rule.guards if g.cost <= 1 and g not in ordered], key=lambda g: g.cost)
  guards_dear = sorted([g for g in rule.guards if g.cost > 1 and g not in ordered], key=lambda g: g.cost) + ordered
  unconditional = is_unconditional(rule)
  out = []
  # orders that differ only in names fire alike, unless a name also appears elsewhere (then it is a constraint)
  for v in variants(rule.pattern, swap_free=not unconditional or has_repeated_names(rule.pattern), loops=loops):
    # a root alternative of other ops never matches in this op's function; one of several root ops tests its own
    if isinstance(dispatched, Ops) and v.ops is not None and dispatched not in v.ops: continue
    root_tested = dispatched is not None and not (dispatched is True and rule.pattern.alternatives is not None)
    sb = StepBuilder(consts, root_dispatched=root_tested, root_op=dispatched if isinstance(dispatched, Ops) else None)
    sb.build(v)
    steps = list(sb.steps)
    aliased: set[str] = set()
    def alias(names, at: list[Step]) -> None:
      for n in sorted(names):
        if n in sb.node_vars and n not in aliased and sb.node_vars[n] != n:
          at.append(Step("bind", f"{n} = {sb.node_vars[n]}"))
          aliased.add(n)
    # cheap guards go right after the steps that bind what they read; the others after every structural test
    placed: dict[int, list] = {}
    for g in guards_cheap:
      need = [sb.bound_at[n] for n in g.names if n in sb.bound_at]
      placed.setdefault(max(need, default=0), []).append(g)
    final: list[Step] = []
    for i in range(len(steps) + 1):
      for g in placed.get(i, []):
        alias(g.names, final)
        final.append(Step("test", _guard_text(consts.op_aliases(_binding_text(g)))))
      if i < len(steps): final.append(steps[i])
    for g in guards_dear:
      alias(g.names, final)
      final.append(Step("test", _guard_text(consts.op_aliases(_binding_text(g)))))
    rb = ResultBuilder(consts, rule, sb.plain, sb.rest_names, v.perm)
    text, conditional = rb.top()
    loop_var = "_"
    if v.any_order and isinstance(rule.result, TupleResult) and rule.result.comp is None:
      # entries follow the node's sources: in the loop's second pass (_k == 1) the written sources matched them swapped
      swapped, _ = ResultBuilder(consts, rule, sb.plain, sb.rest_names, (1, 0)).top()
      text, loop_var = f"({text} if not _k else {swapped})", "_k"
    text = consts.op_aliases(text)
    final = _with_pretests(final)
    where = [consts.op_aliases(line) for line in rb.bindings()]
    needed = set().union(_result_names(rule.result), *(_result_names(b.value) for b in rule.bindings)) - {b.name for b in rule.bindings}
    alias(needed | (set(rule.result.params) if isinstance(rule.result, CallResult) else set()), final)
    if isinstance(rule.result, CallResult):
      # an alternative (UPat.any) may bind only some of the function's captures: the others are None
      for name in rule.result.params:
        if name != "ctx" and name not in sb.node_vars and name not in sb.bound_at: final.append(Step("bind", f"{name} = None"))
    ret = lambda e: f"return ({rule.id}, {e})"  # noqa: E731
    if conditional and rule.returns == "per-source":
      # a helper's tuple: checked to have one entry per source when the rule fires
      consts.helpers |= {"_per_source", "_entry"}
      result = [f"if (_r := {text}) is not None: {ret(f'_per_source(_r, {ROOT}, {rule.id})')}"]
    elif conditional:
      # a Python number becomes a CONST of the root's dtype; a node (or a renderer's string) is the result as it is
      result = [f"if (_r := {text}) is not None: {ret(f'_const({ROOT}.dtype, _r) if _r.__class__ in _NUMBERS else _r')}"]
    else: result = [ret(text)]
    # the `where` lines first; after a {python} one that may be None, the rest nest under its `if`
    indent = where[-1][:len(where[-1]) - len(where[-1].lstrip())] + ("  " if where[-1].lstrip().startswith("if ") else "") if where else ""
    out.append(Alt(rule, final, where + [indent + line for line in result], loop_var=loop_var))
  return out

def _with_pretests(steps: list[Step]) -> list[Step]:
  """Before each loop over two source orders, the tests that open either pass, so a node that can't match in either
  order costs what two explicit copies would. When both passes open with the same tests, they move out of the loop."""
  out: list[Step] = []
  i = 0
  while i < len(steps):
    s = steps[i]
    if s.kind != "loop":
      out.append(s)
      i += 1
      continue
    j = i + 1
    while j < len(steps) and steps[j].kind == "test": j += 1
    first = [t.text for t in steps[i + 1:j]]
    x, y = s.text.split(", ")
    second = [_swap_names(t, x, y) for t in first]
    if first and sorted(first) == sorted(second):
      out += [Step("test", " and ".join(_guard_text(t) for t in first)), s]
      i = j
      continue
    if first:
      one, two = (" and ".join(_guard_text(t) for t in ts) for ts in (first, second))
      out.append(Step("test", f"({one}) or ({two})" if len(first) > 1 else f"{one} or {two}"))
    out.append(s)
    i += 1
  return out

def _swap_names(text: str, x: str, y: str) -> str:
  """A test with the variables x and y (and the sources bound from them) exchanged."""
  return re.sub(r"\b(" + re.escape(x) + "|" + re.escape(y) + r")((?:_\d+)*)\b", lambda m: (y if m[1] == x else x) + m[2], text)

def _binding_text(g) -> str:
  """A guard's Python test: `(d := f(x)) is not None` for a binding (the rule does not fire on None, as ISLE's if-let)."""
  return f"({g.binds} := {g.text}) is not None" if g.binds else g.text

def _guard_text(text: str) -> str:
  return f"({text})" if " or " in text and not text.startswith("(") else text

# ---- the module ----

def emit_ruleset(rs: RuleSet, consts: Consts, out: list[str]) -> dict[Ops | None, str]:
  """The dispatch functions of one rule set; returns op -> function name (None: the any-op function)."""
  by_op: dict[Ops | None, list[Rule]] = {}
  ops_of = {r.id: root_ops(r) for r in rs.rules}
  specific = sorted({o for ops in ops_of.values() if ops is not None for o in ops})
  for o in specific: by_op[o] = [r for r in rs.rules if ops_of[r.id] is None or o in ops_of[r.id]]  # type: ignore[operator]
  if any(ops is None for ops in ops_of.values()): by_op[None] = [r for r in rs.rules if ops_of[r.id] is None]
  names: dict[Ops | None, str] = {}
  bodies: dict[str, list[Ops | None]] = {}   # function body -> the ops it is for (ops whose rules compile alike share one)
  for o, rules in by_op.items():
    body = dispatch_body(rules, consts, o)
    bodies.setdefault(body.text() + _final_return(body), []).append(o)
  for text, ops in bodies.items():
    fname = f"{rs.name}_{ops[0].name if ops[0] is not None else 'any'}"
    for o in ops: names[o] = fname
    shared = f"  # also for {', '.join(o.name for o in ops[1:] if o is not None)}: their rules compile to the same code\n" if len(ops) > 1 else ""
    out.append(f"def {fname}({ROOT}: UOp, ctx):\n{shared}{text}")
  return names

def dispatch_body(rules: list[Rule], consts: Consts, op: Ops | None) -> Block:
  """The body of the function trying `rules` on a node of `op` (None: of any op), in order: an opening that binds what
  several rules read (the node's sources when the op has a fixed number of them, the names rules give the node or its op),
  then one block per rule under its header, reading only the opening's names and its own."""
  alts = [rule_alts(r, consts, dispatched=op if op is not None else True) for r in rules]
  body, done = Block(), {}
  n = ARITY.get(op) if op is not None else None
  unpack = ", ".join(f"{ROOT}_{i}" for i in range(n)) + ("," if n == 1 else "") + f" = {ROOT}.src" if n else None
  binds = [st.text for rule_alts_ in alts for a in rule_alts_ for st in a.steps if st.kind == "bind"]
  if unpack is not None and unpack in binds:
    body.add(1, unpack)
    done = {name: unpack for name in _assigned(unpack)}
  for stmt in _root_names(alts, binds):
    body.add(1, stmt)
    done[_assigned(stmt)[0]] = stmt
  for r, rule_alts_ in zip(rules, alts):
    if not rule_alts_: continue
    for line in rule_header(r): body.add(1, line)
    emit_alts(rule_alts_, body, 1, dict(done))
  return body

_ROOT_NAME = re.compile(rf"([a-z]\w*) = {ROOT}(\.op)?")

def _root_names(alts: list[list[Alt]], binds: list[str]) -> list[str]:
  """`u = _u`, `op = _u.op`: names several rules of a function give the node or its op, bound once at its top when no rule
  binds the name to anything else (the where lines, `_r` and the loop variables are the other assignments a block makes)."""
  counts: dict[str, int] = {}
  for stmt in binds:
    if _ROOT_NAME.fullmatch(stmt): counts[stmt] = counts.get(stmt, 0) + 1
  others = {name for stmt in binds if not _ROOT_NAME.fullmatch(stmt) for name in _assigned(stmt)}
  others |= {m[1] for rule_alts_ in alts for a in rule_alts_ for line in a.result if (m := _ASSIGN.match(line)) is not None}
  others |= {a.loop_var for rule_alts_ in alts for a in rule_alts_}
  others |= {n for rule_alts_ in alts for a in rule_alts_ for st in a.steps for n in re.findall(r"\b([A-Za-z_]\w*) :=", st.text)}
  texts: dict[str, set[str]] = {}
  for stmt in counts: texts.setdefault(_assigned(stmt)[0], set()).add(stmt)
  return sorted(stmt for stmt, k in counts.items() if k > 1 and len(texts[_assigned(stmt)[0]]) == 1 and _assigned(stmt)[0] not in others)

def rule_code(rule: Rule) -> str:
  """A rule's block as a dispatch function for its root ops holds it (the language server shows it)."""
  body = Block()
  for line in rule_header(rule): body.add(0, line)
  emit_alts(rule_alts(rule, Consts(), dispatched=True), body, 0)
  return body.text()

def _final_return(body: Block) -> str:
  # a function that falls off its end returns None: no line for it, unless the body is empty
  return "" if body.lines else "  return None\n"

def emit_module(rf: RuleFile, rel_path: str, fns: dict[Any, str] | None = None) -> str:
  """The Python source of the matcher module for one rule file (fns: Python callables of CallResults -> names)."""
  consts = Consts()
  consts.fns = fns or {}
  body: list[str] = []
  table: dict[str, dict[Ops | None, str]] = {}
  imported = {n for _, names, _ in rf.imports for n in names}
  by_name = {rs.name: rs for rs in rf.rulesets}
  for rs in rf.rulesets:
    if rs.compose is not None:
      # `ruleset a = b + c` of this file's sets: one dispatch over b's rules then c's (no chained calls at run time)
      if len(rs.compose) > 1 and (merged := _merged(rs, by_name)) is not None:
        body.append(f"# ---- ruleset {rs.name} = {' + '.join(rs.compose)}: their rules in one dispatch ----\n")
        table[rs.name] = emit_ruleset(merged, consts, body)
      continue
    body.append(f"# ---- ruleset {rs.name}{': ' + rs.doc.splitlines()[0] if rs.doc else ''} ----\n")
    if rs.caps: body.append(emit_instantiated(rs, consts, imported))
    else: table[rs.name] = emit_ruleset(rs, consts, body)
  digest = source_digest(rf.source)
  head = [f"# Code generated by build.py from {rel_path}. DO NOT EDIT.",
          f"# Regenerate with `python build.py`. Source sha256: {digest}",
          f'"""{_docstring(rf)}"""' if rf.header else f'"""Matchers compiled from {rel_path}."""',
          "# ruff: noqa: E501, F401, F841",
          "import functools, math" if any(rs.caps for rs in rf.rulesets) else "import math",
          "from runtime.dtype import dtypes",
          "from runtime.ops import Ops, GroupOp, exec_alu, cast_value",
          "from runtime.uop import UOp, uop, uop as _uop",
          "from runtime.rewrite import Matcher, Rule, match_all, as_src as _as_src" + (", RewriteError" if consts.helpers & RAISING else ""),
          *(["from rules import built_from as _built_from"] if rel_path.endswith(".rules") else []),
          *(f"from {module} import {', '.join(names)}" for module, names, _ in rf.imports),
          *([f"_built_from(globals().get('__file__'), {import_digest(rf.source)!r})  # the .rules file beside it is what it was built from"]
            if rel_path.endswith(".rules") else []),
          "_const = UOp.const",
          "_NUMBERS = (int, float, bool)",
          *(["_ORDERS = (0, 1)  # a loop over the two orders of a commutative node's sources"] if consts.loops else []),
          "inf, nan = math.inf, math.nan",
          ""]
  for name in sorted(consts.helpers): head.append(HELPERS[name].strip("\n") + "\n")
  if consts.ops:
    ops = sorted(consts.ops)
    head.append(", ".join(o.name for o in ops) + " = " + ", ".join(f"Ops.{o.name}" for o in ops))
  for s, name in consts.sets.items():
    if name.startswith("G_"): head.append(f"{name} = GroupOp.{name[2:]}")
    elif name.startswith("OPS_"): head.append(f"{name} = frozenset({{{', '.join(f'Ops.{o.name}' for o in sorted(s))}}})")
    else: head.append(f"{name} = frozenset({{{', '.join(f'dtypes.{_dtype_name(d)}' for d in sorted(s, key=_dtype_name))}}})")
  for d, name in sorted(consts.dts.items(), key=lambda x: x[1]): head.append(f"{name} = dtypes.{_dtype_name(d)}")
  if consts.literals: head.append("# constants of the results, made once")
  for (dt, value), name in consts.literals.items(): head.append(f"{name} = _const({dt}, {value})")
  head.append("")
  parts = ["\n".join(head), *consts.rest_fns, *body]
  # the rule table last, so editing a .rules comment moves only line numbers here
  rules_tbl = ["# ---- rule table: id, file, line, text, root ops ----"]
  rules_tbl += [_rule_entry(r) for rs in rf.rulesets if not rs.caps for r in rs.rules]
  parts.append("\n".join(rules_tbl) + "\n")
  tail = []
  for rs in rf.rulesets:
    if rs.compose is not None and rs.name in table:
      tail.append(f"{rs.name} = {_matcher(_merged(rs, by_name), table[rs.name])}")  # type: ignore[arg-type]
      continue
    if rs.compose is not None:
      if not rs.caps: tail.append(f"{rs.name} = " + " + ".join(rs.compose))
      else:
        # parts with parameters are instantiated with the composed set's own
        terms = [f"{p}({', '.join(by_name[p].caps)})" if p in by_name and by_name[p].caps else p for p in rs.compose]
        tail.append(f"@functools.cache\ndef {rs.name}({', '.join(rs.caps)}) -> Matcher: return {' + '.join(terms)}")
      continue
    if not rs.caps: tail.append(f"{rs.name} = {_matcher(rs, table[rs.name])}")
  parts.append("\n".join(tail) + "\n")
  return "\n\n".join(p.rstrip("\n") for p in parts) + "\n"

def _merged(rs: RuleSet, by_name: dict[str, RuleSet]) -> RuleSet | None:
  """A composed set as one set of its parts' rules in order, when every part is a plain set of this file (or is composed
  of such); None when a part is imported or takes parameters (then the Matchers are added at import time)."""
  if rs.caps: return None
  rules: list[Rule] = []
  for name in rs.compose or ():
    part = by_name.get(name)
    if part is None or part.caps: return None
    if part.compose is not None:
      if (inner := _merged(part, by_name)) is None: return None
      part = inner
    # a rule met again (`b + a` where b holds a) is left out: where its first copy did not fire, it can't either
    rules += [r for r in part.rules if all(r is not q for q in rules)]
  first = by_name[rs.compose[0]] if rs.compose else rs
  return dataclasses.replace(rs, rules=rules, compose=None, returns=first.returns, params=first.params)

def _rule_entry(r: Rule) -> str:
  ops = root_ops(r)
  ops_txt = "None" if ops is None else "(" + "".join(f"Ops.{o.name}, " for o in sorted(ops)) + ")"
  return f"{r.id} = Rule({r.id!r}, {r.span.file!r}, {r.span.line}, {r.text!r}, {ops_txt})"

def _matcher(rs: RuleSet, fns: dict[Ops | None, str]) -> str:
  fns_txt = ", ".join(f"Ops.{o.name}: {n}" for o, n in sorted(((o, n) for o, n in fns.items() if o is not None), key=lambda x: x[0]))
  if (any_fn := fns.get(None)) is not None: fns_txt = "**{o: " + any_fn + " for o in Ops}" + (", " + fns_txt if fns_txt else "")
  return f"Matcher({rs.name!r}, {{{fns_txt}}}, [{', '.join(r.id for r in rs.rules)}])"

def emit_instantiated(rs: RuleSet, consts: Consts, imported: set[str]) -> str:
  """A rule set with parameters (`ruleset late(caps)`): a cached function of them that builds its Matcher. A guard that
  reads only parameters and constants is computed once per instance (`_k0 = ...`) and tested first, as one boolean."""
  constant = set(rs.caps) | PRELUDE_NAMES | BUILTINS | imported
  hoisted: list[str] = []
  rules: list[Rule] = []
  for r in rs.rules:
    guards = []
    for g in r.guards:
      if g.names <= constant and g.names & set(rs.caps):
        hoisted.append(f"_k{len(hoisted)} = {consts.op_aliases(g.text)}")
        g = dataclasses.replace(g, text=f"_k{len(hoisted) - 1}", names=frozenset(), cost=0)
      guards.append(g)
    rules.append(dataclasses.replace(r, guards=guards))
  inner = dataclasses.replace(rs, rules=rules)
  fns: list[str] = []
  table = emit_ruleset(inner, consts, fns)
  lines = [f"@functools.cache\ndef {rs.name}({', '.join(rs.caps)}) -> Matcher:",
           f'  """{_doc_line(rs) or "Rule set " + rs.name} (an instance for these parameters)"""', *(f"  {x}" for x in hoisted)]
  for fn in fns: lines += [""] + [f"  {x}" if x else "" for x in fn.rstrip("\n").split("\n")]
  lines.append("")
  lines += [f"  {_rule_entry(r)}" for r in rules] + [f"  return {_matcher(inner, table)}"]
  return "\n".join(lines) + "\n"

def _doc_line(rs: RuleSet) -> str:
  return rs.doc.splitlines()[0].rstrip(".").replace('"""', "'''").replace("\\", "\\\\") if rs.doc else ""

def _docstring(rf: RuleFile) -> str:
  return rf.header.replace('"""', "'''").replace("\\", "\\\\")
