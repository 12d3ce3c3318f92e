"""A minimal W3C WebDriver client over HTTP (the standard library only): chromedriver driving headless Chromium, for the
VIZ page tests and bench/bench_viz.py. `available()` says whether Debian's chromium and chromium-driver are installed."""
from __future__ import annotations
import base64, json, os, shutil, socket, subprocess, tempfile, time, urllib.error, urllib.request

CHROMIUM = ("chromium", "chromium-browser", "google-chrome")
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"
# headless Chromium on this machine: no sandbox as root, and no background traffic to hosts it can't reach
ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage", "--window-size=1400,900"]

def browser() -> str | None: return next((p for p in map(shutil.which, CHROMIUM) if p), None)
def driver() -> str | None: return shutil.which("chromedriver")
def available() -> bool: return browser() is not None and driver() is not None

def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]

class WebDriverError(Exception): pass

class Browser:
  """One headless Chromium session. Use as a context manager; every call waits for its answer."""
  def __init__(self, timeout: float = 60):
    self.port = _free_port()
    self.profile = tempfile.mkdtemp(prefix="rulegrad-chromium-")
    self.proc = subprocess.Popen([driver(), f"--port={self.port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # type: ignore[list-item]
    self.base, self.timeout = f"http://127.0.0.1:{self.port}", timeout
    deadline = time.monotonic() + 30
    while True:
      try:
        if self._call("GET", "/status").get("ready"): break
      except (OSError, WebDriverError): pass
      if time.monotonic() > deadline or self.proc.poll() is not None:
        self.close()
        raise WebDriverError("chromedriver did not start")
      time.sleep(0.1)
    caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {"binary": browser(),
                                                                                               "args": ARGS + [f"--user-data-dir={self.profile}"]}}}}
    try: self.session = self._call("POST", "/session", caps)["sessionId"]
    except Exception:
      self.close()
      raise

  def _call(self, method: str, path: str, body: dict | None = None):
    data = json.dumps(body).encode() if body is not None else (b"{}" if method == "POST" else None)
    req = urllib.request.Request(self.base + path, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
      with urllib.request.urlopen(req, timeout=self.timeout) as r: out = json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
      raise WebDriverError(f"{method} {path}: {e.code} {e.read()[:500]!r}") from None
    return out.get("value", out)

  def cmd(self, method: str, path: str, body: dict | None = None): return self._call(method, f"/session/{self.session}{path}", body)
  def get(self, url: str) -> None: self.cmd("POST", "/url", {"url": url})
  def run(self, script: str, *args): return self.cmd("POST", "/execute/sync", {"script": script, "args": list(args)})
  def run_async(self, script: str, *args): return self.cmd("POST", "/execute/async", {"script": script, "args": list(args)})
  def find(self, css: str) -> str: return self.cmd("POST", "/element", {"using": "css selector", "value": css})[ELEMENT]
  def click(self, css: str) -> None: self.cmd("POST", f"/element/{self.find(css)}/click")
  def text(self, css: str) -> str: return self.cmd("GET", f"/element/{self.find(css)}/text")
  def screenshot(self, path: str) -> str:
    with open(path, "wb") as f: f.write(base64.b64decode(self.cmd("GET", "/screenshot")))
    return path

  def wait(self, script: str, timeout: float = 30, *args):
    """Poll a script until it returns something truthy; that value."""
    deadline = time.monotonic() + timeout
    while True:
      v = self.run(script, *args)
      if v: return v
      if time.monotonic() > deadline: raise WebDriverError(f"timed out waiting for: {script}")
      time.sleep(0.05)

  def close(self) -> None:
    if getattr(self, "session", None):
      try: self._call("DELETE", f"/session/{self.session}")
      except (OSError, WebDriverError): pass
      self.session = None
    if self.proc.poll() is None:
      self.proc.terminate()
      try: self.proc.wait(timeout=10)
      except subprocess.TimeoutExpired: self.proc.kill()
    shutil.rmtree(self.profile, ignore_errors=True)

  def __enter__(self) -> Browser: return self
  def __exit__(self, *exc) -> None: self.close()

def artifacts_dir() -> str:
  """Where tests leave screenshots (not in the repository): TEST_ARTIFACTS, else a folder in the temporary directory."""
  d = os.environ.get("TEST_ARTIFACTS") or os.path.join(tempfile.gettempdir(), "rulegrad-test-artifacts")
  os.makedirs(d, exist_ok=True)
  return d
