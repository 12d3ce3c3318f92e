"""Helpers of the VIZ tests: a recording of `Tensor([1,2,3,4]) + 3 + 4` made by VIZ=1 in a fresh process (so every kernel is
compiled there and its rewrites recorded), and a server for a recording on a free loopback port."""
import os, subprocess, sys, threading

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROGRAM = "from tensor import Tensor\nprint((Tensor([1, 2, 3, 4]) + 3 + 4).tolist())\n"

def run_viz(tmp: str, code: str = PROGRAM, **env: str) -> tuple[subprocess.CompletedProcess, str]:
  path = os.path.join(tmp, "trace.pkl")
  r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                     env={**os.environ, "VIZ": "1", "VIZ_SERVE": "0", "VIZ_PATH": path, **env})
  return r, path

class Served:
  def __init__(self, rec):
    from tensor.viz.server import make_server
    self.server = make_server(rec, 0)
    self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
    self.thread.start()
    self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
  def close(self) -> None:
    self.server.shutdown()
    self.server.server_close()
