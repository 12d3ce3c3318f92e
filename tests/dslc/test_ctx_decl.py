"""Typed ctx declarations (`ctx NAME: ...`, `ruleset t(ctx: NAME)`, `(ctx: None)`): checked by `check`, and nothing else: the
generated code is the same with or without them. (Each misuse has a file in tests/dslc/fail/ctx_*.rules.)"""
import pytest
from dslc.compile import compile_rules, load_rules
from dslc.diagnostics import DslError

def without_header(code: str) -> str: return "\n".join(x for x in code.split("\n") if "Source sha256" not in x)

@pytest.mark.parametrize("path,decl", [("rules/symbolic.rules", "(ctx: None)"), ("rules/decompositions.rules", "(ctx: None)")])
def test_declarations_leave_the_generated_code_as_it_was(path, decl):
  text = open(path).read()
  assert decl in text
  assert without_header(compile_rules(path, source=text)) == without_header(compile_rules(path, source=text.replace(decl, "", 1)))

def test_a_declared_context_is_in_the_ir_and_checked():
  src = "ctx K: is_input(x) -> bool, param(x) -> node,\n  rng: node, [x] -> str\nruleset t(ctx: K)\n(ADD x 0) if ctx.is_input(x) -> ctx.param(x)\n"
  rf = load_rules("k.rules", source=src)
  k = rf.contexts["K"]
  assert [(m.name, m.kind, m.params, m.type) for m in k.members.values()] == \
    [("is_input", "method", ("x",), "bool"), ("param", "method", ("x",), "node"), ("rng", "field", (), "node"), ("[]", "index", ("x",), "str")]
  assert (k.members["rng"].span.line, k.members["rng"].span.col) == (2, 3)
  with pytest.raises(DslError) as e: compile_rules("k.rules", source=src.replace("ctx.param(x)", "ctx.parm(x)"))
  assert "k.rules:4:37: error: context 'K' declares no 'parm' (did you mean 'param'?)" in str(e.value)

def test_undeclared_ctx_stays_allowed():
  # a rule set that says nothing of ctx (or names an imported class with no declaration) reads what it likes
  compile_rules("u.rules", source="ruleset t\n(ADD x 0) if ctx.anything(x) -> x\n")
  compile_rules("u.rules", source="from rules.symbolic_helpers import exact\nruleset t(ctx: exact)\n(ADD x 0) if ctx.anything -> x\n")

def test_gradient_ctx_is_a_checked_uop():
  text = open("rules/gradient.rules").read()
  assert "ruleset gradient(ctx: UOp)" in text
  bad = text.replace("(ADD x y) -> (ctx ctx)", "(ADD x y) if ctx.shp -> (ctx ctx)")
  with pytest.raises(DslError) as e: compile_rules("rules/gradient.rules", source=bad)
  assert "ctx (a UOp) has no attribute 'shp' (did you mean 'shape'?)" in str(e.value)
