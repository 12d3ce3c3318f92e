"""A progress bar for training loops, with tqdm's names for what examples use: `for i in (t := trange(steps)):
t.set_description(f"loss {loss.item():.2f}")`. It lives in tensor/helpers.py (with tinygrad's other helpers); this module keeps
the name nn's users import it by. (runtime.helpers.progress is the engine's own, simpler bar.)
"""
from tensor.helpers import tqdm, trange

__all__ = ["tqdm", "trange"]
