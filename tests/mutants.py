"""Broken candidates made from Triton's own vector_add PTX, shared by CPU and GPU tests.

Each function returns the mutated text and raises ``AssertionError`` if the pattern it edits is
missing, so a change in Triton's output can never make a test pass vacuously.
"""

from __future__ import annotations

import re


def _sub(pattern: str, repl: str, text: str, count: int = 1, flags: int = 0) -> str:
    out, n = re.subn(pattern, repl, text, count=count, flags=flags)
    assert n, f"mutation pattern {pattern!r} not found"
    return out


def ptxas_error(ptx: str) -> str:
    """An instruction ptxas rejects."""
    return _sub(r"(\n\s*ret;)", r"\n\tbogus.op.b32 %r1, %r1;\1", ptx)


def wrong_entry(ptx: str) -> str:
    """The entry renamed (the ABI requires the original name)."""
    return _sub(r"\.entry\s+(\w+)", r".entry \1_renamed", ptx)


def wrong_params(ptx: str) -> str:
    """The 32-bit scalar parameter widened to 64 bits (the ABI says .u32)."""
    return _sub(r"\.param \.u32 (\w+_param_3)", r".param .u64 \1", ptx)


def wrong_result(ptx: str) -> str:
    """Every ``add.f32`` becomes ``sub.f32``: x - y instead of x + y."""
    return _sub(r"\badd\.f32\b", "sub.f32", ptx, count=0)


def hang(ptx: str) -> str:
    """An infinite loop before the final ``ret``: the kernel never terminates."""
    return _sub(r"(\n\s*ret;\s*\n)", r"\n$L__ailower_hang:\n\tbra.uni $L__ailower_hang;\1", ptx)


def partial_write(ptx: str) -> str:
    """The last global store skipped by every odd CTA: part of the output is never written."""
    stores = list(re.finditer(r"\n[^\n]*st\.global[^\n]*", ptx))
    assert stores, "no global store found"
    s = stores[-1]
    skip = ("\n\t{\n\t.reg .b32 %ailower_c;\n\t.reg .pred %ailower_p;\n"
            "\tmov.u32 %ailower_c, %ctaid.x;\n\tand.b32 %ailower_c, %ailower_c, 1;\n"
            "\tsetp.ne.u32 %ailower_p, %ailower_c, 0;\n\t@%ailower_p bra $L__ailower_skip;\n\t}")
    return ptx[:s.start()] + skip + ptx[s.start():s.end()] + "\n$L__ailower_skip:" + ptx[s.end():]


def _first_store(ptx: str) -> re.Match:
    m = re.search(r"\n(?P<indent>\s*)(?P<pred>@%p\d+\s+)?st\.global(?P<vec>\.v\d)?\.b32\s*"
                  r"\[\s*(?P<addr>%rd\d+)\s*\+\s*0\s*\]\s*,\s*(?P<val>\{[^}]*\}|%\w+)\s*;", ptx)
    assert m, "no global store found"
    return m


def input_write(ptx: str) -> str:
    """The first store duplicated into the first *input* tensor: an input is modified."""
    ld = re.search(r"ld\.global[^\[\n]*\[\s*(%rd\d+)", ptx)
    assert ld, "no global load found"
    st = _first_store(ptx)
    dup = st.group(0).replace(st.group("addr"), ld.group(1), 1)
    return ptx[:st.end()] + dup + ptx[st.end():]


def oob_write(ptx: str) -> str:
    """An extra store 64 bytes before each thread's output address: block 0 writes below the buffer."""
    st = _first_store(ptx)
    val = st.group("val").strip("{} ").split(",")[0].strip()
    extra = f"\n\tst.global.b32 [ {st.group('addr')} + -64 ], {val};"
    return ptx[:st.end()] + extra + ptx[st.end():]
