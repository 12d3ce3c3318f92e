"""Kernels the system C compiler has miscompiled, against numpy (runtime/ops_cpu.py's workaround flags): a float sum of a
flipped tensor (gcc 12.2 -O3 vectorized its backwards loads wrongly: 286 for 276), at several shapes and axes."""
import numpy as np
import pytest
from tensor import Tensor

@pytest.mark.parametrize("shape", [(4, 6), (8, 8), (16, 3), (7, 9, 3), (5, 17), (32, 32)])
def test_sums_of_flipped_tensors(shape):
  a = np.random.default_rng(0).integers(-5, 6, shape).astype(np.float32)
  for axis in range(len(shape)):
    for over in [None, *range(len(shape))]:
      np.testing.assert_array_equal(Tensor(a).flip(axis).sum(over).numpy(), np.flip(a, axis).sum(over), err_msg=f"flip({axis}).sum({over})")
      np.testing.assert_array_equal(Tensor(a).flip(axis).max(over).numpy(), np.flip(a, axis).max(over), err_msg=f"flip({axis}).max({over})")

def test_the_first_one_found():
  assert Tensor(np.arange(24, dtype=np.float32).reshape(4, 6)).flip(1).sum().item() == 276
