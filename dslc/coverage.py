"""Rule coverage (`python -m dslc coverage`): run the test suite, a script or a module:function with RULECOVERAGE=FILE, so
every process adds how often each rule fired into FILE (runtime/trace.py), then list per rules/*.rules file the rules that
never fired, and a last summary line. `--from FILE` reports a file an earlier run left (CI sets RULECOVERAGE on its test run).
"""
from __future__ import annotations
import argparse, glob, json, os, shlex, subprocess, sys, tempfile
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

def add_arguments(p: argparse.ArgumentParser) -> None:
  p.add_argument("workload", nargs="?", help="a script.py or module:function (default: the test suite, python -m pytest)")
  p.add_argument("--from", dest="from_file", metavar="FILE", help="report the counts in FILE (what RULECOVERAGE=FILE wrote) instead of running")
  p.add_argument("--pytest-args", default="", help="more arguments for pytest, as one string ('-n 2 tests/rules')")
  p.add_argument("-o", "--output", metavar="FILE", help="keep the counts in FILE (default: a temporary file)")
  p.add_argument("--summary", action="store_true", help="print only the summary line")

def rule_tables() -> dict[str, list[Any]]:
  """rules/X.rules -> its rules (the rule IR: those of rule sets with parameters too), in line order: the rules
  `python -m dslc stats` counts (dslc.stats.counted_rules)."""
  from runtime.rewrite import Rule
  from dslc.parse import parse_rules
  from dslc.stats import counted_rules
  out: dict[str, list[Any]] = {}
  for path in sorted(glob.glob(os.path.join(ROOT, "rules", "*.rules"))):
    rel = os.path.relpath(path, ROOT).replace(os.sep, "/")
    rf, _ = parse_rules(path, display_path=rel)
    if rf is None: continue
    rules = [Rule(r.id, rel, r.span.line, r.text, None) for r in counted_rules(rf)]
    out[rel] = sorted(rules, key=lambda r: (r.line, r.id))
  return out

def load_counts(path: str) -> dict[str, int]:
  """file:rule id -> hits."""
  try:
    with open(path) as f: data = json.load(f)
  except FileNotFoundError: return {}
  return {k: int(e.get("hits", 0)) for k, e in data.items()}

def report(counts: dict[str, int], what: str, summary_only: bool = False) -> tuple[str, int, int]:
  """The text of the report, and (rules fired, rules in all)."""
  lines: list[str] = []
  fired = total = 0
  for file, rules in rule_tables().items():
    never = [r for r in rules if counts.get(f"{r.file}:{r.id}", 0) == 0]
    fired += len(rules) - len(never)
    total += len(rules)
    if summary_only: continue
    lines.append(f"{file}: {len(rules) - len(never)} of {len(rules)} rules fired" + ("; never fired:" if never else ""))
    lines += [f"  {file}:{r.line}  {r.text}" for r in never]
  pct = 100 * fired / total if total else 100.0
  lines.append(f"rule coverage: {fired} of {total} rules fired ({pct:.1f}%); {total - fired} never fired in {what}")
  return "\n".join(lines), fired, total

def command(workload: str | None, pytest_args: str) -> list[str]:
  if workload is None: return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *shlex.split(pytest_args)]
  if workload.endswith(".py"): return [sys.executable, workload]
  mod, _, fn = workload.partition(":")
  return [sys.executable, "-c", f"import importlib\ngetattr(importlib.import_module({mod!r}), {fn or 'main'!r})()"]

def run(args: argparse.Namespace) -> int:
  rc = 0
  if args.from_file:
    path, what = args.from_file, f"the run that wrote {args.from_file}"
    if not os.path.exists(path):
      print(f"python -m dslc coverage: {path} does not exist (run with RULECOVERAGE={path} first)", file=sys.stderr)
      return 1
  else:
    path = args.output or os.path.join(tempfile.mkdtemp(prefix="rulecov-"), "coverage.json")
    if os.path.exists(path): os.unlink(path)
    cmd = command(args.workload, args.pytest_args)
    what = args.workload or "the test suite"
    # every process the workload starts inherits RULECOVERAGE and adds its counts at exit
    rc = subprocess.run(cmd, cwd=ROOT if args.workload is None else None, env={**os.environ, "RULECOVERAGE": os.path.abspath(path)}).returncode
    if rc != 0: print(f"python -m dslc coverage: {' '.join(cmd)} exited with {rc}; the counts below are of what ran", file=sys.stderr)
  text, _, _ = report(load_counts(path), what, args.summary)
  print(text)
  return rc
