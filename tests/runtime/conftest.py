"""Fixtures the runtime tests share."""
import tempfile
import pytest
from runtime import kernel_cache

@pytest.fixture
def cache(tmp_path, monkeypatch):
  """An empty kernel cache of this test's own (CACHE_DIR), with its own temporary folder; the path of the cache."""
  d = tmp_path / "cache"
  monkeypatch.setenv("CACHE_DIR", str(d))
  monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # the fallback folder of this test
  (tmp_path / "tmp").mkdir()
  monkeypatch.setattr(kernel_cache, "_full", set())
  return d
