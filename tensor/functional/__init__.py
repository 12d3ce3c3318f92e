"""The nn-functional half of the Tensor API (conv, pools, interpolate, einsum, losses, attention, norms, lookups,
activations) as mixin classes whose methods become Tensor methods: `class Tensor(FunctionalMixin)` in tensor/tensor.py.
They are built from Tensor's own ops (movement, elementwise, reductions), so everything here is lazy and fuses like them.
docs/functional.md lists the ops, their semantics (torch's, under tinygrad's names) and where they differ.
"""
from tensor.functional.activation import ActivationMixin
from tensor.functional.attention import AttentionMixin
from tensor.functional.conv import ConvMixin
from tensor.functional.einsum import EinsumMixin
from tensor.functional.loss import LossMixin
from tensor.functional.lookup import LookupMixin
from tensor.functional.norm import NormMixin
from tensor.functional.pool import PoolMixin
from tensor.functional.resample import ResampleMixin

class FunctionalMixin(ConvMixin, PoolMixin, ResampleMixin, EinsumMixin, LossMixin, AttentionMixin, NormMixin, LookupMixin, ActivationMixin):
  __slots__ = ()

__all__ = ["FunctionalMixin"]
