"""Stand-ins for Tensor methods other branches are adding (core: uniform, kaiming_uniform, glorot_uniform; functional:
layernorm, batchnorm), installed only while the real one is missing, so the nn modules can be tested before those land.
They follow tinygrad's signatures and formulas; once the real methods exist these fixtures do nothing."""
import math
import numpy as np
import pytest
from tensor import Tensor

_rng = np.random.default_rng(1234)

def _uniform(*shape, low=0.0, high=1.0, dtype=None, device=None, **kw):
  shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
  return Tensor(_rng.uniform(low, high, shape).astype(np.float32), device=device, dtype=dtype)

def _kaiming_uniform(*shape, a=0.01, **kw):
  shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
  bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + a ** 2)) / math.sqrt(math.prod(shape[1:]))
  return _uniform(*shape, low=-bound, high=bound, **kw)

def _glorot_uniform(*shape, **kw):
  shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
  bound = math.sqrt(6 / (shape[0] + math.prod(shape[1:])))
  return _uniform(*shape, low=-bound, high=bound, **kw)

def _layernorm(self, axis=-1, eps=1e-5):
  y = self - self.mean(axis, keepdim=True)
  return y * (y * y).mean(axis, keepdim=True).add(eps).rsqrt()

def _batchnorm(self, weight, bias, mean, invstd, axis=1):
  shape = tuple(s if ax == axis else 1 for ax, s in enumerate(self.shape))
  x = self - mean.reshape(shape)
  if weight is not None: x = x * weight.reshape(shape)
  x = x * invstd.reshape(shape)
  return x + bias.reshape(shape) if bias is not None else x

STAND_INS = {"uniform": staticmethod(_uniform), "kaiming_uniform": staticmethod(_kaiming_uniform), "glorot_uniform": staticmethod(_glorot_uniform),
             "layernorm": _layernorm, "batchnorm": _batchnorm}

@pytest.fixture(autouse=True)
def stand_ins(monkeypatch):
  for name, fn in STAND_INS.items():
    if not hasattr(Tensor, name): monkeypatch.setattr(Tensor, name, fn, raising=False)
