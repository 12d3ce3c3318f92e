"""Class-index lookups: one_hot (a compare against arange) and embedding (rows of a table picked by index tensors)."""
from __future__ import annotations
from typing import TYPE_CHECKING
from runtime.dtype import dtypes
from tensor.functional.args import as_int, shape_error, type_error, value_error

if TYPE_CHECKING: from tensor.tensor import Tensor

class LookupMixin:
  __slots__ = ()
  def one_hot(self: Tensor, num_classes: int | None = None) -> Tensor:
    """(..., num_classes) of 0 and 1 (default int dtype) with a 1 at each value of self, as torch's F.one_hot. Without
    num_classes the count is max + 1, which reads the values (a realize); a negative num_classes (torch's -1 too) is
    refused, as tinygrad. Values outside [0, num_classes) give all-zero rows when num_classes is given."""
    if not dtypes.is_int(self.dtype): raise type_error(f"one_hot needs an integer tensor, got {self.dtype} (shape {self.shape})")
    if num_classes is None:
      if self.numel() == 0: raise value_error("one_hot: can't infer num_classes from an empty tensor")
      num_classes = int(self.max().item()) + 1
      if int(self.min().item()) < 0: raise value_error("one_hot: class values must not be negative")
    num_classes = as_int(num_classes, "one_hot: num_classes")
    if num_classes < 0: raise value_error(f"one_hot: num_classes={num_classes} must be at least 0 (omit it to count the classes)")
    classes = type(self).arange(num_classes, dtype=self.dtype, device=self.device)
    return (self.unsqueeze(-1) == classes).cast(dtypes.default_int)

  def embedding(self: Tensor, weight: Tensor) -> Tensor:
    """Rows of weight (num_embeddings, dim) at the indices in self (...): (..., dim), as torch's F.embedding(self, weight)."""
    if not dtypes.is_int(self.dtype): raise type_error(f"embedding: indices must be an integer tensor, got {self.dtype} (shape {self.shape})")
    if weight.ndim != 2: raise shape_error(f"embedding: weight of shape {weight.shape} must be (num_embeddings, embedding_dim)")
    if weight.device != self.device: raise shape_error(f"embedding: indices on {self.device} and weight on {weight.device}")
    from tensor.indexing import take
    # a GATHER node: each row loaded where the index points (rules/rangeify.rules), a vector of zeros for an index outside
    # [0, num_embeddings); its gradient adds g's rows into the rows picked (rules/gradient.rules)
    return take(weight, self)                                                                 # (..., dim)
