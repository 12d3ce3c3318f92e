"""Codegen's cache of lowered programs on disk: a kernel's rendered source and facts (name, sizes, parameters, costs, opts)
kept in the kernel cache (runtime/kernel_cache.py) under a key made from its AST, so a new process that meets a kernel an
earlier one compiled skips lowering, linearizing and rendering as well as the compiler (the engine asks it before it
builds a program: tensor/engine/realize.py).

The key covers everything the program depends on: the AST (written out node by node), the target's device and machine
(its vector registers and the core count: Target.machine), the program variant (NOOPT, THREADS, BEAM, SPEC, the name), and the
code that lowers and renders (a digest of the sources of runtime/, rules/, tensor/codegen/ and tensor/renderer/, taken
once per process), so changing any of them makes new entries instead of reading stale ones. Only targets whose programs
are source text (not the PYTHON device's UOp lists) are kept.
"""
from __future__ import annotations
import functools, hashlib, json, os
from runtime import kernel_cache
from runtime.dtype import _dtype_from_repr
from runtime.ops import Ops
from runtime.uop import UOp, uop
from tensor.codegen import Program, ast_text
from tensor.codegen.target import Target

FORMAT = "1"  # part of every key: a change of the stored layout makes new entries
CODE_DIRS = ("runtime", "rules", "tensor/codegen", "tensor/renderer")

@functools.cache  # the code does not change while the process runs
def code_version() -> str:
  """A digest of the code that turns an AST into a program."""
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  h = hashlib.sha256(FORMAT.encode())
  for d in CODE_DIRS:
    folder = os.path.join(root, d)
    for name in sorted(os.listdir(folder)):
      if not name.endswith(".py"): continue
      h.update(name.encode())
      with open(os.path.join(folder, name), "rb") as f: h.update(f.read())
  return h.hexdigest()

def program_key(ast: UOp, target: Target, variant: object) -> str:
  return hashlib.sha256("\0".join([ast_text(ast), target.device, str(variant), target.machine(), code_version()]).encode()).hexdigest()[:32]

def encode(program: Program) -> bytes | None:
  """The stored form of a Program (None when it can't be stored: not source text, or a variable we can't write out)."""
  if not isinstance(program.src, str) or any(v.src for v in program.vars): return None
  return json.dumps({"name": program.name, "src": program.src, "device": program.device, "n_params": program.n_params,
                     "global_size": list(program.global_size), "ops": program.ops, "mem": program.mem,
                     "vars": [[repr(v.dtype), *v.arg] for v in program.vars], "opts": [list(o) for o in program.opts]}).encode()

def decode(data: bytes) -> Program:
  d = json.loads(data)
  return Program(d["name"], [], d["src"], d["device"], d["n_params"], tuple(d["global_size"]), d["ops"], d["mem"],
                 vars=[uop(Ops.DEFINE_VAR, _dtype_from_repr(t), (), (name, lo, hi)) for t, name, lo, hi in d["vars"]],
                 opts=[tuple(o) for o in d["opts"]])

def load(key: str) -> Program | None:
  """The Program stored under key, or None."""
  data = kernel_cache.load_data(key)
  if data is None: return None
  try: return decode(data)
  except (ValueError, KeyError, TypeError, SyntaxError, NameError, AttributeError):
    return None  # an entry of another layout with the same key can't happen (FORMAT is in the key); a damaged one is rebuilt

def store(key: str, program: Program) -> None:
  if (data := encode(program)) is not None: kernel_cache.store_data(key, data)

__all__ = ["program_key", "load", "store", "encode", "decode", "code_version"]
