"""examples/gpt2.py, a port of tinygrad's model file: each attention layer realizes its key/value cache, so a layer's
realize computes the previous block's output (a `.contiguous()`) on the way. Those realize points are kept (issue 27): no
later realize computes an earlier block again, so a decode step's kernels grow by the same count per layer. Recomputing
them made it grow with the square of the layers (12 layers: 585 kernels per step where 123 do)."""
import pytest
from tensor import Tensor

def decode_step_kernels(gpt2, layers: int) -> tuple[int, list[int]]:
  """The kernels the JIT'd decode step of a small random model captures, and the tokens it produced."""
  Tensor.manual_seed(0)
  model = gpt2.Transformer(dim=32, n_heads=2, n_layers=layers, vocab_size=64, max_seq_len=64)
  toks, _ = gpt2.decode(model, [3, 1, 4], 5)  # the prompt, then four JIT'd steps (run, capture, two replays)
  return len(model.forward_jit.captured.steps), toks

@pytest.fixture(scope="module")
def gpt2(request):
  import importlib.util, pathlib, sys
  path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "gpt2.py"
  spec = importlib.util.spec_from_file_location("examples_gpt2", path)
  module = importlib.util.module_from_spec(spec)
  sys.modules[spec.name] = module
  spec.loader.exec_module(module)
  return module

def test_decode_step_kernels_grow_linearly_with_layers(gpt2):
  counts = [decode_step_kernels(gpt2, n)[0] for n in (1, 2, 3)]
  per_layer = counts[1] - counts[0]
  assert per_layer > 0 and counts[2] - counts[1] == per_layer, counts

def test_replayed_tokens_match_the_eager_forward(gpt2):
  # the captured step (its cache rows written at a bound position) gives the tokens a full forward of the prefix gives
  _, toks = decode_step_kernels(gpt2, 2)
  Tensor.manual_seed(0)
  model = gpt2.Transformer(dim=32, n_heads=2, n_layers=2, vocab_size=64, max_seq_len=64)
  for k in range(3, len(toks)):
    for block in model.h: block.attn.cache_kv = None
    assert model.forward(Tensor([toks[:k]]), 0).tolist()[0] == toks[k], (k, toks)

def test_decode_step_as_written_runs_no_more_kernels_than_with_block_outputs_realized_by_hand(gpt2, monkeypatch):
  # at a width where the layernorm before each attention is a kernel's output (256+ values: tensor/engine/schedule.py), the
  # cache's realize computes it from the last block's contiguous() output; the query reads that buffer, not a second layernorm
  def step_kernels(by_hand: bool) -> list[str]:
    block = gpt2.TransformerBlock.__call__
    if by_hand: monkeypatch.setattr(gpt2.TransformerBlock, "__call__", lambda self, x, p, m: block(self, x, p, m).realize())
    Tensor.manual_seed(0)
    model = gpt2.Transformer(dim=256, n_heads=4, n_layers=3, vocab_size=64, max_seq_len=64)
    gpt2.decode(model, [3, 1, 4], 5)
    monkeypatch.setattr(gpt2.TransformerBlock, "__call__", block)
    return [s.name for s in model.forward_jit.captured.steps if s.name != "copy"]
  as_written, by_hand = step_kernels(False), step_kernels(True)
  assert len(as_written) <= len(by_hand), (as_written, by_hand)
