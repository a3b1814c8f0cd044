"""The leaderboard model, its CLI and its REST routes, on a real static campaign plus GPU-like
TEST FIXTURE cells (synthetic timings, see conftest.py)."""

from __future__ import annotations

import json
import math

import pytest

from .conftest import FIXTURE_DEVICE, FIXTURE_GPU, STATIC_KERNELS, cli, db_url


@pytest.fixture(scope="module")
def board(board_db):
    from campaign.leaderboard import build_leaderboard
    from campaign.store import CampaignStore

    return build_leaderboard(CampaignStore(db_url(board_db)))


def test_rows_follow_the_study_order_and_archs_are_columns(board):
    # common kernels first (relu before softmax in the study's list), skeleton kernels last
    assert board.rows == ["relu.fp16", "softmax", "vector_add"]
    assert board.archs == ["sm_89", "sm_90a"]
    fam = {e.kernel: e.family for e in board.entries}
    assert fam == {"relu.fp16": "common", "softmax": "common", "vector_add": "other"}


def test_static_cells_have_no_times_and_show_the_verifier_verdict(board):
    static = [e for e in board.entries if e.arch == "sm_89"]
    assert sorted(e.kernel for e in static) == sorted(STATIC_KERNELS)
    for e in static:
        assert e.outcome == "static" and e.mode == "static"
        assert e.baseline_ms is None and e.candidate_ms is None and e.speedup is None
        assert e.verdict == "static-only" and e.valid
        assert e.verifier_errors == 0 and e.verifier_errors_all == 0
        assert "no sm_89 GPU" in (e.static_reason or "")
        assert e.baseline_config  # the reference config Triton compiled


def test_win_tie_loss_use_the_interquartile_bands(board):
    got = {(e.kernel, e.who): e for e in board.entries if e.arch == "sm_90a"}
    assert all(e.device == FIXTURE_DEVICE for e in got.values())
    expect = {("vector_add", "triton"): "win", ("relu.fp16", "triton"): "tie",
              ("softmax", "triton"): "loss", ("vector_add", "openai:fixture-model"): "win",
              ("softmax", "openai:fixture-model"): "win"}
    assert {k: e.outcome for k, e in got.items()} == expect
    for k, p, m, ref, cand, rr, cr in FIXTURE_GPU:
        e = got[(k, p + (f":{m}" if m else ""))]
        assert e.speedup == pytest.approx(ref[1] / cand[1])
        assert e.speedup_ci == pytest.approx((0.99 * e.speedup, 1.01 * e.speedup))
        assert (e.baseline_ms, e.candidate_ms) == (ref[1], cand[1])
        assert (e.baseline_roofline, e.candidate_roofline) == (rr, cr)
        assert e.seeds_checked == 3 and e.iteration == 1 and e.run_id is not None


def test_summary_geomean_counts_and_cost(board):
    rows = {(s.arch, s.who): s for s in board.summary}
    t = rows[("sm_90a", "triton")]
    sp = [r[1] / c[1] for k, p, m, r, c, *_ in FIXTURE_GPU if p == "triton"]
    assert t.geomean_speedup == pytest.approx(math.prod(sp) ** (1 / len(sp)))
    assert (t.win, t.tie, t.loss, t.timed, t.cost_usd) == (1, 1, 1, 3, None)
    o = rows[("sm_90a", "openai:fixture-model")]
    assert (o.win, o.tie, o.loss) == (2, 0, 0)
    # 2 cells x (120k input x $3 + 30k output x $15) per million tokens
    assert o.cost_usd == pytest.approx(2 * (0.12 * 3 + 0.03 * 15))
    s = rows[("sm_89", "triton")]
    assert (s.static, s.timed, s.geomean_speedup, s.verifier_errors) == (3, 0, None, 0)


def test_best_entry_per_kernel_and_arch(board):
    best = board.entries[board.best["vector_add"]["sm_90a"]]
    assert best.who == "openai:fixture-model" and best.speedup == pytest.approx(2.0)
    assert board.entries[board.best["softmax"]["sm_90a"]].who == "openai:fixture-model"
    assert board.entries[board.best["relu.fp16"]["sm_89"]].outcome == "static"


def test_cli_json_text_and_filters(board_db):
    r = cli(["leaderboard", "--json", "--arch", "sm_89"], board_db)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert {e["arch"] for e in data["entries"]} == {"sm_89"}
    assert len(data["entries"]) == 3
    r = cli(["leaderboard", "--campaign", "static"], board_db)
    assert r.returncode == 0, r.stderr
    assert "static: verifier 0 err / 0 warn" in r.stdout and "sm_90a" not in r.stdout
    r = cli(["leaderboard", "--campaign", "fixture-gpu"], board_db, COLUMNS="250")
    assert r.returncode == 0, r.stderr
    sp = FIXTURE_GPU[0][3][1] / FIXTURE_GPU[0][4][1]
    assert f"{sp:.3f}x [{0.99 * sp:.3f}-{1.01 * sp:.3f}]" in r.stdout, r.stdout
    r = cli(["leaderboard", "--campaign", "nope"], board_db)
    assert r.returncode == 2 and "no such campaign" in r.stderr
    r = cli(["leaderboard", "--arch", "sm_75"], board_db)
    assert r.returncode == 2 and "sm_75" in r.stderr


def test_rest_routes(board_db):
    from fastapi.testclient import TestClient

    from ailower.settings import Settings
    from server.main import create_app

    app = create_app(Settings(data_dir=board_db), workers=False)
    with TestClient(app) as c:
        r = c.get("/v1/leaderboard", params={"arch": "sm_90a"})
        assert r.status_code == 200
        data = r.json()
        assert {e["kernel"] for e in data["entries"]} == {"vector_add", "relu.fp16", "softmax"}
        assert {s["who"] for s in data["summary"]} == {"triton", "openai:fixture-model"}
        page = c.get("/leaderboard")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert 'id="matrix"' in page.text and "Plotly" in page.text
        assert "cdn." not in page.text.split("<script>", 1)[0]  # nothing fetched at view time
        r = c.get("/v1/leaderboard", params={"campaign": "nope"})
        assert r.status_code == 404 and r.json()["type"] == "not-found"
        assert c.get("/v1/leaderboard", params={"arch": "sm_75"}).status_code == 422


def test_rerunning_a_finished_campaign_runs_nothing(board_db):
    r = cli(["suite", "run", *STATIC_KERNELS, "--arch", "sm_89", "--iterations", "1",
             "--campaign", "static"], board_db)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "3 cells (0 new, 3 already done)" in r.stdout
    assert "campaign static: 3 done, 0 failed" in r.stdout
    r = cli(["suite", "run", "vector_add", "--arch", "sm_89", "--iterations", "2",
             "--campaign", "static"], board_db)
    assert r.returncode == 2 and "--iterations 2 differs" in r.stderr
    r = cli(["suite", "list", "--json"], board_db)
    got = {c["name"]: (c["done"], c["failed"]) for c in json.loads(r.stdout)}
    assert got == {"static": (3, 0), "fixture-gpu": (5, 0)}


def test_tables_are_never_cut_piped_or_at_120_columns(board, board_db):
    """Issue 21 defect 1: piped output and a 120-column terminal kept `ke…`, `pr…`, `relu.f…`."""
    import io

    from rich.console import Console

    from ailower.cmd_leaderboard import render_text

    r = cli(["leaderboard"], board_db)  # piped
    assert r.returncode == 0, r.stderr
    assert "…" not in r.stdout
    for e in board.entries:
        assert e.kernel in r.stdout and e.who in r.stdout
    buf = io.StringIO()
    render_text(board, Console(file=buf, width=120, force_terminal=True, color_system=None))
    text = buf.getvalue()
    assert "…" not in text
    for e in board.entries:
        assert e.kernel in text, e.kernel  # key columns stay whole on a narrow terminal
