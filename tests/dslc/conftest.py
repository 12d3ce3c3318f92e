"""pytest setup for tests/dslc: the repository root first on sys.path, so `import dslc` is this checkout however the package is installed."""
import os, sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if sys.path[:1] != [ROOT]: sys.path.insert(0, ROOT)
