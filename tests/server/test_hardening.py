"""Service fixes of issue 8, each against a real uvicorn on 127.0.0.1 (bounded loops): atomic
per-key limits under concurrent submits, SSE streams that hold no database connection, bounded
``/v1/verify`` that stops when the client leaves, bounded argon2 failures, ``Last-Event-ID``
validation, spec-name bounds, no Host echo in redirects, strict request types, private data
directory and database file, and source submissions refused without isolation."""

from __future__ import annotations

import concurrent.futures as cf
import os
import socket
import stat
import time
from pathlib import Path

import pytest

from server.sandbox import isolation_status

from .conftest import ServerProc
from .sandbox_payloads import softmax_with


def slow_ptx(entries: int = 2, branches: int = 4000) -> str:
    """A PTX just under the 1 MB per-key limit that the verifier needs far longer than the test
    server's 6 s wall limit for: ``entries`` kernels of ``branches`` data-dependent branches each
    (the verifier's per-rule budgets bound each function, not the module; 2 x 5000 branches took
    30 s on the 2-core CI machine, 2026-12-01)."""
    lines = [".version 8.0", ".target sm_90a", ".address_size 64"]
    for e in range(entries):
        lines += [f".visible .entry k{e}(.param .u64 p)", "{", " .reg .b32 %r<8>;",
                  " .reg .pred %p<4>;", " mov.b32 %r1, 0;", " mov.b32 %r2, 1;"]
        for i in range(branches):
            lines += [f" setp.lt.u32 %p1, %r1, {i};", f" @%p1 bra L{e}_{i};",
                      " fma.rn.f32 %r1, %r2, %r2, %r1;", f"L{e}_{i}:", " add.u32 %r1, %r1, 1;"]
        lines += [" ret;", "}"]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    """No job slots (jobs stay queued), short verify limit, long SSE streams (40 per key)."""
    s = ServerProc(tmp_path_factory.mktemp("hard"), cpu_workers=0, verify_wall_s=6,
                   max_stream_s=120, max_streams_per_key=40)  # 30 streams of one key below
    s.start()
    yield s
    s.stop()


def _children(pid: int) -> list[str]:
    """Command lines of the descendants of ``pid``."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            kids = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            continue
        for k in map(int, kids):
            try:
                out.append(Path(f"/proc/{k}/cmdline").read_bytes().replace(b"\0", b" ").decode())
            except OSError:
                pass
            todo.append(k)
    return out


def test_concurrency_limit_holds_under_parallel_submits(srv):
    key = srv.new_key("burst", "--max-concurrent", "4", "--rate-per-minute", "1000")

    def submit(_):
        with srv.client(key) as c:
            return c.post("/v1/lowerings", json={"kernel": "softmax"}).status_code

    with cf.ThreadPoolExecutor(40) as ex:
        codes = list(ex.map(submit, range(40)))
    assert codes.count(202) == 4, codes
    assert codes.count(429) == 36, codes
    assert srv.client(key).get("/v1/lowerings").json()["count"] == 4


def test_rate_limit_holds_under_parallel_submits(srv):
    key = srv.new_key("rate", "--max-concurrent", "100", "--rate-per-minute", "5")

    def submit(_):
        with srv.client(key) as c:
            return c.post("/v1/lowerings", json={"kernel": "softmax"}).status_code

    with cf.ThreadPoolExecutor(30) as ex:
        codes = list(ex.map(submit, range(30)))
    assert codes.count(202) == 5 and codes.count(429) == 25, codes


def test_open_streams_hold_no_database_connection(srv):
    a, b = srv.new_key("streamer"), srv.new_key("bystander")
    job = srv.client(a).post("/v1/lowerings", json={"kernel": "softmax"}).json()["id"]
    socks = []
    try:
        for _ in range(30):  # more than the pool's 5 + 10 connections
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            s.sendall(f"GET /v1/lowerings/{job}/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      f"Authorization: Bearer {a}\r\nAccept: text/event-stream\r\n\r\n".encode())
            head = s.recv(4096)
            assert head.startswith(b"HTTP/1.1 200"), head[:200]
            socks.append(s)
        c = srv.client(b, timeout=10)
        for _ in range(5):
            t0 = time.monotonic()
            r = c.get("/v1/lowerings")
            assert r.status_code == 200, r.text
            assert time.monotonic() - t0 < 5.0  # ~28 s before the fix
        assert srv.client(b).post("/v1/lowerings", json={"kernel": "softmax"}).status_code == 202
    finally:
        for s in socks:
            s.close()


def test_bad_last_event_id_is_422_before_the_stream(srv):
    key = srv.new_key("resume")
    c = srv.client(key)
    job = c.post("/v1/lowerings", json={"kernel": "softmax"}).json()["id"]
    for bad in ("abc", "-1", "1.5", "9" * 20):
        r = c.get(f"/v1/lowerings/{job}/events", headers={"Last-Event-ID": bad})
        assert r.status_code == 422, (bad, r.status_code)
        assert r.headers["content-type"].startswith("application/json")
        assert r.json()["loc"] == ["header", "Last-Event-ID"] or r.json()["type"] == \
            "validation-error"


def test_verify_has_a_wall_limit(srv):
    c = srv.client(srv.new_key("verifier"), timeout=60)
    t0 = time.monotonic()
    r = c.post("/v1/verify", json={"ptx": slow_ptx(), "arch": "sm_90a"})
    assert r.status_code == 422 and r.json()["type"] == "ptx-too-complex", r.text
    assert time.monotonic() - t0 < 20
    assert not any("server._verify_child" in cmd for cmd in _children(srv.proc.pid))
    many = ".version 8.0\n.target sm_90a\n.address_size 64\n" + "// x\n" * 250_000
    r = c.post("/v1/verify", json={"ptx": many, "arch": "sm_90a"})
    assert r.status_code == 413, r.status_code


def test_verify_stops_when_the_client_leaves(srv):
    import httpx

    key = srv.new_key("leaver")
    with pytest.raises(httpx.ReadTimeout):
        srv.client(key, timeout=1.5).post("/v1/verify", json={"ptx": slow_ptx(),
                                                              "arch": "sm_90a"})
    # the verify_wall_s limit is 6 s: the child must be gone well before it
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline and any("server._verify_child" in cmd
                                              for cmd in _children(srv.proc.pid)):
        time.sleep(0.1)
    assert not any("server._verify_child" in cmd for cmd in _children(srv.proc.pid))


def test_failed_key_checks_are_bounded(srv):
    key = srv.new_key("victim")
    key_id = key.split("_")[1]
    rss0 = _rss_mb(srv.proc.pid)

    def attempt(i):
        wrong = f"ail_{key_id}_{'x' * 20}{i:022d}"
        with srv.client(wrong, timeout=60) as c:
            return c.get("/v1/lowerings").status_code

    with cf.ThreadPoolExecutor(16) as ex:
        codes = list(ex.map(attempt, range(48)))
    assert set(codes) <= {401, 429, 503}, codes  # 429: the failure backoff (issue 17)
    assert _rss_mb(srv.proc.pid) - rss0 < 400  # 16 concurrent argon2 runs took ~1 GB before
    # The holder's own request right after the flood is the open lock-out hole (the per-key-id
    # backoff refuses it with 429 until the backoff expires): asserted, strict-xfail, by
    # tests/server/test_redteam_svc.py::test_wrong_secret_flood_does_not_lock_out_the_keys_holder.
    # Here the key itself must still be valid once the backoff has expired.
    r = srv.client(key).get("/v1/lowerings")
    if r.status_code == 429:
        wait = float(r.headers["Retry-After"])
        assert wait <= 60, r.headers
        time.sleep(wait + 0.5)
        r = srv.client(key).get("/v1/lowerings")
    assert r.status_code == 200, (r.status_code, r.text[:200])


def _rss_mb(pid: int) -> float:
    st = Path(f"/proc/{pid}/status").read_text()
    return int(next(ln.split()[1] for ln in st.splitlines() if ln.startswith("VmRSS:"))) / 1024


def test_negative_cache_skips_argon2(tmp_path, monkeypatch):
    from server import keys as K
    from server.db import make_engine, make_sessionmaker

    Session = make_sessionmaker(make_engine(f"sqlite:///{tmp_path / 'k.db'}"))
    with Session() as s:
        plain, _ = K.create_key(s, "n", K.KeyLimits(1, 1, 1024, 1024, 256))
    calls = []
    real = K._hasher

    class Counting:
        def verify(self, h, p):
            calls.append(p)
            return real.verify(h, p)

    monkeypatch.setattr(K, "_hasher", Counting())
    wrong = plain[:-4] + ("aaaa" if not plain.endswith("aaaa") else "bbbb")
    with Session() as s:
        assert K.authenticate(s, wrong) is None
        assert K.authenticate(s, wrong) is None
        assert K.authenticate(s, plain) is not None
    assert calls == [wrong, plain]  # the second wrong attempt never reached argon2


def test_long_or_unsafe_spec_names_are_422(srv):
    c = srv.client(srv.new_key("namer"))
    for name in ("a" * 300, "../../etc/passwd", "x/y", "a" * 101):
        r = c.post("/v1/lowerings", json={"spec": softmax_with([], name=name)})
        assert r.status_code == 422, (name[:20], r.text)
        assert r.json()["loc"] == ["body", "spec", "name"]
    r = c.post("/v1/lowerings", json={"spec": softmax_with([], name="a" * 100)})
    assert r.status_code == (202 if isolation_status()[0] else 503), r.text


def test_redirects_do_not_echo_host(srv):
    import httpx

    r = httpx.get(srv.url + "/v1/lowerings/", headers={"Host": "evil.example"},
                  follow_redirects=False)
    assert not 300 <= r.status_code < 400, r.headers
    assert "evil.example" not in str(r.headers) and "evil.example" not in r.text


@pytest.mark.parametrize("body", [
    {"kernel": "softmax", "budget": {"iterations": True}},
    {"kernel": "softmax", "budget": {"iterations": "4"}},
    {"kernel": "softmax", "budget": {"iterations": 4.0}},
    {"kernel": "softmax", "budget": {"wall_time_s": "10"}},
    {"kernel": "softmax", "budget": {"max_cost_usd": False}},
    {"kernel": 5},
])
def test_strict_request_types(srv, body):
    r = srv.client(srv.new_key("strict")).post("/v1/lowerings", json=body)
    assert r.status_code == 422 and r.json()["type"] == "validation-error", r.text


def test_verify_strict_threads(srv):
    r = srv.client(srv.new_key("strictv")).post("/v1/verify", json={
        "ptx": ".version 8.0\n", "arch": "sm_90a", "threads": True})
    assert r.status_code == 422


def test_data_dir_and_db_are_private(srv):
    assert stat.S_IMODE(os.stat(srv.data_dir).st_mode) == 0o700
    db = srv.data_dir / "ailower.db"
    assert stat.S_IMODE(os.stat(db).st_mode) == 0o600
    for extra in ("-wal", "-shm"):
        p = Path(f"{db}{extra}")
        if p.exists():
            assert stat.S_IMODE(os.stat(p).st_mode) & 0o077 == 0, p


def test_source_refused_without_isolation(tmp_path, monkeypatch):
    """Without isolation the API refuses source (503, clear message); suite kernels still work."""
    from fastapi.testclient import TestClient

    import server.sandbox as sb
    from ailower.settings import Settings
    from server.db import make_engine, make_sessionmaker
    from server.keys import KeyLimits, create_key
    from server.main import create_app
    from server.settings import ServerSettings

    monkeypatch.setattr(sb, "isolation_status", lambda: (False, "bubblewrap is not installed"))
    monkeypatch.setenv("AILOWER_DATA_DIR", str(tmp_path))
    settings = Settings()
    with make_sessionmaker(make_engine(settings.database_url))() as s:
        plain, _ = create_key(s, "t", KeyLimits(100, 10, 1_000_000, 1_000_000, 64_000))
    app = create_app(settings, ServerSettings(), workers=False)
    with TestClient(app) as c:
        auth = {"Authorization": f"Bearer {plain}"}
        r = c.post("/v1/lowerings", json={"spec": softmax_with([])}, headers=auth)
        assert r.status_code == 503 and r.json()["type"] == "isolation-unavailable", r.text
        assert "bubblewrap is not installed" in r.json()["message"]
        assert c.post("/v1/lowerings", json={"kernel": "softmax"}, headers=auth).status_code == 202


def test_runner_env_carries_only_the_jobs_provider_key(tmp_path, monkeypatch):
    from pydantic import SecretStr

    from ailower.settings import Settings
    from server.settings import ServerSettings
    from server.workers import WorkerPool

    monkeypatch.setenv("AILOWER_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("AILOWER_SERVER_ANTHROPIC_API_KEY", "sk-ant-server-secret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-ambient")
    ss = ServerSettings(openai_api_key=SecretStr("sk-openai-server"))
    pool = WorkerPool(Settings(), ss, slots=0)
    triton_env = pool._env(0, "triton")
    assert not any("sk-" in v for v in triton_env.values()), \
        [k for k, v in triton_env.items() if "sk-" in v]
    anth = pool._env(0, "anthropic")
    assert anth["ANTHROPIC_API_KEY"] == "sk-ant-server-secret" and "OPENAI_API_KEY" not in anth
    assert "AILOWER_SERVER_ANTHROPIC_API_KEY" not in anth
    assert pool._env(0, "openai")["OPENAI_API_KEY"] == "sk-openai-server"


def test_runner_never_imports_submitted_text(tmp_path):
    """If the sandbox's cache lacks a config (its code deleted it), the runner's compile path must
    refuse to import the submitted text itself rather than run it outside the box."""
    import json
    import subprocess
    import sys

    marker = tmp_path / "marker"
    spec = softmax_with([])
    spec["source"]["text"] = f"import os\nos.system('touch {marker}')\n" + spec["source"]["text"]
    code = (
        "import json, sys\nfrom pathlib import Path\n"
        "from server.sandbox import forbid_text_source_import\nforbid_text_source_import()\n"
        "from harness import compile_reference\nfrom kernels import KernelSpec, SpecError\n"
        "spec = KernelSpec.model_validate(json.loads(sys.stdin.read()))\n"
        "try:\n"
        "    compile_reference(spec, 'sm_90a', spec.configs()[0], cache_dir=Path(sys.argv[1]))\n"
        "except SpecError as e:\n    print('refused:', e)\n")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "cache")],
                       input=json.dumps(spec), capture_output=True, text=True, timeout=120,
                       cwd=str(Path(__file__).resolve().parents[2]))
    assert "refused:" in r.stdout and "compiled only in the sandbox" in r.stdout, r.stderr[-2000:]
    assert not marker.exists()
