"""Robustness: ``parse_ptx`` raises only ``PTXSyntaxError`` and ``verify`` never raises, whatever
the input (random text, token soup, mutations and truncations of real Triton PTX)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from verifier_testlib import FIXTURES

from verifier import PTXSyntaxError, parse_ptx, verify

SETTINGS = settings(max_examples=200, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow, HealthCheck.data_too_large])

VOCAB = [
    ".version", "8.4", ".target", "sm_90a", ",", "debug", ".address_size", "64", ".visible",
    ".extern", ".weak", ".entry", ".func", "k", "(", ")", "{", "}", "[", "]", ";", ":", ".param",
    ".reg", ".shared", ".global", ".local", ".const", ".align", "16", ".b8", ".b32", ".u64",
    ".pred", ".ptr", "%r<4>", "%r1", "%rd2", "%p1", "%tid.x", "@", "@!", "!", "|", "_", "=",
    "<", ">", "+", "-", "*", "/", "%", "<<", "~", "0f3F800000", "0d3FF0000000000000", "0x10",
    "-4", "1.5", "$L__BB0_1", "$L__BB0_1:", "bra.uni", "call.uni", "ret", "mov.b32", "ld.param.u64",
    "wgmma.fence.sync.aligned", "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32",
    ".reqntid", ".maxntid", "128", ".pragma", '"nounroll"', '"', ".loc", ".file", ".section",
    ".debug_info", "//", "/*", "*/", "\n", "\t", " ", "#", "\x00", "é",
]


def assert_contract(text: str) -> None:
    try:
        parse_ptx(text, "f.ptx")
    except PTXSyntaxError as err:
        assert err.line >= 1 and err.col >= 1
        assert str(err).startswith(f"f.ptx:{err.line}:{err.col}: error: ")
    report = verify(text, arch="sm_90a", threads=128, filename="f.ptx")
    report.render()
    report.render("concise")
    report.to_dict()


@pytest.fixture(scope="module")
def corpus(triton_ptx) -> list[str]:
    texts = [triton_ptx.get("vector_add", 90)[0], triton_ptx.get("softmax", 100)[0],
             (FIXTURES / "hopper_style.ptx").read_text()]
    return texts


@SETTINGS
@given(st.text(max_size=400))
def test_random_text(text):
    assert_contract(text)


@SETTINGS
@given(st.lists(st.sampled_from(VOCAB), max_size=120), st.sampled_from([" ", "\n", ""]))
def test_token_soup(tokens, sep):
    assert_contract(sep.join(tokens))


@SETTINGS
@given(data=st.data())
def test_mutated_real_ptx(corpus, data):
    text = data.draw(st.sampled_from(corpus))
    for _ in range(data.draw(st.integers(1, 4))):
        n = len(text)
        op = data.draw(st.sampled_from(["truncate", "delete", "insert", "duplicate", "swap"]))
        i = data.draw(st.integers(0, n))
        j = data.draw(st.integers(i, min(n, i + 200)))
        if op == "truncate":
            text = text[:i]
        elif op == "delete":
            text = text[:i] + text[j:]
        elif op == "insert":
            piece = data.draw(st.one_of(st.sampled_from(VOCAB), st.text(max_size=8)))
            text = text[:i] + piece + text[i:]
        elif op == "duplicate":
            text = text[:j] + text[i:j] + text[j:]
        else:
            lines = text.split("\n")
            a = data.draw(st.integers(0, len(lines) - 1))
            b = data.draw(st.integers(0, len(lines) - 1))
            lines[a], lines[b] = lines[b], lines[a]
            text = "\n".join(lines)
    assert_contract(text)
