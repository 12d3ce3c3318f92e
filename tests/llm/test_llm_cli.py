"""python -m tensor.llm: one clear line for a missing or malformed file or an unsupported architecture; --prompt streams
a completion (weights kept quantized, or --float32); --benchmark prints tokens/s; the chat reads turns from stdin (tiny random model)."""
import sys, pathlib, subprocess
import pytest
gguf = pytest.importorskip("gguf", reason="pip install gguf to run the tensor.llm CLI tests")
sys.path.insert(0, str(pathlib.Path(__file__).parent))
from tiny import write_model  # noqa: E402
from tensor.llm.__main__ import main  # noqa: E402

def test_bad_files_are_one_line(tmp_path, capsys):
  assert main(["--model", str(tmp_path / "none.gguf")]) == 1
  assert capsys.readouterr().err.strip() == f"error: {tmp_path / 'none.gguf'}: no such file"
  (tmp_path / "bad.gguf").write_bytes(b"GGUF\x03\x00\x00\x00")
  assert main(["--model", str(tmp_path / "bad.gguf")]) == 1
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and "not a valid GGUF file" in err

def test_prompt_benchmark_and_chat(tmp_path, capsys, monkeypatch):
  # Q8_0 weights: kept quantized by default, dequantized to float32 with --float32
  write_model(tmp_path / "m.gguf", "gemma3", head_dim=32, quant=gguf.GGMLQuantizationType.Q8_0)
  assert main(["--model", str(tmp_path / "m.gguf"), "--prompt", "the", "--max-new", "4", "--max-context", "64"]) == 0
  assert capsys.readouterr().out.startswith("the")
  assert main(["--model", str(tmp_path / "m.gguf"), "--benchmark", "6", "--max-context", "64", "--float32"]) == 0
  assert "decode" in capsys.readouterr().out
  import io
  monkeypatch.setattr("sys.stdin", io.StringIO("hello\n"))
  assert main(["--model", str(tmp_path / "m.gguf"), "--max-new", "3", "--max-context", "64"]) == 0

def test_module_runs():
  r = subprocess.run([sys.executable, "-m", "tensor.llm", "--model", "/nonexistent/x.gguf"], capture_output=True, text=True)
  assert r.returncode == 1 and r.stderr.strip() == "error: /nonexistent/x.gguf: no such file"

def test_serve_flag(tmp_path):
  # --serve 0: any free port, printed on the first line; the server answers until it is stopped
  import json, re, urllib.request
  write_model(tmp_path / "m.gguf", "gemma3", head_dim=32)
  p = subprocess.Popen([sys.executable, "-m", "tensor.llm", "--model", str(tmp_path / "m.gguf"), "--serve", "0", "--max-context", "64"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
  try:
    line = p.stdout.readline()
    url = re.search(r"http://127\.0\.0\.1:\d+/v1", line).group()
    with urllib.request.urlopen(url + "/models", timeout=30) as r: assert json.loads(r.read())["data"][0]["id"] == "m"
  finally:
    p.terminate()
    p.wait(timeout=30)
