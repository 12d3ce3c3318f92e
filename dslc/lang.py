"""The fixed vocabulary of the .rules language, shared by every phase of dslc (parse, check, emit): op groups, dtype classes,
and the names generated code reserves. Depends on runtime's tables only, so any phase may import it.
"""
from __future__ import annotations
from runtime.dtype import dtypes
from runtime.ops import GroupOp, Ops

# `x:ints`, `_:floats`: a class of scalar dtypes
DTYPE_CLASSES = {"ints": frozenset(d for d in dtypes.all() if dtypes.is_int(d)), "uints": frozenset(d for d in dtypes.all() if dtypes.is_unsigned(d)),
                 "sints": frozenset(d for d in dtypes.all() if dtypes.is_int(d) and not dtypes.is_unsigned(d)),
                 "floats": frozenset(d for d in dtypes.all() if dtypes.is_float(d)), "bools": frozenset({dtypes.bool})}
# `(ALU ...)`, `(Commutative ...)`: the op groups of runtime.ops.GroupOp
GROUPS: dict[str, frozenset[Ops]] = {k: v for k, v in vars(GroupOp).items() if isinstance(v, frozenset)}

# names a guard or result may use without binding them
BUILTINS = frozenset({"abs", "all", "any", "bool", "dict", "enumerate", "float", "frozenset", "getattr", "int", "isinstance", "len", "list", "max",
                      "min", "range", "reversed", "round", "set", "sorted", "str", "sum", "tuple", "type", "zip", "True", "False", "None"})
# the names every generated module defines for its rules (emit.emit_module's header)
PRELUDE_NAMES = frozenset({"Ops", "GroupOp", "dtypes", "UOp", "uop", "exec_alu", "cast_value", "math", "inf", "nan", "ctx"})
# module-level names of a generated module besides PRELUDE_NAMES that user names must not hide
GENERATED_NAMES = frozenset({"len", "match_all", "Matcher", "Rule"})
