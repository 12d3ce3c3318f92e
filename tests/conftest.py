"""Suite-wide hooks: SPEC=1 unless the environment says otherwise. With RULECOVERAGE=FILE (.ci/run sets it) every test
process adds the rules that fired into FILE as its session ends, and the run's summary says how many rules never fired;
`python -m dslc coverage --from FILE` lists them."""
import os
import pytest
# the suite runs under SPEC=1: every graph is checked against the IR's spec (rules/spec.rules) at each stage boundary, and
# a node no rule allows fails the test that made it, naming the rule that made the node (SPEC=0 in the environment: off)
os.environ.setdefault("SPEC", "1")
from runtime import trace  # noqa: E402  (after SPEC: runtime.helpers reads it when imported)

def pytest_configure(config) -> None:
  config.addinivalue_line("markers", "optimized: the test checks what the optimizer makes (Opts, vectors, groups): it runs with "
                          "NOOPT=0 when the suite runs under NOOPT=1")

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
  # a test of the optimizer's output asks for it: under NOOPT=1 (the suite passes with it too) it would test nothing
  if item.get_closest_marker("optimized") is not None:
    from runtime.helpers import Context
    with Context(NOOPT=0): yield
  else: yield
  # kernels a test ran twice get their final builds in the background (tensor/engine/compile_queue.py): they are made
  # within the test, in its own cache folder (before its fixtures restore CACHE_DIR), not during the next test
  from tensor.engine.compile_queue import wait_upgrades
  wait_upgrades()

def pytest_sessionfinish(session, exitstatus) -> None:
  trace.save_coverage()  # each process, pytest-xdist workers too: before the summary below reads the file

def pytest_terminal_summary(terminalreporter) -> None:
  if not trace.COVERAGE_FILE: return
  from dslc.coverage import load_counts, report
  text, _, _ = report(load_counts(trace.COVERAGE_FILE), "this test run", summary_only=True)
  terminalreporter.write_line(f"{text} (python -m dslc coverage --from {trace.COVERAGE_FILE} lists them)")
