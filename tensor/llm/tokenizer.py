"""The tokenizer a GGUF file describes in its metadata (tokenizer.ggml.*): SentencePiece-style BPE over scores with byte
fallback ("llama": llama, mistral, gemma) and byte-level BPE over merges ("gpt2": llama 3, qwen2, qwen3). Pure Python,
part of tensor.llm; checked against transformers' tokenizer for the same file (tests/llm/test_tokenizer.py).

  tok = Tokenizer.from_gguf_metadata(meta)
  ids = tok.encode("The capital of France is")          # with the file's BOS when it asks for one
  tok.decode(ids)
"""
from __future__ import annotations
import heapq, itertools, re
from typing import Any

__all__ = ["Tokenizer"]

# token types of the GGUF vocabulary (llama.cpp's llama_token_type)
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
SPACE = "\u2581"  # SentencePiece's visible space

def _bytes_to_unicode() -> dict[int, str]:
  """GPT-2's map of the 256 bytes to printable characters (byte-level BPE spells every token with them)."""
  keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
  out, n = {}, 0
  for b in range(256):
    if b in keep: out[b] = chr(b)
    else:
      out[b] = chr(256 + n)
      n += 1
  return out

# pre-tokenizer splits of byte-level BPE by tokenizer.ggml.pre; they need the `regex` module's \p{...} classes
_PRE = {
  "gpt2": r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
  "llama-bpe": r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
  "qwen2": r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
}

class Tokenizer:
  """Text <-> token ids for the vocabulary of a GGUF file."""
  def __init__(self, kind: str, tokens: list[str], scores: list[float] | None, types: list[int] | None, merges: list[str] | None,
               bos: int | None, eos: int | None, add_bos: bool, add_space_prefix: bool, pre: str = "gpt2", rank_by_position: bool = False):
    if kind not in ("llama", "gpt2"): raise ValueError(f"tokenizer model {kind!r} is not supported (llama: SentencePiece, gpt2: byte-level BPE)")
    self.kind, self.tokens, self.bos, self.eos, self.add_bos, self.add_space_prefix = kind, tokens, bos, eos, add_bos, add_space_prefix
    types = types or [NORMAL] * len(tokens)
    self.types = types
    # the few tokens of other types than NORMAL, found once (a vocabulary of 262,144 is walked in C, not a Python loop:
    # each such walk of Gemma 3's took 15-60 ms at every start)
    unusual = list(itertools.compress(range(len(types)), map(NORMAL.__ne__, types)))
    if kind == "llama":
      # a token of spaces only is stored with real spaces; the text's spaces become SPACE before merging. A spelling twice:
      # the later id, as transformers' vocabulary (so a respelled token's id is the later of it and a token spelled so)
      self.ids = dict(zip(tokens, range(len(tokens))))
      for n in range(1, max(map(len, tokens), default=0) + 1):
        if (i := self.ids.pop(" " * n, None)) is not None: self.ids[SPACE * n] = max(i, self.ids.get(SPACE * n, -1))
      # the merge priority: the score, or (gemma: its scores do not follow the merge order) the position in the vocabulary
      # (None: the id's negation, not a list of them)
      self.rank: list[float] | None = None if rank_by_position or scores is None else list(map(float, scores))
      self.byte_ids = {}
      for i in unusual:
        t = tokens[i]
        if types[i] == BYTE and len(t) == 6 and t.startswith("<0x"): self.byte_ids[int(t[3:5], 16)] = i
      self.unk = next((i for i in unusual if types[i] == UNKNOWN), None)
    else:
      self.b2u = _bytes_to_unicode()
      self.u2b = {v: k for k, v in self.b2u.items()}
      self.ids = {t: i for i, t in enumerate(tokens)}
      self.merge_rank = {tuple(m.split(" ", 1)): k for k, m in enumerate(merges or [])}
      try: import regex
      except ImportError: raise ImportError("byte-level BPE tokenizers need the `regex` module (\\p{L} classes): pip install regex") from None
      self.split = regex.compile(_PRE.get(pre, _PRE["gpt2"]))
    # control and user-defined tokens are matched whole in the text before the rest is tokenized
    self.special = {tokens[i]: i for i in unusual if types[i] in (CONTROL, USER_DEFINED) and tokens[i] and (kind == "gpt2" or tokens[i].strip(" "))}
    # longest first, so a regex alternation of them prefers the longest at a position
    self.special_by_length = sorted(self.special, key=len, reverse=True)

  @staticmethod
  def from_gguf_metadata(meta: dict[str, Any]) -> Tokenizer:
    kind = meta.get("tokenizer.ggml.model")
    if kind is None or "tokenizer.ggml.tokens" not in meta: raise ValueError("the GGUF metadata has no tokenizer (tokenizer.ggml.model and .tokens)")
    arch = meta.get("general.architecture", "")
    return Tokenizer(kind, meta["tokenizer.ggml.tokens"], meta.get("tokenizer.ggml.scores"), meta.get("tokenizer.ggml.token_type"),
                     meta.get("tokenizer.ggml.merges"), meta.get("tokenizer.ggml.bos_token_id"), meta.get("tokenizer.ggml.eos_token_id"),
                     bool(meta.get("tokenizer.ggml.add_bos_token", kind == "llama")),
                     bool(meta.get("tokenizer.ggml.add_space_prefix", kind == "llama" and not arch.startswith("gemma"))),
                     meta.get("tokenizer.ggml.pre", "gpt2"), rank_by_position=arch.startswith("gemma"))

  # ---- encoding ----
  def encode(self, text: str, bos: bool | None = None) -> list[int]:
    """The ids of text; the file's BOS first when it asks for one (or when bos is True)."""
    out = [self.bos] if (self.add_bos if bos is None else bos) and self.bos is not None else []
    pos, first = 0, True
    for m in (r.finditer(text) if (r := self._special_re(text)) is not None else ()):
      if m.start() > pos: out += self._encode_part(text[pos:m.start()], first)
      out.append(self.special[m.group()])
      pos, first = m.end(), False
    if pos < len(text): out += self._encode_part(text[pos:], first)
    return out

  def _special_re(self, text: str) -> re.Pattern | None:
    """The alternation of the special tokens that occur in text (None when none does): one of all of them (Gemma 3:
    6,384) took ~0.15 s to compile, at every start."""
    present = [t for t in self.special_by_length if t in text]
    return re.compile("|".join(map(re.escape, present))) if present else None

  def _encode_part(self, text: str, first: bool) -> list[int]:
    if self.kind == "gpt2":
      out = []
      for piece in self.split.findall(text): out += self._bpe([self.b2u[b] for b in piece.encode("utf-8")])
      return out
    text = text.replace(" ", SPACE)
    if first and self.add_space_prefix and not text.startswith(SPACE): text = SPACE + text  # transformers' Metaspace: not twice
    return self._spm(text)

  def _spm(self, text: str) -> list[int]:
    """Merge adjacent pieces, the pair whose merged piece ranks highest first (leftmost on ties); pieces not in the
    vocabulary become their UTF-8 bytes (<0x..> tokens)."""
    syms = list(text)
    if not syms: return []
    prev, nxt = list(range(-1, len(syms) - 1)), list(range(1, len(syms) + 1))
    alive = [True] * len(syms)
    heap: list[tuple[float, int, int, str]] = []
    rank = self.rank
    def push(i: int) -> None:
      j = nxt[i]
      if j >= len(syms): return
      merged = syms[i] + syms[j]
      if (tid := self.ids.get(merged)) is not None: heapq.heappush(heap, (tid if rank is None else -rank[tid], i, j, merged))
    for i in range(len(syms) - 1): push(i)
    while heap:
      _, i, j, merged = heapq.heappop(heap)
      if not alive[i] or not alive[j] or nxt[i] != j or syms[i] + syms[j] != merged: continue  # stale
      syms[i], alive[j] = merged, False
      nxt[i] = nxt[j]
      if nxt[j] < len(syms): prev[nxt[j]] = i
      if prev[i] >= 0: push(prev[i])
      push(i)
    out = []
    i = 0
    while i < len(syms):
      s = syms[i]
      if (tid := self.ids.get(s)) is not None: out.append(tid)
      else:
        for b in s.encode("utf-8"):
          if b in self.byte_ids: out.append(self.byte_ids[b])
          elif self.unk is not None: out.append(self.unk)
      i = nxt[i]
    return out

  def _bpe(self, chars: list[str]) -> list[int]:
    """Byte-level BPE of one pre-token: apply the lowest-ranked merge present until none applies."""
    parts = chars
    while len(parts) > 1:
      best, at = None, -1
      for k in range(len(parts) - 1):
        r = self.merge_rank.get((parts[k], parts[k + 1]))
        if r is not None and (best is None or r < best): best, at = r, k
      if best is None: break
      a, b = parts[at], parts[at + 1]
      merged, k = [], 0
      while k < len(parts):  # merge every occurrence of this pair, left to right
        if k < len(parts) - 1 and parts[k] == a and parts[k + 1] == b: merged.append(a + b); k += 2  # noqa: E702
        else: merged.append(parts[k]); k += 1  # noqa: E702
      parts = merged
    return [self.ids[p] for p in parts if p in self.ids]

  # ---- decoding ----
  def decode(self, ids: list[int], skip_special: bool = True) -> str:
    """The text of ids (control tokens left out when skip_special)."""
    raw = bytearray()
    for i in ids:
      if not 0 <= i < len(self.tokens): raise ValueError(f"token id {i} is outside the vocabulary of {len(self.tokens)}")
      t, ty = self.tokens[i], self.types[i]
      if ty == CONTROL and skip_special: continue
      if self.kind == "gpt2": raw += bytes(self.u2b[c] for c in t) if ty != CONTROL and ty != USER_DEFINED else t.encode()
      elif ty == BYTE: raw.append(int(t[3:5], 16))
      else: raw += t.replace(SPACE, " ").encode("utf-8")
    text = raw.decode("utf-8", errors="replace")
    return text[1:] if self.kind == "llama" and self.add_space_prefix and text.startswith(" ") else text
