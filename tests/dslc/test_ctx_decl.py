"""Typed ctx declarations (`ctx NAME: ...`, `ruleset t(ctx: NAME)`, `(ctx: None)`): checked by `check`, and nothing else: the
generated code is the same with or without them. (Each misuse has a file in tests/dslc/fail/ctx_*.rules.)"""
import pytest
from dslc.compile import compile_rules, load_rules
from dslc.diagnostics import DslError

def without_header(code: str) -> str:
  # the source's digest: in the header, and in the import-time check that the module is not stale (rules.built_from)
  return "\n".join(x for x in code.split("\n") if "Source sha256" not in x and not x.startswith("_built_from("))

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

def test_a_rule_set_reading_ctx_declares_it():
  # issue 20: every ctx is declared; a rule set that reads none may say nothing
  compile_rules("u.rules", source="ruleset t\n(ADD x 0) -> x\n")
  with pytest.raises(DslError) as e: compile_rules("u.rules", source="ruleset t\n(ADD x 0) if ctx.anything(x) -> x\n(MUL x 1) if ctx.more -> x\n")
  assert len(e.value.diagnostics) == 1 and "rule set 't' reads ctx but does not say what it is" in str(e.value)
  # a helper passed ctx is a read too
  with pytest.raises(DslError): compile_rules("u.rules", source="from rules.symbolic_helpers import exact\nruleset t\n(ADD x 0) if exact(ctx) -> x\n")

def test_an_imported_class_or_builtin_is_checked():
  src = "from rules.kernelize_helpers import Params\nruleset t(ctx: Params)\n(CONST) if ctx.bound -> ctx.param(x)\n"
  compile_rules("u.rules", source=src.replace("(CONST)", "x@(CONST)"))
  with pytest.raises(DslError) as e: compile_rules("u.rules", source=src.replace("(CONST)", "x@(CONST)").replace("ctx.bound", "ctx.bond"))
  assert "ctx (Params) has no attribute 'bond' (did you mean 'bound'?)" in str(e.value)
  with pytest.raises(DslError) as e: compile_rules("u.rules", source=src.replace("(CONST)", "x@(CONST)").replace("ctx.param(x)", "ctx.param(x, x)"))
  assert "ctx.param takes 1 argument, this call gives it 2" in str(e.value)
  with pytest.raises(DslError) as e: compile_rules("u.rules", source="ruleset t(ctx: dict)\nx@_ -> {ctx.gett(x)}\n")
  assert "ctx (a dict) has no attribute 'gett' (did you mean 'get'?)" in str(e.value)
  src = "from rules.symbolic_helpers import exact\nruleset t(ctx: exact)\n(ADD x 0) -> x\n"
  with pytest.raises(DslError) as e: compile_rules("u.rules", source=src)
  assert "ctx's type 'exact' is not a class" in str(e.value)

def test_a_declaration_is_checked_against_the_classes_implementing_it():
  src = ("from rules.rangeify_helpers import CodegenContext\nctx R(CodegenContext): index: dtype, new_range() -> int, reduces: dict\n"
         "ruleset t(ctx: R)\nr@(RANGE) if ctx.reduces -> r\n")
  compile_rules("u.rules", source=src)
  for bad, message in [("new_rang() -> int", "declares 'new_rang', but class CodegenContext has no 'new_rang' (did you mean 'new_range'?)"),
                       ("new_range(x) -> int", "context 'R' declares new_range(x), but CodegenContext.new_range takes 0 arguments"),
                       ("new_range: int", None)]:
    if message is None:
      compile_rules("u.rules", source=src.replace("new_range() -> int", bad))  # a method read as a field: a bound method, fine
      continue
    with pytest.raises(DslError) as e: compile_rules("u.rules", source=src.replace("new_range() -> int", bad))
    assert message in str(e.value), str(e.value)
  with pytest.raises(DslError) as e: compile_rules("u.rules", source=src.replace("(CodegenContext)", "(Codegen)"))
  assert "'Codegen' is not imported" in str(e.value)

def test_gradient_ctx_is_a_checked_uop():
  text = open("rules/gradient.rules").read()
  assert "ruleset gradient(ctx: UOp)" in text
  bad = text.replace("(ADD x y) -> (ctx ctx)", "(ADD x y) if ctx.shp -> (ctx ctx)")
  with pytest.raises(DslError) as e: compile_rules("rules/gradient.rules", source=bad)
  assert "ctx (a UOp) has no attribute 'shp' (did you mean 'shape'?)" in str(e.value)
