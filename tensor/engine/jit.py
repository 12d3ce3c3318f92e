"""The TinyJit's error, defined at the engine layer so the seeds' import path `from tensor.engine.jit import JitError`
(API.md) works; TinyJit itself is in tensor/jit.py, beside the Tensor it captures.
"""

class JitError(RuntimeError):
  """A TinyJit used in a way it can't honour: inputs that differ from the capture, nested capture, nothing to capture,
  a returned number. A RuntimeError, which is what a nested TinyJit raises in tinygrad."""

__all__ = ["JitError"]
