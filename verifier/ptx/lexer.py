"""PTX tokenizer: one compiled regular expression, no per-character Python loop.

Every match is ``(trivia, token)``: the possessive trivia group swallows whitespace and ``//`` /
``/* */`` comments, the token group takes one token (or one stray character, which the parser
rejects with a precise message). Token start offsets come from a running sum of the matched
lengths (``itertools.accumulate``), so tokenizing stays in C.

Token classes (told apart by the parser from the first character):

* identifiers / opcodes / registers: ``ld.global.v4.b32``, ``tcgen05.alloc.cta_group::1``,
  ``%r12``, ``%tid.x``, ``$L__BB0_1``, ``_``;
* directives: ``.reg``, ``.shared::cta`` (one dot each, so ``.ptr.global`` is two tokens);
* numbers: ``0f3F800000``, ``0d3FF0000000000000``, ``0x1F``, ``0b101``, ``12U``, ``1.5e3``;
* strings ``"..."``; punctuation ``{ } ( ) [ ] ; , : < > + - * / % @ ! | = ~ & ^``.

Source: PTX ISA 9.1 §4 (syntax: comments, identifiers, constants).
"""

from __future__ import annotations

import re
from itertools import accumulate, chain

__all__ = ["line_starts", "tokenize"]

# An unterminated /* runs to the end of the text (so it is scanned once, not once per later
# position); tokenize() turns that case into a "/*" token the parser reports.
_TRIVIA = r"((?:\s+|//[^\n]*|/\*[\s\S]*?(?:\*/|\Z))*+)"
_CLOSED_TRIVIA = re.compile(r"(?:\s+|//[^\n]*|/\*[\s\S]*?\*/)*+")
_TOKEN = (
    r"("
    r"[A-Za-z_$%][\w$]*(?:(?:\.|::)[\w$]+)*"          # identifier / opcode / register
    r"|\.[A-Za-z_][\w$]*(?:::[\w$]+)*"                 # directive
    r"|0[fF][0-9a-fA-F]{8}(?![\w$])"                   # f32 bit pattern
    r"|0[dD][0-9a-fA-F]{16}(?![\w$])"                  # f64 bit pattern
    r"|0[xX][0-9a-fA-F]+U?"
    r"|0[bB][01]+U?"
    r"|\d+\.\d*(?:[eE][+-]?\d+)?"
    r"|\d+[eE][+-]?\d+"
    r"|\d+U?"
    r'|"(?:[^"\\\n]|\\.)*"'
    r"|<<|>>|::"
    r"|[\s\S]"                                         # anything else: the parser reports it
    r"|\Z)"
)
_LEX = re.compile(_TRIVIA + _TOKEN)
_NL = re.compile(r"\n")


def tokenize(text: str) -> tuple[list[str], list[int]]:
    """Split ``text`` into tokens.

    Returns:
        ``(tokens, starts)``: token texts and their start offsets; the last token is ``""`` at
        ``len(text)`` (end of file).

    Never raises: characters that start no token become one-character tokens for the parser to
    reject, and a block comment left open at the end of the text becomes a ``/*`` token.
    """
    pairs = _LEX.findall(text)
    if not pairs or pairs[-1][1] != "":
        pairs.append(("", ""))
    # drop empty-token pairs except the final EOF one (they can only occur at the end)
    while len(pairs) > 1 and pairs[-2][1] == "":
        pairs[-1] = (pairs[-2][0] + pairs[-1][0], "")
        del pairs[-2]
    ends = list(accumulate(map(len, chain.from_iterable(pairs))))
    starts = ends[0::2]
    toks = [p[1] for p in pairs]
    starts[-1] = len(text)
    tail = pairs[-1][0]
    if "/*" in tail:
        m = _CLOSED_TRIVIA.match(tail)
        if m.end() < len(tail):   # the text ends inside a block comment
            toks.insert(-1, "/*")
            starts.insert(-1, len(text) - len(tail) + m.end())
    return toks, starts


def line_starts(text: str) -> list[int]:
    """Offsets at which each line begins (``[0, ...]``), for offset -> (line, col) via bisect."""
    return [0] + [m.end() for m in _NL.finditer(text)]
