"""What a generated module was built from, so `python build.py` can skip a file whose inputs did not change.

A generated module's header holds the sha256 of its .rules source (`Source sha256: ...`). The compiler is an input too:
its digest (dslc's sources and the runtime tables it reads) and each generated module's own digest are kept in a stamp
file under rules/__pycache__ (never committed), written after each build. A file is up to date when its source matches
its header, the compiler matches the stamp, and the module is byte for byte what the last build wrote.

Imports nothing but the standard library: build.py loads this file alone, before dslc or lark, to keep a no-op build fast.
"""
from __future__ import annotations
import glob, hashlib, json, os, re, zlib

HEADER = re.compile(r"# Regenerate with `python build.py`\. Source sha256: ([0-9a-f]{16})")
# what emitted code depends on besides the .rules file: the compiler and the runtime tables it reads (ops, arities, dtypes)
COMPILER_FILES = ("dslc/*.py", "dslc/grammar.lark", "runtime/ops.py", "runtime/dtype.py", "runtime/uop.py")

def source_digest(text: str) -> str: return hashlib.sha256(text.encode()).hexdigest()[:16]

def import_digest(text: str) -> str:
  """What a generated module checks its .rules file against when imported (rules.built_from): a CRC-32 (zlib is loaded
  already; enough to tell an edited file, cheaper than a sha256)."""
  return f"{zlib.crc32(text.encode()):08x}"

def compiler_digest(root: str) -> str:
  h = hashlib.sha256()
  for pattern in COMPILER_FILES:
    for path in sorted(glob.glob(os.path.join(root, pattern))):
      with open(path, "rb") as f: h.update(path[len(root):].encode() + b"\0" + f.read() + b"\0")
  return h.hexdigest()[:16]

def stamp_path(root: str) -> str: return os.path.join(root, "rules", "__pycache__", "build-stamp.json")

def load_stamp(root: str) -> dict:
  try:
    with open(stamp_path(root)) as f: return json.load(f)
  except (OSError, ValueError): return {}

def save_stamp(root: str, compiler: str, outputs: dict[str, str]) -> None:
  path = stamp_path(root)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  tmp = f"{path}.tmp{os.getpid()}"
  with open(tmp, "w") as f: json.dump({"compiler": compiler, "outputs": outputs}, f, indent=1, sort_keys=True)
  os.replace(tmp, path)

def up_to_date(source: str, generated: str | None, stamp: dict, compiler: str, key: str) -> bool:
  """Whether `generated` (a module's text, None when missing) is what compiling `source` would give."""
  if generated is None or stamp.get("compiler") != compiler: return False
  m = HEADER.search(generated[:400])
  return m is not None and m[1] == source_digest(source) and stamp.get("outputs", {}).get(key) == source_digest(generated)
