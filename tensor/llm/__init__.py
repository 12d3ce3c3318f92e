"""Language models from GGUF files: Transformer.from_gguf (tensor/llm/model.py), the tokenizer in the file's metadata
(tensor/llm/tokenizer.py). At the nn level: it imports tensor and tensor.nn. docs/llm.md is the user's guide."""
from tensor.llm.model import ModelConfig, Transformer, UnsupportedModelError, sample

__all__ = ["Transformer", "ModelConfig", "UnsupportedModelError", "sample"]
