"""Names for rules/float_compute.rules: the narrow float types, and the mark of the casts back to them it makes."""
from __future__ import annotations
from runtime.dtype import dtypes

NARROW = (dtypes.float16, dtypes.bfloat16)
# the tag of a cast back to the narrow type made by the rules: an ALU over it takes its float32 source (a cast the kernel's
# graph holds, `x.half()` of a float32 x, is untagged and keeps its rounding)
WIDE = "float32 compute"
