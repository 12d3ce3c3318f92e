"""PROFILE=1 (runtime/profile.py): a Chrome trace-event JSON with spans for the tensor graph, scheduling, each codegen stage,
compilation and each kernel run, agreeing with GlobalCounters and the DEBUG=2 lines; DEBUG=2 colours only on a terminal."""
import json, os, pty, re, select, subprocess, sys
import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# a matmul, a reduction long enough to be split (>= 64), an elementwise kernel short enough to be upcast, and copies
PROGRAM = """
import json
import numpy as np
from tensor import Tensor, GlobalCounters
a = Tensor(np.arange(96, dtype=np.float32).reshape(8, 12))
b = (a @ Tensor.ones(12, 5)).relu().sum(axis=1)
c = (Tensor([1, 2, 3, 4]) + 3 + 4)
d = Tensor(np.ones(256, dtype=np.float32)).sum()
out = [b.numpy().tolist(), c.tolist(), d.item()]
print("RESULT", json.dumps(out))
print("COUNTERS", json.dumps([GlobalCounters.global_ops, GlobalCounters.global_mem, GlobalCounters.kernel_count, GlobalCounters.time_sum_s]))
"""

def run(tmp_path, **env):
  return subprocess.run([sys.executable, "-c", PROGRAM], cwd=ROOT, capture_output=True, text=True, timeout=300,
                        env={**os.environ, "CACHE_DIR": str(tmp_path / "cache"), **env})

@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("profile")
  r = run(tmp, PROFILE="1", PROFILE_PATH=str(tmp / "trace.json"), DEBUG="2", DEV="CPU")
  assert r.returncode == 0, r.stderr
  with open(tmp / "trace.json") as f: trace = json.load(f)
  return r, trace

def line_of(stdout: str, tag: str): return json.loads(next(x for x in stdout.splitlines() if x.startswith(tag + " ")).split(" ", 1)[1])

def test_results_are_right(profiled):
  r, _ = profiled
  m = np.arange(96, dtype=np.float32).reshape(8, 12) @ np.ones((12, 5), np.float32)
  assert line_of(r.stdout, "RESULT") == [np.maximum(m, 0).sum(axis=1).tolist(), [8, 9, 10, 11], 256.0]

def test_the_trace_is_valid_chrome_trace_json(profiled):
  r, trace = profiled
  evs = trace["traceEvents"]
  assert trace["displayTimeUnit"] in ("ms", "ns") and evs
  for e in evs:
    assert e["ph"] in ("X", "M") and isinstance(e["name"], str) and isinstance(e["pid"], int) and isinstance(e["tid"], int)
    if e["ph"] == "X": assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0 and e["dur"] >= 0 and isinstance(e.get("args", {}), dict)
  assert {e["name"] for e in evs if e["ph"] == "M"} == {"process_name", "thread_name"}
  assert "PROFILE: " in r.stderr and "events written to" in r.stderr

def test_the_expected_spans(profiled):
  _, trace = profiled
  spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
  cats = {e["cat"] for e in spans}
  assert {"python", "schedule", "rewrite", "codegen", "compile", "kernel", "copy"} <= cats
  names = {e["name"] for e in spans}
  assert {"tensor graph", "schedule", "tensor_cleanup", "to_kernel_ast", "rangeify", "symbolic", "lower", "linearize", "render"} <= names
  kernels = [e for e in spans if e["cat"] == "kernel"]
  for k in kernels:
    assert {"flops", "bytes", "device", "global_size"} <= set(k["args"]) and k["args"]["device"] == "CPU"
    # each kernel was lowered inside its codegen span and compiled before it ran
    cg = next(e for e in spans if e["name"] == f"codegen {k['name']}")
    comp = next(e for e in spans if e["name"] == f"compile {k['name']}")
    assert cg["ts"] + cg["dur"] <= comp["ts"] + 1e-3 and comp["ts"] + comp["dur"] <= k["ts"] + 1e-3
    inner = [e for e in spans if e["cat"] == "rewrite" and cg["ts"] <= e["ts"] and e["ts"] + e["dur"] <= cg["ts"] + cg["dur"] + 1e-3]
    # (rangeify and symbolic may have run already, in the scheduler's fusion check, which codegen reuses)
    assert "lower" in {e["name"] for e in inner}

def test_kernel_spans_agree_with_global_counters_and_debug_2(profiled):
  r, trace = profiled
  ops, mem, count, seconds = line_of(r.stdout, "COUNTERS")
  runs = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] in ("kernel", "copy")]
  kernels = [e for e in runs if e["cat"] == "kernel"]
  assert len(runs) == count
  assert sum(e["args"]["flops"] for e in kernels) == ops and sum(e["args"]["bytes"] for e in kernels) == mem
  assert sum(e["dur"] for e in runs) == pytest.approx(seconds * 1e6, abs=1e-3 * len(runs))
  debug = [m.groups() for m in re.finditer(r"^\*\*\* CPU +(\d+) (\S+) .* tm +([\d.]+)us", r.stdout, re.M)]
  assert [(int(n), name) for n, name, _ in debug] == [(i + 1, e["name"]) for i, e in enumerate(runs)]
  for (_, _, tm), e in zip(debug, runs): assert float(tm) == pytest.approx(e["dur"], abs=0.006)
  assert "\x1b[" not in r.stdout, "no colours when stdout is not a terminal"

def test_nothing_is_written_without_profile(tmp_path):
  r = run(tmp_path, PROFILE_PATH=str(tmp_path / "trace.json"))
  assert r.returncode == 0 and not os.path.exists(tmp_path / "trace.json") and "PROFILE" not in r.stderr

def run_in_terminal(tmp_path, **env) -> str:
  # DEBUG=2 with stdout a terminal: a pseudo-terminal
  master, slave = pty.openpty()
  p = subprocess.Popen([sys.executable, "-c", PROGRAM], cwd=ROOT, stdout=slave, stderr=subprocess.DEVNULL,
                       env={**os.environ, "CACHE_DIR": str(tmp_path / "cache"), **env})
  os.close(slave)
  out = b""
  while True:
    ready, _, _ = select.select([master], [], [], 300)
    if not ready: break
    try: chunk = os.read(master, 65536)
    except OSError: break
    if not chunk: break
    out += chunk
  p.wait(timeout=300)
  os.close(master)
  return out.decode()

def test_debug_2_colours_kernel_names_on_a_terminal(tmp_path):
  out = run_in_terminal(tmp_path, DEBUG="2", DEV="CPU", NOOPT="0")  # the colours say which opts applied: the optimizer on
  esc = lambda code, text: f"\x1b[{code}m{text}\x1b[0m"  # noqa: E731
  blue, red, yellow, magenta = 34, 31, 33, 35
  # the seeds: "DEBUG=2 paints the 4 yellow because it was upcasted"
  assert f"E_{esc(yellow, '4')}" in out
  # the sum over 256 is split into interleaved lanes (unroll, purple); the fused matmul-relu-sum: 8 outputs (global, blue)
  # reducing 12 values each (red)
  assert f"r_{esc(blue, '1')}_{esc(magenta, '256')}" in out
  assert f"r_{esc(blue, '8')}_{esc(red, '12')}" in out

