"""runtime/helpers.py: getenv and its types, ContextVar and Context, GlobalCounters.reset, progress."""
import pytest
from runtime import Context, ContextVar, DEBUG, GlobalCounters, getenv
from runtime.helpers import RULESTATS, colored, prod, progress

def test_getenv_converts_to_the_default_type(monkeypatch):
  monkeypatch.setenv("RT_TEST_INT", "42")
  monkeypatch.setenv("RT_TEST_FLOAT", "2.5")
  monkeypatch.setenv("RT_TEST_STR", "hello")
  assert getenv("RT_TEST_INT") == 42 and type(getenv("RT_TEST_INT")) is int
  assert getenv("RT_TEST_FLOAT", 0.0) == 2.5 and getenv("RT_TEST_STR", "") == "hello"
  assert getenv("RT_TEST_UNSET_VARIABLE") == 0 and getenv("RT_TEST_UNSET_VARIABLE", "dflt") == "dflt"
  assert getenv("RT_TEST_UNSET_VARIABLE", 1.5) == 1.5

@pytest.mark.parametrize("text,want", [("1", True), ("yes", True), ("0", False), ("", False), ("false", False), ("False", False)])
def test_getenv_bool(monkeypatch, text, want):
  key = f"RT_TEST_BOOL_{abs(hash(text))}"
  monkeypatch.setenv(key, text)
  assert getenv(key, False) is want and getenv(key, True) is want

def test_getenv_bad_value_raises(monkeypatch):
  monkeypatch.setenv("RT_TEST_BAD_INT", "two")
  with pytest.raises(ValueError): getenv("RT_TEST_BAD_INT", 0)

def test_getenv_reads_once(monkeypatch):
  monkeypatch.setenv("RT_TEST_CACHED", "1")
  assert getenv("RT_TEST_CACHED") == 1
  monkeypatch.setenv("RT_TEST_CACHED", "2")
  assert getenv("RT_TEST_CACHED") == 1  # documented: read once per process

def test_context_var_compares_like_its_value():
  v = ContextVar("RT_TEST_CONTEXT_VAR", 3)
  assert v.value == 3 and v == 3 and v >= 3 and v > 2 and v <= 3 and v < 4 and int(v) == 3 and bool(v) and [0, 1, 2, 3][v] == 3
  assert repr(v) == "RT_TEST_CONTEXT_VAR=3"
  with pytest.raises(ValueError, match="exists"): ContextVar("RT_TEST_CONTEXT_VAR", 0)

def test_context_sets_and_restores():
  before_debug, before_stats = DEBUG.value, RULESTATS.value
  with Context(DEBUG=4, RULESTATS=1) as ctx:
    assert DEBUG.value == 4 and DEBUG >= 4 and RULESTATS.value == 1 and isinstance(ctx, Context)
    with Context(DEBUG=7):
      assert DEBUG.value == 7 and RULESTATS.value == 1
    assert DEBUG.value == 4
  assert DEBUG.value == before_debug and RULESTATS.value == before_stats

def test_context_restores_after_an_exception():
  before = DEBUG.value
  with pytest.raises(RuntimeError):
    with Context(DEBUG=5): raise RuntimeError("boom")
  assert DEBUG.value == before

def test_context_as_decorator():
  @Context(DEBUG=6)
  def inside(): return DEBUG.value
  before = DEBUG.value
  assert inside() == 6 and DEBUG.value == before

def test_context_rejects_unknown_names():
  with pytest.raises(KeyError, match="NOT_A_FLAG"): Context(NOT_A_FLAG=1)
  with pytest.raises(KeyError):
    with Context(DEBUG=1, NOT_A_FLAG=1): pass
  assert "DEBUG" in ContextVar._registry

def test_global_counters_reset():
  saved = (GlobalCounters.global_ops, GlobalCounters.global_mem, GlobalCounters.time_sum_s, GlobalCounters.kernel_count, GlobalCounters.mem_used)
  try:
    GlobalCounters.global_ops, GlobalCounters.global_mem, GlobalCounters.time_sum_s, GlobalCounters.kernel_count = 10, 20, 1.5, 3
    GlobalCounters.mem_used = 1024
    GlobalCounters.reset()
    assert (GlobalCounters.global_ops, GlobalCounters.global_mem, GlobalCounters.time_sum_s, GlobalCounters.kernel_count) == (0, 0, 0.0, 0)
    assert GlobalCounters.mem_used == 1024  # live allocations outlast a reset, as in tinygrad
  finally:
    (GlobalCounters.global_ops, GlobalCounters.global_mem, GlobalCounters.time_sum_s, GlobalCounters.kernel_count,
     GlobalCounters.mem_used) = saved

def test_progress_yields_every_item(capsys):
  assert list(progress(range(1000), desc="work")) == list(range(1000))
  err = capsys.readouterr().err
  assert "work: " in err and "1000/1000" in err and err.endswith("\n")

def test_progress_without_a_length(capsys):
  items = (i * i for i in range(50))
  assert list(progress(items)) == [i * i for i in range(50)]
  assert "it/s" in capsys.readouterr().err  # (the last count drawn may be an early one: see the report)
  assert list(progress(iter("abc"), total=3)) == ["a", "b", "c"]

def test_progress_disabled_and_empty(capsys):
  assert list(progress([1, 2, 3], disable=True)) == [1, 2, 3]
  assert list(progress([])) == []
  assert capsys.readouterr().err == ""

def test_small_helpers():
  assert prod([2, 3, 4]) == 24 and prod([]) == 1
  assert colored("x", None) == "x" and "x" in colored("x", "red")
