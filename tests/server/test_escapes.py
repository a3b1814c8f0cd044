"""Escape attempts from untrusted kernel source, against a real uvicorn on 127.0.0.1.

Each attempt is either refused at submission (4xx naming the expression and its source:LINE:COL)
or, when it is legal Triton that only burns resources, ends as a failed job with a clear message;
every payload also tries to create a marker file, and no marker may ever appear (nothing ran
outside the sandbox). Classes: attribute chains through the public tl/triton objects and their
modules, constexpr-to-string tricks, builtins, decorators, annotations, defaults, module-level
code, imports, recursion, compile-time loops, output floods, syntax that reaches the interpreter.
"""

from __future__ import annotations

import re
import time

import pytest

from .conftest import ServerProc, needs_isolation, wait_status
from .sandbox_payloads import softmax_with

M = "/var/tmp/ailower-escape-marker"
TOUCH = f"'touch {M}'"

# (lines injected at the top of the softmax kernel body, what the 422 message must say)
BODY = [
    (f"tl.core.knobs.os.system({TOUCH})", "'tl.core.knobs.os.system' is not in"),
    (f"tl.core.builtins.exec(\"open('{M}', 'w')\".value)", "'tl.core.builtins.exec' is not in"),
    ("x = int(tl.core.knobs.os.popen(\"id\".value).read())", "is not in the documented"),
    ("x = tl.core.builtins.eval('1')", "'tl.core.builtins.eval' is not in"),
    ("c = tl.core", "'tl.core' is not in"),
    ("k = tl.core.knobs", "'tl.core.knobs' is not in"),
    ("m = tl.math", "'tl.math' is not in"),
    ("t = tl", "may only be used as 'tl.<documented name>'"),
    ("d = triton.runtime.driver.active", "'triton.runtime.driver.active' is not in"),
    ("f = triton.compiler.compile", "'triton.compiler.compile' is not in"),
    (f"triton.knobs.os.system({TOUCH})", "'triton.knobs.os.system' is not in"),
    ("x = tl.extra.cuda.libdevice.exp(1.0)", "'tl.extra.cuda.libdevice.exp' is not in"),
    (f"triton.language.core.builtins.exec(\"open('{M}', 'w')\".value)",
     "'triton.language.core.builtins.exec' is not in"),
    ("x = tl.tensor.__init__", "private or dunder attribute"),
    ("x = tl.constexpr.value", "'tl.constexpr.value' is not in"),
    ("x = \"id\".value", "attribute of a literal"),
    ("x = BLOCK_N.value", "attribute 'value'"),
    ("x = row.type", "attribute 'type'"),
    ("x = row.handle", "attribute 'handle'"),
    ("x = softmax_kernel.fn", "attribute 'fn'"),
    ("x = row.to.__self__", "private or dunder attribute"),
    ("x = tl.load.__globals__", "private or dunder attribute"),
    ("x = getattr(tl, 'core')", "name 'getattr'"),
    ("x = __import__('os')", "dunder name '__import__'"),
    ("x = ().__class__", "private or dunder attribute"),
    (f"x = open('{M}', 'w')", "name 'open'"),
    (f"exec(\"open('{M}', 'w')\")", "name 'exec'"),
    ("x = globals()", "name 'globals'"),
    ("print(1)", "name 'print'"),
    ("breakpoint()", "name 'breakpoint'"),
    ("x = f'{row}'", "JoinedStr"),
    ("x = [c for c in range(3)]", "ListComp"),
    ("x = (lambda: 0)()", "Lambda"),
    ("x = {1: 2}", "Dict"),
    ("tl.static_print('A' * 1000000000)", "string arithmetic"),
    ("x = 10 ** (10 ** 10)", "constant integer exponent"),
    ("x = tl.inline_asm_elementwise('mov.b32 $0, $1;', '=r,r', [row], dtype=tl.int32, "
     "is_pure=True, pack=1)", "inline_asm_elementwise is disabled"),
    ("import os", "Import statements are not allowed"),
    ("global tl", "Global statements"),
    (f"with open('{M}') as f:\n    pass", "With statements"),
    ("try:\n    pass\nexcept Exception:\n    pass", "Try statements"),
    ("del row", "Delete statements"),
    ("tl = 1", "assignment to 'tl'"),
    ("range = 3", "assignment to 'range'"),
    ("x: tl.core.knobs = 1", "only 'NAME: tl.constexpr = VALUE'"),
    ("yield 1", "Yield"),
    ("x, *y = (1, 2)", "starred assignment"),
    ("tl.store(out_ptr, *(1,))", "starred arguments"),
    ("x = tl.load(**{})", "'**' keyword arguments"),
    ("tl.static_assert(True, tl.core.knobs.os.getcwd())", "'tl.core.knobs.os.getcwd' is not in"),
    ("x = tl.debug_barrier.__call__", "private or dunder attribute"),
    ("x = b'abc'", "bytes literals"),
    ("x = row.to(tl.float32).__class__.__mro__", "private or dunder attribute"),
    ("x = tl.PropagateNan.ALL", "'tl.PropagateNan.ALL' is not in"),
    ("row.dtype = 3", "assignment to the attribute"),
    ("x = (row := 1)", "NamedExpr"),
    ("x = 'x' * 300", "string arithmetic"),
    ("tl.static_print('" + "A" * 300 + "')", "string literal of 300 characters"),
]

KT = ("import triton\nimport triton.language as tl\n{pre}\n@triton.jit{dec}\n"
      "def k(x_ptr{params}){ret}:\n    tl.store(x_ptr, 1.0)\n")

# (whole module source, what the 422 message must say)
MODULE = [
    ("import triton\nfrom triton.language.core import builtins\n",
     "import from triton.language.core"),
    ("import triton\nfrom triton.language import core\n", "'core' is not in the documented"),
    ("import triton.language.core as c\n", "import of 'triton.language.core'"),
    ("from triton import knobs\n", "'from triton import knobs' is not allowed"),
    ("from triton import runtime\n", "'from triton import runtime' is not allowed"),
    ("import importlib\n", "import of 'importlib'"),
    ("import os\n", "import of 'os'"),
    (KT.format(pre="", dec="(repr=lambda x: 'x')", params="", ret=""), "keyword 'repr'"),
    (KT.format(pre="", dec="(launch_metadata=tl.core.knobs.os.system)", params="", ret=""),
     "keyword 'launch_metadata'"),
    (KT.format(pre="", dec="\n@triton.heuristics({})", params="", ret=""), "exactly one decorator"),
    ("import triton\nimport triton.language as tl\n@triton.autotune(configs=[], key=[])\n"
     "def k(x_ptr):\n    pass\n", "the decorator must be @triton.jit"),
    (KT.format(pre="", dec="", params=f", y: tl.core.knobs.os.system({TOUCH})", ret=""),
     "annotation"),
    (KT.format(pre="", dec="", params="", ret=" -> tl.core"), "return annotations"),
    (KT.format(pre="", dec="", params=f", y=tl.core.knobs.os.system({TOUCH})", ret=""),
     "not a constant"),
    (KT.format(pre=f"x = tl.core.knobs.os.system({TOUCH})", dec="", params="", ret=""),
     "only imports and @triton.jit functions"),
    (KT.format(pre="class C:\n    pass", dec="", params="", ret=""), "not ClassDef"),
    (KT.format(pre="if __name__ == '__main__':\n    pass", dec="", params="", ret=""), "not If"),
    (KT.format(pre="", dec="", params=", *args", ret=""), "*args/**kwargs"),
    ("import triton\nfrom triton import jit as __builtins__\n", "dunder name '__builtins__'"),
    ("import triton\nimport triton.language as tl\n@triton.jit\ndef k(x_ptr):\n    k(x_ptr)\n",
     "recursive @triton.jit call k -> k"),
    ("import triton\nimport triton.language as tl\n@triton.jit\ndef a(x):\n    b(x)\n"
     "@triton.jit\ndef b(x):\n    a(x)\n@triton.jit\ndef k(x_ptr):\n    a(x_ptr)\n",
     "recursive @triton.jit call"),
    ("import triton\nimport triton.language as tl\n@triton.jit\ndef k(x_ptr):\n"
     "    x = 1 if tl.core else 2\n", "'tl.core' is not in"),
]


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    """One slot, small sandbox limits so resource attacks end within seconds (a 20 s compile wall:
    the uploaded softmax compiles in 7-11 s on a loaded 2-core host)."""
    s = ServerProc(tmp_path_factory.mktemp("esc"), cpu_workers=1, lease_s=5, heartbeat_s=0.5,
                   sandbox_wall_s=20, sandbox_output_bytes=1 << 20)
    s.start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def key(srv):
    return srv.new_key("mallory", "--max-concurrent", "50", "--rate-per-minute", "1000")


@pytest.fixture(autouse=True)
def no_marker():
    import os

    if os.path.exists(M):
        os.unlink(M)
    yield
    time.sleep(0.05)
    assert not os.path.exists(M), "a payload ran outside the sandbox"


def _refused(srv, key, spec: dict, expect: str) -> dict:
    c = srv.client(key)
    before = c.get("/v1/lowerings", params={"limit": 1}).json()["count"]
    r = c.post("/v1/lowerings", json={"spec": spec, "budget": {"iterations": 1}})
    assert 400 <= r.status_code < 500, r.text
    err = r.json()
    assert err["type"] == "source-rejected", err
    assert expect in err["message"], err["message"]
    assert c.get("/v1/lowerings", params={"limit": 1}).json()["count"] == before  # no job
    return err


@pytest.mark.parametrize("lines,expect", BODY, ids=[f"body{i}" for i in range(len(BODY))])
def test_body_escape_refused(srv, key, lines, expect):
    spec = softmax_with(lines.split("\n"))
    err = _refused(srv, key, spec, expect)
    m = re.match(r"source:(\d+):(\d+): ", err["message"])
    assert m and int(m.group(1)) >= 5, err["message"]  # names the line:col in the kernel body
    assert err["loc"][:4] == ["body", "spec", "source", "text"]


@pytest.mark.parametrize("text,expect", MODULE, ids=[f"module{i}" for i in range(len(MODULE))])
def test_module_escape_refused(srv, key, text, expect):
    spec = softmax_with([])
    spec["source"] = {"function": "k", "text": text}
    _refused(srv, key, spec, expect)


@needs_isolation
def test_suite_style_kernel_still_accepted(srv, key):
    """The policy is not a wall: the suite's own softmax (as uploaded) passes and compiles."""
    c = srv.client(key)
    r = c.post("/v1/lowerings", json={"spec": softmax_with([]), "budget": {"iterations": 1}})
    assert r.status_code == 202, r.text
    body = wait_status(c, r.json()["id"], {"succeeded", "failed"}, timeout=120)
    assert body["status"] == "succeeded", body


@needs_isolation
@pytest.mark.parametrize("lines,expect", [
    (["for i in tl.static_range(100000000):", "    pass"], "wall-clock limit (20 s)"),
    (["for i in tl.static_range(1000000):", "    tl.static_print('" + "A" * 200 + "')"],
     "wrote more than 1048576 bytes"),
], ids=["compile-time-loop", "static-print-flood"])
def test_resource_attacks_fail_the_job(srv, key, lines, expect):
    c = srv.client(key)
    r = c.post("/v1/lowerings", json={"spec": softmax_with(lines), "budget": {"iterations": 1}})
    assert r.status_code == 202, r.text
    body = wait_status(c, r.json()["id"], {"succeeded", "failed"}, timeout=90)
    assert body["status"] == "failed", body
    assert body["error"]["type"] == "sandbox-compile", body["error"]
    assert expect in body["error"]["message"], body["error"]["message"]
