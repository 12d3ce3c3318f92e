"""The Python front end: tinygrad's `UPat` and `PatternMatcher`, compiled to the same rule IR and through the same
emitter as .rules files, once per PatternMatcher, so a matcher built at run time is as fast as a generated one.

  pm = PatternMatcher([(UPat.cvar("c1") + UPat.cvar("c2"), lambda c1, c2: c1.const_like(c1.arg + c2.arg))])
  graph_rewrite(expr, pm)
"""
from __future__ import annotations
import dataclasses, inspect, linecache, os, sys
from typing import Any, Callable, Iterable
from runtime.dtype import DType, dtypes
from runtime.ops import GroupOp, Ops
from runtime.rewrite import Matcher
from dslc.diagnostics import DslError
from dslc.ir import CallResult, Pat, Rule, RuleFile, RuleSet, Span

_HERE = os.path.dirname(os.path.abspath(__file__))

def _location() -> tuple[str, int]:
  # the first frame outside dslc: where the user wrote the UPat
  f = sys._getframe(1)
  while f is not None and os.path.dirname(os.path.abspath(f.f_code.co_filename)) == _HERE: f = f.f_back  # type: ignore[assignment]
  return (f.f_code.co_filename, f.f_lineno) if f is not None else ("<unknown>", 0)

OpsArg = Ops | Iterable[Ops] | None

class UPat:
  """A pattern over UOps, as in tinygrad: op (or ops), dtype(s), src, arg, name.

  src: a tuple matches the sources in order; a list in any order; a single UPat matches every source.
  allow_any_len: more sources than `src` gives are fine. arg=None does not look at the arg."""
  __slots__ = ("op", "dtype", "src", "src_kind", "arg", "name", "allow_any_len", "alternatives", "location")
  def __init__(self, op: OpsArg = None, dtype: DType | Iterable[DType] | None = None, src: Any = None, arg: Any = None, name: str | None = None,
               allow_any_len: bool = False, custom_early_reject: Any = None, location: tuple[str, int] | None = None):
    self.op: frozenset[Ops] | None = None if op is None else frozenset({op}) if isinstance(op, Ops) else frozenset(op)
    self.dtype: frozenset[DType] | None = None if dtype is None else frozenset({dtype}) if isinstance(dtype, DType) else frozenset(dtype)
    if src is None: self.src, self.src_kind = None, "none"
    elif isinstance(src, UPat): self.src, self.src_kind = (src,), "repeat"
    elif isinstance(src, list): self.src, self.src_kind = tuple(src), "any_order"
    elif isinstance(src, tuple): self.src, self.src_kind = src, "ordered"
    else: raise TypeError(f"UPat src must be a tuple, a list or a UPat, not {type(src).__name__}")
    if self.src is not None and not all(isinstance(s, UPat) for s in self.src): raise TypeError("every UPat source must be a UPat")
    if name == "ctx": raise ValueError("a UPat can't be named 'ctx': that name is the rewrite context")
    self.arg, self.name, self.allow_any_len = arg, name, allow_any_len
    self.alternatives: tuple[UPat, ...] | None = None
    self.location = location or _location()

  # ---- constructors ----
  @staticmethod
  def var(name: str | None = None, dtype: DType | Iterable[DType] | None = None) -> UPat: return UPat(dtype=dtype, name=name, location=_location())
  @staticmethod
  def cvar(name: str | None = None, dtype: DType | Iterable[DType] | None = None, vec: bool = True) -> UPat:
    return UPat((Ops.CONST, Ops.VCONST) if vec else Ops.CONST, dtype, name=name, location=_location())
  @staticmethod
  def const(dtype: DType | Iterable[DType] | None, b: Any) -> UPat: return UPat(Ops.CONST, dtype, arg=b, location=_location())
  @staticmethod
  def any(*pats: UPat) -> UPat:
    u = UPat(location=_location())
    u.alternatives = pats
    return u
  def named(self, name: str) -> UPat:
    u = UPat(self.op, self.dtype, self._src_arg(), self.arg, name, self.allow_any_len, location=self.location)
    u.alternatives = self.alternatives
    return u
  def _src_arg(self):
    if self.src_kind == "repeat": return self.src[0]  # type: ignore[index]
    if self.src_kind == "any_order": return list(self.src)  # type: ignore[arg-type]
    return self.src

  # ---- sugar: UPat arithmetic builds ALU patterns (commutative ops match in any order) ----
  def _operand(self, x: Any) -> UPat: return x if isinstance(x, UPat) else UPat.const(self.dtype, x)
  def alu(self, op: Ops, *others: Any) -> UPat:
    src = (self, *(self._operand(x) for x in others))
    dt = dtypes.bool if op in GroupOp.Comparison else None
    return UPat(op, dt, list(src) if op in GroupOp.Commutative else src, location=_location())
  def __add__(self, x): return self.alu(Ops.ADD, x)
  def __radd__(self, x): return self._operand(x).alu(Ops.ADD, self)
  def __sub__(self, x): return self.alu(Ops.SUB, x)
  def __rsub__(self, x): return self._operand(x).alu(Ops.SUB, self)
  def __mul__(self, x): return self.alu(Ops.MUL, x)
  def __rmul__(self, x): return self._operand(x).alu(Ops.MUL, self)
  def __floordiv__(self, x): return self.alu(Ops.IDIV, x)
  def __mod__(self, x): return self.alu(Ops.MOD, x)
  def __truediv__(self, x): return self.alu(Ops.FDIV, x)
  def __and__(self, x): return self.alu(Ops.AND, x)
  def __or__(self, x): return self.alu(Ops.OR, x)
  def __xor__(self, x): return self.alu(Ops.XOR, x)
  def __lshift__(self, x): return self.alu(Ops.SHL, x)
  def __rshift__(self, x): return self.alu(Ops.SHR, x)
  def __neg__(self): return UPat(Ops.NEG, None, (self,), location=_location())
  def __lt__(self, x): return self.alu(Ops.CMPLT, x)
  def ne(self, x): return self.alu(Ops.CMPNE, x)
  def eq(self, x): return self.alu(Ops.CMPEQ, x)
  def maximum(self, x): return self.alu(Ops.MAX, x)
  def where(self, x, y): return self.alu(Ops.WHERE, x, y)
  def cast(self, dtype: DType | None = None, name: str | None = None): return UPat(Ops.CAST, dtype, (self,), name=name, location=_location())

  # ---- the rule IR ----
  def to_pat(self) -> Pat:
    span = Span(*self.location, 1)
    if self.alternatives is not None: return Pat(alternatives=tuple(a.to_pat() for a in self.alternatives), name=self.name, span=span)
    p = Pat(ops=self.op, dtypes=self.dtype, name=self.name, span=span)
    if self.arg is not None: p.arg_eq, p.has_arg_eq = self.arg, True
    if self.src_kind == "repeat": p.src, p.rest = (), self.src[0].to_pat()  # type: ignore[index]
    elif self.src is not None:
      p.src = tuple(s.to_pat() for s in self.src)
      p.any_order = self.src_kind == "any_order" and len(self.src) >= 2
      if self.allow_any_len: p.rest = Pat()
    elif self.allow_any_len: p.src, p.rest = (), Pat()
    return p

  def __repr__(self) -> str: return self.text()
  def text(self) -> str:
    """This pattern in .rules syntax."""
    if self.alternatives is not None: return "{" + " | ".join(a.text() for a in self.alternatives) + "}"
    named = f"{self.name}@" if self.name else ""
    if self.op is None and self.src is None and self.arg is None:
      dt = ":" + "|".join(sorted(d.name for d in self.dtype)) if self.dtype else ""
      return (self.name or "_") + dt
    ops = "|".join(o.name for o in sorted(self.op)) if self.op else "_"
    dt = ":" + "|".join(sorted(repr(d)[7:] for d in self.dtype)) if self.dtype else ""
    arg = f" [{self.arg!r}]" if self.arg is not None else ""
    if self.src_kind == "repeat": srcs = " " + self.src[0].text() + "..."  # type: ignore[index]
    elif self.src is not None: srcs = "".join(" " + s.text() for s in self.src) + (" _..." if self.allow_any_len else "")
    else: srcs = ""
    bang = "!" if self.src_kind == "ordered" and self.op and all(o in GroupOp.Commutative for o in self.op) and self.src else ""
    return f"{named}({ops}{bang}{dt}{arg}{srcs})"

def _params(fn: Callable, names: set[str]) -> tuple[tuple[str, ...], bool]:
  """The capture names fn takes (and ctx), and whether it takes them by keyword (**kwargs)."""
  try: sig = inspect.signature(fn)
  except (TypeError, ValueError): return tuple(sorted(names)), True
  ps = list(sig.parameters.values())
  if any(p.kind is p.VAR_KEYWORD for p in ps): return tuple(sorted(names | {"ctx"})), True
  out = []
  for p in ps:
    if p.kind in (p.VAR_POSITIONAL,): continue
    if p.name == "ctx" or p.name in names or p.default is p.empty: out.append(p.name)
  return tuple(out), False


class PatternMatcher(Matcher):
  """A rule set written in Python: a list of (UPat, fn); fn gets the captures it names (and ctx) and returns a UOp,
  or None to let the next rule try. Compiled to Python once, when constructed."""
  _count = 0
  def __init__(self, patterns: list[tuple[UPat, Callable]], name: str | None = None):
    from dslc.check import check_file
    from dslc.emit import emit_module
    PatternMatcher._count += 1
    name = name or f"pm{PatternMatcher._count}"
    rules: list[Rule] = []
    fns: dict[Any, str] = {}
    for i, (upat, fn) in enumerate(patterns):
      if not isinstance(upat, UPat): raise TypeError(f"pattern {i} is a {type(upat).__name__}, not a UPat")
      if not callable(fn): raise TypeError(f"the action of pattern {i} ({upat.text()}) is not callable")
      pat = upat.to_pat()
      params, by_kw = _params(fn, pat.names())
      fns.setdefault(fn, f"_f{len(fns)}")
      span = Span(upat.location[0], upat.location[1], 1)
      fname = getattr(fn, "__name__", "fn")
      rules.append(Rule(pat, [], CallResult(fn, params, span), f"{upat.text()} -> {fname}", span, {}, id=f"{name}_{i}"))
      rules[-1].result.by_keyword = by_kw  # type: ignore[attr-defined]
    rf = RuleFile("<PatternMatcher>", "", [RuleSet(name, "", rules, Span("<PatternMatcher>", 1, 1))], [])
    diags = [d for d in check_file(rf) if "never fires" not in d.message and "duplicate" not in d.message]
    # show the Python line each problem comes from, with its caret, as for a .rules file
    if diags: raise DslError([dataclasses.replace(d, line_text=linecache.getline(d.file, d.line).rstrip("\n") or None) for d in diags])
    code = emit_module(rf, "<PatternMatcher>", fns)
    ns: dict[str, Any] = {v: k for k, v in fns.items()}
    filename = f"<PatternMatcher {name} #{PatternMatcher._count}>"
    # the source stays readable (tracebacks; Rule.alone cuts one rule out of it, runtime/rule_alone.py)
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    exec(compile(code, filename, "exec"), ns)  # noqa: S102 - our own generated code
    m: Matcher = ns[name]
    super().__init__(name, {}, m.rules)
    self.table = m.table
    self.code = code
    self.patterns = patterns

__all__ = ["UPat", "PatternMatcher"]
