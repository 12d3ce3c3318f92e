"""Tiny GGUF models with random weights, written with the `gguf` package for the tests (llama and gemma3 layouts)."""
import numpy as np

def vocab(n: int) -> tuple[list[str], list[float], list[int]]:
  """A SentencePiece-style vocabulary: specials, the 256 byte pieces, then letters and pieces with '▁'."""
  toks = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
  pieces = ["▁"] + [chr(c) for c in range(33, 127)] + ["▁t", "he", "▁the", "in", "▁a", "er", "an", "re", "on", "▁b", "at", "en", "ll", "▁w", "or",
                                                      "▁▁", "▁▁▁▁", "\n", "\n\n", "th", "ac", "▁ac", "▁c"]
  toks += pieces + [f"▁w{i}" for i in range(n - len(toks) - len(pieces))]
  scores = [0.0] * 3 + [0.0] * 256 + [-float(i) for i in range(len(toks) - 259)]
  types = [2, 3, 3] + [6] * 256 + [1] * (len(toks) - 259)
  return toks[:n], scores[:n], types[:n]

def byte_level_vocab(n: int) -> tuple[list[str], list[str]]:
  """A GPT-2-style vocabulary (the 256 byte characters, then merged pieces) and its merges, best first."""
  from tensor.llm.tokenizer import _bytes_to_unicode
  toks = [_bytes_to_unicode()[b] for b in range(256)]
  merges = ["Ġ t", "h e", "Ġt he", "i n", "Ġ a", "e r", "a n", "r e", "o n", "Ġ c", "a p", "Ġc ap", "i t", "a l", "Ġ 1", "1 2", "Ġ Ġ", "Ċ Ċ",
            "Ġ f", "Ġf r", "an ce", "c e", "Ġ i", "Ġi s", "o f", "Ġ of", "T he", "Ġ T", "ĠT he"]
  merges = [m for m in merges if all(p in toks or p in [x.replace(" ", "") for x in merges] for p in m.split(" "))]
  for m in merges:
    if m.replace(" ", "") not in toks: toks.append(m.replace(" ", ""))
  toks += [f"<|tok{i}|>" for i in range(n - len(toks) - 2)] + ["<|begin_of_text|>", "<|end_of_text|>"]
  return toks, merges

def write_model(path, arch: str = "llama", quant=None, seed: int = 0, n_layers: int = 2, dim: int = 64, n_heads: int = 4,
                n_kv_heads: int = 2, head_dim: int = 16, hidden: int = 128, n_vocab: int = 400, ctx: int = 128, window: int = 8,
                tokenizer: str = "llama") -> dict:
  import gguf
  from gguf.quants import quantize
  rng = np.random.default_rng(seed)
  w = gguf.GGUFWriter(str(path), arch)
  w.add_context_length(ctx)
  w.add_embedding_length(dim)
  w.add_block_count(n_layers)
  w.add_feed_forward_length(hidden)
  w.add_head_count(n_heads)
  w.add_head_count_kv(n_kv_heads)
  w.add_layer_norm_rms_eps(1e-6)
  w.add_rope_freq_base(10000.0)
  w.add_key_length(head_dim)
  w.add_value_length(head_dim)
  w.add_vocab_size(n_vocab)
  if arch == "gemma3": w.add_sliding_window(window)
  else: w.add_rope_dimension_count(head_dim)
  if tokenizer == "gpt2":
    toks, merges = byte_level_vocab(n_vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("llama-bpe")
    w.add_token_list(toks)
    w.add_token_types([1] * (n_vocab - 2) + [3, 3])
    w.add_token_merges(merges)
    w.add_bos_token_id(n_vocab - 2)
    w.add_eos_token_id(n_vocab - 1)
  else:
    toks, scores, types = vocab(n_vocab)
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
  w.add_add_bos_token(True)
  def t(name, *shape, scale=None, norm=False):
    a = (1 + 0.1 * rng.standard_normal(shape)) if norm else rng.standard_normal(shape) * (scale or 1 / np.sqrt(shape[-1]))
    a = a.astype(np.float32)
    if quant is not None and len(shape) == 2 and shape[-1] % 32 == 0: w.add_tensor(name, quantize(a, quant), raw_dtype=quant)
    else: w.add_tensor(name, a)
  t("token_embd.weight", n_vocab, dim, scale=0.5)
  t("output_norm.weight", dim, norm=True)
  if arch != "gemma3": t("output.weight", n_vocab, dim)
  for i in range(n_layers):
    p = f"blk.{i}."
    t(p + "attn_norm.weight", dim, norm=True)
    t(p + "attn_q.weight", n_heads * head_dim, dim)
    t(p + "attn_k.weight", n_kv_heads * head_dim, dim)
    t(p + "attn_v.weight", n_kv_heads * head_dim, dim)
    t(p + "attn_output.weight", dim, n_heads * head_dim)
    t(p + "ffn_norm.weight", dim, norm=True)
    t(p + "ffn_gate.weight", hidden, dim)
    t(p + "ffn_up.weight", hidden, dim)
    t(p + "ffn_down.weight", dim, hidden)
    if arch == "gemma3":
      for n in ("attn_q_norm", "attn_k_norm"): t(p + n + ".weight", head_dim, norm=True)
      for n in ("post_attention_norm", "post_ffw_norm"): t(p + n + ".weight", dim, norm=True)
  w.write_header_to_file()
  w.write_kv_data_to_file()
  w.write_tensors_to_file()
  w.close()
  return {"n_vocab": n_vocab, "ctx": ctx}
