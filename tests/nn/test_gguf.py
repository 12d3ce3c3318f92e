"""tensor/gguf.py: GGUF files written here with the `gguf` package (ggml's own writer), read back and dequantized by
kernels, checked against gguf's numpy dequantization exactly; malformed files are one GGUFError, never a read past the end."""
import struct
import numpy as np
import pytest
gguf = pytest.importorskip("gguf", reason="pip install gguf (the GGUF reference reader/writer) to run the GGUF tests")
from gguf import GGMLQuantizationType as Q  # noqa: E402
from gguf.quants import dequantize, quantize  # noqa: E402
from tensor import Tensor, dtypes  # noqa: E402
from tensor.gguf import GGUFError, gguf_load  # noqa: E402

QUANTS = [Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q8_0, Q.Q4_K, Q.Q5_K, Q.Q6_K]

def _write(path, tensors: dict, meta: dict | None = None, arch: str = "llama") -> None:
  w = gguf.GGUFWriter(str(path), arch)
  for k, v in (meta or {}).items():
    if isinstance(v, str): w.add_string(k, v)
    elif isinstance(v, float): w.add_float32(k, v)
    elif isinstance(v, list): w.add_array(k, v)
    else: w.add_uint32(k, v)
  for name, (data, qtype) in tensors.items():
    if qtype in (Q.F32, Q.F16): w.add_tensor(name, data)
    else: w.add_tensor(name, quantize(data, qtype), raw_dtype=qtype)
  w.write_header_to_file()
  w.write_kv_data_to_file()
  w.write_tensors_to_file()
  w.close()

def _data(shape, seed=0):
  return (np.random.default_rng(seed).standard_normal(shape) * np.linspace(0.01, 3, shape[-1])).astype(np.float32)

# where each type's float16 scales sit in its block (the other bytes may hold any bits)
F16_FIELDS = {Q.Q4_0: [0], Q.Q4_1: [0, 2], Q.Q5_0: [0], Q.Q8_0: [0], Q.Q4_K: [0, 2], Q.Q5_K: [0, 2], Q.Q6_K: [208]}

def _random_blocks(qtype, rows: int, cols: int, seed: int) -> np.ndarray:
  """Random blocks of a quantized type: every bit pattern of the quants and scales, finite float16 factors."""
  block, size = gguf.GGML_QUANT_SIZES[qtype]
  rng = np.random.default_rng(seed)
  raw = rng.integers(0, 256, (rows * cols // block, size), dtype=np.uint8)
  for at in F16_FIELDS[qtype]:
    raw[:, at:at + 2] = (rng.standard_normal(len(raw)) * 0.05).astype(np.float16).view(np.uint8).reshape(-1, 2)
  return raw.reshape(rows, cols // block * size)

@pytest.mark.parametrize("qtype", QUANTS, ids=lambda q: q.name)
def test_dequantize_matches_gguf_exactly(tmp_path, qtype):
  raw = _random_blocks(qtype, 3, 512, int(qtype))
  w = gguf.GGUFWriter(str(tmp_path / "m.gguf"), "llama")
  w.add_tensor("w", raw, raw_dtype=qtype)
  if qtype in (Q.Q4_0, Q.Q8_0):  # and a tensor gguf quantized itself
    w.add_tensor("v", quantize(_data((4, 64)), qtype), raw_dtype=qtype)
  w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()  # noqa: E702
  meta, ts = gguf_load(tmp_path / "m.gguf")
  assert ts["w"].shape == (3, 512) and ts["w"].dtype is dtypes.float32
  np.testing.assert_array_equal(ts["w"].numpy(), dequantize(raw, qtype))
  if "v" in ts: np.testing.assert_array_equal(ts["v"].numpy(), dequantize(quantize(_data((4, 64)), qtype), qtype))

def test_plain_types_metadata_and_shapes(tmp_path):
  a, b = _data((2, 3, 4)), _data((5, 8), 1).astype(np.float16)
  _write(tmp_path / "m.gguf", {"a": (a, Q.F32), "b": (b, Q.F16)},
         {"llama.block_count": 2, "llama.rope.freq_base": 10000.0, "tokenizer.ggml.tokens": ["a", "b", "héllo"], "x.s": "text"})
  meta, ts = gguf_load(tmp_path / "m.gguf")
  assert meta["general.architecture"] == "llama" and meta["llama.block_count"] == 2 and meta["llama.rope.freq_base"] == 10000.0
  assert meta["tokenizer.ggml.tokens"] == ["a", "b", "héllo"] and meta["x.s"] == "text"
  np.testing.assert_array_equal(ts["a"].numpy(), a)
  assert ts["b"].dtype is dtypes.float16
  np.testing.assert_array_equal(ts["b"].numpy(), b)
  # the same file's bytes in a tensor
  _, ts2 = gguf_load(Tensor(np.fromfile(tmp_path / "m.gguf", np.uint8)))
  np.testing.assert_array_equal(ts2["a"].numpy(), a)

def _valid(tmp_path) -> bytes:
  _write(tmp_path / "v.gguf", {"tensor.w": (_data((2, 64)), Q.Q8_0)}, {"k": "v"})
  return (tmp_path / "v.gguf").read_bytes()

def _load_bytes(tmp_path, data: bytes):
  p = tmp_path / "bad.gguf"
  p.write_bytes(data)
  meta, ts = gguf_load(p)
  return [t.numpy() for t in ts.values()]

def test_malformed_files_are_one_error(tmp_path):
  good = _valid(tmp_path)
  _load_bytes(tmp_path, good)
  key_at = 24 + 8 + len("general.architecture") + 4 + 8 + len("llama")  # the second key's length
  cases = {
    "truncated in the data": good[:-50],
    "truncated in the header": good[:40],
    "empty": b"",
    "bad magic": b"GGUX" + good[4:],
    "bad version": good[:4] + struct.pack("<I", 9) + good[8:],
    "huge tensor count": good[:8] + struct.pack("<Q", 2**60) + good[16:],
    "huge metadata count": good[:16] + struct.pack("<Q", 2**60) + good[24:],
    "huge string length": good[:key_at] + struct.pack("<Q", 2**62) + good[key_at + 8:],
  }
  # the tensor's offset (the last 8 bytes of the table) past the end, and misaligned
  table_end = good.index(struct.pack("<Q", 8) + b"tensor.w") + 16 + 4 + 16 + 4  # name, dims, 2 sizes, type
  cases["offset past the end"] = good[:table_end] + struct.pack("<Q", 1 << 20) + good[table_end + 8:]
  cases["misaligned offset"] = good[:table_end] + struct.pack("<Q", 3) + good[table_end + 8:]
  cases["unknown type"] = good[:table_end - 4] + struct.pack("<I", 99) + good[table_end:]
  cases["huge dims"] = good[:table_end - 20] + struct.pack("<Q", 2**63) + good[table_end - 12:]
  for what, data in cases.items():
    with pytest.raises(GGUFError): _load_bytes(tmp_path, data), what

def test_missing_file_is_clear(tmp_path):
  with pytest.raises(FileNotFoundError, match="no such GGUF file"): gguf_load(tmp_path / "nope.gguf")

def test_string_arrays_across_read_chunks_and_faults(tmp_path):
  """A vocabulary-sized string array (read through buffered chunks of 1 MB and more: strings straddle their ends) reads
  back exactly; an entry that is not UTF-8, or an array cut short, is a GGUFError naming the entry."""
  rng = np.random.default_rng(0)
  words = ["".join(chr(c) for c in rng.integers(0x20, 0x800, rng.integers(0, 40))) for _ in range(60000)]   # ~2.5 MB
  _write(tmp_path / "s.gguf", {"w": (_data((2, 4)), Q.F32)}, {"tokenizer.ggml.tokens": words, "after": "end"})
  meta, _ = gguf_load(tmp_path / "s.gguf")
  assert meta["tokenizer.ggml.tokens"] == words and meta["after"] == "end"
  _write(tmp_path / "u.gguf", {"w": (_data((2, 4)), Q.F32)}, {"tokenizer.ggml.tokens": ["ab", "cd", "ef"]})
  data = (tmp_path / "u.gguf").read_bytes()
  at = data.index(struct.pack("<Q", 2) + b"cd") + 8
  with pytest.raises(GGUFError, match=r"tokens'\[1\] is not UTF-8"): _load_bytes(tmp_path, data[:at] + b"\xff" + data[at + 1:])
  at = data.index(struct.pack("<Q", 2) + b"ef")
  with pytest.raises(GGUFError, match="runs past the end"): _load_bytes(tmp_path, data[:at] + struct.pack("<Q", 2**40) + data[at + 8:])

def test_tensors_are_the_files_mapped_pages(tmp_path):
  """On a host device a tensor's buffer is the file's pages, mapped copy-on-write: its values equal the bytes read with
  read(), a kernel writing into it leaves the file alone, and keep_in_memory gives a tensor memory of its own (the
  same values). A file truncated after loading is a GGUFError naming the tensor, never an access past the mapping."""
  from tensor.file_bytes import file_buffer, keep_in_memory
  from tensor.gguf import gguf_load_blocks
  a, b = _data((4, 64)), _data((3, 32), 1)
  _write(tmp_path / "m.gguf", {"a": (a, Q.F32), "b": (b, Q.Q8_0)})
  data = (tmp_path / "m.gguf").read_bytes()
  _, blocks = gguf_load_blocks(tmp_path / "m.gguf")
  raw_a, raw_b = blocks["a"][0], keep_in_memory(blocks["b"][0])
  assert raw_a.numpy().tobytes() in data and raw_b.numpy().tobytes() in data
  fa, fb = file_buffer(raw_a), file_buffer(raw_b)
  assert fa is not None and fa.base is not None and fb is not None and fb.base is None   # mapped / its own memory
  np.testing.assert_array_equal(gguf_load(tmp_path / "m.gguf")[1]["a"].numpy(), a)
  raw_a.assign(Tensor.zeros(raw_a.shape[0], dtype=dtypes.uint8).contiguous()).realize()
  assert not raw_a.numpy().any() and (tmp_path / "m.gguf").read_bytes() == data   # copy-on-write: the file is unchanged
  _, blocks = gguf_load_blocks(tmp_path / "m.gguf")
  with open(tmp_path / "m.gguf", "r+b") as f: f.truncate(len(data) - 100)
  with pytest.raises(GGUFError, match="tensor 'b' needs bytes .* changed after gguf_load"): blocks["b"][0].numpy()
