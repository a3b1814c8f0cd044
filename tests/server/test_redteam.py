"""Red-team findings against the source policy and the REST service (each was a hole; the tests
fail on the code before its fix).

1. *Late-bound builtins*: the policy treated every assigned name as a local everywhere in the
   body, but Triton resolves a name that is not bound *yet* (used before its assignment, or
   assigned only in a branch Triton folds away) through the module globals and then its code
   generator's ``builtin_namespace`` (``getattr``, ``hasattr``, ``isinstance``, ``list``,
   ``print`` ...). ``getattr(tl.load, "__globals__")`` then reaches ``exec``: the payload below
   passed the policy and ran ``exec`` at compile time (verified with Triton 3.9 on 2026-12-01).
2. *Policy checker recursion*: a chain of ~1500 ``@triton.jit`` helpers (66 KB, under the default
   64 000-byte source limit... and under any limit near it) made the cycle check raise
   ``RecursionError`` in the API process (a 500 instead of an answer).
"""

from __future__ import annotations

import builtins
import json
import time

import pytest

from server.source_check import SourceRejected, check_triton_source

from .sandbox_payloads import softmax_with

HEAD = "import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x_ptr):\n"

# the exact escape: getattr is "a local" for the policy, Triton's builtin getattr at compile time
GETATTR_EXEC = HEAD + (
    "    g: tl.constexpr = getattr(tl.load, '__globals__')\n"
    "    b: tl.constexpr = getattr(g, 'get')('__builtins__')\n"
    "    e: tl.constexpr = getattr(b, 'get')('exec')\n"
    "    e(\"open('/var/tmp/ailower-escape-marker', 'w')\")\n"
    "    tl.store(x_ptr, 1.0)\n"
    "    if 0:\n"
    "        getattr = 0\n")

LATE_BOUND = {
    "getattr-dead-branch": GETATTR_EXEC,
    "getattr-after-use": HEAD + "    x = getattr(x_ptr, 'dtype')\n    getattr = 1\n",
    "hasattr": HEAD + "    x = hasattr(x_ptr, 'handle')\n    hasattr = 1\n",
    "isinstance": HEAD + "    x = isinstance(x_ptr, int)\n    isinstance = 1\n",
    "list": HEAD + "    x = list((1, 2))\n    list = 1\n",
    "print": HEAD + "    print(x_ptr)\n    print = 1\n",
    "for-target": HEAD + "    x = getattr(x_ptr, 'dtype')\n    for getattr in range(2):\n"
                         "        pass\n",
    "annassign": HEAD + "    x = getattr(x_ptr, 'dtype')\n    getattr: tl.constexpr = 1\n",
    "exec": HEAD + "    exec('1')\n    exec = 1\n",
    "type": HEAD + "    x = type(x_ptr)\n    type = 1\n",
}


@pytest.mark.parametrize("name", sorted(LATE_BOUND))
def test_builtin_names_cannot_become_locals(name):
    with pytest.raises(SourceRejected) as ei:
        check_triton_source(LATE_BOUND[name], "k")
    assert "shadows" in ei.value.reason and ei.value.line >= 6, str(ei.value)


def test_every_name_triton_resolves_after_locals_is_refused_as_a_local():
    """The kind, not the sample: every name of Triton's ``builtin_namespace`` (read from the
    installed Triton, so a new Triton's additions are covered) and every Python builtin."""
    from triton.compiler.code_generator import CodeGenerator

    names = set(CodeGenerator.builtin_namespace) | {n for n in dir(builtins)
                                                    if n.isidentifier() and not n.startswith("_")
                                                    and n not in ("True", "False", "None")}
    assert {"getattr", "hasattr", "isinstance", "list", "print"} <= names
    accepted = []
    for n in sorted(names):
        try:
            check_triton_source(HEAD + f"    x = {n}\n    {n} = 1\n", "k")
            accepted.append(n)
        except SourceRejected:
            pass
    assert accepted == []


def _chain(n: int, cycle: bool) -> str:
    parts = ["import triton", "import triton.language as tl"]
    for i in range(n):
        nxt = f"f{i + 1}" if i < n - 1 else ("f0" if cycle else "")
        body = f"    return {nxt}(x)" if nxt else "    return x"
        parts.append(f"@triton.jit\ndef f{i}(x):\n{body}")
    return "\n".join(parts) + "\n"


def test_long_call_chain_is_answered_not_a_recursion_error():
    names = check_triton_source(_chain(1500, cycle=False), "f0")
    assert len(names) == 1500
    with pytest.raises(SourceRejected) as ei:
        check_triton_source(_chain(1500, cycle=True), "f0")
    assert "recursive @triton.jit call f0 -> f1" in ei.value.reason


def test_getattr_escape_refused_over_http(server):
    key = server.new_key("redteam", "--max-source-bytes", "200000", "--max-body-bytes", "290000")
    c = server.client(key)
    spec = softmax_with([])
    spec["source"] = {"function": "k", "text": GETATTR_EXEC}
    r = c.post("/v1/lowerings", json={"spec": spec, "budget": {"iterations": 1}})
    assert r.status_code == 422, r.text
    assert r.json()["type"] == "source-rejected" and "'getattr'" in r.json()["message"]
    spec["source"] = {"function": "f0", "text": _chain(1500, cycle=True)}
    r = c.post("/v1/lowerings", json={"spec": spec, "budget": {"iterations": 1}})
    assert r.status_code == 422, r.text
    assert "recursive @triton.jit call" in r.json()["message"]


@pytest.mark.parametrize("text", [
    HEAD + "    f = triton.jit(tl.load)\n",
    "from triton import jit\nimport triton.language as tl\n\n@jit\ndef k(x_ptr):\n"
    "    f = jit(tl.load)\n",
], ids=["attr", "imported-name"])
def test_triton_jit_only_as_a_decorator(text):
    """Defence in depth (no exploit shown): ``triton.jit(f)`` in a body would compile the source
    of any reachable Python function ``f`` with *its* module's globals, which the policy never
    saw. The decorator itself keeps working."""
    with pytest.raises(SourceRejected, match="decorator only"):
        check_triton_source(text, "k")
    plain = text.replace("    f = jit(tl.load)\n", "    pass\n").replace(
        "    f = triton.jit(tl.load)\n", "    pass\n")
    assert check_triton_source(plain, "k") == ["k"]


def test_open_streams_per_key_are_capped(tmp_path):
    """One key opened 200 SSE streams on its queued job: another tenant's ``GET /v1/lowerings``
    went from 17 ms to 390 ms median (1.5 s max) on a 2-core host (measured 2026-12-01), and
    nothing bounded the number. Now a key holds at most ``max_streams_per_key`` open streams
    (429 ``too-many-streams`` with ``Retry-After``) and a closed stream frees its slot."""
    from .conftest import ServerProc

    srv = ServerProc(tmp_path, cpu_workers=0, max_streams_per_key=3)
    srv.start()
    try:
        c = srv.client(srv.new_key("streamer"))
        jid = c.post("/v1/lowerings", json={"kernel": "softmax", "provider": "triton",
                                            "budget": {"iterations": 1}}).json()["id"]
        held = [c.stream("GET", f"/v1/lowerings/{jid}/events") for _ in range(3)]
        for h in held:
            assert h.__enter__().status_code == 200
        with c.stream("GET", f"/v1/lowerings/{jid}/events") as r:
            assert r.status_code == 429
            assert json.loads(r.read())["type"] == "too-many-streams" and r.headers["Retry-After"]
        # another key is not affected
        other = srv.client(srv.new_key("other"))
        assert other.get("/v1/lowerings").status_code == 200
        held.pop().__exit__(None, None, None)
        deadline, code = time.monotonic() + 10, None
        while time.monotonic() < deadline:  # the server sees the disconnect within ~0.25 s
            with c.stream("GET", f"/v1/lowerings/{jid}/events") as s:
                code = s.status_code
            if code == 200:
                break
            time.sleep(0.2)
        assert code == 200
        for h in held:
            h.__exit__(None, None, None)
    finally:
        srv.stop()


def test_one_key_cannot_hold_every_verify_slot(tmp_path):
    """``/v1/verify`` had one server-wide pool (``verify_concurrency``) and no per-key bound:
    one key sending ``verify_concurrency`` slow PTX files at a time kept every other tenant at
    429 ``verify-busy``. Now a key runs at most ``verify_per_key`` verifications at once."""
    import threading

    from .conftest import ServerProc
    from .test_hardening import slow_ptx

    srv = ServerProc(tmp_path, cpu_workers=0, verify_wall_s=6, verify_concurrency=2,
                     verify_per_key=1)
    srv.start()
    try:
        hog = srv.new_key("hog")
        ptx = slow_ptx()  # ~20 s of verifier work, stopped at verify_wall_s = 6 s
        codes: list[int] = []

        def slow() -> None:
            r = srv.client(hog, timeout=30).post("/v1/verify", json={"ptx": ptx,
                                                                     "arch": "sm_90a"})
            codes.append(r.status_code)

        ts = [threading.Thread(target=slow) for _ in range(2)]
        for t in ts:
            t.start()
            time.sleep(0.5)
        small = (".version 8.0\n.target sm_90a\n.address_size 64\n"
                 ".visible .entry k()\n{\n ret;\n}\n")
        r = srv.client(srv.new_key("bystander"), timeout=30).post(
            "/v1/verify", json={"ptx": small, "arch": "sm_90a"})
        for t in ts:
            t.join(40)
        assert r.status_code == 200, r.text
        assert sorted(codes) == [422, 429], codes  # one ran to its wall limit, one was refused
    finally:
        srv.stop()


def test_fullwidth_builtin_name_is_normalised_and_refused():
    """NFKC: Python folds ``ｇｅｔａｔｔｒ`` to ``getattr`` when it parses, and so does the policy
    (it reads the same ``ast``), so the late-bound-builtin escape cannot hide in other glyphs."""
    fullwidth = "".join(chr(ord(c) + 0xFEE0) for c in "getattr")  # U+FF47 ...
    text = LATE_BOUND["getattr-after-use"].replace("getattr", fullwidth)
    assert "getattr" not in text
    with pytest.raises(SourceRejected, match="'getattr'"):
        check_triton_source(text, "k")


def test_sys_path_folders_outside_the_python_environment_are_not_shown(tmp_path, monkeypatch):
    """The box showed every ``sys.path`` folder read-only, whole: a server started with
    ``PYTHONPATH=/srv/tools`` (or a script run from ``/tmp``: ``sys.path[0]``) exposed that whole
    folder, e.g. all of the host's ``/tmp``, to the sandbox uid (seen 2026-12-01: the box's
    mountinfo had the host ``/tmp`` bound over its private tmpfs). Only the Python environment
    (its prefixes and ``site-packages``/``dist-packages`` folders) may be shown."""
    import subprocess
    import sys

    from server.sandbox import SandboxLimits, _python_dirs, isolation_status, run_isolated

    loose = tmp_path / "loose"
    loose.mkdir()
    (loose / "secret.txt").write_text("host secret")
    (loose / "secret.txt").chmod(0o644)
    loose.chmod(0o755)
    for p in [tmp_path, *tmp_path.parents]:
        if p != p.parent:
            subprocess.run(["chmod", "o+x", str(p)], check=False)
    monkeypatch.setattr(sys, "path", [str(loose), *sys.path])
    shown = _python_dirs([])
    assert not any(loose == d or loose.is_relative_to(d) for d in shown), shown
    ok, _ = isolation_status()
    if ok:
        r = run_isolated(["/bin/cat", str(loose / "secret.txt")], work=tmp_path / "w",
                         limits=SandboxLimits(wall_s=20))
        assert b"host secret" not in r.stdout and r.returncode != 0
