"""PTX front end: tokenizer, recursive-descent parser and syntax tree.

Source: PTX ISA 9.1 §4 (syntax), §5 (state spaces, types, variables), §7 (functions), §11 (directives).
"""

from verifier.ptx.ast import (
    TYPE_SIZES,
    Directive,
    Function,
    Instruction,
    Label,
    Module,
    Operand,
    Param,
    PerfDirective,
    RegDecl,
    Scope,
    Statement,
    VarDecl,
    type_size,
)
from verifier.ptx.parser import parse_ptx

__all__ = [
    "TYPE_SIZES",
    "Directive",
    "Function",
    "Instruction",
    "Label",
    "Module",
    "Operand",
    "Param",
    "PerfDirective",
    "RegDecl",
    "Scope",
    "Statement",
    "VarDecl",
    "parse_ptx",
    "type_size",
]
