"""Issue 21 defects 2, 7 and 8, in process (no worker, no subprocess): the REST service takes the
CLI's default provider, a finished job's state agrees with itself, and ``/docs`` works offline."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient


@pytest.fixture()
def api(tmp_path):
    from common.settings import Settings
    from server.db import Job
    from server.keys import KeyLimits, create_key
    from server.main import create_app
    from server.settings import ServerSettings

    ss = ServerSettings()
    app = create_app(Settings(data_dir=tmp_path, db_url=None), ss, workers=False)
    with TestClient(app) as client:
        with app.state.sessionmaker() as s:
            key, _ = create_key(s, "alice", KeyLimits.defaults(ss))
        client.headers["Authorization"] = f"Bearer {key}"
        yield client, app.state.sessionmaker, Job


def test_search_provider_is_accepted_for_suite_kernels(api):
    client, _, _ = api
    r = client.post("/v1/lowerings", json={"kernel": "softmax", "provider": "search"})
    assert r.status_code == 202, r.text
    assert r.json()["status"] == "queued"
    assert client.get(f"/v1/lowerings/{r.json()['id']}").json()["provider"] == "search"


def test_search_provider_with_a_submitted_spec_is_refused_with_the_reason(api):
    client, _, _ = api
    spec = {"name": "k", "source": {"function": "k", "text": "import triton\n"}}
    r = client.post("/v1/lowerings", json={"spec": spec, "provider": "search"})
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["type"] == "provider-not-allowed" and "sandbox" in body["message"]
    assert body["url"].endswith("docs/rest.md#error-provider-not-allowed")


def test_expert_provider_takes_suite_kernels_and_refuses_a_spec(api):
    client, _, _ = api
    r = client.post("/v1/lowerings", json={"kernel": "softmax", "provider": "expert"})
    assert r.status_code == 202, r.text
    assert client.get(f"/v1/lowerings/{r.json()['id']}").json()["provider"] == "expert"
    spec = {"name": "softmax", "source": {"function": "k", "text": "import triton\n"}}
    r = client.post("/v1/lowerings", json={"spec": spec, "provider": "expert"})
    assert r.status_code == 422, r.text
    assert r.json()["type"] == "provider-not-allowed" and "expert corpus" in r.json()["message"]


def test_a_finished_job_reports_a_terminal_stage_and_cancel_changes_nothing(api):
    client, Session, Job = api
    job_id = client.post("/v1/lowerings", json={"kernel": "softmax"}).json()["id"]
    r = client.post(f"/v1/lowerings/{job_id}/cancel")
    assert r.status_code == 202 and r.json()["status"] == "cancelled"  # queued: cancelled now
    assert r.json()["progress"]["stage"] == "cancelled"
    assert client.post(f"/v1/lowerings/{job_id}/cancel").status_code == 200  # already finished

    job2 = client.post("/v1/lowerings", json={"kernel": "softmax",
                                              "budget": {"iterations": 2}}).json()["id"]
    with Session() as s:  # what a runner leaves behind: last progress 'iterating'
        j = s.get(Job, job2)
        j.status = "succeeded"
        j.progress = {"stage": "iterating", "iteration": 2, "iterations": 2, "attempt": 1}
        j.summary = {"best": {"iteration": 1, "verdict": "static-only"}, "iterations": 2}
        s.commit()
    body = client.get(f"/v1/lowerings/{job2}").json()
    assert body["progress"]["stage"] == "succeeded"
    assert body["progress"]["best_iteration"] == body["best"]["iteration"] == 1
    r = client.post(f"/v1/lowerings/{job2}/cancel")
    assert r.status_code == 200 and r.json()["status"] == "succeeded"
    assert r.json()["cancel_requested"] is False


def test_docs_page_loads_swagger_ui_from_this_server_only(api):
    import re

    client, _, _ = api
    client.headers.pop("Authorization")
    page = client.get("/docs")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    urls = re.findall(r"(?:src|href)=['\"]([^'\"]+)['\"]", page.text)
    assert urls and all(u.startswith("/") for u in urls), urls  # no CDN, no other host
    assert "cdn." not in page.text and "http://" not in page.text and "https://" not in page.text
    for u in urls:
        r = client.get(u)
        assert r.status_code == 200 and len(r.content) > 100, u
    js = client.get("/docs-assets/swagger-ui-bundle.js")
    assert "javascript" in js.headers["content-type"] and len(js.content) > 500_000
    assert client.get("/openapi.json").json()["info"]["title"] == "ailower"
