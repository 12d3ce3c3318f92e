"""Suite-wide hooks. With RULECOVERAGE=FILE (.ci/run sets it) every test process adds the rules that fired into FILE as its
session ends, and the run's summary says how many rules never fired; `python -m dslc coverage --from FILE` lists them."""
import pytest
from runtime import trace

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
  yield
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
