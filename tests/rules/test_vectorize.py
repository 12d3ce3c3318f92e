"""rules/vectorize.rules: the lanes of an upcast or unrolled loop grouped into the Target's vectors (its caps: the widths
and ops its renderer has), and split where a vector is wider than the caps allow. Every rule fires on the shared lowering
work (tests/rules/fires.py: the CPU's caps); vector code's values are tested in tests/codegen/test_reduce_opts.py and
tests/tensor/test_matmul_panels.py."""
from __future__ import annotations
from fires import assert_every_rule_fires, lowering
from rules.vectorize import vectorize
from tensor.codegen import target_for

def test_every_rule_fires():
  # a rule set made per caps (ruleset vectorize(caps)): its rules are the same for every caps, counted by file and id
  assert_every_rule_fires(vectorize(target_for("CPU").caps).rules, lowering())
