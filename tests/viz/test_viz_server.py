"""The VIZ server over HTTP on loopback: VIZ=1 saves a recording at exit, `python -m tensor.viz` and VIZ=1 itself serve it on
127.0.0.1 only, and the JSON API gives each step's graph and rule (the page's view of it: test_viz_browser.py)."""
import json, os, signal, subprocess, sys, time, urllib.error, urllib.request
import pytest
from viz_helpers import ROOT, run_viz
from runtime.trace import load
from tensor.viz.server import free_port

def get(url: str, timeout: float = 30):
  with urllib.request.urlopen(url, timeout=timeout) as r: return r.status, r.headers.get("Content-Type"), r.read().decode()

def get_json(url: str): return json.loads(get(url)[2])

def rule_line(file: str, line: int) -> str:
  with open(os.path.join(ROOT, file)) as f: return f.read().split("\n")[line - 1]

def test_viz_saves_the_recording_at_exit(add_3_4_recording):
  rec = load(add_3_4_recording)
  groups = [rw["group"] for rw in rec.rewrites]
  kernel = next(g for g in groups if g.startswith("E_4n"))  # the kernel's name: E_4 and a digest of its AST
  assert groups[0] == "schedule"
  assert {rw["name"] for rw in rec.rewrites if rw["group"] == kernel} >= {"rangeify", "symbolic", "lower"}
  assert set(rec.sources) >= {"rules/symbolic.rules", "rules/rangeify.rules", "rules/kernelize.rules"}

def test_the_api_steps_through_a_kernel(served):
  index = get_json(served.url + "/api/index")
  kernel = next(g for g in index["groups"] if g["name"].startswith("E_4n"))  # E_4 and a digest of its AST
  sym = next(r for r in kernel["rewrites"] if index["rewrites"][r]["name"] == "symbolic")
  n = index["rewrites"][sym]["steps"]
  assert n >= 1
  first = get_json(f"{served.url}/api/step?r={sym}&s=0")
  assert first["step"] == 0 and "rule" not in first and 'class="n ' in first["svg"] and " changed" not in first["svg"]
  folded = None
  for s in range(1, n + 1):
    d = get_json(f"{served.url}/api/step?r={sym}&s={s}")
    rule = d["rule"]
    assert d["svg"].count('class="n ') == d["nodes"] > 0 and d["svg"].count(" changed") == 1
    # the rule shown is the rule written at that line of its file
    assert " ".join(rule_line(rule["file"], rule["line"]).split()) in " ".join(rule["text"].split())
    if "CONST 7" in d["after"]: folded = d
  assert folded is not None, "the symbolic rewrite folds 3 + 4 into 7"
  steps = get_json(f"{served.url}/api/steps?r={sym}")
  assert len(steps) == n and all(st["rule"]["file"].endswith(".rules") for st in steps)

def test_the_source_view_and_bad_requests(served):
  status, ctype, page = get(served.url + "/source?file=rules/symbolic.rules")
  assert status == 200 and ctype.startswith("text/html") and 'id="L42"' in page and "(ADD! x:ints 0) -&gt; x" in page
  for bad in ("/source?file=/etc/passwd", "/source?file=../README.md", "/api/step?r=999", "/nothing"):
    with pytest.raises(urllib.error.HTTPError) as e: get(served.url + bad)
    assert e.value.code == 404, bad
  with pytest.raises(urllib.error.HTTPError) as e: get(served.url + "/api/step?r=x")
  assert e.value.code == 400
  status, ctype, page = get(served.url + "/")
  assert status == 200 and "<svg" not in page and "/api/index" in page and "http" not in page.replace("http://www.w3.org", "")

def test_the_server_listens_on_loopback_only(served):
  assert served.server.server_address[0] == "127.0.0.1"

def wait_for(url: str, proc: subprocess.Popen, timeout: float = 60) -> str:
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline:
    if proc.poll() is not None: raise AssertionError(f"the server exited with {proc.returncode}: {proc.stderr.read()}")
    try: return get(url, timeout=5)[2]
    except OSError: time.sleep(0.1)
  raise AssertionError(f"nothing served at {url}")

def stop(proc: subprocess.Popen) -> str:
  os.killpg(proc.pid, signal.SIGINT)
  try: proc.wait(timeout=30)
  except subprocess.TimeoutExpired:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
  return proc.stderr.read()

def test_python_m_tensor_viz_serves_a_saved_recording(add_3_4_recording):
  port = free_port()
  proc = subprocess.Popen([sys.executable, "-m", "tensor.viz", add_3_4_recording], cwd=ROOT, stderr=subprocess.PIPE, text=True,
                          env={**os.environ, "VIZ_PORT": str(port)}, start_new_session=True)
  try: index = json.loads(wait_for(f"http://127.0.0.1:{port}/api/index", proc))
  finally: err = stop(proc)
  assert any(g["name"].startswith("E_4n") for g in index["groups"])
  assert f"http://127.0.0.1:{port}/" in err

def test_viz_serves_at_exit_and_names_its_port(tmp_path):
  port = free_port()
  path = str(tmp_path / "t.pkl")
  code = "from runtime import UOp\nx = UOp.variable('x', 0, 9)\nprint((x + 3 + 4).simplify().render())\n"
  proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                          env={**os.environ, "VIZ": "1", "VIZ_PORT": str(port), "VIZ_PATH": path})
  try: index = json.loads(wait_for(f"http://127.0.0.1:{port}/api/index", proc))
  finally: err = stop(proc)
  assert [rw["name"] for rw in index["rewrites"]] == ["simplify"] and os.path.exists(path)
  assert f"127.0.0.1:{port}" in err and path in err

def test_a_bad_recording_file_is_a_clear_error(tmp_path):
  bad = tmp_path / "bad.pkl"
  bad.write_bytes(b"not a pickle")
  r = subprocess.run([sys.executable, "-m", "tensor.viz", str(bad)], cwd=ROOT, capture_output=True, text=True, timeout=120)
  assert r.returncode == 1 and f"can't read {bad}" in r.stderr

def test_nothing_is_saved_when_nothing_was_rewritten(tmp_path):
  r, path = run_viz(str(tmp_path), code="print(1)")
  assert r.returncode == 0 and not os.path.exists(path) and r.stderr == ""
