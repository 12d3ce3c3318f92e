"""tensor/llm/model.py: tiny GGUF models with random weights (written with the `gguf` package) give transformers'
logits for the same file, position by position through the KV cache (one TinyJit capture for every decode position);
quantized weights within a stated bound; sampling. Skips cleanly without gguf (and the comparisons without torch and
transformers)."""
import sys, pathlib
import numpy as np
import pytest
gguf = pytest.importorskip("gguf", reason="pip install gguf to run the language-model tests")
from tensor import Tensor  # noqa: E402
from tensor.llm import Transformer, UnsupportedModelError, sample  # noqa: E402
sys.path.insert(0, str(pathlib.Path(__file__).parent))
from tiny import write_model  # noqa: E402

IDS = [1, 5, 300, 17, 42, 9, 260, 77, 100, 3, 33, 200]

def _ours(path, ids=IDS):
  m = Transformer.from_gguf(path, max_context=64)
  out = [m.logits(ids[:3], 0).numpy()[0]]
  out += [m.logits([t], i).numpy()[0] for i, t in enumerate(ids[3:], 3)]   # decode: the captured step from the third on
  return m, np.stack(out)

def _hf(path, ids=IDS):
  torch = pytest.importorskip("torch", reason="pip install torch transformers to compare with transformers")
  transformers = pytest.importorskip("transformers", reason="pip install transformers to compare with transformers")
  pytest.importorskip("accelerate", reason="transformers loads GGUF files with accelerate: pip install accelerate")
  hf = transformers.AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
  with torch.no_grad(): return hf(torch.tensor([ids])).logits[0, 2:].numpy()

@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_logits_match_transformers_f32(tmp_path, arch):
  # gemma3 with head_dim 256: transformers scales queries by query_pre_attn_scalar (256) ** -0.5 whatever the file says,
  # llama.cpp by head_dim ** -0.5; equal here. Window 8 < 12 tokens: the sliding layers' mask is exercised
  write_model(tmp_path / "m.gguf", arch, head_dim=256 if arch == "gemma3" else 16, window=8)
  m, ours = _ours(tmp_path / "m.gguf")
  want = _hf(tmp_path / "m.gguf")
  np.testing.assert_allclose(ours, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
  # it starts at 1 (captured on its first call); every later position replayed it, the 3-token prompt's too (< DECODE_BELOW)
  assert m.decode_jit.cnt == 1 + len(IDS)

def test_logits_match_transformers_quantized(tmp_path):
  # both dequantize the same Q8_0 blocks to the same floats (tests/nn/test_gguf.py): the bound is float32 rounding
  write_model(tmp_path / "m.gguf", "llama", quant=gguf.GGMLQuantizationType.Q8_0)
  _, ours = _ours(tmp_path / "m.gguf")
  want = _hf(tmp_path / "m.gguf")
  np.testing.assert_allclose(ours, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())

def test_decode_replays_match_eager_prefill(tmp_path):
  # without an oracle library: the logits after feeding tokens one by one (captured decode step) equal those of one prefill
  write_model(tmp_path / "m.gguf", "gemma3", head_dim=32, window=4)
  _, stepped = _ours(tmp_path / "m.gguf")
  m = Transformer.from_gguf(tmp_path / "m.gguf", max_context=64)
  whole = m.logits(IDS, 0, chunk=len(IDS)).numpy()[0]
  np.testing.assert_allclose(stepped[-1], whole, rtol=1e-4, atol=1e-4)
  # the captured prefill: prompts of 60 (a chunk of 32, then 28 padded to 32), 20 (padded) and 5 tokens (fewer than
  # DECODE_BELOW: through the decode step, one by one) give the eager logits, one capture of each step
  ids = (IDS * 5)[:60]
  for n in (60, 20, 5):
    np.testing.assert_allclose(m.logits(ids[:n]).numpy()[0], m.logits(ids[:n], 0, chunk=n).numpy()[0], rtol=1e-4, atol=1e-4)
  assert m.prefill_jit.cnt == 1 + 3 and m.prefill_jit.captured is not None and m.decode_jit.captured is not None
  greedy = list(m.generate(IDS[:4], 6))
  assert greedy[0] == int(np.argmax(m.logits(IDS[:4], 0).numpy()))
  assert len(greedy) == 6 and all(0 <= t < 400 for t in greedy)

def test_sampling():
  logits = Tensor([[0.0, 10.0, 9.0, -5.0, 1.0]])
  assert sample(logits) == 1
  assert sample(Tensor([[0.0, 7.0, 3.0, 7.0]])) == 1 and sample(Tensor([[0.0, float("nan"), 9.0, float("nan")]])) == 1  # the first, nan first
  Tensor.manual_seed(3)
  draws = [sample(logits, temperature=1.0, top_k=2) for _ in range(40)]
  assert set(draws) == {1, 2}
  assert all(sample(logits, temperature=1.0, top_p=0.5) == 1 for _ in range(10))  # token 1 alone holds over half
  assert {sample(logits, temperature=100.0) for _ in range(60)} == {0, 1, 2, 3, 4}

def test_unsupported_architecture_is_one_clear_error(tmp_path):
  w = gguf.GGUFWriter(str(tmp_path / "m.gguf"), "mamba")
  w.add_tensor("token_embd.weight", np.zeros((4, 4), np.float32))
  w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()  # noqa: E702
  with pytest.raises(UnsupportedModelError, match="architecture 'mamba' is not supported"): Transformer.from_gguf(tmp_path / "m.gguf")
