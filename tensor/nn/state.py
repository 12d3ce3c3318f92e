"""Model state: the tensors of a model by name (get_state_dict, get_parameters, load_state_dict) and safetensors files
(safe_save, safe_load, safe_load_metadata); GGUF files are tensor/gguf.py (gguf_load here too). The reader checks a
file as strictly as the format allows (in time and memory linear in its header), keeps it open, and reads each tensor's
bytes into its device buffer only when the tensor is first used.

  safe_save(get_state_dict(model), "model.safetensors")
  load_state_dict(model, safe_load("model.safetensors"))
"""
from __future__ import annotations
import json, math, os, pathlib, re, stat, struct, tempfile, time
from typing import Any
import numpy as np
from runtime.dtype import DType, dtypes
from runtime.helpers import DEBUG
from tensor.engine.state import ENGINE
from tensor.engine.storage import realized_buffer
from tensor.parameters import get_parameters, get_state_dict
from tensor.tensor import Tensor
from tensor.file_bytes import FileBuffer, _FileBytes, _lazy_tensor, file_buffer

__all__ = ["get_state_dict", "get_parameters", "load_state_dict", "safe_save", "safe_load", "safe_load_metadata", "SafetensorsError", "FileBuffer",
           "file_buffer", "gguf_load"]

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

  strict: every key of the model must be in state_dict (ValueError listing the missing keys otherwise). Keys of
  state_dict the model does not have are skipped, as tinygrad (a torch checkpoint's `num_batches_tracked` for a
  BatchNorm without running stats); DEBUG=1 lists them. A shape or dtype that differs is a ValueError naming the key
  (shapes () and (1,) count as the same). A tensor already in memory keeps its storage (optimizers and captured JITs
  holding it see the new values); a lazy one is replaced.
  consume: delete each loaded key from state_dict, so its memory can go as soon as it is copied.
  """
  own = get_state_dict(model)
  missing, unexpected = sorted(own.keys() - state_dict.keys()), sorted(state_dict.keys() - own.keys())
  if strict and missing:
    raise ValueError(f"load_state_dict: missing keys (in the model, not in the state dict): {missing}"
                     + (f"; and unused keys (in the state dict, not in the model): {unexpected}" if unexpected else ""))
  if unexpected and DEBUG >= 1: print(f"load_state_dict: unused keys in the state dict (not in the model): {unexpected}")
  loaded: list[Tensor] = []
  for k, v in own.items():
    if k not in state_dict: continue
    new = state_dict[k]
    if not isinstance(new, Tensor): raise ValueError(f"load_state_dict: state_dict[{k!r}] is a {type(new).__name__}, not a Tensor")
    if new.shape != v.shape:
      if {new.shape, v.shape} != {(), (1,)}:
        raise ValueError(f"load_state_dict: Shape mismatch in layer `{k}`: Expected shape {v.shape}, but found {new.shape} in state dict.")
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
  temporary name and renamed over it at the end, so fn is never left half-written; temporary files of an earlier save of fn
  that was killed are deleted first."""
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
  _remove_stale_temps(path)
  fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
  try:
    with os.fdopen(fd, "wb") as f:
      f.write(struct.pack("<Q", len(head)))
      f.write(head)
      for d in datas: f.write(memoryview(d).cast("B") if d.nbytes else b"")
    os.replace(tmp, path)
  except BaseException:
    pathlib.Path(tmp).unlink(missing_ok=True)
    raise

STALE_AFTER = 60  # seconds without a write: a save's temporary file whose writer is gone and that old is left over
def _remove_stale_temps(path: pathlib.Path) -> None:
  """Delete the temporary files an earlier save of `path` left when it was killed (`.NAME.<pid>.<random>.tmp`, ours and
  regular): those whose process is gone and that have not been written for a minute, and any over an hour old (names
  without a pid, from before the pid was in them, included). A 240 MB leftover stayed for ever."""
  pattern = re.compile(re.escape(f".{path.name}.") + r"(?:(\d+)\.)?[a-z0-9_]{8}\.tmp")
  try: entries = list(os.scandir(path.parent))
  except OSError: return
  now = time.time()
  for e in entries:
    if (m := pattern.fullmatch(e.name)) is None: continue
    try: st = e.stat(follow_symlinks=False)
    except OSError: continue
    if not stat.S_ISREG(st.st_mode) or (hasattr(os, "geteuid") and st.st_uid != os.geteuid()): continue
    age = now - st.st_mtime
    if age > 3600 or (m.group(1) is not None and age > STALE_AFTER and not _alive(int(m.group(1)))):
      try: os.unlink(e.path)
      except OSError: pass

def _alive(pid: int) -> bool:
  try: os.kill(pid, 0)
  except ProcessLookupError: return False
  except OSError: pass  # another user's process (EPERM): alive
  return True

def _host_bytes(t: Tensor) -> np.ndarray:
  """t's values as a C-contiguous little-endian numpy array of its storage type (bfloat16 as its raw 16 bits, read from
  the buffer: no kernel, since not every device renders bfloat16)."""
  if t.numel() == 0: return np.zeros(0, np.uint8)
  t.realize()
  if not _is_buffer(t): t = t.contiguous().realize()
  a = ENGINE.storage.buffers[realized_buffer(t.uop)].host_array()
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

# The header is read one entry at a time, each checked as it is read: a header of 2,000,000 dims or of 33 million empty lists
# fails at its first bad entry, in time linear in its bytes, holding no more than the entries read so far (json.loads of the
# whole header took 74 s on the first and 2.6 GB on the second). A tensor's entry is a small object ({"dtype", "shape" of
# at most MAX_DIMS dims, "data_offsets"}), the metadata an object of strings.
_STR = r'"[^"\\]*(?:\\.[^"\\]*)*"'
_KEY = re.compile(r"\s*(" + _STR + r")\s*:\s*")
_OBJECT = re.compile(r"\{[^{}\"]*(?:" + _STR + r"[^{}\"]*)*\}")  # an object holding no object (strings may hold braces)
_NEXT = re.compile(r"\s*([,}])")
_JSON_TYPES = {"[": "list", '"': "str", "t": "bool", "f": "bool", "n": "NoneType"}
MAX_DIMS = 64  # numpy's limit; no model has more
MAX_ENTRY = 64 * 1024  # bytes of one tensor's entry: MAX_DIMS dims need well under 2 KB, even pretty-printed
MAX_METADATA_KEYS = 65536

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
  del raw
  if not text.startswith("{"): raise _fail(fn, "the header does not start with '{'")
  data_len = size - 8 - n
  header: dict[str, Any] = {}
  ranges = []
  for name, info in _entries(fn, text):
    if name in header: raise _fail(fn, f"the header is not valid JSON: duplicate key {name!r}")
    header[name] = info
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

def _entries(fn: Any, text: str):
  """(name, value) of each entry of the header's object, in order; a value that is no object is given as a JSON type name."""
  def bad(at: int, what: str) -> SafetensorsError: return _fail(fn, f"the header is not valid JSON: {what} at character {at} ({text[at:at + 40]!r})")
  def load(part: str, at: int) -> Any:
    try: return json.loads(part, object_pairs_hook=_no_duplicates, parse_constant=_no_constants)
    except (ValueError, RecursionError) as e: raise bad(at, str(e)) from None
  pos = 1
  if (m := _NEXT.match(text, pos)) is not None and m.group(1) == "}": pos = m.end()
  else:
    while True:
      if (m := _KEY.match(text, pos)) is None: raise bad(pos, "expected a tensor's name")
      name, pos = load(m.group(1), pos), m.end()
      if (o := _OBJECT.match(text, pos)) is None:
        if text.startswith("{", pos): raise bad(pos, "an entry holding an object (tensor entries hold strings, numbers and lists)")
        yield name, _JsonValue(_JSON_TYPES.get(text[pos:pos + 1], "int"))
        return  # no valid header goes on: the caller refuses this entry
      if name != "__metadata__" and o.end() - pos > MAX_ENTRY:
        raise _fail(fn, f"tensor {name!r}: its entry is {o.end() - pos} bytes, more than {MAX_ENTRY} (a shape has at most {MAX_DIMS} dims)")
      if name == "__metadata__" and re.sub(_STR, "", o.group()).count(":") > MAX_METADATA_KEYS:
        raise _fail(fn, f"__metadata__ has more than {MAX_METADATA_KEYS} keys")
      yield name, load(o.group(), pos)
      pos = o.end()
      if (m := _NEXT.match(text, pos)) is None: raise bad(pos, "expected ',' or '}'")
      pos = m.end()
      if m.group(1) == "}": break
  if text[pos:].strip(" \t\r\n"): raise bad(pos, "extra data after the header's object")

class _JsonValue:
  """A header value that is not an object, kept only as its JSON type (the entry is refused: nothing more of it is read)."""
  def __init__(self, kind: str): self.kind = kind
  def __repr__(self) -> str: return f"a JSON {self.kind}"

def _check_entry(fn: Any, name: str, info: Any, data_len: int) -> tuple[int, int]:
  where = f"tensor {name!r}"
  if isinstance(info, _JsonValue): raise _fail(fn, f"{where}: its entry is a JSON {info.kind}, not an object")
  if not isinstance(info, dict): raise _fail(fn, f"{where}: its entry is a JSON {type(info).__name__}, not an object")
  if set(info) != {"dtype", "shape", "data_offsets"}:
    raise _fail(fn, f"{where}: its entry has keys {sorted(info)}, expected dtype, shape and data_offsets")
  dt, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
  if not isinstance(dt, str) or dt not in SAFE_DTYPES: raise _fail(fn, f"{where}: unknown or unsupported dtype {dt!r}")
  if not isinstance(shape, list) or not all(type(s) is int and s >= 0 for s in shape):
    raise _fail(fn, f"{where}: shape {shape!r:.100} is not a list of non-negative integers")
  if len(shape) > MAX_DIMS: raise _fail(fn, f"{where}: shape has {len(shape)} dims, more than {MAX_DIMS}")
  # as the reference reader: the element count must fit in 64 bits, counting every dim ([2**62, 2**62, 0] is refused)
  count = 1
  for s in shape:
    if s and (count := count * s) >= 2**63: raise _fail(fn, f"{where}: shape {shape!r:.100} has 2**63 or more elements")
  if not isinstance(offsets, list) or len(offsets) != 2 or not all(type(o) is int for o in offsets) or not 0 <= offsets[0] <= offsets[1]:
    raise _fail(fn, f"{where}: data_offsets {offsets!r:.100} is not [begin, end] with 0 <= begin <= end")
  begin, end = offsets
  if end > data_len: raise _fail(fn, f"{where}: its bytes [{begin}, {end}) run past the end of the data ({data_len} bytes)")
  if (need := math.prod(shape) * SAFE_DTYPES[dt].itemsize) != end - begin:
    raise _fail(fn, f"{where}: shape {shape} of {dt} needs {need} bytes but data_offsets give {end - begin}")
  return begin, end

def safe_load_metadata(fn: str | os.PathLike) -> tuple[Tensor, int, dict[str, Any]]:
  """(the whole file as a lazy uint8 tensor, where the data starts, the parsed header) of a checked safetensors file."""
  f = open(fn, "rb")
  try: start, header, size = _read_header(fn, f)
  except BaseException:
    f.close()
    raise
  return _lazy_tensor(_FileBytes(fn, f, SafetensorsError, "safe_load"), 0, size, dtypes.uint8, (size,), None), start, header

def safe_load(fn: str | os.PathLike, device: str | None = None) -> dict[str, Tensor]:
  """The tensors of a safetensors file by name, on device (the default device if None). The file is checked whole first
  (SafetensorsError on any fault) and kept open; a tensor's bytes are read into its buffer when it is first used, and a
  file that has become shorter by then (overwritten, truncated) is a SafetensorsError naming it, never a crash."""
  f = open(fn, "rb")
  try: start, header, _ = _read_header(fn, f)
  except BaseException:
    f.close()
    raise
  src = _FileBytes(fn, f, SafetensorsError, "safe_load")
  out: dict[str, Tensor] = {}
  for name, info in header.items():
    if name == "__metadata__": continue
    begin, end = info["data_offsets"]
    out[name] = _lazy_tensor(src, start + begin, start + end, SAFE_DTYPES[info["dtype"]], tuple(info["shape"]), device, name)
  return out

def gguf_load(fn: Any, device: str | None = None) -> tuple[dict[str, Any], dict[str, Tensor]]:
  """(metadata, tensors by name) of a GGUF file (or of its bytes in a uint8 tensor): tensor/gguf.py."""
  from tensor.gguf import gguf_load as load  # that module builds on this one's file buffers
  return load(fn, device)
