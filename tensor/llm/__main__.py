"""python -m tensor.llm --model FILE.gguf: chat in the terminal with a GGUF model, streaming its tokens; --prompt TEXT
completes one text and exits; --benchmark N prints prefill and decode tokens/s. A missing or malformed file, or an
unsupported architecture, is one line on stderr (exit status 1)."""
from __future__ import annotations
import argparse, sys, time
from tensor.llm.model import Transformer, UnsupportedModelError
from tensor.llm.tokenizer import Tokenizer
from tensor.gguf import GGUFError

def _stream(model: Transformer, tok: Tokenizer, ids: list[int], n: int, temperature: float, top_k: int, top_p: float) -> list[int]:
  """Generates up to n tokens after ids, printing the text as it grows (a UTF-8 character split over tokens waits)."""
  out: list[int] = []
  shown = ""
  stop = {t for t in (tok.eos, tok.special.get("<end_of_turn>"), tok.special.get("<|eot_id|>"), tok.special.get("<|im_end|>")) if t is not None}
  for t in model.generate(ids, n, temperature, top_k, top_p, stop=stop):
    if t in stop: break
    out.append(t)
    text = tok.decode(out)
    if not text.endswith("\ufffd"):
      print(text[len(shown):], end="", flush=True)
      shown = text
  print(flush=True)
  return out

def _chat_prompt(tok: Tokenizer, arch: str, history: list[tuple[str, str]]) -> list[int]:
  """The turns in the model's chat format (gemma's turns, or ChatML for the others)."""
  if arch.startswith("gemma"):
    text = "".join(f"<start_of_turn>{role}\n{msg}<end_of_turn>\n" for role, msg in history) + "<start_of_turn>model\n"
  else: text = "".join(f"<|im_start|>{role}\n{msg}<|im_end|>\n" for role, msg in history) + "<|im_start|>assistant\n"
  return tok.encode(text)

def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(prog="python -m tensor.llm", description=__doc__.split("\n")[0])
  ap.add_argument("--model", required=True, help="a GGUF file (llama, mistral, qwen2, qwen3, gemma3)")
  ap.add_argument("--prompt", help="complete this text and exit (no chat format)")
  ap.add_argument("--max-new", type=int, default=256)
  ap.add_argument("--max-context", type=int, default=2048)
  ap.add_argument("--temperature", type=float, default=0.0)
  ap.add_argument("--top-k", type=int, default=0)
  ap.add_argument("--top-p", type=float, default=1.0)
  ap.add_argument("--benchmark", type=int, metavar="N", help="print prefill and decode tokens/s for N new tokens")
  args = ap.parse_args(argv)
  try:
    model = Transformer.from_gguf(args.model, max_context=args.max_context)
    tok = Tokenizer.from_gguf_metadata(model.meta)
  except FileNotFoundError as e:
    print(f"error: {e.filename or args.model}: no such file", file=sys.stderr)
    return 1
  except (GGUFError, UnsupportedModelError, ValueError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 1
  if args.benchmark:
    ids = tok.encode("The quick brown fox jumps over the lazy dog. " * 4)[:max(1, model.cfg.max_context - args.benchmark - 1)]
    t0 = time.perf_counter()
    model.logits(ids).realize()
    prefill = len(ids) / (time.perf_counter() - t0)
    times = []
    t = time.perf_counter()
    for _ in model.generate(ids, args.benchmark):
      now = time.perf_counter()
      times.append(now - t)
      t = now
    steady = sorted(times[3:] or times)[len(times[3:] or times) // 2]
    print(f"prefill {prefill:.1f} tokens/s ({len(ids)} tokens, first run: compiles included); decode {1 / steady:.2f} tokens/s (median)")
    return 0
  if args.prompt is not None:
    print(args.prompt, end="", flush=True)
    _stream(model, tok, tok.encode(args.prompt), args.max_new, args.temperature, args.top_k, args.top_p)
    return 0
  history: list[tuple[str, str]] = []
  while True:
    try: line = input("> ")
    except EOFError: return 0
    if not line.strip(): continue
    history.append(("user", line))
    out = _stream(model, tok, _chat_prompt(tok, model.cfg.arch, history), args.max_new, args.temperature, args.top_k, args.top_p)
    history.append(("model", tok.decode(out)))

if __name__ == "__main__": sys.exit(main())
