"""Model state: the tensors of a model by name (get_state_dict, get_parameters, load_state_dict) and safetensors files
(safe_save, safe_load, safe_load_metadata). The reader checks a file as strictly as the format allows, maps it into
memory, and copies each tensor's bytes into its device buffer only when the tensor is first used.

  safe_save(get_state_dict(model), "model.safetensors")
  load_state_dict(model, safe_load("model.safetensors"))
"""
from __future__ import annotations
import json, math, mmap, os, pathlib, struct, tempfile
from typing import Any
import numpy as np
from runtime.device import Buffer, Device
from runtime.dtype import DType, dtypes
from tensor.engine.state import ENGINE
from tensor.engine.storage import realized_buffer
from tensor.parameters import get_parameters, get_state_dict
from tensor.tensor import Tensor, buffer_uop

__all__ = ["get_state_dict", "get_parameters", "load_state_dict", "safe_save", "safe_load", "safe_load_metadata", "SafetensorsError", "FileBuffer",
           "file_buffer"]

class SafetensorsError(ValueError):
  """A safetensors file that breaks the format, or tensors that can't be saved in it. The message names the file and the fault."""

# the format's dtype names (https://huggingface.co/docs/safetensors) for the dtypes we have; F8_*, F4 and complex are refused
SAFE_DTYPES: dict[str, DType] = {"BOOL": dtypes.bool, "I8": dtypes.int8, "U8": dtypes.uint8, "I16": dtypes.int16, "U16": dtypes.uint16,
                                 "I32": dtypes.int32, "U32": dtypes.uint32, "I64": dtypes.int64, "U64": dtypes.uint64,
                                 "F16": dtypes.float16, "BF16": dtypes.bfloat16, "F32": dtypes.float32, "F64": dtypes.float64}
SAFE_NAMES: dict[DType, str] = {v: k for k, v in SAFE_DTYPES.items()}
# the reference implementation refuses headers past 100 MB: a header that large is an attack, not a model
MAX_HEADER = 100_000_000

# ---- state dicts ----

def _is_buffer(t: Tensor) -> bool: return realized_buffer(t.uop) is not None

def load_state_dict(model: Any, state_dict: dict[str, Tensor], strict: bool = True, consume: bool = False, realize: bool = True) -> list[Tensor]:
  """Copy state_dict's tensors into model's (matched by name); returns the model's tensors that were loaded.

  strict: every key of the model must be in state_dict and nothing else may be (ValueError listing the keys otherwise).
  A shape or dtype that differs is a ValueError naming the key (shapes () and (1,) count as the same). A tensor already
  in memory keeps its storage (optimizers and captured JITs holding it see the new values); a lazy one is replaced.
  consume: delete each loaded key from state_dict, so its memory can go as soon as it is copied.
  """
  own = get_state_dict(model)
  missing, unexpected = sorted(own.keys() - state_dict.keys()), sorted(state_dict.keys() - own.keys())
  if strict and (missing or unexpected):
    raise ValueError("load_state_dict: " + "; ".join(
      ([f"missing keys (in the model, not in the state dict): {missing}"] if missing else []) +
      ([f"unexpected keys (in the state dict, not in the model): {unexpected}"] if unexpected else [])))
  loaded: list[Tensor] = []
  for k, v in own.items():
    if k not in state_dict: continue
    new = state_dict[k]
    if not isinstance(new, Tensor): raise ValueError(f"load_state_dict: state_dict[{k!r}] is a {type(new).__name__}, not a Tensor")
    if new.shape != v.shape:
      if {new.shape, v.shape} != {(), (1,)}:
        raise ValueError(f"load_state_dict: shape mismatch for {k!r}: the model has {v.shape}, the state dict {new.shape}")
      new = new.reshape(v.shape)
    if new.dtype is not v.dtype:
      raise ValueError(f"load_state_dict: dtype mismatch for {k!r}: the model has {v.dtype.name}, the state dict {new.dtype.name}")
    # a tensor in memory is written in place; a lazy one gets storage of its own first (never the state dict's, which
    # would tie the two models together)
    if not _is_buffer(v): v.uop = Tensor.empty(*v.shape, dtype=v.dtype, device=v.device).uop
    v.assign(new.to(v.device))
    loaded.append(v)
    if consume: del state_dict[k]
  if realize and loaded: Tensor.realize(*loaded)
  return loaded

# ---- writing safetensors ----

def safe_save(tensors: dict[str, Tensor], fn: str | os.PathLike, metadata: dict[str, str] | None = None) -> None:
  """Write tensors to fn in the safetensors format, with optional string metadata. The file is written beside fn under a
  temporary name and renamed over it at the end, so fn is never left half-written."""
  if metadata is not None and (not isinstance(metadata, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())):
    raise SafetensorsError(f"safe_save {fn}: metadata must be a dict of str to str, got {metadata!r}")
  header: dict[str, Any] = {"__metadata__": metadata} if metadata else {}
  datas: list[np.ndarray] = []
  offset = 0
  for name, t in tensors.items():
    if not isinstance(name, str) or name == "__metadata__":
      raise SafetensorsError(f"safe_save {fn}: tensor names must be strings other than '__metadata__', got {name!r}")
    if not isinstance(t, Tensor): raise SafetensorsError(f"safe_save {fn}: {name!r} is a {type(t).__name__}, not a Tensor")
    if t.dtype not in SAFE_NAMES: raise SafetensorsError(f"safe_save {fn}: {name!r} has dtype {t.dtype}, which safetensors can't hold")
    data = _host_bytes(t)
    header[name] = {"dtype": SAFE_NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + data.nbytes]}
    datas.append(data)
    offset += data.nbytes
  head = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
  head += b" " * (-len(head) % 8)  # the data starts 8-byte aligned, as the reference writer does
  path = pathlib.Path(fn)
  fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
  try:
    with os.fdopen(fd, "wb") as f:
      f.write(struct.pack("<Q", len(head)))
      f.write(head)
      for d in datas: f.write(memoryview(d).cast("B") if d.nbytes else b"")
    os.replace(tmp, path)
  except BaseException:
    pathlib.Path(tmp).unlink(missing_ok=True)
    raise

def _host_bytes(t: Tensor) -> np.ndarray:
  """t's values as a C-contiguous little-endian numpy array of its storage type (bfloat16 as its raw 16 bits, read from
  the buffer: no kernel, since not every device renders bfloat16)."""
  if t.numel() == 0: return np.zeros(0, np.uint8)
  t.realize()
  if not _is_buffer(t): t = t.contiguous().realize()
  a = ENGINE.storage.buffers[realized_buffer(t.uop)].as_array()
  return np.ascontiguousarray(a.astype(a.dtype.newbyteorder("<"), copy=False))

# ---- reading safetensors ----

def _fail(fn: Any, msg: str) -> SafetensorsError: return SafetensorsError(f"{fn}: not a valid safetensors file: {msg}")

def _no_constants(name: str): raise ValueError(f"{name} is not JSON")
def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
  out: dict[str, Any] = {}
  for k, v in pairs:
    if k in out: raise ValueError(f"duplicate key {k!r}")
    out[k] = v
  return out

def _read_header(fn: Any, f) -> tuple[int, dict[str, Any], int]:
  """(data start, header, file size) of an open file, after every check of the header and the byte ranges it gives."""
  size = os.fstat(f.fileno()).st_size
  if size < 8: raise _fail(fn, f"the file has {size} bytes, fewer than the 8 of the header length")
  (n,) = struct.unpack("<Q", f.read(8))
  if n > size - 8: raise _fail(fn, f"the header length {n} runs past the end of the file ({size} bytes)")
  if n > MAX_HEADER: raise _fail(fn, f"the header length {n} is over the limit of {MAX_HEADER} bytes")
  raw = f.read(n)
  if len(raw) != n: raise _fail(fn, f"the file ended inside the header ({len(raw)} of {n} bytes read)")
  try: text = raw.decode("utf-8")
  except UnicodeDecodeError as e: raise _fail(fn, f"the header is not UTF-8 ({e.reason} at byte {e.start})") from None
  if not text.startswith("{"): raise _fail(fn, "the header does not start with '{'")
  try: header = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constants)
  except (ValueError, RecursionError) as e: raise _fail(fn, f"the header is not valid JSON: {e}") from None
  if not isinstance(header, dict): raise _fail(fn, f"the header is a JSON {type(header).__name__}, not an object")
  data_len = size - 8 - n
  ranges = []
  for name, info in header.items():
    if name == "__metadata__":
      if not isinstance(info, dict) or not all(isinstance(v, str) for v in info.values()):
        raise _fail(fn, f"__metadata__ must map strings to strings, got {info!r:.200}")
      continue
    ranges.append((*_check_entry(fn, name, info, data_len), name))
  # the tensors must tile the data exactly: in order, no gaps, no overlaps, nothing after the last
  pos = 0
  for begin, end, name in sorted(ranges):
    if begin != pos:
      raise _fail(fn, f"tensor {name!r} starts at byte {begin} of the data, expected {pos} ({'a gap' if begin > pos else 'an overlap'})")
    pos = end
  if pos != data_len: raise _fail(fn, f"the tensors cover {pos} bytes of data but the file holds {data_len} after the header (trailing bytes)")
  return 8 + n, header, size

def _check_entry(fn: Any, name: str, info: Any, data_len: int) -> tuple[int, int]:
  where = f"tensor {name!r}"
  if not isinstance(info, dict): raise _fail(fn, f"{where}: its entry is a JSON {type(info).__name__}, not an object")
  if set(info) != {"dtype", "shape", "data_offsets"}:
    raise _fail(fn, f"{where}: its entry has keys {sorted(info)}, expected dtype, shape and data_offsets")
  dt, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
  if not isinstance(dt, str) or dt not in SAFE_DTYPES: raise _fail(fn, f"{where}: unknown or unsupported dtype {dt!r}")
  if not isinstance(shape, list) or not all(type(s) is int and s >= 0 for s in shape):
    raise _fail(fn, f"{where}: shape {shape!r:.100} is not a list of non-negative integers")
  if not isinstance(offsets, list) or len(offsets) != 2 or not all(type(o) is int for o in offsets) or not 0 <= offsets[0] <= offsets[1]:
    raise _fail(fn, f"{where}: data_offsets {offsets!r:.100} is not [begin, end] with 0 <= begin <= end")
  begin, end = offsets
  if end > data_len: raise _fail(fn, f"{where}: its bytes [{begin}, {end}) run past the end of the data ({data_len} bytes)")
  if (need := math.prod(shape) * SAFE_DTYPES[dt].itemsize) != end - begin:
    raise _fail(fn, f"{where}: shape {shape} of {dt} needs {need} bytes but data_offsets give {end - begin}")
  return begin, end

def safe_load_metadata(fn: str | os.PathLike) -> tuple[Tensor, int, dict[str, Any]]:
  """(the whole file as a lazy uint8 tensor, where the data starts, the parsed header) of a checked safetensors file."""
  with open(fn, "rb") as f:
    start, header, size = _read_header(fn, f)
    raw = _map(f, size)
  return _lazy_tensor(raw, 0, size, dtypes.uint8, (size,), None), start, header

def safe_load(fn: str | os.PathLike, device: str | None = None) -> dict[str, Tensor]:
  """The tensors of a safetensors file by name, on device (the default device if None). The file is checked whole first
  (SafetensorsError on any fault) and memory-mapped; a tensor's bytes are copied into its buffer when it is first used."""
  with open(fn, "rb") as f:
    start, header, size = _read_header(fn, f)
    raw = _map(f, size)
  out: dict[str, Tensor] = {}
  for name, info in header.items():
    if name == "__metadata__": continue
    begin, end = info["data_offsets"]
    out[name] = _lazy_tensor(raw, start + begin, start + end, SAFE_DTYPES[info["dtype"]], tuple(info["shape"]), device)
  return out

def _map(f, size: int) -> memoryview:
  # read-only: loaded tensors copy out of it, nothing writes through it
  return memoryview(mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)) if size else memoryview(b"")

class FileBuffer(Buffer):
  """A device buffer whose first contents are bytes of a mapped file, copied in when the buffer is first allocated."""
  __slots__ = ("_source",)
  def __init__(self, device: str, size: int, dtype: DType, source: memoryview):
    super().__init__(device, size, dtype)
    self._source: memoryview | None = source
  def ensure_allocated(self) -> Buffer:
    if self.is_allocated(): return self
    super().ensure_allocated()
    if self._source is not None:
      self.as_array().view(np.uint8)[:] = np.frombuffer(self._source, dtype=np.uint8)
      self._source = None  # the mapping can go once every tensor of the file is in memory
    return self
  def is_loaded(self) -> bool:
    """Whether the file's bytes have been copied in yet."""
    return self._source is None

def _lazy_tensor(raw: memoryview, begin: int, end: int, dtype: DType, shape: tuple[int, ...], device: str | None) -> Tensor:
  n = math.prod(shape)
  u = buffer_uop(FileBuffer(Device.canonicalize(device), n, dtype, raw[begin:end]))
  t = Tensor(u)
  return t.reshape(shape) if shape != (n,) else t

def file_buffer(t: Tensor) -> FileBuffer | None:
  """The FileBuffer behind a tensor safe_load returned (None for any other tensor): tells whether it was copied in yet."""
  b = ENGINE.storage.buffers.get(u) if (u := realized_buffer(t.uop)) is not None else None
  return b if isinstance(b, FileBuffer) else None
