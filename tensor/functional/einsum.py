"""einsum: numpy's subscripts (explicit `->` or implicit output, repeated letters for diagonals, `...` for broadcast
dims) lowered to movement ops, broadcast multiplies and sums. Operands are contracted left to right, each letter summed
out as soon as no later operand and not the output uses it, so a chain stays a sequence of matmul-sized products.
"""
from __future__ import annotations
import string
from typing import TYPE_CHECKING, Sequence
from runtime.dtype import dtypes, least_upper_dtype
from tensor.functional.args import shape_error, type_error, value_error

if TYPE_CHECKING: from tensor.tensor import Tensor

def _parse(formula: str, shapes: list[tuple[int, ...]]) -> tuple[list[str], str]:
  """Each operand's letters (with `...` replaced by fresh capital-free letters, right-aligned) and the output letters."""
  f = formula.replace(" ", "")
  lhs, arrow, rhs = f.partition("->")
  terms = lhs.split(",")
  if len(terms) != len(shapes): raise value_error(f"einsum {formula!r} has {len(terms)} operands in its subscripts but got {len(shapes)} tensors")
  for t in terms + ([rhs] if arrow else []):
    rest = t.replace("...", "")
    if "." in rest or any(c not in string.ascii_letters for c in rest):
      raise value_error(f"einsum {formula!r}: subscripts take letters and one '...' per operand, not {t!r}")
    if t.count("...") > 1: raise value_error(f"einsum {formula!r}: {t!r} has more than one '...'")
  used = set(f)
  fresh = [c for c in string.ascii_letters if c not in used]
  n_ell = 0
  for t, shape in zip(terms, shapes):
    named = len(t.replace("...", ""))
    if ("..." in t and named > len(shape)) or ("..." not in t and named != len(shape)):
      raise shape_error(f"einsum {formula!r}: subscripts {t!r} don't fit operand of shape {shape}")
    if "..." in t: n_ell = max(n_ell, len(shape) - named)
  ell = "".join(fresh[:n_ell])
  out_terms = []
  for t, shape in zip(terms, shapes):
    k = len(shape) - len(t.replace("...", ""))
    out_terms.append(t.replace("...", ell[n_ell - k:]) if "..." in t else t)
  if arrow:
    # an output without '...' sums over the dims '...' covers (as torch), like any letter it leaves out
    out = rhs.replace("...", ell)
    all_in = "".join(out_terms)
    for c in out:
      if c not in all_in: raise value_error(f"einsum {formula!r}: output letter {c!r} is in no operand")
      if out.count(c) > 1: raise value_error(f"einsum {formula!r}: output letter {c!r} repeats")
  else:  # numpy's implicit output: the broadcast dims, then the letters used once, in alphabetical order
    joined = "".join(terms)
    out = ell + "".join(sorted(c for c in set(joined) if c != "." and joined.count(c) == 1))
  return out_terms, out

def _diagonal(x: Tensor, letters: str) -> tuple[Tensor, str]:
  """Take the diagonal over each letter repeated within one operand: 'ii' of (n, n) -> 'i' of (n,)."""
  while any(letters.count(c) > 1 for c in letters):
    c = next(c for c in letters if letters.count(c) > 1)
    a, b = letters.index(c), letters.index(c, letters.index(c) + 1)
    if x.shape[a] != x.shape[b]:
      raise shape_error(f"einsum: letter {c!r} repeats in one operand over dims of different sizes {x.shape[a]} and {x.shape[b]}")
    n = x.shape[a]
    rest = [i for i in range(x.ndim) if i not in (a, b)]
    x = x.permute(*rest, a, b).reshape(*[x.shape[i] for i in rest], n * n)
    # element (i, i) sits at i*(n+1): pad to n*(n+1), read in rows of n+1, keep column 0
    x = x.pad([(0, 0)] * len(rest) + [(0, n)]).reshape(*[x.shape[i] for i in range(len(rest))], n, n + 1)
    x = x.shrink([(0, s) for s in x.shape[:-1]] + [(0, 1)]).reshape(x.shape[:-1])
    letters = "".join(letters[i] for i in rest) + c
  return x, letters

class EinsumMixin:
  __slots__ = ()
  @staticmethod
  def einsum(formula: str, *operands: Tensor | Sequence[Tensor], dtype=None) -> Tensor:
    """Sums of products over the letters of `formula`, as numpy.einsum: Tensor.einsum("ij,jk->ik", a, b) is a @ b,
    "ii" a trace, "...ij->...ji" a batched transpose. dtype: the accumulation dtype of the sums."""
    if not isinstance(formula, str): raise type_error(f"einsum takes the subscripts string first, got {type(formula).__name__}")
    xs = list(operands[0]) if len(operands) == 1 and isinstance(operands[0], (list, tuple)) else list(operands)
    if not xs: raise value_error("einsum needs at least one operand")
    terms, out = _parse(formula, [tuple(x.shape) for x in xs])
    parts = [_diagonal(x, t) for x, t in zip(xs, terms)]
    sizes: dict[str, int] = {}
    for x, t in parts:
      for c, s in zip(t, x.shape):
        if sizes.get(c, s) != s and 1 not in (s, sizes[c]):
          raise shape_error(f"einsum {formula!r}: letter {c!r} has size {sizes[c]} in one operand and {s} in another "
                            f"(operand shapes {[tuple(x.shape) for x in xs]})")
        if sizes.get(c, 1) == 1: sizes[c] = s  # a size-1 dim broadcasts, as numpy's
    acc, acc_letters = parts[0]
    for i in range(1, len(parts) + 1):
      nxt, nxt_letters = parts[i] if i < len(parts) else (None, "")
      later = out + nxt_letters + "".join(t for _, t in parts[i + 1:])
      # sum out the letters of acc nobody needs any more, then multiply in the next operand on the union of letters
      gone = [j for j, c in enumerate(acc_letters) if c not in later]
      if gone:
        acc = acc.sum(tuple(gone), dtype=dtype)
        acc_letters = "".join(c for j, c in enumerate(acc_letters) if j not in gone)
      if nxt is None: break
      union = acc_letters + "".join(c for c in nxt_letters if c not in acc_letters)
      acc = _align(acc, acc_letters, union) * _align(nxt, nxt_letters, union)
      acc_letters = union
    acc = _align(acc, acc_letters, out).expand(*[sizes[c] for c in out]) if out else acc
    # ints accumulate in int64 (as sum) and give their own type back, as matmul does (bools give their counts)
    if dtype is not None: return acc.cast(dtype)
    return acc if (want := least_upper_dtype(*(x.dtype for x in xs))) is dtypes.bool else acc.cast(want)

def _align(x: Tensor, letters: str, target: str) -> Tensor:
  """x with its dims in the order of `target` (size 1 where it lacks a letter)."""
  order = [letters.index(c) for c in target if c in letters]
  return x.permute(*order).reshape(*[x.shape[letters.index(c)] if c in letters else 1 for c in target])
