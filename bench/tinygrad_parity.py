"""Runs tinygrad's own test files against this library through a name alias (bench/tinygrad_alias.py), and against tinygrad
itself for its counts on the same files; prints per-file pass counts and writes a JSON summary beside the JUnit files.

  TINYGRAD_TESTS=/path/to/tinygrad-checkout python bench/tinygrad_parity.py [--side ours|tinygrad|both] [--files ...]
      [--tinygrad-python /venv-tg/bin/python] [--forward-only] [--device CL] [--out DIR] [-k EXPR] [--tree CHECKOUT --label NAME]

Fetches nothing: it runs only when TINYGRAD_TESTS names a checkout holding tinygrad's `test/` (and `extra/`, which some
tests import). Each file runs in its own pytest process in a staging folder that links the checkout's test/, extra/ and
examples/ but not its tinygrad/ package, so the reference run imports the installed tinygrad and ours imports the alias.
Per side the results land in OUT/<side>/<file>.xml (JUnit) and OUT/summary.json; a later run of one side keeps the other's.
Tests about tinygrad's internals are listed in NOT_APPLICABLE with the reason, and not counted.
"""
from __future__ import annotations
import argparse, fnmatch, json, os, re, subprocess, sys, tempfile, time
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

OPS = "test/backend/test_ops.py"
# the user-level files (issue 26): what a user porting tinygrad code meets; test_multitensor is multi-device (run, not counted)
USER_FILES = [
  "test/backend/test_tensor.py", "test/backend/test_nn.py", "test/backend/test_optim.py", "test/backend/test_jit.py",
  "test/backend/test_randomness.py", "test/backend/test_setitem.py", "test/backend/test_dtype.py", "test/backend/test_symbolic_jit.py",
  "test/unit/test_gradient.py", "test/unit/test_indexing.py", "test/unit/test_getitem_ops.py", "test/unit/test_conv.py",
  "test/unit/test_attention.py", "test/unit/test_jit_footguns.py", "test/models/test_mnist.py",
]
EXCLUDED_FILES = {"test/backend/test_multitensor.py": "multi-device: a later issue's"}
DEFAULT_FILES = [OPS, *USER_FILES]

# (file, "Class.test" glob) -> why the test is about tinygrad's internals, not its API: listed, run, not counted
_JIT_CACHE = "reads the capture's private memory plan and graph batching (CapturedJit.free_intermediates, graph_class), not results"
_UOP = "builds or inspects tinygrad's UOp graph directly (UOp.const without a device, .uop.base, UOp.alu), not the Tensor API"
_RNG = "reads tinygrad's random-number internals (_device_rng_counters, _threefry_random_bits, its kernel schedule)"
NOT_APPLICABLE: dict[tuple[str, str], str] = {
  **{("test/backend/test_jit.py", t): _JIT_CACHE for t in ("TestJitFree.*", "TestJitGraphSplit.*")},
  # the other kernel counts (CapturedJit.linear) are counted: ours must replay no more kernels than tinygrad's
  ("test/backend/test_symbolic_jit.py", "TestSymbolicJit.test_attention"): "asserts tinygrad's scheduler splits attention into 5 "
  "kernels; ours fuses it into 3 (the values, checked first, match)",
  **{("test/backend/test_randomness.py", t): _RNG for t in ("TestRandomness.test_rand_is_lazy", "TestRandomness.test_random_counter_overflow",
                                                           "TestRandomness.test_threefry_*")},
  ("test/backend/test_setitem.py", "TestSetitem.test_setitem_multiple_disjoint_on_invalid"): "reads Tensor.invalids, an internal marker of tinygrad",
  **{("test/backend/test_tensor.py", t): _UOP for t in ("TestTinygrad.test_deviceless_const_*", "TestZeroShapeTensor.test_clone",
                                                       "TestZeroShapeTensor.test_clone_deviceless_const*",
                                                       "TestZeroShapeTensor.test_clone_with_shrink*",
                                                       "TestZeroShapeTensor.test_numpy_deviceless_const")},
  ("test/backend/test_tensor.py", "TestTinygrad.test_randperm"): _RNG + ": the permutation tinygrad's generator gives for a seed",
  ("test/backend/test_tensor.py", "TestTinygrad.test_const_backward_pass_optimizer"): "reads Tensor.is_param, newer tinygrad's optimizer marker",
  **{("test/unit/test_gradient.py", t): _UOP for t in ("TestTensorGradient.test_implicit_broadcast_*", "TestMultiOutputGradient.*")},
  ("test/unit/test_attention.py", "*"): "tests tinygrad.llm.model (its model library: rope, SSM blocks, pairwise_topk), not the Tensor API",
}

# a failure's cause, from its message (first match wins): the per-cause table of `--causes SIDE`
CAUSES: list[tuple[str, str]] = [
  ("kernel count read from tinygrad's CapturedJit.linear (values checked first)", r"has no attribute 'linear'"),
  ("gradient: target not in the graph", r"is not in the graph of this|no tensor in the graph"),
  ("gradient: wrong value or nan at extremes", r"backward pass tensor \d+ failed|nan != 0.0"),
  ("optimizer Opt on a loop of 0 or 1", r"OptError"),
  ("a name with no counterpart here", r"NoCounterpart|has no counterpart|has no attribute|unexpected keyword argument|cannot import name"),
  ("fp8 dtypes missing", r"fp8"),
  ("JIT did not refuse", r"JitError not raised|JitError"),
  ("wrong error type or message", r"not raised|does not match|Regex pattern did not match"),
  ("argument refused that tinygrad takes", r"ArgumentValueError|ArgumentTypeError|FunctionalValueError|ShapeError|AxisError|TensorIndexError"),
  ("symbolic shapes", r"Variable|symbolic"),
  ("writes into views / assign", r"not a whole realized buffer|NotImplementedError"),
  ("wrong value or shape", r"forward pass failed|Not equal to tolerance|Mismatch|AssertionError|assert "),
  ("timeout", r"TestTimeout|ran longer than"),
]

def cause_of(message: str) -> str:
  for cause, pattern in CAUSES:
    if re.search(pattern, message): return cause
  return "other: " + message[:60]

def causes(summary: dict, side: str, files: list[str]) -> str:
  """A table: cause -> failing tests (counted tests only), with the tests of each."""
  by: dict[str, list[str]] = {}
  for file in files:
    for tid, r in summary["files"].get(file, {}).get(side, {}).items():
      if r["outcome"] in ("failed", "error") and not not_applicable(file, tid):
        by.setdefault(cause_of(r["message"]), []).append(f"{file.rsplit('/', 1)[-1]}::{tid}")
  lines = [f"| cause ({side}) | tests |", "|---|---|"]
  for cause, tests in sorted(by.items(), key=lambda kv: -len(kv[1])): lines.append(f"| {cause} | {len(tests)} |")
  return "\n".join(lines)

def not_applicable(file: str, test: str) -> str | None:
  for (f, pattern), reason in NOT_APPLICABLE.items():
    if f == file and fnmatch.fnmatchcase(test, pattern): return reason
  return None

def stage(checkout: Path) -> Path:
  """A folder with the checkout's test/, extra/ and examples/ linked in (not tinygrad/) and the alias plugin."""
  d = Path(tempfile.mkdtemp(prefix="tinygrad-parity-"))
  for name in ("test", "extra", "examples"):
    if (checkout / name).exists(): (d / name).symlink_to(checkout / name)
  (d / "parity_alias.py").symlink_to(HERE / "tinygrad_alias.py")
  (d / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")  # not the checkout's config, nor ours
  return d

def run_file(side: str, python: str, staging: Path, file: str, out: Path, env_extra: dict[str, str], kexpr: str | None, timeout: int,
             tree: Path = REPO) -> Path:
  xml = out / side / (file.replace("/", "__") + ".xml")
  xml.parent.mkdir(parents=True, exist_ok=True)
  # RUN_SLOW=1: tinygrad's `slow` tests (all of test_nn and test_optim) are the ones a user's code is most like
  env = {"RUN_SLOW": "1", **os.environ, **env_extra, "PYTHONDONTWRITEBYTECODE": "1", "PARITY_TIMEOUT": str(timeout),
         "PARITY_ALIAS": "0" if side.startswith("tinygrad") else "1",
         "PYTHONPATH": os.pathsep.join([str(staging)] + ([] if side.startswith("tinygrad") else [str(tree)]))}
  cmd = [python, "-m", "pytest", "-p", "parity_alias", "-q", "--tb=line", "-rN", f"--junitxml={xml}", "--rootdir", str(staging),
         "-c", str(staging / "pytest.ini"), str(staging / file)]
  if kexpr: cmd += ["-k", kexpr]
  t0 = time.perf_counter()
  proc = subprocess.run(cmd, cwd=staging, env=env, capture_output=True, text=True)
  if not xml.exists():  # pytest died before writing its report (a crash at import): one error for the file
    ET.ElementTree(ET.fromstring(f'<testsuites><testsuite name="{file}"><testcase classname="{file}" name="(the file)">'
                                 f'<error message="pytest exited {proc.returncode}"/></testcase></testsuite></testsuites>')).write(xml)
  print(f"  {side:<10} {file}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
  return xml

def read_junit(xml: Path, file: str) -> dict[str, dict]:
  """test id ("Class.test") -> {"outcome": passed|failed|error|skipped, "message": ...}."""
  tests: dict[str, dict] = {}
  for case in ET.parse(xml).iter("testcase"):
    cls = case.get("classname", "").rsplit(".", 1)[-1]
    tid = f"{cls}.{case.get('name')}"
    outcome, message = "passed", ""
    for tag in ("failure", "error", "skipped"):
      if (el := case.find(tag)) is not None:
        outcome = {"failure": "failed"}.get(tag, tag)
        message = (el.get("message") or el.text or "").strip().splitlines()[0][:300] if (el.get("message") or el.text) else ""
        break
    if outcome == "error" and tid in tests and tests[tid]["outcome"] == "passed": tid += " (teardown)"
    tests[tid] = {"outcome": outcome, "message": message}
  return tests

def table(summary: dict, sides: list[str]) -> str:
  head = "| file | tests | n/a | " + " | ".join(sides) + " |"
  lines = [head, "|" + "---|" * (3 + len(sides))]
  totals = {s: 0 for s in sides}
  total_tests = total_na = 0
  for file, entry in summary["files"].items():
    ids = sorted(set().union(*(entry.get(s, {}).keys() for s in sides)))
    na = [t for t in ids if not_applicable(file, t)]
    counted = [t for t in ids if t not in na]
    row = []
    for s in sides:
      res = entry.get(s)
      n = sum(1 for t in counted if res is not None and res.get(t, {}).get("outcome") == "passed")
      if file not in EXCLUDED_FILES and file != OPS: totals[s] += n
      row.append(str(n) if res is not None else "-")
    if file not in EXCLUDED_FILES and file != OPS: total_tests, total_na = total_tests + len(counted), total_na + len(na)
    lines.append(f"| {file.removeprefix('test/')}{' (not counted: ' + EXCLUDED_FILES[file] + ')' if file in EXCLUDED_FILES else ''} "
                 f"| {len(counted)} | {len(na)} | " + " | ".join(row) + " |")
  lines.append(f"| total of the user-level files | {total_tests} | {total_na} | " + " | ".join(str(totals[s]) for s in sides) + " |")
  return "\n".join(lines)

def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--side", choices=["ours", "tinygrad", "both"], default="ours")
  ap.add_argument("--files", nargs="*", help=f"paths inside the checkout (default: {OPS} and the user-level files)")
  ap.add_argument("--tinygrad-python", default=os.environ.get("TINYGRAD_PYTHON", ""), help="a Python with tinygrad installed")
  ap.add_argument("--forward-only", action="store_true", help="FORWARD_ONLY=1 (test_ops skips backward): recorded as <side>-fwd")
  ap.add_argument("--device", default="", help="DEV=NAME for our side (CL, CPU, ...): recorded as <side>-<NAME>")
  ap.add_argument("--out", default="parity-results", help="folder for the JUnit files and summary.json")
  ap.add_argument("-k", dest="kexpr", help="pytest -k expression (a partial run)")
  ap.add_argument("--timeout", type=int, default=300, help="seconds per test")
  ap.add_argument("--tree", default=str(REPO), help="the checkout of ours to test (default: this one; another for 'before' counts)")
  ap.add_argument("--label", default="", help="a suffix for the side's name in the results (ours-base, ...)")
  ap.add_argument("--report", metavar="SIDE", help="run nothing: print the table of OUT/summary.json and SIDE's failures by cause")
  args = ap.parse_args(argv)
  if not (checkout := os.environ.get("TINYGRAD_TESTS")):
    print("TINYGRAD_TESTS is not set: name a checkout of tinygrad holding its test/ folder (this script fetches nothing)", file=sys.stderr)
    return 2
  root = Path(checkout).resolve()
  if not (root / "test").is_dir(): print(f"TINYGRAD_TESTS={checkout}: no test/ folder there", file=sys.stderr); return 2  # noqa: E702
  files = args.files or [f for f in DEFAULT_FILES if (root / f).exists()]
  sides = {"ours": ["ours"], "tinygrad": ["tinygrad"], "both": ["ours", "tinygrad"]}[args.side]
  if "tinygrad" in sides and not args.tinygrad_python:
    print("--side tinygrad needs --tinygrad-python (or TINYGRAD_PYTHON): a Python with tinygrad installed", file=sys.stderr)
    return 2
  out = Path(args.out).resolve()  # pytest runs in the staging folder: a relative --junitxml would land there
  summary_path = out / "summary.json"
  summary = json.loads(summary_path.read_text()) if summary_path.exists() else {"files": {}}
  if args.report:
    shown = sorted({s for e in summary["files"].values() for s in e}, key=lambda s: (s.startswith("tinygrad"), s))
    print(table({"files": {f: summary["files"][f] for f in files if f in summary["files"]}}, shown))
    print()
    print(causes(summary, args.report, files))
    return 0
  env_extra = {"FORWARD_ONLY": "1"} if args.forward_only else {}
  if args.device: env_extra["DEV"] = args.device
  staging = stage(root)
  for file in files:
    for side in sides:
      label = side + ("-fwd" if args.forward_only else "") + (f"-{args.device}" if args.device else "") + (f"-{args.label}" if args.label else "")
      python = sys.executable if side == "ours" else args.tinygrad_python
      xml = run_file(label, python, staging, file, out, env_extra, args.kexpr, args.timeout, Path(args.tree))
      summary["files"].setdefault(file, {})[label] = read_junit(xml, file)
  summary["not_applicable"] = {f"{f}::{p}": r for (f, p), r in NOT_APPLICABLE.items()}
  out.mkdir(parents=True, exist_ok=True)
  summary_path.write_text(json.dumps(summary, indent=1, sort_keys=True))
  shown = sorted({s for e in summary["files"].values() for s in e}, key=lambda s: (s.startswith("tinygrad"), s))
  print(table({"files": {f: summary["files"][f] for f in files}}, shown))
  return 0

if __name__ == "__main__":
  sys.exit(main())
