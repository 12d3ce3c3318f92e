"""Tensor.einsum against numpy.einsum (the oracle for the subscript language itself), on CPU and PYTHON: hypothesis
over random subscripts (1-3 operands, repeated letters, implicit and explicit outputs, '...', size-1 broadcasting and
empty dims), contractions 64+ long, dtypes, and the errors numpy raises as ValueErrors.
"""
import numpy as np
import pytest
from hypothesis import strategies as st
from tensor import Tensor, dtypes
from tensor.tensor import TensorError
import functional_refs as R

LETTERS = "abcd"

@st.composite
def problems(draw, device):
  sizes = {c: draw(st.sampled_from([1, 2, 3, 4] if device == "CPU" else [1, 2, 3])) for c in LETTERS}
  if draw(st.integers(0, 9)) == 0: sizes[draw(st.sampled_from(LETTERS))] = 0
  n_ops = draw(st.integers(1, 3))
  ellipsis = draw(st.booleans())
  ell_shape = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
  terms, shapes = [], []
  for _ in range(n_ops):
    letters = draw(st.lists(st.sampled_from(LETTERS), max_size=3))
    shape = [sizes[c] if draw(st.integers(0, 5)) else 1 for c in letters]  # a size-1 dim broadcasts against the letter's size
    if ellipsis and draw(st.booleans()):
      k = draw(st.integers(0, len(ell_shape)))
      pos = draw(st.integers(0, len(letters)))
      shape[pos:pos] = list(ell_shape[len(ell_shape) - k:])
      letters = letters[:pos] + ["..."] + letters[pos:]
    terms.append("".join(letters))
    shapes.append(tuple(shape))
  used = sorted({c for t in terms for c in t if c != "."})
  has_ell = any("..." in t for t in terms)
  if draw(st.booleans()):
    out = "".join(draw(st.permutations(used))[:draw(st.integers(0, len(used)))])
    if has_ell: out = "..." + out if draw(st.booleans()) else out + "..."
    formula = ",".join(terms) + "->" + out
  else: formula = ",".join(terms)
  return formula, shapes

def _check(device, problem, seed):
  formula, shapes = problem
  rng = np.random.default_rng(seed)
  ops = [rng.integers(-3, 4, s).astype(np.float32) for s in shapes]  # small integers: exact sums in any order
  try: want = np.einsum(formula, *ops)
  except ValueError:
    with pytest.raises(ValueError): Tensor.einsum(formula, *[Tensor(o, device=device) for o in ops]).realize()
    return
  got = Tensor.einsum(formula, *[Tensor(o, device=device) for o in ops])
  assert got.shape == want.shape, f"{formula} {shapes}: shape {got.shape}, numpy {want.shape}"
  np.testing.assert_array_equal(got.numpy(), want, err_msg=f"{formula} {shapes}")

@pytest.mark.parametrize("device", R.DEVICES)
def test_random_subscripts(device):
  R.run(device, lambda p, seed: _check(device, p, seed), problems(device), st.integers(0, 2**32 - 1), examples=3 * R.EXAMPLES[device])

@pytest.mark.parametrize("formula, shapes", [
  ("ij,jk->ik", [(3, 70), (70, 5)]), ("bij,bjk->bik", [(2, 4, 66), (2, 66, 3)]), ("ij,jk,kl->il", [(5, 64), (64, 65), (65, 2)]),
  ("ii", [(80, 80)]), ("ii->i", [(5, 5)]), ("ij->", [(9, 130)]), ("i,j->ij", [(3,), (4,)]), ("...ij,...jk", [(2, 1, 3, 4), (5, 4, 2)]),
  ("bhqd,bhkd->bhqk", [(2, 3, 5, 64), (2, 3, 6, 64)]), ("iij->j", [(3, 3, 4)]), ("ijk->kji", [(2, 3, 4)]), ("i,i,i", [(6,), (6,), (6,)]),
])
def test_named_cases(formula, shapes):
  rng = np.random.default_rng(8)
  ops = [R.rand(rng, *s) for s in shapes]
  got = Tensor.einsum(formula, *[Tensor(o) for o in ops])
  R.close(got, np.einsum(formula, *[o.astype(np.float64) for o in ops]), rtol=1e-5, atol=1e-4, what=formula)
  if R.torch is not None: R.close(got, R.torch.einsum(formula, *[R.T(o) for o in ops]), rtol=1e-5, atol=1e-4, what=f"torch {formula}")

@pytest.mark.parametrize("device", R.DEVICES)
def test_dtypes_and_operand_list(device):
  a, b = np.arange(6, dtype=np.int32).reshape(2, 3), np.arange(12, dtype=np.int32).reshape(3, 4)
  got = Tensor.einsum("ij,jk->ik", [Tensor(a, device=device), Tensor(b, device=device)])  # a list works, as tinygrad
  assert got.dtype is dtypes.int32
  np.testing.assert_array_equal(got.numpy(), a @ b)
  h = Tensor.einsum("ij,jk->ik", Tensor(a, device=device).half(), Tensor(b, device=device).half(), dtype=dtypes.float32)
  assert h.dtype is dtypes.float32
  np.testing.assert_array_equal(h.numpy(), a @ b)
  mixed = Tensor.einsum("i,i->", Tensor(a[0], device=device), Tensor(b[0, :3].astype(np.float32), device=device))
  assert mixed.dtype is dtypes.float32 and mixed.item() == float(a[0] @ b[0, :3])

@pytest.mark.parametrize("formula, shapes, exc, message", [
  ("ij,jk->ik", [(2, 3)], ValueError, r"has 2 operands in its subscripts but got 1 tensors"),
  ("ij,jk->ik", [(2, 3), (4, 5)], RuntimeError, r"letter 'j' has size 3 in one operand and 4 in another"),
  ("ij->ik", [(2, 3)], ValueError, r"output letter 'k' is in no operand"),
  ("ij->ii", [(2, 3)], ValueError, r"output letter 'i' repeats"),
  ("i1->i", [(2, 3)], ValueError, r"subscripts take letters and one '...' per operand"),
  ("ijk", [(2, 3)], RuntimeError, r"subscripts 'ijk' don't fit operand of shape \(2, 3\)"),
  ("ii", [(2, 3)], RuntimeError, r"letter 'i' repeats in one operand over dims of different sizes 2 and 3"),
])
def test_errors(formula, shapes, exc, message):
  with pytest.raises(exc, match=message) as e: Tensor.einsum(formula, *[Tensor.ones(*s) for s in shapes])
  assert isinstance(e.value, TensorError)
  with pytest.raises(ValueError): np.einsum(formula, *[np.ones(s) for s in shapes])  # numpy refuses each of them too
