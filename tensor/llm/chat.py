"""Chat turns in a model's format and generated text as it grows: what the terminal chat (tensor/llm/__main__.py) and the
OpenAI-style server (tensor/llm/serve.py) share. Part of tensor.llm."""
from __future__ import annotations
from typing import Iterator
from tensor.llm.model import Transformer
from tensor.llm.tokenizer import Tokenizer

__all__ = ["chat_ids", "stop_tokens", "stream_text"]

def chat_ids(tok: Tokenizer, arch: str, messages: list[tuple[str, str]]) -> list[int]:
  """The ids of (role, text) turns in the model's chat format, ending where the model's answer starts: gemma's turns (its
  answer role is "model", and it has no system role: a system text opens the first user turn), or ChatML for the others."""
  if arch.startswith("gemma"):
    system = "\n\n".join(m for r, m in messages if r == "system")
    turns = [("model" if r == "assistant" else r, m) for r, m in messages if r != "system"]
    if system:
      if turns and turns[0][0] == "user": turns[0] = ("user", system + "\n\n" + turns[0][1])
      else: turns.insert(0, ("user", system))
    text = "".join(f"<start_of_turn>{role}\n{msg}<end_of_turn>\n" for role, msg in turns) + "<start_of_turn>model\n"
  else: text = "".join(f"<|im_start|>{role}\n{msg}<|im_end|>\n" for role, msg in messages) + "<|im_start|>assistant\n"
  return tok.encode(text)

def stop_tokens(tok: Tokenizer) -> set[int]:
  """The end-of-text and end-of-turn tokens the vocabulary has."""
  return {t for t in (tok.eos, tok.special.get("<end_of_turn>"), tok.special.get("<|eot_id|>"), tok.special.get("<|im_end|>")) if t is not None}

def stream_text(model: Transformer, tok: Tokenizer, ids: list[int], max_new: int, temperature: float = 0.0, top_k: int = 0,
                top_p: float = 1.0, seed: int | None = None, stop: list[str] | None = None) -> Iterator[tuple[str, list[int], str | None]]:
  """Generates up to max_new tokens after ids; yields (new text, the tokens so far, None) as the text grows, then
  ("", tokens, finish) with finish "stop" (a stop token or stop string) or "length". A UTF-8 character split over
  tokens waits for its last token; text that could start a stop string waits until it can't (and a stop string is cut)."""
  out: list[int] = []
  shown, ends = "", stop_tokens(tok)
  stop = [s for s in stop or [] if s]
  for t in model.generate(ids, max_new, temperature, top_k, top_p, stop=ends, seed=seed):
    if t in ends: break
    out.append(t)
    text = tok.decode(out)
    if text.endswith("\ufffd"): continue
    cut = min((text.find(s) for s in stop if s in text), default=-1)
    if cut >= 0:
      if cut > len(shown): yield text[len(shown):cut], out, None
      yield "", out, "stop"
      return
    # hold back a tail that is the start of a stop string
    hold = max((k for s in stop for k in range(1, len(s)) if text.endswith(s[:k])), default=0)
    if len(text) - hold > len(shown):
      yield text[len(shown):len(text) - hold], out, None
      shown = text[:len(text) - hold]
  else:
    text = tok.decode(out)
    if len(text) > len(shown): yield text[len(shown):], out, None
    yield "", out, "length"   # max_new tokens, or the context is full
    return
  text = tok.decode(out)
  if len(text) > len(shown): yield text[len(shown):], out, None
  yield "", out, "stop"
