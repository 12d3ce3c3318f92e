"""The VIZ explorer's web server: serves page.html and a small JSON API over a recording (runtime/trace.py), on 127.0.0.1
only. The page asks for the index of rewrites, then one drawn step at a time; graphs are laid out here (graphs.py).
Requests must name a loopback host (Host: 127.0.0.1, localhost or [::1]): a web page elsewhere can't read the recording
through a name it points at 127.0.0.1 (DNS rebinding, docs/security.md). A client that hangs up is no error.

  GET /                          the page
  GET /api/index                 kernels (groups) and their rewrites: name, steps, node counts
  GET /api/step?r=I&s=K          rewrite I after K steps: SVG, the rule that made step K (file:line, text), its node
  GET /api/steps?r=I             every step of rewrite I: rule and the node before and after, in words
  GET /source?file=F             a rule file the recording names, with line anchors (#L12)
"""
from __future__ import annotations
import json, os, socket, sys, threading
from typing import BinaryIO
from functools import lru_cache
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse
from runtime.graph import OP_CLASSES, OTHER_COLOR
from runtime.trace import Recording
from tensor.viz.graphs import Replay, label, svg

DEFAULT_PORT = 8000
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})

def loopback_host(host: str | None) -> bool:
  """Whether a Host header names this machine's loopback interface (any port): 127.0.0.1, localhost or [::1]."""
  if not host: return False
  host = host.strip().lower()
  if host.startswith("["): name = host[1:host.index("]")] if "]" in host else ""
  else: name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
  return name in LOOPBACK_HOSTS
PAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "page.html")

class Explorer:
  """The answers the API gives for one recording (thread safe: requests run on several threads)."""
  def __init__(self, rec: Recording):
    self.rec = rec
    self.lock = threading.Lock()
    self.replays: dict[int, Replay] = {}
    self.step = lru_cache(maxsize=64)(self._step)

  def index(self) -> dict:
    groups: dict[str, list[int]] = {}
    for i, rw in enumerate(self.rec.rewrites): groups.setdefault(rw["group"], []).append(i)
    return {"groups": [{"name": g, "rewrites": ids} for g, ids in groups.items()],
            "classes": {**{c: color for c, (_, color) in OP_CLASSES.items()}, "other": OTHER_COLOR},
            "rewrites": [{"name": rw["name"], "group": rw["group"], "steps": len(rw["steps"]), "ms": round(rw["ms"], 3), "error": rw["error"],
                          "bottom_up": rw["bottom_up"], "depth": rw.get("depth", 0)} for rw in self.rec.rewrites]}

  def replay(self, r: int) -> Replay:
    if r not in self.replays: self.replays[r] = Replay(self.rec, r)
    return self.replays[r]

  def _step(self, r: int, s: int) -> dict:
    rw = self.rec.rewrites[r]
    s = max(0, min(s, len(rw["steps"])))
    # the last step is the recorded output: no need to replay every step to show it
    if s == len(rw["steps"]) and rw["output"] is not None: root = rw["output"]
    else:
      with self.lock: root = self.replay(r).root(s)
    out = {"rewrite": r, "step": s, "steps": len(rw["steps"]), "name": rw["name"], "group": rw["group"], "error": rw["error"]}
    changed = None
    if s:
      rule, before, after = rw["steps"][s - 1]
      changed = after
      out["rule"] = self.rule(rule)
      out["before"], out["after"] = self.describe(before), self.describe(after)
    out["svg"], out["labels"], out["nodes"] = svg(self.rec, root, changed)
    return out

  def rule(self, i: int) -> dict:
    file, line, text, rid = self.rec.rules[i]
    return {"file": file, "line": line, "text": text, "id": rid, "has_source": file in self.rec.sources}

  def describe(self, n: int) -> str:
    """A node in words: its op, dtype and arg, and its sources' ops."""
    head, src = self.rec.nodes[n]
    op, dtype, arg = self.rec.heads[head]
    inner = ", ".join(" ".join(label(self.rec, s)) for s in src[:6]) + (", ..." if len(src) > 6 else "")
    return f"{op} {dtype}{' ' + arg if arg else ''}" + (f" ({inner})" if src else "")

  def steps(self, r: int) -> list[dict]:
    return [{"rule": self.rule(rule), "after": " ".join(label(self.rec, a))} for rule, _, a in self.rec.rewrites[r]["steps"]]

  def source_page(self, file: str) -> str | None:
    text = self.rec.sources.get(file)
    if text is None: return None
    rows = "".join(f'<tr id="L{i}"><td class="ln"><a href="#L{i}">{i}</a></td><td><pre>{escape(line)}</pre></td></tr>'
                   for i, line in enumerate(text.split("\n"), 1))
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(file)}</title><style>body{{font:13px monospace;margin:0}}"
            "table{border-collapse:collapse}td{padding:0 8px;vertical-align:top}pre{margin:0}.ln{color:#888;text-align:right}"
            f"tr:target{{background:#fff3a0}}</style></head><body><h3 style='margin:8px'>{escape(file)}</h3><table>{rows}</table></body></html>")

def make_handler(explorer: Explorer) -> type[BaseHTTPRequestHandler]:
  class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None: pass  # quiet: the terminal is the user's

    def send(self, code: int, body: str | bytes, ctype: str) -> None:
      data = body.encode() if isinstance(body, str) else body
      self.send_response(code)
      self.send_header("Content-Type", ctype)
      self.send_header("Content-Length", str(len(data)))
      self.send_header("Cache-Control", "no-store")
      self.end_headers()
      self.wfile.write(data)

    def do_GET(self) -> None:
      if not loopback_host(self.headers.get("Host")):
        return self.send(403, "VIZ answers only requests addressed to 127.0.0.1, localhost or [::1]\n", "text/plain; charset=utf-8")
      url = urlparse(self.path)
      q = {k: v[0] for k, v in parse_qs(url.query).items()}
      try:
        if url.path == "/":
          with open(PAGE, "rb") as f: return self.send(200, f.read(), "text/html; charset=utf-8")
        if url.path == "/api/index": return self.send(200, json.dumps(explorer.index()), "application/json")
        if url.path in ("/api/step", "/api/steps"):
          r = int(q.get("r", "0"))
          if not 0 <= r < len(explorer.rec.rewrites): return self.send(404, json.dumps({"error": f"no rewrite {r}"}), "application/json")
          body = explorer.step(r, int(q.get("s", "0"))) if url.path == "/api/step" else explorer.steps(r)
          return self.send(200, json.dumps(body), "application/json")
        if url.path == "/source" and (page := explorer.source_page(q.get("file", ""))) is not None:
          return self.send(200, page, "text/html; charset=utf-8")
        self.send(404, f"not found: {url.path}", "text/plain; charset=utf-8")
      except ValueError as e: self.send(400, f"bad request: {e}", "text/plain; charset=utf-8")
  return Handler

class Server(ThreadingHTTPServer):
  daemon_threads = True  # a client that keeps its connection open does not hold the process at exit
  request_queue_size = 128  # socketserver's 5: a burst of connections (a page's parallel fetches) waited 1 s each for a SYN retry
  def handle_error(self, request, client_address) -> None:
    # a browser that closes a tab or cancels a request mid-answer: not worth a traceback on the user's terminal
    if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)): return
    super().handle_error(request, client_address)

def make_server(rec: Recording, port: int | None = None) -> ThreadingHTTPServer:
  """A server on 127.0.0.1 (never another interface): port VIZ_PORT or 8000, or any free one if that is taken; 0 picks one."""
  if port is None: port = int(os.environ.get("VIZ_PORT", DEFAULT_PORT))
  handler = make_handler(Explorer(rec))
  try: return Server(("127.0.0.1", port), handler)
  except OSError:
    if "VIZ_PORT" in os.environ and port == int(os.environ["VIZ_PORT"]): raise
    return Server(("127.0.0.1", 0), handler)

def serve(rec: Recording, port: int | None = None, until_eof: BinaryIO | None = None) -> None:
  """Serve the explorer until Ctrl-C, printing its address; with until_eof, also until that stream ends (VIZ=1 serves from a
  child process reading a pipe from the script: when the script ends, killed or not, the pipe closes and the server stops)."""
  server = make_server(rec, port)
  print(f"VIZ: {len(rec.rewrites)} graph rewrites at http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C stops)", file=sys.stderr)
  if until_eof is not None:
    def watch() -> None:
      try:
        while until_eof.read(4096): pass
      except (OSError, ValueError): pass
      server.shutdown()
    threading.Thread(target=watch, daemon=True).start()
  try: server.serve_forever()
  except KeyboardInterrupt: pass
  finally: server.server_close()

def free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]
