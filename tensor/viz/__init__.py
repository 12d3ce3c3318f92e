"""VIZ: the graph-rewrite explorer. `VIZ=1 python script.py` records every graph_rewrite (runtime/trace.py) and, at exit,
serves this web page on 127.0.0.1; `python -m tensor.viz trace.pkl` serves a saved recording. See docs/tools.md.
"""
from tensor.viz.server import make_server, serve

__all__ = ["make_server", "serve"]
