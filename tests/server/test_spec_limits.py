"""Issue 17, item 3: tenant-chosen sizes are bounded before any work (:mod:`server.spec_limits`).

Before: a policy-clean relu spec with ``sizes.verify`` N = 2**27 was queued (its emulation drove
the runner past 23 GiB), and a 27 KB spec (``maxnreg`` list x 64 configs, 50 constraints of 500
characters) cost 10-14 s of API CPU before its 422 (7.5 s measured on the 2-core dev host,
2026-12-01). Each refusal is a 422 whose ``loc`` names the field.
"""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels import get
from server.bodies import json_depth
from server.errors import ApiError
from server.spec_limits import SpecLimits
from server.submit import _check_spec

from .conftest import ServerProc
from .sandbox_payloads import suite_source_text


def uploaded_relu() -> dict:
    """The relu.fp32 suite spec as a client uploads it (source text, no reference)."""
    d = get("relu.fp32").model_dump(mode="json")
    d["source"] = {"function": "relu_kernel", "text": suite_source_text("kernels.suite.relu")}
    d["reference"] = None
    d["name"] = "my_relu"
    return d


def spec_27k() -> dict:
    """The issue's expensive spec: 4 x 16 num_warps x num_stages (64 configs, the old pre-check's
    limit) x 64 ``maxnreg`` values (which the old pre-check ignored: 4096 configs) and 50
    constraints of 500 characters (each evaluated for every config)."""
    d = uploaded_relu()
    c = "(" + " + ".join(["num_warps * num_stages"] * 20) + ") >= 0"
    d["autotune"] = {"meta": {"BLOCK_SIZE": [1024]}, "num_warps": [1, 2, 4, 8],
                     "num_stages": list(range(1, 17)), "maxnreg": list(range(16, 80)),
                     "constraints": [c] * 50}
    return d


def refusal(spec: dict, limits: SpecLimits | None = None) -> ApiError:
    with pytest.raises(ApiError) as exc:
        _check_spec(spec, 64_000, limits=limits)
    assert exc.value.status == 422
    return exc.value


def test_suite_specs_fit_the_default_limits():
    _check_spec(uploaded_relu(), 64_000)
    d = uploaded_relu()
    d["sizes"]["verify"]["N"] = 2**21  # 16 MiB of verify buffers, 262,144 threads: fine
    _check_spec(d, 64_000)


@pytest.mark.parametrize("edit,type_,loc", [
    (lambda d: d["sizes"]["verify"].update(N=2**27), "buffers-too-large", ["sizes", "verify"]),
    (lambda d: d["sizes"]["bench"].update(N=2**31 - 1), "buffers-too-large", ["sizes", "bench"]),
    (lambda d: d["autotune"]["meta"].update(BLOCK_SIZE=[1]), "emulation-too-large",
     ["sizes", "verify"]),
    (lambda d: (d["autotune"]["meta"].update(BLOCK_SIZE=[16]),
                d["sizes"]["verify"].update(N=2**16)), "grid-too-large", ["grid"]),
    (lambda d: d["autotune"].update(maxnreg=list(range(16, 32))), "autotune-space-too-large",
     ["autotune"]),
    (lambda d: d["autotune"].update(constraints=["BLOCK_SIZE > 0"] * 17),
     "too-many-constraints", ["autotune", "constraints"]),
    (lambda d: d["autotune"].update(meta={"BLOCK_SIZE": list(range(1024, 1024 + 32))},
                                    num_warps=[4, 8], constraints=["BLOCK_SIZE > 0"] * 16),
     "autotune-space-too-large", ["autotune", "constraints"]),
    (lambda d: d.update(flops=" + ".join(["N"] * 100)), "expression-too-long", ["flops"]),
    (lambda d: d["params"][0].update(shape=["N"] * 600), "spec-too-large", ["params"]),
    (lambda d: d["sizes"].update({f"s{i}": {"N": 16} for i in range(8)}), "spec-too-large",
     ["sizes"]),
    (lambda d: d["sizes"]["verify"].update({f"D{i}": 1 for i in range(17)}), "spec-too-large",
     ["sizes", "verify"]),
], ids=["verify-bytes", "bench-bytes", "emulated-threads", "grid-programs", "maxnreg-space",
        "constraints", "configs-x-constraints", "expr-chars", "expressions", "sizes", "dims"])
def test_each_limit_names_its_field(edit, type_, loc):
    d = uploaded_relu()
    edit(d)
    lim = SpecLimits(max_grid_programs=2048) if type_ == "grid-too-large" else None
    err = refusal(d, lim)
    assert (err.type, err.loc) == (type_, ["body", "spec", *loc]), err.message


def test_eval_work_is_bounded():
    d = uploaded_relu()
    d["sizes"].update({f"s{i}": {"N": 1024 * (i + 1)} for i in range(6)})
    d["params"] += [{"name": f"k{i}", "kind": "scalar", "dtype": "i64", "value": f"N + {i}"}
                    for i in range(40)]
    d["autotune"].update(num_warps=[1, 2, 4, 8], num_stages=[1, 2, 3, 4])  # 64 configs
    err = refusal(d)
    assert err.type == "spec-too-large" and "evaluations" in err.message
    _check_spec(d, 64_000, limits=SpecLimits(max_eval_work=10**6))  # only that bound refused it


def test_27k_spec_refused_at_once_in_process():
    d = spec_27k()
    assert len(json.dumps(d)) > 27_000
    t0 = time.perf_counter()
    err = refusal(d)
    assert time.perf_counter() - t0 < 0.05  # counts only: no expression is compiled
    assert err.type in ("expression-too-long", "autotune-space-too-large",
                        "too-many-constraints")
    # with short constraints the maxnreg values still count
    d["autotune"]["constraints"] = ["BLOCK_SIZE > 0"]
    err = refusal(d)
    assert err.type == "autotune-space-too-large" and "4096" in err.message


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    """No job slots: an accepted job would stay queued."""
    s = ServerProc(tmp_path_factory.mktemp("limits"), cpu_workers=0)
    s.start()
    yield s
    s.stop()


def test_huge_verify_size_refused_before_any_emulation(srv):
    key = srv.new_key("huge", "--rate-per-minute", "100")
    d = uploaded_relu()
    d["sizes"]["verify"]["N"] = 2**27
    with srv.client(key) as c:
        r = c.post("/v1/lowerings", json={"spec": d})
        assert r.status_code == 422, r.text  # before the fix: 202, then > 23 GiB of emulation
        assert r.json()["type"] == "buffers-too-large"
        assert r.json()["loc"] == ["body", "spec", "sizes", "verify"]
        assert c.get("/v1/lowerings").json()["count"] == 0


def test_27k_spec_refused_in_under_half_a_second(srv):
    key = srv.new_key("spender", "--rate-per-minute", "100")
    body = {"spec": spec_27k()}
    with srv.client(key) as c:
        assert c.get("/v1/lowerings").status_code == 200  # authenticated once (key cache warm)
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            r = c.post("/v1/lowerings", json=body)
            times.append(time.perf_counter() - t0)
            assert r.status_code == 422, r.text
        assert min(times) < 0.5, times  # 10-14 s before the fix
        body["spec"]["autotune"]["constraints"] = ["BLOCK_SIZE > 0"]
        r = c.post("/v1/lowerings", json=body)
        assert r.status_code == 422 and r.json()["type"] == "autotune-space-too-large"
        assert r.json()["loc"] == ["body", "spec", "autotune"]


def test_refused_submissions_count_against_the_rate_limit(srv):
    key = srv.new_key("refused", "--rate-per-minute", "4", "--max-concurrent", "10")
    bad = uploaded_relu()
    bad["sizes"]["verify"]["N"] = 2**27
    with srv.client(key) as c:
        assert c.post("/v1/lowerings", json={"spec": bad}).status_code == 422
        assert c.post("/v1/lowerings", json={"spec": spec_27k()}).status_code == 422
        assert c.post("/v1/lowerings", json={"kernel": 5}).status_code == 422  # body schema
        assert c.post("/v1/lowerings", json={"kernel": "no_such"}).status_code == 422
        # four refusals in the minute: the next submission, even a valid one, is 429 (was 202)
        r = c.post("/v1/lowerings", json={"kernel": "softmax"})
        assert r.status_code == 429 and r.json()["type"] == "rate-limited", r.text
        assert 1 <= int(r.headers["Retry-After"]) <= 60
        r = c.post("/v1/lowerings", json={"spec": bad})
        assert r.status_code == 429  # answered before the spec is looked at
        assert c.get("/v1/lowerings").json()["count"] == 0
    other = srv.new_key("bystander2")
    with srv.client(other) as c:  # another key is not affected
        assert c.post("/v1/lowerings", json={"kernel": "softmax"}).status_code == 202


def test_idempotent_replay_is_not_rate_limited(srv):
    key = srv.new_key("replayer", "--rate-per-minute", "1", "--max-concurrent", "10")
    h = {"Idempotency-Key": "once"}
    with srv.client(key) as c:
        first = c.post("/v1/lowerings", json={"kernel": "softmax"}, headers=h)
        assert first.status_code == 202
        again = c.post("/v1/lowerings", json={"kernel": "softmax"}, headers=h)
        assert again.status_code == 202 and again.json()["id"] == first.json()["id"]
        assert c.post("/v1/lowerings", json={"kernel": "softmax"}).status_code == 429


def _nesting(o) -> int:
    """Reference depth of a parsed JSON value (recursive; test data only)."""
    if isinstance(o, list):
        return 1 + max((_nesting(x) for x in o), default=0)
    if isinstance(o, dict):
        return 1 + max((_nesting(x) for x in o.values()), default=0)
    return 0


_JSON = st.recursive(
    st.none() | st.integers() | st.text(alphabet='[]{}"\\ab\u2028', max_size=6),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(alphabet='[]{}"\\k', max_size=4), inner, max_size=3),
    max_leaves=30)


@settings(max_examples=150, deadline=None)
@given(_JSON)
def test_json_depth_matches_the_parsed_nesting(value):
    for text in (json.dumps(value), json.dumps(value, ensure_ascii=False, indent=1)):
        assert json_depth(text.encode()) == _nesting(value)


def test_json_depth_is_linear_and_needs_no_recursion():
    assert json_depth(b"[" * 2_000_000) == 2_000_000  # json.loads: RecursionError
    t0 = time.perf_counter()
    json_depth(b'""' * 1_000_000)  # the most pieces a 2 MB body can hold
    assert time.perf_counter() - t0 < 2.0


@pytest.mark.parametrize("depth", [900, 200_000])
def test_deeply_nested_spec_is_a_422(srv, depth):
    key = srv.new_key(f"deep{depth}")
    d = uploaded_relu()
    d["description"] = None
    raw = json.dumps({"spec": d}).replace('"description": null',
                                          '"description": ' + "[" * depth + "]" * depth)
    with srv.client(key) as c:
        r = c.post("/v1/lowerings", content=raw, headers={"Content-Type": "application/json"})
        assert r.status_code == 422, r.text[:300]  # before: 500 (pydantic: depth exceeded)
        assert r.json()["type"] == "json-too-deep" and r.json()["loc"] == ["body"]
        r = c.post("/v1/verify", content="[" * depth + "]" * depth,
                   headers={"Content-Type": "application/json"})
        assert r.status_code == 422 and r.json()["type"] == "json-too-deep"
        d["description"] = json.loads("[" * 20 + "]" * 20)  # under the limit: the spec check
        r = c.post("/v1/lowerings", json={"spec": d})  # runs (and refuses a list description)
        assert r.status_code == 422 and r.json()["type"] == "invalid-spec", r.text
