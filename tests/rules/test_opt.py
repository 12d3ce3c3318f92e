"""rules/opt.rules: the rule sets that apply each Opt (tensor/codegen/opt.py): upcast and unroll lanes, TILE, SWAP, STASH,
SPLIT, PREFETCH. Each Opt's effect and values are tested in tests/codegen (test_reduce_opts.py, test_opt_fuzz.py against
the PYTHON interpreter); here every rule fires on the shared lowering work (tests/rules/fires.py: the heuristic's lists and
legal ones drawn at random)."""
from __future__ import annotations
from fires import assert_every_rule_fires, lowering, rules_of

def test_every_rule_fires():
  assert_every_rule_fires(rules_of("rules/opt.rules"), lowering())
