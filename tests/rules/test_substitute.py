"""rules/substitute.rules: the nodes of a graph that are keys of a mapping become their values (one rule: one lookup per
node, bottom-up, so keys match the original nodes and a chain of replacements ends at its last). The frontend rewires
the graphs of pending tensors with it after a realize, and the schedule cache resolves what became what."""
from __future__ import annotations
import numpy as np
import pytest
from fires import assert_every_rule_fires, firing, rules_of
from rules.substitute import substitute
from runtime import Ops, UOp, graph_rewrite
from runtime.dtype import dtypes
from runtime.rewrite import RewriteLoopError
from tensor import Tensor

def test_keys_become_their_values_and_chains_end_at_the_last():
  a, b, c = (UOp.variable(n, 0, 9, dtypes.int32) for n in "abc")
  g = a + b * 2
  assert graph_rewrite(g, substitute, {a: c}, bottom_up=True) is c + b * 2
  assert graph_rewrite(g, substitute, {a: b, b: c}, bottom_up=True) is c + c * 2
  assert graph_rewrite(g, substitute, {}, bottom_up=True) is g
  with pytest.raises(RewriteLoopError): graph_rewrite(g, substitute, {a: a + 1}, bottom_up=True)

def test_a_realize_rewires_a_pending_tensor_and_every_rule_fires():
  x = Tensor(np.arange(6, dtype=np.float32)).realize()
  y = x + 1
  z = y * 2  # pending: after y is realized its graph reads y's buffer
  with firing() as counts: y.realize()
  assert any(u is y.uop for u in z.uop.toposort()) and not any(u.op is Ops.ADD for u in z.uop.toposort())
  np.testing.assert_array_equal(z.numpy(), (np.arange(6) + 1) * 2)
  assert_every_rule_fires(rules_of("rules/substitute.rules"), counts)
