"""Issue 17, item 2: the source policy checks exactly the text that is compiled.

The policy (:mod:`server.source_check`) parses with :mod:`ast`; the extractor that builds the
compiled module (:mod:`kernels.source`) used to rebuild it with ``str.splitlines()``, which also
splits at eight characters Python's tokenizer does not end a line at, so a comment such as
``# note<U+2028>    tl.core.builtins.exec(...)`` was a statement in the compiled module. Now both
split lines with :func:`kernels.source.split_lines`, and the policy refuses such characters
outside string literals. The property test feeds random Unicode (weighted towards separators,
control and format characters) around a policy-approved kernel: the policy refuses it, or the
extracted module has the same AST as the text the policy approved (and passes the policy itself).
"""

from __future__ import annotations

import ast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernels.source import extract_kernel, split_lines, unsafe_characters
from server.source_check import SourceRejected, check_triton_source

from .conftest import ServerProc
from .sandbox_payloads import softmax_with

# every character str.splitlines() splits at besides \n and \r (Python docs, str.splitlines)
SEPARATORS = ["\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
PAYLOAD = "    tl.core.builtins.exec('open(\"/tmp/ailower_pwned\", \"w\")')"

BASE = '''"""A relu kernel: the docstring is a string literal, so anything may go in it."""
import triton
import triton.language as tl


@triton.jit
def kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    # a comment line
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n  # a trailing comment
    x = tl.load(x_ptr + offs, mask=mask)
    tl.static_assert(BLOCK > 0, "BLOCK must be positive")
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


@triton.jit
def helper(a):
    return a + 1
'''


def _functions(tree: ast.Module) -> dict[str, str]:
    """name -> ``ast.dump`` of each top-level function, decorators left out (the extractor writes
    its own ``@triton.jit``)."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            node.decorator_list = []
            out[node.name] = ast.dump(node)
    return out


def test_split_lines_follows_the_parser():
    text = "a = 1\r\nb = 2\rc = 3\nd = 4  # x\u2028e = 5\x0cf\n"
    tree = ast.parse(text)
    lines = split_lines(text)
    for node in tree.body:
        assert lines[node.lineno - 1].lstrip().startswith(ast.unparse(node.targets[0]))
    assert len(lines) == 4 and lines[3].endswith("\x0cf")
    assert "".join(split_lines(text, keepends=True)) == text


@pytest.mark.parametrize("sep", SEPARATORS, ids=[f"U+{ord(c):04X}" for c in SEPARATORS])
def test_extractor_keeps_a_comment_a_comment(sep):
    # the CLI path (no policy): a separator inside a comment stays inside the comment
    text = softmax_with([f"# note{sep}{PAYLOAD}"])["source"]["text"]
    ext = extract_kernel(text, "softmax_kernel")
    assert "exec" not in ast.dump(ast.parse(ext.text))
    assert _functions(ast.parse(ext.text)) == _functions(ast.parse(text))


@pytest.mark.parametrize("sep", SEPARATORS, ids=[f"U+{ord(c):04X}" for c in SEPARATORS])
def test_policy_refuses_separator_outside_strings(sep):
    text = softmax_with([f"# note{sep}{PAYLOAD}"])["source"]["text"]
    with pytest.raises(SourceRejected) as exc:
        check_triton_source(text, "softmax_kernel")
    assert (exc.value.line, exc.value.col) == (5, 11)
    assert f"U+{ord(sep):04X}" in str(exc.value) and str(exc.value).startswith("source:5:11:")


def test_strings_may_hold_any_character():
    text = BASE.replace("BLOCK must be positive", "BLOCK\u2028must\x0cbe\u200bpositive\x85")
    assert unsafe_characters(text) == []
    assert check_triton_source(text, "kernel") == ["kernel", "helper"]
    assert unsafe_characters("x = 1  # \ufeff\n") == [(1, 10, "\ufeff")]
    assert unsafe_characters("x = '''\n\u2028'''  # \u2029\n") == [(2, 9, "\u2029")]
    # lone-CR line ends (old Mac files) are line ends to the parser, and so to the check
    assert unsafe_characters("x = 1\rs = 'a\u2028b'\ry = 2  # \u2028\r") == [(3, 10, "\u2028")]


_SPECIAL = st.sampled_from(SEPARATORS + [
    "\x00", "\x01", "\x1f", "\x7f", "\u200b", "\u200c", "\u200d", "\u200e", "\u202e", "\u2066",
    "\ufeff", "\u00ad", "\t", "\n", "\r", "\r\n", " ", "#", "'", '"', '"""', "\\", "(", ")",
    ":", PAYLOAD, "tl.core", "exec(1)"])
_SNIPPET = st.lists(st.one_of(_SPECIAL, _SPECIAL, st.characters(codec="utf-8")), min_size=1,
                    max_size=6).map("".join)
# where to insert: anywhere, or (more often) inside the comments, strings and the docstring
_HOT = [BASE.index(s) + k for s in ("a comment line", "a trailing comment", "must be",
                                    "the docstring", "return a") for k in (0, 3)]


@pytest.mark.filterwarnings("ignore::SyntaxWarning", "ignore::DeprecationWarning")
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.one_of(st.sampled_from(_HOT), st.integers(0, len(BASE))),
                          _SNIPPET), min_size=1, max_size=3))
def test_property_policy_approves_only_what_the_extractor_compiles(edits):
    text = BASE
    for pos, snippet in sorted(edits, reverse=True):
        text = text[:pos] + snippet + text[pos:]
    try:
        jit = check_triton_source(text, "kernel")
    except SourceRejected:
        return  # refused: nothing is compiled
    ext = extract_kernel(text, "kernel")
    approved, compiled = _functions(ast.parse(text)), _functions(ast.parse(ext.text))
    assert set(ext.functions) <= set(jit)
    assert {n: approved[n] for n in ext.functions} == compiled, (text, ext.text)
    assert unsafe_characters(ext.text) == []
    check_triton_source(ext.text, "kernel")  # the compiled module passes the policy itself


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    """No job slots: a submission the policy accepts stays queued (nothing runs)."""
    s = ServerProc(tmp_path_factory.mktemp("lines"), cpu_workers=0)
    s.start()
    yield s
    s.stop()


@pytest.mark.parametrize("sep", SEPARATORS, ids=[f"U+{ord(c):04X}" for c in SEPARATORS])
def test_separator_bypass_refused_by_the_server(srv, sep):
    key = srv.new_key(f"sep{ord(sep):x}")
    spec = softmax_with([f"# note{sep}{PAYLOAD}"])
    with srv.client(key) as c:
        r = c.post("/v1/lowerings", json={"spec": spec})
        assert r.status_code == 422, r.text  # before the fix: 202 (queued) and exec ran
        body = r.json()
        assert body["type"] == "source-rejected"
        assert body["message"].startswith("source:5:11: character U+")
        assert body["loc"] == ["body", "spec", "source", "text", 5, 11]
        assert c.get("/v1/lowerings").json()["count"] == 0
