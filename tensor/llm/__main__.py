"""python -m tensor.llm --model FILE.gguf: chat in the terminal with a GGUF model, streaming its tokens; --prompt TEXT
completes one text and exits; --benchmark N prints prefill and decode tokens/s; --serve [PORT] serves an OpenAI-compatible
API (tensor/llm/serve.py) on 127.0.0.1 (--host to change). Quantized weights stay quantized (--float32: dequantized at
load). A missing or malformed file, or an unsupported architecture, is one line on stderr (exit status 1)."""
from __future__ import annotations
import argparse, os, sys, time
from tensor.llm.model import Transformer, UnsupportedModelError
from tensor.llm.chat import chat_ids, stream_text
from tensor.llm.tokenizer import Tokenizer
from tensor.gguf import GGUFError

def _stream(model: Transformer, tok: Tokenizer, ids: list[int], n: int, temperature: float, top_k: int, top_p: float) -> list[int]:
  """Generates up to n tokens after ids, printing the text as it grows."""
  out: list[int] = []
  for piece, out, _ in stream_text(model, tok, ids, n, temperature, top_k, top_p): print(piece, end="", flush=True)
  print(flush=True)
  return out

def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(prog="python -m tensor.llm", description=__doc__.split("\n")[0])
  ap.add_argument("--model", required=True, help="a GGUF file (llama, mistral, qwen2, qwen3, gemma3)")
  ap.add_argument("--prompt", help="complete this text and exit (no chat format)")
  ap.add_argument("--max-new", type=int, default=256)
  ap.add_argument("--max-context", type=int, default=2048)
  ap.add_argument("--temperature", type=float, default=0.0)
  ap.add_argument("--top-k", type=int, default=0)
  ap.add_argument("--top-p", type=float, default=1.0)
  ap.add_argument("--float32", action="store_true", help="dequantize every weight to float32 at load (default: quantized weights stay "
                  "int8 groups and scales, which decode faster in a quarter of the memory)")
  ap.add_argument("--benchmark", type=int, metavar="N", help="print prefill and decode tokens/s for N new tokens")
  ap.add_argument("--serve", type=int, nargs="?", const=8000, metavar="PORT", help="serve /v1/chat/completions and /v1/models (port 8000; 0: any)")
  ap.add_argument("--host", default="127.0.0.1", help="the address --serve listens on")
  args = ap.parse_args(argv)
  try:
    model = Transformer.from_gguf(args.model, max_context=args.max_context, quantized=not args.float32)
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
  if args.serve is not None:
    from tensor.llm.serve import make_server
    name = str(model.meta.get("general.name") or os.path.splitext(os.path.basename(args.model))[0])
    try: server = make_server(model, tok, name, args.host, args.serve, verbose=True)
    except OSError as e:
      print(f"error: can't listen on {args.host}:{args.serve}: {e.strerror}", file=sys.stderr)
      return 1
    host, port = server.server_address[:2]
    print(f"serving {name!r} on http://{host}:{port}/v1 (POST /v1/chat/completions, GET /v1/models); Ctrl-C stops", flush=True)
    try: server.serve_forever()
    except KeyboardInterrupt: pass
    finally: server.server_close()
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
    out = _stream(model, tok, chat_ids(tok, model.cfg.arch, history), args.max_new, args.temperature, args.top_k, args.top_p)
    history.append(("assistant", tok.decode(out)))

if __name__ == "__main__": sys.exit(main())
