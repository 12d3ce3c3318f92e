"""Contracts as SMT meanings for `dslc verify`: the helpers of rules/symbolic_helpers.py that rebuild a whole sum (any number of
terms) have no term-by-term meaning, so each is given its contract, a relation between the values of its arguments and of
its result that holds wherever it fires, and z3 proves the rule from the contract and the rule's guard. A contract is not
proved: tests/dslc/test_verify_contracts.py checks each against the helper itself on random sums (hypothesis), so a
contract can't silently claim more than the helper does. What z3 proves on top is the step from the helper's arithmetic
on exact integers (floor division, the sum's terms added without wrapping) to the node's C semantics: truncating `//` and
`%`, wrapping, and which guard makes the sum exact.
"""
from __future__ import annotations
from typing import Any
import z3
from runtime.dtype import dtypes
from runtime.ops import Ops
from dslc import smt
from dslc.smt import PInt, Unsupported
from dslc.verify_nodes import Maybe, SNode, Sym, and_

def _int_node(n: Any, what: str) -> SNode:
  if not isinstance(n, SNode) or not dtypes.is_int(n.dtype) or n.dtype not in smt.SCALARS:
    raise Unsupported(f"{what} of a node that is not a scalar int")
  return n

def congruent(a: Any, b: Any, n: int) -> z3.BoolRef:
  """a == b modulo 2**n (two Python ints, symbolic)."""
  return smt.p_cmp("==", smt.p_mod(smt.p_sub(a, b), 1 << n), 0)

def term_sum(sym: Sym, x: SNode) -> PInt:
  """S, the value of the sum x as split_sum reads it (each term's coefficient times its base's value, plus the constant, as
  Python ints): congruent to x's value modulo 2^n (ADD and MUL wrap as a ring), and equal to it when x is exact."""
  d = x.dtype
  s = smt.fresh_pint(sym.name(f"{x.name or 'x'}.terms"), smt.bits(d) + 2)
  v = smt.to_python(x.value, d)
  sym.fact(congruent(s, v, smt.bits(d)))
  sym.fact(z3.Implies(sym.exact(x), smt.p_cmp("==", s, v)))
  return s

def result(sym: Sym, d, name: str) -> tuple[SNode, Any]:
  """A fresh result node of dtype d (its value a free variable the contract constrains) and its Python value."""
  v = smt.fresh(sym.name(name), d)
  sym.fact(smt.in_range(v, d))
  return SNode(None, d, (), None, v, name), smt.to_python(v, d)

def fires(sym: Sym, name: str) -> z3.BoolRef:
  """Whether the helper returns a node: any truth value (the rule must hold wherever it does)."""
  return z3.Bool(sym.name(f"{name}.fires"))

def _divmod(name: str):
  """divmod_linear, divmod_factor, mod_reduce, div_split, div_nest, divmod_common_factor(u, x, c): u is IDIV or MOD of the sum
  x by c. Contract: with c > 0, x.vmin >= 0 and x exact (the rules' guard), a result is floor(S / c) (IDIV) or S mod c (MOD)
  modulo 2^n, S the sum's value as its terms add up (`term_sum`)."""
  def meaning(sym: Sym, u: Any, x: Any, c: Any) -> Maybe:
    u, x = _int_node(u, name), _int_node(x, name)
    if u.op not in (Ops.IDIV, Ops.MOD) or (name in ("mod_reduce",) and u.op is not Ops.MOD) or \
       (name in ("div_split", "div_nest") and u.op is not Ops.IDIV):
      raise Unsupported(f"{name} of a {u.op.name if u.op else 'node'}")
    d = u.dtype
    s = term_sum(sym, x)
    node, r = result(sym, d, name)
    f = fires(sym, name)
    safe_c = smt.p_ite(smt.p_cmp(">", c, 0), c, 1)
    want = smt.p_floordiv(s, safe_c) if u.op is Ops.IDIV else smt.p_mod(s, safe_c)
    pre = and_(f, smt.p_cmp(">", c, 0), smt.p_cmp(">=", sym.bounds(x)[0], 0), sym.exact(x))
    sym.fact(z3.Implies(pre, congruent(r, want, smt.bits(d))))
    return Maybe(node, f)
  return meaning

def _lt_fold(sym: Sym, x: Any, c: Any) -> Maybe:
  """lt_fold(s, c): (s < c) as t < c/g. Contract: with s exact, a result is S < c."""
  x = _int_node(x, "lt_fold")
  s = term_sum(sym, x)
  node, r = result(sym, dtypes.bool, "lt_fold")
  f = fires(sym, "lt_fold")
  sym.fact(z3.Implies(and_(f, sym.exact(x)), r == smt.p_cmp("<", s, c)))
  return Maybe(node, f)

def _add_term(sym: Sym, x: Any, y: Any) -> Maybe:
  """add_term(s, y): the sum s + y with y merged into a term of s. Contract: a result is s + y modulo 2^n (like terms and the
  halves of a div/mod split recombine as a ring does: C's a == (a//c)*c + a%c for every a and c)."""
  x, y = _int_node(x, "add_term"), _int_node(y, "add_term")
  if x.dtype is not y.dtype: raise Unsupported("add_term of two dtypes")
  d = x.dtype
  node, r = result(sym, d, "add_term")
  f = fires(sym, "add_term")
  sym.fact(z3.Implies(f, congruent(r, smt.p_add(smt.to_python(x.value, d), smt.to_python(y.value, d)), smt.bits(d))))
  return Maybe(node, f)

def _where_given(sym: Sym, c: Any, x: Any, y: Any) -> Maybe:
  """where_given(c, x, y): c ? x' : y' with x' simplified knowing c, y' knowing not c. Contract: a result's value is x's where
  c holds and y's where it fails."""
  if not all(isinstance(n, SNode) for n in (c, x, y)) or c.dtype is not dtypes.bool or x.dtype is not y.dtype:
    raise Unsupported("where_given of nodes of other dtypes")
  node, _ = result(sym, x.dtype, "where_given")
  f = fires(sym, "where_given")
  sym.fact(z3.Implies(f, smt.same(node.value, smt.ite(c.value, x.value, y.value), x.dtype)))
  return Maybe(node, f)

def _and_given(sym: Sym, a: Any, b: Any) -> Maybe:
  """and_given(a, b): a & b' with b' simplified knowing a. Contract: a result is a & b."""
  if not all(isinstance(n, SNode) and n.dtype is dtypes.bool for n in (a, b)): raise Unsupported("and_given of nodes that are not bools")
  node, r = result(sym, dtypes.bool, "and_given")
  f = fires(sym, "and_given")
  sym.fact(z3.Implies(f, r == z3.And(a.value, b.value)))
  return Maybe(node, f)

# qualified name -> meaning (dslc/verify_nodes.py's MEANINGS takes these in)
CONTRACTS = {f"rules.symbolic_helpers.{n}": _divmod(n) for n in ("divmod_linear", "divmod_factor", "mod_reduce", "div_split", "div_nest",
                                                                  "divmod_common_factor")}
CONTRACTS.update({"rules.symbolic_helpers.lt_fold": _lt_fold, "rules.symbolic_helpers.add_term": _add_term,
                  "rules.symbolic_helpers.where_given": _where_given, "rules.symbolic_helpers.and_given": _and_given})
