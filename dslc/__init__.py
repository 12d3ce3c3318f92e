"""dslc: the rule compiler. `.rules` text or Python UPats -> rule IR -> checks -> generated Python matchers.

Build time (`python build.py`) and the Python front end; imports runtime, never tensor.
"""
from dslc.upat import UPat, PatternMatcher
from dslc.diagnostics import Diagnostic, DslError

__all__ = ["UPat", "PatternMatcher", "Diagnostic", "DslError"]
