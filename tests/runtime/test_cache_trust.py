"""What the kernel cache trusts (issue 22, docs/security.md): an entry is code that runs as the user, so a folder or entry
another user could have written is never read. The attacks reproduced: another user (uid 65534) plants a `k_<key>.so` whose
ELF constructor runs as the victim, or a `p_<key>.bin` whose dtype text ran through eval; squats the fallback folder
$TMPDIR/rulegrad-<uid>; plants the LALR tables dslc keeps as a pickle. The parts done as another user need root and skip
without it; the refusal logic itself is checked directly too.
"""
import hashlib, json, os, pickle, shutil, stat, subprocess, tempfile, uuid, warnings
import pytest
from other_user import NOBODY, as_other_user, needs_root, shared_folder
from runtime import kernel_cache, ops_cpu, safe_files
from runtime.dtype import _dtype_from_repr, dtypes
from tensor.codegen import program_cache

REAL_CC = shutil.which(os.environ.get("CC", "cc")) or "cc"

@pytest.fixture
def fresh(tmp_path, monkeypatch):
  """A temporary folder of this test (the fallback folder is made in it) and no memory of earlier warnings."""
  tmp = tmp_path / "tmp"
  tmp.mkdir()
  monkeypatch.setattr(tempfile, "tempdir", str(tmp))
  monkeypatch.setattr(kernel_cache, "_full", set())
  monkeypatch.setattr(kernel_cache, "_untrusted", set())
  monkeypatch.setattr(kernel_cache, "_warned", set())
  monkeypatch.setattr(safe_files, "_private", {})
  return tmp

def kernel_source(name: str) -> str:
  return (f"void {name}(int* restrict data0) {{ data0[0] = 7; }}\n"
          f"void {name}_call(void* const* bufs, const long long* ivals, const double* fvals) {{ {name}((int*)bufs[0]); }}\n")

def evil_entry(tmp_path, key: str, marker: str) -> bytes:
  """A shared object whose constructor creates `marker` when it is loaded, with a valid trailer for `key`."""
  src = tmp_path / "evil.c"
  src.write_text(f'#include <stdio.h>\n__attribute__((constructor)) static void run(void) {{\n'
                 f'  FILE* f = fopen("{marker}", "w"); if (f) fclose(f); }}\n')
  out = tmp_path / "evil.so"
  subprocess.run([REAL_CC, "-shared", "-fPIC", str(src), "-o", str(out)], check=True, capture_output=True, timeout=120)
  elf = out.read_bytes()
  return elf + kernel_cache._TRAILER.pack(kernel_cache.MAGIC, key.encode(), hashlib.sha256(elf).digest(), len(elf))

def program_entry(key: str, dtype_text: str) -> bytes:
  data = json.dumps({"name": "E_1", "src": "", "device": "CPU", "n_params": 1, "global_size": [1], "ops": 0, "mem": 0,
                     "vars": [[dtype_text, "n", 1, 9]], "opts": []}).encode()
  return data + kernel_cache._TRAILER.pack(kernel_cache.MAGIC, key.encode(), hashlib.sha256(data).digest(), len(data))

def write(path: str, data: bytes, mode: int = 0o600) -> None:
  with open(path, "wb") as f: f.write(data)
  os.chmod(path, mode)

# ---- the folder ----

def test_a_new_cache_folder_is_private(fresh, tmp_path, monkeypatch):
  d = tmp_path / "new" / "cache"
  monkeypatch.setenv("CACHE_DIR", str(d))
  assert kernel_cache.cache_dir() == str(d)
  assert stat.S_IMODE(os.stat(d).st_mode) == 0o700

def test_our_folder_others_may_write_is_closed(fresh, tmp_path, monkeypatch):
  d = tmp_path / "open"
  d.mkdir()
  os.chmod(d, 0o777)
  monkeypatch.setenv("CACHE_DIR", str(d))
  with pytest.warns(UserWarning, match="could be written by others.*made it 0700") as w:
    assert kernel_cache.cache_dir() == str(d)
    assert kernel_cache.cache_dir() == str(d)
  assert len(w) == 1 and stat.S_IMODE(os.stat(d).st_mode) == 0o700

def test_the_refusal_logic(tmp_path):
  """What makes a folder or file untrusted, checked directly (the tests as another user below need root)."""
  me, other = os.geteuid(), os.geteuid() + 4242
  st = lambda mode, uid: os.stat_result((mode, 0, 0, 1, uid, 0, 0, 0, 0, 0))  # noqa: E731
  assert safe_files.problem(st(stat.S_IFDIR | 0o700, me)) is None
  assert safe_files.problem(st(stat.S_IFDIR | 0o755, me)) is None  # readable by others: nothing to fear
  assert safe_files.problem(st(stat.S_IFDIR | 0o700, 0)) is None  # root's: root can change ours anyway
  assert "belongs to another user" in safe_files.problem(st(stat.S_IFDIR | 0o700, other))
  assert "can be written by others" in safe_files.problem(st(stat.S_IFDIR | 0o777, me))
  assert "can be written by its group" in safe_files.problem(st(stat.S_IFDIR | 0o770, me))
  assert "not a folder" in safe_files.problem(st(stat.S_IFREG | 0o700, me))
  assert "not a regular file" in safe_files.problem(st(stat.S_IFDIR | 0o600, me), "file")
  assert safe_files.problem(st(stat.S_IFREG | 0o600, me), "file") is None

def test_entries_built_under_a_loose_umask_are_ours_alone(fresh, tmp_path, monkeypatch):
  """A compiler output made under umask 002 was group-writable: the entry check would refuse our own kernels."""
  monkeypatch.setenv("CACHE_DIR", str(tmp_path / "cache"))
  old = os.umask(0o002)
  try:
    name = f"k_{uuid.uuid4().hex[:8]}"
    path = ops_cpu.compile_c(kernel_source(name))
  finally: os.umask(old)
  assert stat.S_IMODE(os.stat(path).st_mode) & 0o022 == 0
  kernel_cache.open_verified(path)  # trusted as it is

def test_another_users_folder_and_planted_kernel_never_run(fresh, tmp_path, monkeypatch):
  """The attack of issue 22: uid 65534 makes the cache folder and plants k_<key>.so with a valid trailer; the victim
  (root) compiling the same source used to load it, running its constructor."""
  needs_root()
  name = f"k_{uuid.uuid4().hex[:8]}"
  src = kernel_source(name)
  key = ops_cpu.cache_key(src, ops_cpu.cflags(src))
  with shared_folder() as shared:
    marker = os.path.join(shared, "ran")
    evil = evil_entry(tmp_path, key, marker)
    d = os.path.join(shared, "cache")
    def plant() -> None:
      os.mkdir(d, 0o755)
      write(kernel_cache.entry_path(d, key), evil, 0o755)
    as_other_user(plant)
    assert os.stat(d).st_uid == NOBODY
    monkeypatch.setenv("CACHE_DIR", d)
    with pytest.warns(UserWarning, match=f"{d} belongs to another user.*not used"):
      prog = ops_cpu.program(src, name)
    assert not os.path.exists(marker), "the planted kernel ran"
    assert not os.path.dirname(prog.lib._name).startswith(d)
    from runtime.device import Buffer
    out = Buffer("CPU", 1, dtypes.int32)
    prog([out])
    assert out.numpy().tolist() == [7]

def test_an_entry_another_user_owns_is_rebuilt_not_loaded(fresh, tmp_path, monkeypatch):
  # the folder is the victim's, the entry is not (made before the folder was closed, or by a copy): it is never loaded
  needs_root()
  d = tmp_path / "cache"
  monkeypatch.setenv("CACHE_DIR", str(d))
  name = f"k_{uuid.uuid4().hex[:8]}"
  src = kernel_source(name)
  key = ops_cpu.cache_key(src, ops_cpu.cflags(src))
  marker = str(tmp_path / "ran")
  os.makedirs(d, 0o700)
  path = kernel_cache.entry_path(str(d), key)
  write(path, evil_entry(tmp_path, key, marker))
  os.chown(path, NOBODY, NOBODY)
  with pytest.raises(kernel_cache.CacheError, match="belongs to another user"): kernel_cache.open_verified(path, key)
  ops_cpu.program(src, name)
  assert not os.path.exists(marker)
  assert os.stat(path).st_uid == os.geteuid()  # rebuilt by us, over the planted one

def test_entries_others_may_write_or_links_are_not_read(fresh, tmp_path, monkeypatch):
  d = tmp_path / "cache"
  monkeypatch.setenv("CACHE_DIR", str(d))
  d.mkdir(mode=0o700)
  key = uuid.uuid4().hex
  write(kernel_cache.data_path(str(d), key), program_entry(key, "dtypes.float"), 0o666)
  with pytest.raises(kernel_cache.CacheError, match="can be written by others"): kernel_cache.open_trusted(kernel_cache.data_path(str(d), key))
  assert kernel_cache.load_data(key) is None
  key2 = uuid.uuid4().hex
  target = tmp_path / "elsewhere.bin"
  write(str(target), program_entry(key2, "dtypes.float"))
  os.symlink(target, kernel_cache.data_path(str(d), key2))
  with pytest.raises(kernel_cache.CacheError, match="symbolic link"): kernel_cache.open_trusted(kernel_cache.data_path(str(d), key2))
  assert kernel_cache.load_data(key2) is None

# ---- cache contents are parsed, never evaluated ----

def test_a_dtype_in_a_program_entry_is_never_evaluated(fresh, tmp_path, monkeypatch):
  """The second attack: a p_<key>.bin whose `vars` dtype text was `__import__('os').system(...)`, run by eval."""
  d = tmp_path / "cache"
  monkeypatch.setenv("CACHE_DIR", str(d))
  d.mkdir(mode=0o700)
  marker = tmp_path / "ran"
  key = uuid.uuid4().hex
  write(kernel_cache.data_path(str(d), key), program_entry(key, f"__import__('os').system('touch {marker}')"))
  assert program_cache.load(key) is None
  assert not marker.exists()
  good = uuid.uuid4().hex
  write(kernel_cache.data_path(str(d), good), program_entry(good, "dtypes.int"))
  assert program_cache.load(good).vars[0].dtype is dtypes.int32

@pytest.mark.parametrize("d", [dtypes.float32, dtypes.half.vec(4), dtypes.int.ptr(16), dtypes.float.ptr(addrspace="local"), dtypes.bfloat16,
                               dtypes.uint64.vec(2).ptr(8, "local"), dtypes.void, dtypes.bool.ptr()])
def test_dtypes_are_parsed_by_name(d):
  assert _dtype_from_repr(repr(d)) is d and pickle.loads(pickle.dumps(d)) is d

@pytest.mark.parametrize("text", ["__import__('os').system('true')", "dtypes.float; 1", "dtypes.__class__", "dtypes.min", "dtypes.float.vec(999999)",
                                  "(dtypes.float)", "dtypes.float.ptr(1, addrspace=__import__('os'))", ""])
def test_anything_else_is_not_a_dtype(text):
  with pytest.raises(ValueError, match="not a dtype"): _dtype_from_repr(text)

# ---- the fallback folder ----

def test_a_squatted_fallback_folder_is_not_used(fresh, monkeypatch):
  """Another user made $TMPDIR/rulegrad-<uid> first (it was used whoever owned it): a private folder of our own is made."""
  needs_root()
  with shared_folder() as shared:
    monkeypatch.setattr(tempfile, "tempdir", shared)
    squat = os.path.join(shared, f"rulegrad-{os.geteuid()}")
    as_other_user(lambda: os.mkdir(squat, 0o777))
    with pytest.warns(UserWarning, match="belongs to another user"):
      d = kernel_cache.fallback_dir()
    assert d != squat and os.stat(d).st_uid == os.geteuid() and stat.S_IMODE(os.stat(d).st_mode) == 0o700
    with warnings.catch_warnings():
      warnings.simplefilter("error")
      assert kernel_cache.fallback_dir() == d  # decided once

def test_a_fallback_folder_that_is_a_link_is_not_used(fresh, tmp_path):
  target = tmp_path / "target"
  target.mkdir(mode=0o700)
  os.symlink(target, os.path.join(str(fresh), f"rulegrad-{os.geteuid()}"))
  with pytest.warns(UserWarning, match="is a symbolic link"):
    d = safe_files.private_dir()
  assert os.path.realpath(d) != str(target)

def test_our_own_fallback_folder_is_closed(fresh):
  base = os.path.join(str(fresh), f"rulegrad-{os.geteuid()}")
  os.mkdir(base, 0o755)
  assert safe_files.private_dir() == base and stat.S_IMODE(os.stat(base).st_mode) == 0o700

# ---- the rule compiler's tables (a pickle) ----

def test_planted_parser_tables_are_not_loaded(fresh, tmp_path, monkeypatch):
  """dslc keeps Lark's LALR tables in the cache folder as a pickle: one another user wrote is rebuilt, never loaded."""
  needs_root()
  from dslc import parse
  d = tmp_path / "cache"
  d.mkdir(mode=0o700)
  monkeypatch.setenv("CACHE_DIR", str(d))
  parse.grammar.cache_clear()
  parse.grammar()  # writes the tables
  (path,) = [p for p in d.iterdir() if p.name.startswith("dslc-grammar-")]
  marker = tmp_path / "ran"
  class Evil:
    def __reduce__(self): return (os.system, (f"touch {marker}",))
  path.write_bytes(pickle.dumps(Evil()))
  os.chown(path, NOBODY, NOBODY)
  parse.grammar.cache_clear()
  try: assert parse.grammar().parse("(ADD x 0) -> x") is not None
  finally: parse.grammar.cache_clear()
  assert not marker.exists()
