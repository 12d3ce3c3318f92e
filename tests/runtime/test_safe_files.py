"""Outputs written without following another user's link (issue 22 item 3, docs/security.md): PROFILE=1, VIZ=1 and GRAPH=1
wrote `$TMPDIR/rulegrad_profile_<pid>.json.tmp<pid>`, `rulegrad_viz_<pid>.pkl.tmp<pid>` and a fixed `$TMPDIR/rulegrad_graph`
with a plain open(..., 'w'): another user's symlink at such a name made PROFILE=1 overwrite the victim's private file. Now
the default outputs go to this user's private folder and every write is a fresh mkstemp file renamed into place.

The attacker's links are made by uid 65534 in a folder like /tmp when the tests run as root, by this user otherwise (a link
at the temporary name is then still never followed); the squatted private folder needs another user and skips without root.
"""
import json, os, stat, tempfile
import pytest
from other_user import as_other_user, shared_folder
from runtime import UOp, dtypes, graph, profile, safe_files, trace

def as_attacker(fn) -> None:
  if hasattr(os, "geteuid") and os.geteuid() == 0: as_other_user(fn)
  else: fn()

@pytest.fixture
def secret(tmp_path):
  p = tmp_path / "secret"
  p.write_text("the victim's private data")
  os.chmod(p, 0o600)
  return p

@pytest.fixture
def shared(tmp_path, monkeypatch):  # tmp_path first: it must not be made in the shared folder
  with shared_folder() as d:
    monkeypatch.setattr(tempfile, "tempdir", d)
    monkeypatch.setattr(safe_files, "_private", {})
    yield d

def links(folder: str, names: list[str], target) -> None:
  for n in names: os.symlink(str(target), os.path.join(folder, n))

def test_profile_never_writes_through_a_planted_link(shared, secret, monkeypatch):
  pid = os.getpid()
  squat = os.path.join(shared, f"rulegrad-{os.geteuid()}")
  def plant() -> None:
    # every name the old code would have written, in the temporary folder and in a squatted private folder
    links(shared, [f"rulegrad_profile_{pid}.json", f"rulegrad_profile_{pid}.json.tmp{pid}"], secret)
    os.mkdir(squat, 0o777)
    links(squat, [f"rulegrad_profile_{pid}.json", f"rulegrad_profile_{pid}.json.tmp{pid}"], secret)
  as_attacker(plant)
  monkeypatch.delenv("PROFILE_PATH", raising=False)
  profile.add_span("x", "python", 0.0, 1.0)
  try:
    if os.geteuid() == 0:
      with pytest.warns(UserWarning, match="belongs to another user"): path = profile.save()
    else: path = profile.save()
  finally: profile.reset()
  assert secret.read_text() == "the victim's private data"
  assert not os.path.islink(path) and json.loads(open(path).read())["traceEvents"]
  if os.geteuid() == 0: assert os.path.dirname(path) != squat
  folder = os.path.dirname(path)
  assert os.stat(folder).st_uid == os.geteuid() and stat.S_IMODE(os.stat(folder).st_mode) == 0o700

def test_profile_path_in_a_shared_folder_is_written_whole_not_through_links(shared, secret, monkeypatch):
  pid = os.getpid()
  path = os.path.join(shared, "trace.json")
  as_attacker(lambda: links(shared, ["trace.json.tmp" + str(pid), "trace.json"], secret))
  monkeypatch.setenv("PROFILE_PATH", path)
  profile.add_span("x", "python", 0.0, 1.0)
  try: assert profile.save() == path
  finally: profile.reset()
  assert secret.read_text() == "the victim's private data"
  assert not os.path.islink(path) and os.stat(path).st_uid == os.geteuid() and "traceEvents" in open(path).read()

def test_viz_recording_is_written_whole_not_through_links(shared, secret):
  pid = os.getpid()
  path = os.path.join(shared, f"rulegrad_viz_{pid}.pkl")
  as_attacker(lambda: links(shared, [f"rulegrad_viz_{pid}.pkl.tmp{pid}"], secret))
  trace.Recording().save(path)
  assert secret.read_text() == "the victim's private data"
  assert isinstance(trace.load(path), trace.Recording)

def test_viz_and_graph_default_to_the_private_folder(shared, monkeypatch):
  monkeypatch.delenv("GRAPH_DIR", raising=False)
  assert graph.graph_dir() == os.path.join(safe_files.private_dir(), "graph")
  assert os.path.dirname(safe_files.private_path("x")) == safe_files.private_dir() == os.path.join(shared, f"rulegrad-{os.geteuid()}")

def test_graph_never_writes_into_another_users_folder(shared, secret, monkeypatch):
  pid = os.getpid()
  old = os.path.join(shared, "rulegrad_graph")  # the fixed folder GRAPH=1 used
  def plant() -> None:
    os.mkdir(old, 0o777)
    links(old, [f"g.dot.tmp{pid}", f"g.mmd.tmp{pid}", f"g.svg.tmp{pid}"], secret)
  as_attacker(plant)
  monkeypatch.delenv("GRAPH_DIR", raising=False)
  x = UOp.variable("x", 0, 10)
  paths = graph.write_graph(x + UOp.const(dtypes.int, 3), "g")
  assert secret.read_text() == "the victim's private data"
  assert paths and all(not p.startswith(old) and os.path.isfile(p) and not os.path.islink(p) for p in paths)
  monkeypatch.setenv("GRAPH_DIR", old)  # a folder the user names is used, still never through a link
  graph.write_graph(x + UOp.const(dtypes.int, 3), "g")
  assert secret.read_text() == "the victim's private data"

def test_replace_file_leaves_nothing_behind_on_failure(tmp_path):
  def boom(f): f.write(b"half"); raise RuntimeError("stopped")
  with pytest.raises(RuntimeError): safe_files.replace_file(tmp_path / "out", boom)
  assert list(tmp_path.iterdir()) == []
