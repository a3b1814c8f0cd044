"""Red-team round on the svc-policy hardening (issue 17): attacks on the JSON body checks, the
refusal counter and the source policy, against a real ``ailower serve`` on 127.0.0.1.

Got through before the fix in this branch (each test failed then):

* a UTF-16 body: ``json.loads`` decodes UTF-16/UTF-32 bytes, but :func:`server.bodies.json_depth`
  scans bytes as UTF-8; U+2200 is the bytes ``00 22`` in UTF-16-LE, a quote to the scanner, so
  the brackets after it were "inside a string" and a spec nested 900 deep reached pydantic's
  serializer: an unhandled 500 (connection reset, traceback in the log);
* bodies refused before the submit route's dependencies ran (not JSON, nested too deep) were not
  counted against the key's rate limit: 12 in a row at 5 per minute were all 422, never 429;
  nor was an ``Idempotency-Key`` over 200 characters (5 at 3 per minute: all 422);
* a lone surrogate (``"\\udc80"``) in a comment of the source text: ``json.loads`` takes it, the
  policy's first ``str.encode()`` raised ``UnicodeEncodeError``: an unhandled 500.

Refused before and kept as regressions: source tricks (BOM, form feed in indentation, NFKC
spelling of a forbidden chain, an f-string, a bytes prefix, a ``**`` tower).
"""

from __future__ import annotations

import json

import pytest

from server.source_check import SourceRejected, check_triton_source

from .conftest import ServerProc
from .test_spec_limits import uploaded_relu

JSON = {"content-type": "application/json"}


def nested_spec(depth: int = 900) -> str:
    """A relu submission whose ``spec.description`` is a list nested ``depth`` deep."""
    body = {"spec": uploaded_relu()}
    x: object = 1
    for _ in range(depth):
        x = [x]
    body["spec"]["description"] = x
    return json.dumps(body)


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    s = ServerProc(tmp_path_factory.mktemp("redpol"), cpu_workers=1, lease_s=3,
                   heartbeat_s=0.5)
    s.start()
    yield s
    s.stop()


def test_utf16_body_cannot_hide_its_nesting(srv):
    # U+2200 in UTF-16-LE is b"\x00\x22": a fake quote for a byte scanner
    raw = nested_spec().replace('"spec": {', '"spec": {"z\u2200": 1, ', 1)
    key = srv.new_key("utf16", "--rate-per-minute", "100")
    with srv.client(key) as c:
        for enc in ("utf-16-le", "utf-16", "utf-32"):
            r = c.post("/v1/lowerings", content=raw.encode(enc), headers=JSON)
            assert r.status_code == 422, (enc, r.status_code, r.text[:300])
            assert r.json()["type"] == "json-not-utf8" and r.json()["loc"] == ["body"]
        r = c.post("/v1/verify", content=raw.encode("utf-16-le"), headers=JSON)
        assert r.status_code == 422 and r.json()["type"] == "json-not-utf8", r.text[:300]
    assert "Circular reference" not in srv.log()


@pytest.mark.parametrize("body", [b'{"spec": ', b'{"spec": {}} trailing', nested_spec().encode(),
                                  '{"spec": 1}'.encode("utf-16")],
                         ids=["truncated", "trailing", "too-deep", "utf16"])
def test_malformed_bodies_count_against_the_rate_limit(srv, body):
    key = srv.new_key(f"malformed{abs(hash(body)) % 10**6}", "--rate-per-minute", "3",
                      "--max-concurrent", "10")
    with srv.client(key) as c:
        codes = [c.post("/v1/lowerings", content=body, headers=JSON).status_code
                 for _ in range(5)]
    assert codes == [422, 422, 422, 429, 429], codes


def test_bad_headers_count_against_the_rate_limit(srv):
    # the header is validated by the dependency that used to set the refusal hook
    key = srv.new_key("badheader", "--rate-per-minute", "3", "--max-concurrent", "10")
    with srv.client(key) as c:
        codes = [c.post("/v1/lowerings", json={"kernel": "relu.fp32"},
                        headers={"Idempotency-Key": "x" * 300}).status_code for _ in range(3)]
        codes.append(c.post("/v1/lowerings", json={"kernel": "nope"}).status_code)
    assert codes == [422, 422, 422, 429], codes


def _with(where: str, value: str) -> bytes:
    spec = uploaded_relu()
    if where == "text":
        spec["source"]["text"] = spec["source"]["text"].replace("import triton\n",
                                                                f"import triton  # {value}\n", 1)
    else:
        spec["description"] = value
    return json.dumps({"spec": spec}).encode()


@pytest.mark.parametrize("body", [
    _with("text", "\udc80"), _with("description", "a\ud800b"),
    _with("description", "SURR").replace(b"SURR", "\ud800".encode("utf-8", "surrogatepass")),
], ids=["escape-in-source", "escape-in-description", "raw-bytes"])
def test_lone_surrogates_are_a_422_not_a_500(srv, body):
    key = srv.new_key(f"surr{abs(hash(body)) % 10**6}", "--rate-per-minute", "100")
    with srv.client(key) as c:
        r = c.post("/v1/lowerings", content=body, headers=JSON)
        assert r.status_code == 422 and r.json()["type"] == "json-invalid", r.text[:300]
        # a surrogate pair is a character (U+1F600): not refused for that
        r = c.post("/v1/lowerings", content=_with("description", "\U0001f600"), headers=JSON)
        assert r.json().get("type") != "json-invalid", r.text[:300]
    assert "UnicodeEncodeError" not in srv.log()


def test_malformed_body_without_a_key_is_401(srv):
    with srv.client() as c:
        r = c.post("/v1/lowerings", content=b'{"spec": ', headers=JSON)
    assert r.status_code == 401, r.text[:300]


def test_malformed_body_elsewhere_is_a_clear_422(srv):
    key = srv.new_key("verifier")
    with srv.client(key) as c:
        r = c.post("/v1/verify", content=b'{"ptx": ', headers=JSON)
    assert r.status_code == 422 and r.json()["type"] == "json-invalid", r.text[:300]


BASE = ("import triton\nimport triton.language as tl\n\n@triton.jit\n"
        "def k(X, N: tl.constexpr):\n    i = tl.arange(0, N)\n    tl.store(X + i, tl.load(X + i))\n")


@pytest.mark.parametrize("source", [
    "\ufeff" + BASE,
    BASE.replace("    i = ", "\x0c    i = "),
    BASE.replace("tl.store(X + i, tl.load(X + i))", "tl.\U0001d41core.builtins.exec('1')"),
    BASE.replace("tl.load(X + i)", "tl.load(X + i, cache_modifier=f'{N}')"),
    BASE.replace("tl.load(X + i)", "tl.load(X + i, cache_modifier=rb'.cg')"),
    BASE.replace("    i = tl.arange(0, N)", "    i = tl.arange(0, N)\n    z = 10**64**64"),
], ids=["bom", "formfeed-indent", "nfkc-core", "fstring", "bytes", "pow-tower"])
def test_source_tricks_stay_refused(source):
    check_triton_source(BASE, "k")  # the kernel itself is fine
    with pytest.raises(SourceRejected):
        check_triton_source(source, "k")
