"""Decoder-only language models read from GGUF files: the llama family (llama, mistral, qwen2, qwen3) and gemma3.
At the nn level (tensor.llm imports tensor and tensor.nn). One TinyJit capture of the decode step serves every position:
the position is the bound Variable `start_pos`, the KV cache is written at [start_pos, start_pos + T) and read over
[0, start_pos + T). docs/llm.md is the user's guide.

  model = Transformer.from_gguf("gemma-3-270m.gguf", max_context=1024)
  for tok in model.generate(ids, max_new=32): ...
"""
from __future__ import annotations
import math, os
from dataclasses import dataclass
from typing import Any, Iterator, Union
from runtime.uop import UOp
from tensor import Tensor, TinyJit, Variable, dtypes
from tensor.gguf import GGUFError, dequantize_many, gguf_load_blocks, is_quantized
from tensor.llm.quant import QuantizedWeight, quantized_weights

__all__ = ["Transformer", "ModelConfig", "UnsupportedModelError", "sample"]

class UnsupportedModelError(ValueError):
  """A GGUF file of an architecture (or with a feature) this module does not run; the message names it."""

ARCHS = ("llama", "mistral", "qwen2", "qwen3", "gemma3")
PREFILL_CHUNK = 32   # prompt tokens per step of the captured prefill (the last chunk is padded to it)
# fewer prompt tokens than this go through the captured decode step one at a time, not a padded prefill chunk (Gemma 3
# 270M, one thread: a 7-token prompt's first logits 0.95 s -> 0.40 s in a new process; the decode step is captured anyway)
DECODE_BELOW = PREFILL_CHUNK // 2

@dataclass(frozen=True)
class ModelConfig:
  arch: str
  n_layers: int
  dim: int
  hidden_dim: int
  n_heads: int
  n_kv_heads: int
  head_dim: int
  norm_eps: float
  vocab_size: int
  max_context: int
  rope_base: float
  rope_base_local: float        # gemma3's sliding-window layers use their own base
  rope_interleaved: bool        # llama's GGUF q/k rows are permuted for ggml's adjacent-pair rope; the others rotate halves
  qk_norm: bool
  qkv_bias: bool
  sliding_window: int           # 0: none
  sliding_pattern: int          # gemma3: every sliding_pattern-th layer is global, the others sliding
  gemma: bool                   # embeddings scaled by sqrt(dim), GeGLU, norms after attention and the feed-forward

  @staticmethod
  def from_metadata(meta: dict[str, Any], max_context: int | None, tensors: dict[str, Any]) -> ModelConfig:
    arch = meta.get("general.architecture")
    if arch not in ARCHS: raise UnsupportedModelError(f"architecture {arch!r} is not supported (supported: {', '.join(ARCHS)})")
    def get(key: str, default: Any = None) -> Any:
      v = meta.get(f"{arch}.{key}", default)
      if v is None: raise GGUFError(f"the GGUF metadata has no {arch}.{key}, which a {arch} model needs")
      return v
    n_heads, dim = get("attention.head_count"), get("embedding_length")
    if isinstance(n_heads, list) or isinstance(get("attention.head_count_kv", n_heads), list):
      raise UnsupportedModelError(f"{arch}: a head count per layer is not supported")
    if meta.get(f"{arch}.rope.scaling.type", "none") not in ("none", "linear") or meta.get(f"{arch}.expert_count", 0):
      raise UnsupportedModelError(f"{arch}: rope scaling {meta.get(f'{arch}.rope.scaling.type')!r} or experts are not supported")
    ctx = get("context_length")
    vocab = tensors["token_embd.weight"].shape[0]
    gemma = arch == "gemma3"
    return ModelConfig(
      arch=arch, n_layers=get("block_count"), dim=dim, hidden_dim=get("feed_forward_length"), n_heads=n_heads,
      n_kv_heads=get("attention.head_count_kv", n_heads), head_dim=get("attention.key_length", dim // n_heads),
      norm_eps=get("attention.layer_norm_rms_epsilon"), vocab_size=vocab, max_context=min(max_context or ctx, ctx),
      rope_base=float(get("rope.freq_base", 10000.0)), rope_base_local=10000.0 if gemma else float(get("rope.freq_base", 10000.0)),
      rope_interleaved=arch in ("llama", "mistral"), qk_norm="blk.0.attn_q_norm.weight" in tensors, qkv_bias="blk.0.attn_q.bias" in tensors,
      sliding_window=get("attention.sliding_window", 0) if gemma else 0, sliding_pattern=6 if gemma else 0, gemma=gemma)

  def is_sliding(self, layer: int) -> bool: return bool(self.sliding_window) and (layer + 1) % self.sliding_pattern != 0

# ---- pieces ----

Weight = Union[Tensor, QuantizedWeight]

def linear(x: Tensor, w: Weight) -> Tensor:
  """x @ w.T, w float32 or kept quantized (dequantized inside the matmul)."""
  return w.matmul(x) if isinstance(w, QuantizedWeight) else x @ w.T

def rms_norm(x: Tensor, w: Tensor, eps: float) -> Tensor:
  return x * (x * x).mean(-1, keepdim=True).add(eps).rsqrt() * w   # gemma's 1 + w is in the file's weights (ggml stores it so)

def rope_table(head_dim: int, n: int, base: float) -> tuple[Tensor, Tensor]:
  """cos and sin (n, head_dim // 2) of position * base ** (-2i / head_dim), in float32 as transformers computes them."""
  import numpy as np
  inv = (1.0 / (base ** (np.arange(0, head_dim, 2, dtype=np.int64).astype(np.float32) / head_dim))).astype(np.float32)
  ang = np.arange(n, dtype=np.float32)[:, None] * inv[None, :]
  return Tensor(np.cos(ang)).contiguous().realize(), Tensor(np.sin(ang)).contiguous().realize()

def apply_rope(x: Tensor, cos: Tensor, sin: Tensor, interleaved: bool) -> Tensor:
  """x (B, H, T, D) rotated by cos/sin (T, D/2): adjacent pairs (ggml's llama) or the two halves (neox, gemma, qwen)."""
  B, H, T, D = x.shape
  if interleaved:
    p = x.reshape(B, H, T, D // 2, 2)
    a, b = p[..., 0], p[..., 1]
    return Tensor.stack(a * cos - b * sin, b * cos + a * sin, dim=-1).reshape(B, H, T, D)
  a, b = x[..., :D // 2], x[..., D // 2:]
  return Tensor.cat(a * cos - b * sin, b * cos + a * sin, dim=-1)

class Block:
  """One decoder layer: attention with its KV cache (2, 1, n_kv_heads, max_context, head_dim), then the feed-forward."""
  def __init__(self, cfg: ModelConfig, w: dict[str, Weight], layer: int, masks: dict[tuple[int, bool], Tensor] | None = None):
    self.cfg, self.w, self.layer, self.masks = cfg, w, layer, {} if masks is None else masks
    self.sliding = cfg.is_sliding(layer)
    # room for a padded prefill chunk past the last position (its padding rows are written, never read)
    self.cache = Tensor.zeros(2, 1, cfg.n_kv_heads, cfg.max_context + PREFILL_CHUNK, cfg.head_dim).contiguous().realize()

  def _lin(self, x: Tensor, name: str) -> Tensor:
    y = linear(x, self.w[name + ".weight"])
    return y + self.w[name + ".bias"] if name + ".bias" in self.w else y

  def mask(self, T: int) -> Tensor:
    """The attention mask of T queries at positions sp + t, as a table (1, 1, 1, T, max_context + T) made once (shared by
    the layers of one kind): column c is the key at sp + c - max_context, 0 where query t sees it (c - max_context <= t
    and, on a sliding layer, t - (c - max_context) < window), -inf elsewhere; columns [max_context - sp, max_context + T)
    are the mask at position sp. Built from triu/tril by the Variable sp, its arange over the symbolic length was
    rebuilt in every layer's graph (15 ms of Python each) and computed from sp's bits in the kernels."""
    if (m := self.masks.get((T, self.sliding))) is None:
      import numpy as np
      k, t = np.arange(-self.cfg.max_context, T)[None, :], np.arange(T)[:, None]
      sees = (k <= t) & ((t - k < self.cfg.sliding_window) if self.sliding else True)
      m = Tensor(np.where(sees, 0, -np.inf).astype(np.float32).reshape(1, 1, 1, T, -1)).contiguous().realize()
      self.masks[(T, self.sliding)] = m
    return m

  def attention(self, x: Tensor, sp: Any, rope: tuple[Tensor, Tensor]) -> Tensor:
    cfg = self.cfg
    B, T, _ = x.shape
    H, KV, D = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    q = self._lin(x, "attn_q").reshape(B, T, H, D).transpose(1, 2)      # (B, H, T, D)
    k = self._lin(x, "attn_k").reshape(B, T, KV, D).transpose(1, 2)     # (B, KV, T, D)
    v = self._lin(x, "attn_v").reshape(B, T, KV, D).transpose(1, 2)
    if cfg.qk_norm: q, k = rms_norm(q, self.w["attn_q_norm.weight"], cfg.norm_eps), rms_norm(k, self.w["attn_k_norm.weight"], cfg.norm_eps)
    cos, sin = rope[0][sp:sp + T], rope[1][sp:sp + T]
    q, k = apply_rope(q, cos, sin, cfg.rope_interleaved), apply_rope(k, cos, sin, cfg.rope_interleaved)
    # the new keys and values stored first, then written into the cache by a kernel over its rows [sp, sp + T) alone
    # (tensor/codegen/window.py)
    q = q.contiguous()
    self.cache[:, :, :, sp:sp + T] = Tensor.stack(k, v).contiguous()
    keys, vals = self.cache[0, :, :, 0:sp + T], self.cache[1, :, :, 0:sp + T]   # (B, KV, S, D), S = sp + T
    # grouped-query attention: the G = H / KV query heads of a KV head are G * T rows against its keys. Not the keys
    # expanded to H heads: merged with the symbolic S, that expand indexed each key by divisions by S (a prefill chunk's
    # scores: 6 ms a layer)
    G = H // KV
    # query t (position sp + t) sees key j when j <= sp + t, and on a sliding layer when sp + t - j < window
    mask = self.mask(T)[:, :, :, :, cfg.max_context - sp:cfg.max_context + T]
    scores = (q.reshape(B, KV, G * T, D) @ keys.transpose(2, 3)) * (1.0 / math.sqrt(D))   # (B, KV, G * T, S)
    # the probabilities stored once: fused into att @ vals, each was computed again (its exp and mask) for every one of
    # the D values it weighs (Gemma 3 270M, a prefill chunk: 31 ms a layer)
    att = (scores.reshape(B, KV, G, T, sp + T) + mask).softmax(-1).contiguous().reshape(B, KV, G * T, sp + T)
    out = (att @ vals).reshape(B, H, T, D).transpose(1, 2).reshape(B, T, H * D)
    return self._lin(out, "attn_output")

  def __call__(self, x: Tensor, sp: Any, rope: tuple[Tensor, Tensor]) -> Tensor:
    cfg, w = self.cfg, self.w
    h = self.attention(rms_norm(x, w["attn_norm.weight"], cfg.norm_eps), sp, rope)
    if cfg.gemma: h = rms_norm(h, w["post_attention_norm.weight"], cfg.norm_eps)
    x = x + h
    f = rms_norm(x, w["ffn_norm.weight"], cfg.norm_eps)
    # each matvec its own kernel and the activation stored once: fused, ffn_down's rows each computed gelu (tanh) over the
    # hidden vector again, and gate and up as one kernel of two reductions lost their vector lanes (Gemma 3 270M: 1.3 and
    # 1.7 ms per layer, against 0.3 for each matvec alone)
    gate, up = self._lin(f, "ffn_gate").contiguous(), self._lin(f, "ffn_up").contiguous()
    f = self._lin(((gate.gelu() if cfg.gemma else gate.silu()) * up).contiguous(), "ffn_down")
    if cfg.gemma: f = rms_norm(f, w["post_ffw_norm.weight"], cfg.norm_eps)
    return x + f

# ---- the model ----

class Transformer:
  """A decoder-only model: token ids -> next-token logits, with a KV cache per layer. `meta` is the file's metadata."""
  def __init__(self, cfg: ModelConfig, weights: dict[str, Weight], meta: dict[str, Any] | None = None):
    self.cfg, self.meta = cfg, meta or {}
    per_layer: list[dict[str, Weight]] = [{} for _ in range(cfg.n_layers)]
    for name, t in weights.items():
      if name.startswith("blk."):
        _, n, rest = name.split(".", 2)
        if int(n) < cfg.n_layers: per_layer[int(n)][rest] = t
    masks: dict[tuple[int, bool], Tensor] = {}
    self.blocks = [Block(cfg, per_layer[i], i, masks) for i in range(cfg.n_layers)]
    for b in self.blocks:   # the captured steps' masks made now: a capture records what runs, and their tables need no kernel
      b.mask(1), b.mask(PREFILL_CHUNK)
    self.embedding = weights["token_embd.weight"]
    self.output = weights.get("output.weight", self.embedding)   # tied embeddings when the file has no output matrix
    self.output_norm = weights["output_norm.weight"]
    n = cfg.max_context + PREFILL_CHUNK
    self.rope = rope_table(cfg.head_dim, n, cfg.rope_base)
    self.rope_local = rope_table(cfg.head_dim, n, cfg.rope_base_local) if cfg.rope_base_local != cfg.rope_base else self.rope
    self.start_pos = Variable("start_pos", 0, cfg.max_context - 1)
    self.last = Variable("last", 0, PREFILL_CHUNK - 1)   # the prefill chunk's last real token (the rest is padding)
    self.decode_jit, self.prefill_jit = TinyJit(self._decode), TinyJit(self._prefill)
    # the weights and caches are realized already: capture on the first call (a warm-up call would schedule it all twice)
    self.decode_jit.cnt = self.prefill_jit.cnt = 1

  @staticmethod
  def from_gguf(path: str | os.PathLike, max_context: int | None = None, quantized: bool = False) -> Transformer:
    """The model of a GGUF file. max_context: the KV cache's length (at most the model's context_length). quantized:
    quantized weights stay as their blocks in memory and each matmul (and the embedding's row lookup) dequantizes what it
    reads, in the kernel; else every weight is dequantized to float32 now."""
    meta, blocks = gguf_load_blocks(path)
    blocks.pop("rope_freqs.weight", None)
    keep = {k for k, (_, t, shape) in blocks.items() if quantized and is_quantized(t) and len(shape) == 2}
    # the weights of one type unpacked (or dequantized) together, by one set of kernels into buffers each weight is a view
    # of, the quantized ones first, then the plain ones (float32 norms: the file's bytes as they are, no kernel)
    weights: dict[str, Weight] = dict(quantized_weights({k: blocks[k] for k in keep}))  # type: ignore[arg-type]
    rest = [k for k in blocks if k not in keep]
    for k, w in zip(rest, dequantize_many([blocks[k] for k in rest])): weights[k] = w.float()
    cfg = ModelConfig.from_metadata(meta, max_context, weights)
    Tensor.realize(*[w for w in weights.values() if isinstance(w, Tensor)])
    return Transformer(cfg, weights, meta)

  def forward(self, tokens: Tensor, sp: Any, last: Any = None) -> Tensor:
    """tokens (1, T) int32 at positions [sp, sp + T) -> the logits (1, vocab) after the one at `last` (default T - 1)."""
    emb = self.embedding.dequantized() if isinstance(self.embedding, QuantizedWeight) else self.embedding
    x = emb[tokens]                                                      # (1, T, dim): only these rows are read
    if self.cfg.gemma: x = x * math.sqrt(self.cfg.dim)
    # each layer's output realized: its KV-cache write realizes k and v anyway, and the next layer then reads a buffer
    # instead of recomputing (and re-scheduling) every layer before it. The cache's assign is realized with it: left pending
    # it is a live reader of the cache, which makes the engine schedule each layer afresh (not from its schedule cache);
    # realized together, the layers of one kind share one schedule (Gemma 3 270M's first prompt: 18 schedules -> 5)
    for b in self.blocks:
      x = b(x, sp, self.rope_local if b.sliding else self.rope)
      Tensor.realize(x, b.cache)
    x = x[:, -1] if last is None else x[:, last:last + 1].reshape(x.shape[0], x.shape[2])
    x = rms_norm(x, self.output_norm, self.cfg.norm_eps)
    return linear(x, self.output)

  def _decode(self, token: Tensor, sp: UOp) -> Tensor: return self.forward(token, sp).realize()
  def _prefill(self, tokens: Tensor, sp: UOp, last: UOp) -> Tensor: return self.forward(tokens, sp, last).realize()

  def logits(self, tokens: list[int], start_pos: int = 0, chunk: int | None = None) -> Tensor:
    """Feeds tokens at positions start_pos, ... and returns the logits (1, vocab) after the last. One token goes through
    the captured decode step, more through the captured prefill step in chunks of PREFILL_CHUNK (the last padded) while
    DECODE_BELOW or more remain, the rest one by one through the decode step, so no prompt length compiles anew; `chunk`
    instead runs chunks of that many uncaptured (eagerly)."""
    if not tokens: raise ValueError("logits of no tokens")
    if start_pos + len(tokens) > self.cfg.max_context:
      raise ValueError(f"{start_pos + len(tokens)} tokens do not fit the context of {self.cfg.max_context} (from_gguf's max_context)")
    out, pos = None, start_pos
    while pos < start_pos + len(tokens):
      left = start_pos + len(tokens) - pos
      part = tokens[pos - start_pos:pos - start_pos + (chunk or (PREFILL_CHUNK if left >= DECODE_BELOW else 1))]
      sp = self.start_pos.bind(pos)
      if chunk is not None: out = self.forward(Tensor([part], dtype=dtypes.int32), sp).realize()
      elif len(part) == 1: out = self.decode_jit(Tensor([part], dtype=dtypes.int32), sp)
      else: out = self.prefill_jit(Tensor([part + [0] * (PREFILL_CHUNK - len(part))], dtype=dtypes.int32), sp, self.last.bind(len(part) - 1))
      pos += len(part)
    assert out is not None
    return out

  def generate(self, tokens: list[int], max_new: int, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
               stop: set[int] | None = None, seed: int | None = None) -> Iterator[int]:
    """The next tokens after `tokens` (from position 0; the cache is filled again), one by one, until max_new or a stop token."""
    if seed is not None: Tensor.manual_seed(seed)
    logits = self.logits(tokens)
    pos = len(tokens)
    for _ in range(max_new):
      tok = sample(logits, temperature, top_k, top_p)
      yield tok
      if (stop and tok in stop) or pos >= self.cfg.max_context: return
      logits = self.logits([tok], pos)
      pos += 1

def sample(logits: Tensor, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0) -> int:
  """A token from logits (1, vocab): the most likely at temperature 0; else drawn from softmax(logits / temperature)
  restricted to the top_k most likely (0: all) and to the smallest set of them whose probability reaches top_p."""
  if temperature <= 0:
    # the first most likely token, found on the host in the one row of logits (1 MB for Gemma's 262,144 tokens): our argmax
    # kernel (a max, then the least index holding it) took 1.1 ms of a 25 ms decode step on one thread
    import numpy as np
    return int(np.argmax(logits.numpy().reshape(-1)))
  k = top_k if 0 < top_k < logits.shape[-1] else min(logits.shape[-1], 1024 if top_p < 1 else logits.shape[-1])
  if k < logits.shape[-1]: vals, idx = logits.topk(k, dim=-1)
  else: vals, idx = logits, None
  probs = (vals / temperature).softmax(-1)
  if top_p < 1:
    order_vals, order = probs.sort(-1, descending=True) if idx is None else (probs, None)
    before = order_vals.cumsum(-1) - order_vals                          # the probability of the more likely ones
    keep = (before < top_p).float()
    order_vals = order_vals * keep
    pick = int(order_vals.multinomial(1).item())
    pick = int(order[0, pick].item()) if order is not None else pick
  else: pick = int(probs.multinomial(1).item())
  return pick if idx is None else int(idx[0, pick].item())
