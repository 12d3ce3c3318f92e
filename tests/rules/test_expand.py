"""rules/expand.rules: the lanes of upcast and unrolled loops made explicit (UNROLL and CONTRACT nodes) once the opts are
applied, before vectorize groups them. Every rule fires on the shared lowering work (tests/rules/fires.py) and on a
softmax whose row is prefetched across an upcast and an unrolled loop (prefetch hints per lane: one per cache line)."""
from __future__ import annotations
import numpy as np
from fires import assert_every_rule_fires, firing, kernel_asts, lowering, rules_of
from tensor import Tensor
from tensor.codegen import program, target_for
from tensor.codegen.opt import Opt

def test_every_rule_fires():
  a = Tensor(np.random.default_rng(0).standard_normal((8, 1024)).astype(np.float32)).realize()
  with firing() as counts:
    # the softmax's last kernel: its row's loads prefetched inside an upcast (2 rows) and unrolled (4 partials) loop
    program(kernel_asts([a.softmax(-1)])[-1], target_for("CPU"), "k", [Opt("UPCAST", 0, 2), Opt("PREFETCH", 2, 1), Opt("UNROLL", 2, 4)])
  assert_every_rule_fires(rules_of("rules/expand.rules"), {**lowering(), **counts})
