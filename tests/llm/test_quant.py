"""tensor/llm/quant.py: a matmul over quantized blocks (each type's groups scaled once per group) equals x @ W.T for
W dequantized by `gguf`'s numpy reference, to float32 rounding of the sums: |ours - exact| <= 1e-5 * sum_i |x_i w_oi|
(the bound float32 accumulation of 512 terms in another order keeps, with margin); a tiny model's logits kept quantized
equal those with its weights dequantized to float32 at load."""
import sys, pathlib
import numpy as np
import pytest
gguf = pytest.importorskip("gguf", reason="pip install gguf to run the quantized-matmul tests")
from gguf import GGMLQuantizationType as Q  # noqa: E402
from gguf.quants import dequantize  # noqa: E402
from tensor import Tensor, dtypes  # noqa: E402
from tensor.llm import Transformer  # noqa: E402
from tensor.llm.quant import DEQUANTIZE_ROWS, QuantizedWeight  # noqa: E402
sys.path.insert(0, str(pathlib.Path(__file__).parent))
sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "nn"))
from tiny import write_model  # noqa: E402
from test_gguf import _random_blocks  # noqa: E402

@pytest.mark.parametrize("rows", [3, DEQUANTIZE_ROWS + 1], ids=["matvec", "dequantized-first"])
@pytest.mark.parametrize("qtype", [Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q8_0, Q.Q4_K, Q.Q5_K, Q.Q6_K], ids=lambda q: q.name)
def test_quantized_matmul_matches_dequantized(qtype, rows):
  raw = _random_blocks(qtype, 6, 512, 7 + int(qtype))
  w = dequantize(raw, qtype).astype(np.float64)                                    # (6, 512)
  x = np.random.default_rng(int(qtype)).standard_normal((rows, 512)).astype(np.float32)
  qw = QuantizedWeight(Tensor(raw.reshape(-1)).cast(dtypes.uint8).contiguous().realize(), int(qtype), (6, 512))
  got = qw.matmul(Tensor(x)).numpy()
  exact = x.astype(np.float64) @ w.T
  bound = 1e-5 * (np.abs(x.astype(np.float64)) @ np.abs(w).T)
  assert np.all(np.abs(got - exact) <= bound), np.max(np.abs(got - exact) / bound)
  np.testing.assert_array_equal(qw.dequantized().numpy(), w.astype(np.float32))

def test_model_logits_quantized_equal_float32_load(tmp_path):
  write_model(tmp_path / "m.gguf", "gemma3", head_dim=32, quant=Q.Q8_0)
  ids = [1, 5, 300, 17, 42, 9]
  out = {}
  for quantized in (False, True):
    m = Transformer.from_gguf(tmp_path / "m.gguf", max_context=64, quantized=quantized)
    assert any(isinstance(w, QuantizedWeight) for w in m.blocks[0].w.values()) == quantized
    out[quantized] = np.stack([m.logits(ids).numpy()[0], m.logits([7], len(ids)).numpy()[0]])
  np.testing.assert_allclose(out[True], out[False], rtol=0, atol=1e-5 * np.abs(out[False]).max())

@pytest.mark.optimized
def test_quantized_matvec_is_one_kernel_in_vector_lanes():
  """A decode step's matvec over a quantized weight is one kernel reading int8 values, scales and x: its reduction's
  innermost loop (a group's elements) unrolled into lanes, and on AVX-512 the int8 widened to floats 16 at a time (the
  unrolled scalar loop ran 5-8x slower than a float32 matvec of 4x the bytes)."""
  sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "rules"))
  from fires import kernel_asts
  from tensor.codegen import program, target_for
  from tensor.renderer.cstyle import cpu_vector_caps
  for qtype in (Q.Q4_K, Q.Q8_0):   # Q8_0's int8 are read in place from its blocks' bytes: a bitcast of uint8 loads
    raw = _random_blocks(qtype, 64, 512, 3)
    qw = QuantizedWeight(Tensor(raw.reshape(-1)).cast(dtypes.uint8).contiguous().realize(), int(qtype), (64, 512))
    x = Tensor(np.random.default_rng(0).standard_normal((1, 512)).astype(np.float32)).realize()
    asts = kernel_asts([qw.matmul(x)])
    q_dtype = dtypes.uint8 if qtype == Q.Q8_0 else dtypes.int8
    assert len(asts) == 1 and [g.dtype.base for g in asts[0].toposort() if g.op.name == "DEFINE_GLOBAL"].count(q_dtype) == 1
    p = program(asts[0], target_for("CPU"))
    assert any(o[0] == "UNROLL" for o in p.opts), p.opts
    if cpu_vector_caps().register_bytes == 64: assert "vcvt_f32x16_i8x16" in p.src and "bitcast_" not in p.src, p.src

def test_weights_of_a_file_unpacked_together_equal_gguf(tmp_path):
  """Transformer.from_gguf's loading: the weights of one type gathered from the file and unpacked (quantized_weights) or
  dequantized (dequantize_many) together, each a view of the shared buffers, equal gguf's numpy dequantization of each,
  whatever their shapes and the tensors between them in the file."""
  from tensor.gguf import dequantize_many, gguf_load_blocks
  from tensor.llm.quant import quantized_weights
  import gguf as G
  want, w = {}, G.GGUFWriter(str(tmp_path / "m.gguf"), "llama")
  for k, qtype in enumerate([Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q8_0, Q.Q4_K, Q.Q5_K, Q.Q6_K] * 2):
    rows, cols = (3 + k % 4, 256 * (1 + k % 3))
    raw = _random_blocks(qtype, rows, cols, 100 + k)
    w.add_tensor(f"w{k}", raw, raw_dtype=qtype)
    w.add_tensor(f"norm{k}", np.arange(rows + k, dtype=np.float32))   # plain tensors between them
    want[f"w{k}"], want[f"norm{k}"] = dequantize(raw, qtype), np.arange(rows + k, dtype=np.float32)
  w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()  # noqa: E702
  _, blocks = gguf_load_blocks(tmp_path / "m.gguf")
  qws = quantized_weights({k: v for k, v in blocks.items() if k.startswith("w")})
  x = np.random.default_rng(0).standard_normal((1, 768)).astype(np.float32)
  for k, qw in qws.items():
    np.testing.assert_array_equal(qw.dequantized().numpy(), want[k], err_msg=k)
    xk = x[:, :qw.shape[1]]
    np.testing.assert_allclose(qw.matmul(Tensor(xk)).numpy(), xk.astype(np.float64) @ want[k].T.astype(np.float64), rtol=1e-4, atol=1e-4, err_msg=k)
  _, blocks = gguf_load_blocks(tmp_path / "m.gguf")
  names = list(blocks)
  for k, t in zip(names, dequantize_many([blocks[k] for k in names])): np.testing.assert_array_equal(t.numpy(), want[k], err_msg=k)
