"""runtime: the foundation layer. dtypes, the Ops table, the hash-consed UOp IR, the rewrite engine and helpers.

Imports no other package of the project (a test enforces it).
"""
from runtime.dtype import DType, PtrDType, dtypes, least_upper_dtype, least_upper_float
from runtime.ops import Ops, GroupOp, exec_alu
from runtime.uop import UOp, sym_infer
from runtime.rewrite import graph_rewrite, Matcher, Rule, RewriteError, RewriteLoopError, RuleError
from runtime.helpers import getenv, Context, ContextVar, GlobalCounters, DEBUG

__all__ = ["DType", "PtrDType", "dtypes", "least_upper_dtype", "least_upper_float", "Ops", "GroupOp", "exec_alu", "UOp", "sym_infer",
           "graph_rewrite", "Matcher", "Rule", "RewriteError", "RewriteLoopError", "RuleError",
           "getenv", "Context", "ContextVar", "GlobalCounters", "DEBUG"]
