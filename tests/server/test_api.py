"""The REST service against a real uvicorn server on loopback: life cycle with the offline
``triton`` provider (static path: no GPU here), SSE content and resume, auth and isolation,
idempotency, rate and size limits, cancellation, metrics, and malicious sources."""

from __future__ import annotations

import ast
import json
import inspect
import time

import pytest

from kernels import get

from .conftest import needs_isolation, read_sse, wait_status


def suite_source_text(module: str) -> str:
    """A suite module reduced to its triton imports and @triton.jit functions (valid for upload)."""
    tree = ast.parse(inspect.getsource(__import__(module, fromlist=["SPEC"])))
    keep = [n for n in tree.body
            if (isinstance(n, ast.Import) and n.names[0].name.startswith("triton"))
            or (isinstance(n, ast.FunctionDef) and n.decorator_list)]
    return "\n".join(ast.unparse(n) for n in keep) + "\n"


def uploaded_softmax(text: str | None = None) -> dict:
    """The softmax spec as a client would upload it: source text, no NumPy reference."""
    d = get("softmax").model_dump(mode="json")
    d["source"] = {"function": "softmax_kernel",
                   "text": text if text is not None else suite_source_text("kernels.suite.softmax")}
    d["reference"] = None
    d["name"] = "my_softmax"
    return d


@pytest.fixture(scope="module")
def alice(server):
    return server.new_key("alice")


@pytest.fixture(scope="module")
def bob(server):
    return server.new_key("bob")


def test_life_cycle_suite_kernel(server, alice):
    c = server.client(alice)
    r = c.post("/v1/lowerings", json={"kernel": "softmax", "arch": "sm_90a",
                                      "budget": {"iterations": 2}})
    assert r.status_code == 202, r.text
    job_id = r.json()["id"]
    assert r.json()["status"] == "queued"
    body = wait_status(c, job_id, {"succeeded", "failed", "cancelled"})
    assert body["status"] == "succeeded", body
    assert body["attempts"] == 1
    assert body["best"]["verdict"] == "static-only"  # no GPU on this host
    assert body["best"]["assembly_ok"] is True and body["best"]["verifier_ok"] is True
    assert body["best"]["registers"] > 0
    assert body["gpu"] is False and "GPU evaluation skipped" in body["gpu_note"]
    assert body["progress"]["iteration"] == 2
    assert sorted(body["artifacts"]) == ["cubin", "ptx", "report", "transcript"]
    ptx = c.get(f"/v1/lowerings/{job_id}/artifacts/ptx")
    assert ptx.status_code == 200
    assert ".target sm_90a" in ptx.text and ".entry softmax_kernel" in ptx.text
    rep = c.get(f"/v1/lowerings/{job_id}/artifacts/report").json()
    assert rep["kernel"] == "softmax" and rep["job_id"] == job_id
    assert [it["iteration"] for it in rep["iterations"]] == [1, 2]
    assert rep["candidate"]["digest"] == body["best"]["digest"]
    cubin = c.get(f"/v1/lowerings/{job_id}/artifacts/cubin")
    assert cubin.content[:4] == b"\x7fELF"
    tx = c.get(f"/v1/lowerings/{job_id}/artifacts/transcript").text.splitlines()
    assert any('"event": "iteration"' in ln for ln in tx)
    listed = c.get("/v1/lowerings", params={"status": "succeeded", "kernel": "softmax"}).json()
    assert job_id in [j["id"] for j in listed["data"]] and listed["count"] >= 1


def test_sse_content_and_resume(server, alice):
    c = server.client(alice)
    job_id = c.post("/v1/lowerings", json={"kernel": "vector_add",
                                           "budget": {"iterations": 2}}).json()["id"]
    events = read_sse(c, job_id)
    kinds = [e["event"] for e in events]
    assert kinds[0] == "queued" and kinds[-1] == "end" and kinds[-2] == "succeeded"
    for k in ("claimed", "started", "reference_compiled", "done"):
        assert k in kinds
    its = [e["data"]["data"] for e in events if e["event"] == "iteration"]
    assert [i["iteration"] for i in its] == [1, 2]
    for it in its:  # proposal, assembly, verifier results per iteration
        assert it["origin"].startswith("triton:") and it["candidate_digest"]
        assert it["assembly"]["ok"] is True and it["assembly"]["registers"] > 0
        assert it["verifier"]["ok"] is True
        assert it["verdict"] == "static-only"
    ids = [int(e["id"]) for e in events if "id" in e]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    # resume after the third event: exactly the rest, same ids
    rest = read_sse(c, job_id, headers={"Last-Event-ID": str(ids[2])})
    assert [int(e["id"]) for e in rest if "id" in e] == ids[3:]
    assert rest[-1]["event"] == "end" and rest[-1]["data"] == {"status": "succeeded"}


@needs_isolation
def test_uploaded_spec_runs_through_the_sandbox(server, alice):
    c = server.client(alice)
    r = c.post("/v1/lowerings", json={"spec": uploaded_softmax(), "budget": {"iterations": 1}})
    assert r.status_code == 202, r.text
    body = wait_status(c, r.json()["id"], {"succeeded", "failed"})
    assert body["status"] == "succeeded", body
    assert body["kernel"] == "my_softmax"
    events = read_sse(c, body["id"])
    sb = next(e for e in events if e["event"] == "sandbox_compiled")["data"]["data"]
    assert sorted(sb["compiled"]) == sorted(c.key() for c in get("softmax").configs())
    assert sb["failures"] == []


def test_auth_required_and_isolation(server, alice, bob):
    anon = server.client()
    assert anon.get("/v1/kernels").status_code == 200  # the one public /v1 route
    names = [k["name"] for k in anon.get("/v1/kernels").json()["data"]]
    assert names[:3] == ["vector_add", "softmax", "matmul"]
    from kernels import names as suite_names
    assert names == suite_names()
    for method, path in (("GET", "/v1/lowerings"), ("POST", "/v1/lowerings"),
                         ("GET", "/v1/lowerings/x"), ("POST", "/v1/verify")):
        r = anon.request(method, path, json={})
        assert r.status_code == 401, (method, path, r.text)
        assert r.json()["type"] == "unauthorized"
    bad = server.client("ail_0123456789ab_" + "x" * 43)
    assert bad.get("/v1/lowerings").status_code == 401
    a, b = server.client(alice), server.client(bob)
    job_id = a.post("/v1/lowerings", json={"kernel": "softmax",
                                           "budget": {"iterations": 1}}).json()["id"]
    assert b.get(f"/v1/lowerings/{job_id}").status_code == 404
    assert b.get(f"/v1/lowerings/{job_id}/events").status_code == 404
    assert b.get(f"/v1/lowerings/{job_id}/artifacts/report").status_code == 404
    assert b.post(f"/v1/lowerings/{job_id}/cancel").status_code == 404
    assert job_id not in [j["id"] for j in b.get("/v1/lowerings").json()["data"]]
    assert job_id in [j["id"] for j in a.get("/v1/lowerings", params={"limit": 100}).json()["data"]]
    wait_status(a, job_id, {"succeeded"})
    # revocation takes effect at once
    carol = server.new_key("carol")
    assert server.client(carol).get("/v1/lowerings").status_code == 200
    key_id = carol.split("_")[1]
    r = server.keys("revoke", key_id)
    assert r.exit_code == 0 and "revoked" in r.output
    assert server.client(carol).get("/v1/lowerings").status_code == 401
    listing = server.keys("list", "--json")
    rows = {k["key_id"]: k for k in json.loads(listing.output)}
    assert rows[key_id]["revoked"] is True and rows[key_id]["name"] == "carol"
    assert rows[alice.split("_")[1]]["revoked"] is False
    assert carol not in listing.output and "argon2" not in listing.output


def test_idempotency_key(server, alice):
    c = server.client(alice)
    body = {"kernel": "vector_add", "budget": {"iterations": 1}}
    h = {"Idempotency-Key": "req-42"}
    r1 = c.post("/v1/lowerings", json=body, headers=h)
    r2 = c.post("/v1/lowerings", json=body, headers=h)
    assert r1.status_code == r2.status_code == 202
    assert r1.json()["id"] == r2.json()["id"]
    r3 = c.post("/v1/lowerings", json={**body, "budget": {"iterations": 2}}, headers=h)
    assert r3.status_code == 409 and r3.json()["type"] == "idempotency-conflict"
    wait_status(c, r1.json()["id"], {"succeeded"})


def test_rate_limit_429_retry_after(server):
    k = server.new_key("ratey", "--rate-per-minute", "2", "--max-concurrent", "10")
    c = server.client(k)
    ids = []
    for _ in range(2):
        r = c.post("/v1/lowerings", json={"kernel": "vector_add", "budget": {"iterations": 1}})
        assert r.status_code == 202
        ids.append(r.json()["id"])
    r = c.post("/v1/lowerings", json={"kernel": "vector_add", "budget": {"iterations": 1}})
    assert r.status_code == 429 and r.json()["type"] == "rate-limited"
    assert 1 <= int(r.headers["Retry-After"]) <= 60
    for i in ids:
        wait_status(c, i, {"succeeded"})


def test_concurrency_limit(server):
    k = server.new_key("single", "--max-concurrent", "1")
    c = server.client(k)
    first = c.post("/v1/lowerings", json={"kernel": "matmul", "budget": {"iterations": 1}})
    assert first.status_code == 202
    r = c.post("/v1/lowerings", json={"kernel": "softmax", "budget": {"iterations": 1}})
    assert r.status_code == 429 and r.json()["type"] == "too-many-jobs"
    assert r.headers["Retry-After"] == "5"
    wait_status(c, first.json()["id"], {"succeeded"})
    assert c.post("/v1/lowerings", json={"kernel": "softmax",
                                         "budget": {"iterations": 1}}).status_code == 202


def test_size_limits(server):
    k = server.new_key("small", "--max-body-bytes", "4096", "--max-ptx-bytes", "1024",
                       "--max-source-bytes", "300")
    c = server.client(k)
    ptx = ".version 8.0\n.target sm_90a\n.address_size 64\n" + "// pad\n" * 200
    r = c.post("/v1/verify", json={"ptx": ptx, "arch": "sm_90a"})
    assert r.status_code == 413 and r.json()["type"] == "ptx-too-large"
    r = c.post("/v1/verify", json={"ptx": ptx * 4, "arch": "sm_90a"})
    assert r.status_code == 413 and r.json()["type"] == "body-too-large"
    spec = uploaded_softmax()
    assert len(spec["source"]["text"]) > 300
    r = server.client(k).post("/v1/lowerings", json={"spec": spec})
    assert r.status_code == 413, r.text
    assert r.json()["type"] in ("source-too-large", "body-too-large")
    # the server-wide cap applies before authentication
    r = server.client().post("/v1/lowerings", content=b"x" * 400_000,
                             headers={"Content-Type": "application/json"})
    assert r.status_code == 413


def test_verify_endpoint(server, alice):
    c = server.client(alice)
    r = c.post("/v1/verify", json={"ptx": ".version 9.0\n.target sm_80\n.address_size 64\n",
                                   "arch": "sm_90a"})
    assert r.status_code == 200
    body = r.json()
    assert body["ok"] is False  # wrong .target and no entry
    assert any(f["severity"] == "error" for f in body["findings"])
    r = c.post("/v1/verify", json={"ptx": "", "arch": "sm_90a"})
    assert r.status_code == 422 and r.json()["type"] == "validation-error"


def test_cancel_queued_and_running(server, alice):
    c = server.client(alice)
    # occupy the single slot, then cancel a queued job behind it
    running = c.post("/v1/lowerings", json={"kernel": "matmul", "arch": "sm_100a",
                                            "budget": {"iterations": 6}}).json()["id"]
    queued = c.post("/v1/lowerings", json={"kernel": "softmax",
                                           "budget": {"iterations": 1}}).json()["id"]
    r = c.post(f"/v1/lowerings/{queued}/cancel")
    assert r.status_code == 202
    assert wait_status(c, queued, {"cancelled", "succeeded"}, timeout=10)["status"] == "cancelled"
    wait_status(c, running, {"running"}, timeout=60)
    t0 = time.monotonic()
    c.post(f"/v1/lowerings/{running}/cancel")
    body = wait_status(c, running, {"cancelled", "succeeded", "failed"}, timeout=20)
    elapsed = time.monotonic() - t0
    assert body["status"] == "cancelled", body
    assert body["error"]["type"] == "cancelled"
    assert elapsed < 10, elapsed  # "within seconds" (the slot polls every 0.25 s)


def test_metrics_and_health(server, alice):
    h = server.client().get("/healthz").json()
    assert h["status"] == "ok" and h["database"] is True and h["slots"] == 1
    text = server.client().get("/metrics").text
    assert "ailower_queue_depth" in text
    assert 'ailower_jobs{state="succeeded"}' in text
    line = next(ln for ln in text.splitlines()
                if ln.startswith('ailower_jobs{state="succeeded"}'))
    assert float(line.split()[-1]) >= 1
    assert 'ailower_stage_seconds_count{stage="assemble"}' in text


MARK = "__MARKER__"
MALICIOUS = [
    ("import os\nos.system('touch {m}')\n", "import of 'os'"),
    ("import subprocess\n", "import of 'subprocess'"),
    ("from os import system\n", "import from os"),
    ("open('{m}', 'w').write('x')\n", "only imports and @triton.jit"),
    ("import triton\n@triton.jit\ndef k(x, y=open('{m}', 'w')):\n    pass\n", "default value"),
    ("import triton\n@triton.jit\ndef k(x: open('{m}', 'w')):\n    pass\n", "annotation"),
    ("import triton\n@(lambda f: open('{m}', 'w'))\ndef k(x):\n    pass\n", "decorator"),
    ("import triton\n@triton.jit\n@triton.jit\ndef k(x):\n    pass\n", "exactly one decorator"),
    ("import triton\n@triton.jit\ndef k(x):\n    exec(\"open('{m}', 'w')\")\n", "'exec'"),
    ("import triton\n@triton.jit\ndef k(x):\n    __import__('os').system('touch {m}')\n",
     "dunder name"),
    ("import triton\n@triton.jit\ndef k(x):\n    y = ().__class__.__bases__[0].__subclasses__()\n",
     "dunder attribute"),
    ("import triton\nimport triton.language as tl\n@triton.jit\ndef k(x):\n"
     "    g = getattr(tl, 'core')\n", "'getattr'"),
    ("import triton\n@triton.jit\ndef k(x):\n    def inner():\n        pass\n", "FunctionDef"),
    ("import triton as t\nclass K:\n    pass\n", "ClassDef"),
    ("import triton\nx = (" + "(" * 200 + ")" * 200 + ")\n", "syntax"),
    ("import math\nimport triton\n@triton.jit\ndef other(x):\n    pass\n", "no @triton.jit function"),
]


@pytest.mark.parametrize("template,why", MALICIOUS, ids=[w for _, w in MALICIOUS])
def test_malicious_sources_rejected_nothing_executed(server, alice, tmp_path, template, why):
    marker = tmp_path / "marker"
    src = template.replace(MARK, str(marker)).replace("{m}", str(marker))
    spec = uploaded_softmax(src)
    spec["source"]["function"] = "k"
    c = server.client(alice)
    before = c.get("/v1/lowerings", params={"limit": 1}).json()["count"]
    r = c.post("/v1/lowerings", json={"spec": spec})
    assert 400 <= r.status_code < 500, r.text
    err = r.json()
    assert err["type"] in ("source-rejected", "validation-error", "invalid-spec"), err
    assert err["type"] == "source-rejected"
    if why not in ("syntax",):
        assert why.strip("'") in err["message"] or why in err["message"], err["message"]
    time.sleep(0.3)
    assert not marker.exists()
    assert c.get("/v1/lowerings", params={"limit": 1}).json()["count"] == before  # no job queued


@pytest.mark.parametrize("source,kind", [
    ({"function": "softmax_kernel", "module": "os"}, "source-not-allowed"),
    ({"function": "softmax_kernel", "path": "/etc/passwd"}, "source-not-allowed"),
])
def test_module_and_path_sources_refused(server, alice, source, kind):
    spec = uploaded_softmax()
    spec["source"] = source
    r = server.client(alice).post("/v1/lowerings", json={"spec": spec})
    assert r.status_code == 422 and r.json()["type"] == kind


def test_reference_and_huge_inputs_refused(server, tmp_path):
    # a key of its own: refusals count against a key's rate (the module's alice refuses often)
    c = server.client(server.new_key("refused", "--rate-per-minute", "100"))
    spec = uploaded_softmax()
    spec["reference"] = "os:system"
    r = c.post("/v1/lowerings", json={"spec": spec})
    assert r.status_code == 422 and r.json()["type"] == "reference-not-allowed"
    spec = uploaded_softmax()
    spec["autotune"] = {"num_warps": [1, 2, 4, 8, 16, 32], "num_stages": list(range(1, 13))}
    r = c.post("/v1/lowerings", json={"spec": spec})
    assert r.status_code == 422 and r.json()["type"] == "autotune-space-too-large"
    spec = uploaded_softmax()
    spec["flops"] = "((M ** 64) ** 64) ** 64"
    r = c.post("/v1/lowerings", json={"spec": spec})
    assert r.status_code == 422 and r.json()["type"] == "expression-rejected"
    huge = uploaded_softmax("import triton\n" + "# pad\n" * 60_000)
    r = c.post("/v1/lowerings", json={"spec": huge})
    assert r.status_code == 413
    r = c.post("/v1/lowerings", json={"kernel": "softmax", "provider": "anthropic",
                                      "model": "some-model"})
    assert r.status_code == 422 and r.json()["type"] == "provider-not-configured"
    r = c.post("/v1/lowerings", json={"kernel": "nope"})
    assert r.status_code == 422 and r.json()["type"] == "unknown-kernel"
