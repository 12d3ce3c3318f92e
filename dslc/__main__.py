"""The dslc command line.

  python -m dslc check FILE...            report every problem; exit 1 if there is any
  python -m dslc compile FILE -o OUT      write the generated matcher module (nothing is written on error)
  python -m dslc explain FILE [RULESET]   each rule set, its rules, and the generated code of one rule set
  python -m dslc explain FILE --on EXPR   for the node EXPR (`(ADD (MUL x 2) 0)`), each rule tried and why it did or did not fire
  python -m dslc explain FILE --why EXPR  rewrite EXPR with a rule set (TRACK_RULES on) and print the chain of rules that made the result
  python -m dslc stats [FILE.rules...]    per rule file: rule sets, rules, rule lines, helper lines, helper lines per rule line
  python -m dslc stats WORKLOAD           run a workload (script.py or module:function) with RULESTATS=1: per-rule attempts, hits, time
  python -m dslc coverage [WORKLOAD]      run the tests (or a script) and list, per .rules file, the rules that never fired
  python -m dslc lsp                      the .rules language server, over stdio (needs pygls: pip install -e '.[tools]')
  python -m dslc verify FILE...           prove each rule with z3: proved, counterexample, unsupported or timeout (needs z3: '.[verify]')
"""
from __future__ import annotations
import argparse, os, sys

def _load(path: str):
  from dslc.compile import load_rules
  return load_rules(path, _shown(path))

def _shown(path: str) -> str:
  p = os.path.relpath(os.path.abspath(path)).replace(os.sep, "/")
  return path if p.startswith("..") else p

def cmd_check(args) -> int:
  from dslc.compile import compile_rules
  from dslc.diagnostics import DslError
  bad = 0
  for path in args.files:
    # all that compile does, the emitted Python included, so check rejects everything compile would
    try: compile_rules(path, _shown(path))
    except DslError as e:
      print(str(e), file=sys.stderr)
      bad += len(e.diagnostics)
  if bad: print(f"{bad} error{'s' if bad != 1 else ''}", file=sys.stderr)
  return 1 if bad else 0

def cmd_compile(args) -> int:
  from dslc.compile import compile_rules
  from dslc.diagnostics import DslError
  try: code = compile_rules(args.file, _shown(args.file))
  except DslError as e:
    print(str(e), file=sys.stderr)
    return 1
  if args.output == "-": sys.stdout.write(code)
  else: write_atomic(args.output, code)
  return 0

def write_atomic(path: str, text: str) -> None:
  """Write via a temporary file and a rename, so a reader never sees half a file."""
  tmp = f"{path}.tmp{os.getpid()}"
  try:
    with open(tmp, "w") as f: f.write(text)
    os.replace(tmp, path)
  finally:
    if os.path.exists(tmp): os.unlink(tmp)

def cmd_explain(args) -> int:
  from dslc.diagnostics import DslError
  from dslc.emit import Consts, emit_instantiated, emit_ruleset, variants
  try: rf = _load(args.file)
  except DslError as e:
    print(str(e), file=sys.stderr)
    return 1
  if args.on is not None or args.why is not None: return explain_on(rf, args)
  for rs in rf.rulesets:
    if rs.compose is not None:
      print(f"ruleset {rs.name} = {' + '.join(rs.compose)}\n")
      continue
    print(f"ruleset {rs.name}: {len(rs.rules)} rules{' - ' + rs.doc.splitlines()[0] if rs.doc else ''}")
    for r in rs.rules:
      n = len(variants(r.pattern, True))
      print(f"  {r.id}  line {r.span.line:<4} {r.text}" + (f"   ({n} source orders)" if n > 1 else ""))
    print()
  target = next((rs for rs in rf.rulesets if rs.compose is None and (args.ruleset is None or rs.name == args.ruleset)), None)
  if target is None:
    print(f"no ruleset named {args.ruleset!r}", file=sys.stderr)
    return 1
  out: list[str] = []
  consts = Consts()
  if target.caps: out.append(emit_instantiated(target, consts, {n for _, names, _ in rf.imports for n in names}))
  else: emit_ruleset(target, consts, out)
  print(f"# ---- generated code of ruleset {target.name} ----")
  print("\n".join(out))
  return 0

def explain_on(rf, args) -> int:
  from dslc.compile import compile_rules
  from dslc.explain import ExprError, explain_on, module_namespace, parse_on
  if args.ruleset is not None and not any(rs.name == args.ruleset for rs in rf.rulesets):
    print(f"no ruleset named {args.ruleset!r}", file=sys.stderr)
    return 1
  try:
    u = parse_on(args.on if args.on is not None else args.why)
    ctx = parse_on(args.ctx) if args.ctx is not None else None
  except ExprError as e:
    print(str(e), file=sys.stderr)
    return 1
  ns = module_namespace(rf, compile_rules(args.file, _shown(args.file)))
  if args.on is not None:
    print("\n".join(explain_on(rf, ns, u, args.ruleset, ctx)))
    return 0
  from dslc.explain import show
  from runtime.provenance import track_rules, why
  from runtime.rewrite import graph_rewrite
  name = args.ruleset or next((rs.name for rs in rf.rulesets if not rs.caps), None)
  if name is None or not hasattr(ns.get(name), "table"):
    print(f"{args.file}: no rule set without parameters to rewrite with{f' named {name!r}' if name else ''}", file=sys.stderr)
    return 1
  track_rules(True)
  out = graph_rewrite(u, ns[name], ctx)
  print(f"graph_rewrite({show(u)}, {name}) = {show(out)}")
  print("\n".join(why(out)) or "no rule fired")
  return 0

def cmd_stats(args) -> int:
  if not args.workload or all(w.endswith(".rules") for w in args.workload):
    from dslc.stats import all_stats, table
    missing = [w for w in args.workload if not os.path.exists(w)]
    if missing:
      print(f"no such file: {missing[0]}", file=sys.stderr)
      return 1
    print(table(all_stats([os.path.abspath(w) for w in args.workload] or None)))
    return 0
  if len(args.workload) > 1:
    print("stats runs one workload (a .py file or module:function), or takes .rules files only", file=sys.stderr)
    return 1
  args.workload = args.workload[0]
  import importlib, runpy
  from runtime.helpers import Context
  from runtime.rewrite import print_rule_stats
  with Context(RULESTATS=1):
    if args.workload.endswith(".py"): runpy.run_path(args.workload, run_name="__main__")
    else:
      mod, _, fn = args.workload.partition(":")
      getattr(importlib.import_module(mod), fn or "main")()
  print_rule_stats()
  # graph_rewrite registered the same table to print at exit: once is enough
  import atexit
  atexit.unregister(print_rule_stats)
  from runtime.trace import save_rule_stats
  save_rule_stats()  # for the language server's hover
  return 0

def add_verify_arguments(p) -> None:
  p.add_argument("files", nargs="+")
  p.add_argument("-q", "--quiet", action="store_true", help="list only the rules not proved")
  p.add_argument("--line", type=int, action="append", help="only the rule at this line (repeatable)")
  p.add_argument("--rlimit", type=int, default=None, help="z3's resource limit per query: past it, a timeout")
  p.add_argument("--json", metavar="OUT", help="also write the outcomes as JSON")
  p.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, help="rules verified at once, in processes (default: one per CPU)")
  p.add_argument("--all-float32", action="store_true",
                 help="check approximate float32 rules on all 2^32 inputs (minutes of CPU a rule; otherwise they are unsupported)")

def cmd_verify(args) -> int:
  try: from dslc import verify
  except ImportError as e:
    if getattr(e, "name", "") != "z3": raise
    print("dslc verify needs z3: pip install z3-solver (or pip install -e '.[verify]')", file=sys.stderr)
    return 2
  if args.rlimit is None: args.rlimit = verify.RLIMIT
  if args.all_float32: os.environ["DSLC_VERIFY_ALL32"] = "1"  # read where the check runs (a -j worker process too)
  return verify.run(args)

def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(prog="python -m dslc", description="The .rules compiler.")
  sub = ap.add_subparsers(dest="cmd", required=True)
  p = sub.add_parser("check", help="report every problem in .rules files")
  p.add_argument("files", nargs="+")
  p = sub.add_parser("compile", help="compile a .rules file to a Python matcher module")
  p.add_argument("file")
  p.add_argument("-o", "--output", default="-")
  p = sub.add_parser("explain", help="print the rule sets, their rules and the generated code of one; --on: the rules tried on a node")
  p.add_argument("file")
  p.add_argument("ruleset", nargs="?")
  g = p.add_mutually_exclusive_group()
  g.add_argument("--on", metavar="EXPR", help="a node, written as a pattern: `(ADD (MUL x 2) 0)`; variables are int32 in [0, 16] (x[-4:8]: bounds)")
  g.add_argument("--why", metavar="EXPR", help="rewrite EXPR (as --on) with RULESET (default: the first) and print the rules that made the result")
  p.add_argument("--ctx", metavar="EXPR", help="with --on or --why: the rewrite's ctx, a node written as EXPR is (default: None)")
  p = sub.add_parser("stats", help="the rules and helper lines of each rule file; with a workload (a .py file or module:function), "
                                    "run it and print per-rule statistics")
  p.add_argument("workload", nargs="*", help="none or .rules files: the table of rule and helper lines; a script or module:function: "
                                             "run it (bench.bench_symbolic:stats_workload for the symbolic corpus)")
  from dslc.coverage import add_arguments
  add_arguments(sub.add_parser("coverage", help="run the tests (or a script) and list the rules that never fired"))
  sub.add_parser("lsp", help="the .rules language server over stdio (needs pygls)")
  add_verify_arguments(sub.add_parser("verify", help="prove each rule with z3 (needs z3: pip install -e '.[verify]')"))
  args = ap.parse_args(argv)
  from dslc import coverage, lsp
  cmds = {"check": cmd_check, "compile": cmd_compile, "explain": cmd_explain, "stats": cmd_stats, "coverage": coverage.run,
          "lsp": lambda a: lsp.main(), "verify": cmd_verify}
  try: return cmds[args.cmd](args)
  except BrokenPipeError:
    # the reader went away (`python -m dslc explain FILE | head`): stop quietly, as Python's docs advise for pipes
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 1

if __name__ == "__main__": sys.exit(main())
