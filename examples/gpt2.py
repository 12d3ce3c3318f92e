"""GPT-2 (Radford et al. 2019) with a key/value cache, laid out as tinygrad's examples/gpt2.py: each attention layer keeps
its cache in a realized buffer and writes this step's keys and values into it (a realize per layer and step), and a
decode step of one token runs through TinyJit with the token and its position as bound Variables (one capture serves
every position). Parameter names are Hugging Face's `gpt2` checkpoint's; the Conv1D weights are stored (in, out), so
Linear layers take them transposed (bench/inference.py copies a torch model's random weights in).

  python examples/gpt2.py --layers 2 --tokens 8     # a small random model: greedy decode, ms per token
"""
from __future__ import annotations
import argparse, time
from tensor import Tensor, TinyJit, Variable, nn
from tensor.nn.state import get_state_dict

MAX_CONTEXT = 128

class Attention:
  def __init__(self, dim: int, n_heads: int):
    self.c_attn, self.c_proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
    self.n_heads, self.dim, self.head_dim = n_heads, dim, dim // n_heads
    self.cache_kv: Tensor | None = None

  def __call__(self, x: Tensor, start_pos, mask: Tensor | None) -> Tensor:
    xqkv = self.c_attn(x).reshape(x.shape[0], x.shape[1], 3, self.n_heads, self.head_dim)
    xq, xk, xv = (xqkv[:, :, i] for i in range(3))
    bsz, seqlen = xq.shape[:2]
    if self.cache_kv is None:
      self.cache_kv = Tensor.zeros(2, bsz, MAX_CONTEXT, self.n_heads, self.head_dim, dtype=x.dtype).contiguous().realize()
    # this step's keys and values into the cache, realized: the layer's kernels read it from memory. One token at a
    # symbolic position is written by selecting its row (a slice at a Variable offset can't be padded back)
    kv = Tensor.stack(xk, xv)                                                                # (2, bsz, seqlen, heads, head_dim)
    if seqlen == 1 and not isinstance(start_pos, int):
      row = Tensor.arange(MAX_CONTEXT).reshape(1, 1, MAX_CONTEXT, 1, 1) == start_pos
      self.cache_kv.assign(row.where(kv.expand(2, bsz, MAX_CONTEXT, self.n_heads, self.head_dim), self.cache_kv))
    else: self.cache_kv[:, :, start_pos:start_pos + seqlen] = kv
    self.cache_kv.realize()
    keys = self.cache_kv[0][:, :start_pos + seqlen]
    values = self.cache_kv[1][:, :start_pos + seqlen]
    xq, keys, values = xq.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2)
    out = xq.scaled_dot_product_attention(keys, values, mask).transpose(1, 2).reshape(bsz, seqlen, self.dim)
    return self.c_proj(out)

class FeedForward:
  def __init__(self, dim: int, hidden: int): self.c_fc, self.c_proj = nn.Linear(dim, hidden), nn.Linear(hidden, dim)
  def __call__(self, x: Tensor) -> Tensor: return self.c_proj(self.c_fc(x).gelu())

class TransformerBlock:
  def __init__(self, dim: int, n_heads: int, eps: float):
    self.attn, self.mlp = Attention(dim, n_heads), FeedForward(dim, 4 * dim)
    self.ln_1, self.ln_2 = nn.LayerNorm(dim, eps), nn.LayerNorm(dim, eps)
  def __call__(self, x: Tensor, start_pos, mask: Tensor | None) -> Tensor:
    h = x + self.attn(self.ln_1(x), start_pos, mask)
    return (h + self.mlp(self.ln_2(h))).contiguous()

class Transformer:
  def __init__(self, dim: int = 768, n_heads: int = 12, n_layers: int = 12, eps: float = 1e-5, vocab_size: int = 50257,
               max_seq_len: int = 1024):
    self.vocab_size = vocab_size
    self.wte, self.wpe = nn.Embedding(vocab_size, dim), nn.Embedding(max_seq_len, dim)
    self.h = [TransformerBlock(dim, n_heads, eps) for _ in range(n_layers)]
    self.ln_f = nn.LayerNorm(dim, eps)
    self.lm_head = nn.Linear(dim, vocab_size, bias=False)
    self.allpos = Tensor.arange(0, MAX_CONTEXT).reshape(1, -1).realize()
    self.forward_jit = TinyJit(self.forward)

  def forward(self, tokens, start_pos) -> Tensor:
    """Greedy next tokens: tokens (bs, seqlen) int Tensor, or one token as a bound Variable (decode)."""
    if isinstance(tokens, Tensor): seqlen, tok_emb = tokens.shape[1], self.wte(tokens)
    else: seqlen, tok_emb = 1, self.wte.weight.shrink(((tokens, tokens + 1), None)).reshape(1, 1, self.wte.embed_sz)
    h = tok_emb + self.wpe(self.allpos.shrink((None, (start_pos, start_pos + seqlen))))
    mask = Tensor.full((1, 1, seqlen, start_pos + seqlen), float("-inf")).triu(start_pos + 1) if seqlen > 1 else None
    for block in self.h: h = block(h, start_pos, mask)
    logits = self.lm_head(self.ln_f(h))[:, -1, :]
    return logits.argmax(-1).flatten().realize()

  def __call__(self, tokens, start_pos) -> Tensor:
    return (self.forward_jit if not isinstance(tokens, Tensor) else self.forward)(tokens, start_pos)

def decode(model: Transformer, prompt: list[int], count: int) -> tuple[list[int], list[float]]:
  """Greedy decode: the prompt in one forward, then `count` tokens one at a time (the JIT'd step); the tokens and the
  seconds each step took."""
  toks, times, start = list(prompt), [], 0
  for _ in range(count):
    t0 = time.perf_counter()
    if start and len(toks) - start == 1:
      nxt = model(Variable("tokens", 0, model.vocab_size - 1).bind(toks[-1]), Variable("start_pos", 1, MAX_CONTEXT - 1).bind(start))
    else: nxt = model(Tensor([toks[start:]]), start)  # the prompt: plain sizes
    tok = nxt.tolist()[0]
    times.append(time.perf_counter() - t0)
    start = len(toks)
    toks.append(tok)
  return toks, times

if __name__ == "__main__":
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--layers", type=int, default=12)
  ap.add_argument("--tokens", type=int, default=10)
  args = ap.parse_args()
  Tensor.manual_seed(0)
  model = Transformer(n_layers=args.layers)
  print(f"{sum(t.numel() for t in get_state_dict(model).values()) / 1e6:.0f}M parameters")
  toks, times = decode(model, [464, 3280, 318], args.tokens)
  print(toks, " ".join(f"{1e3 * t:.0f}" for t in times), "ms per step")
