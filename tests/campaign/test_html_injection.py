"""Red-team check of the self-contained leaderboard page: every stored string (kernel, provider,
model, campaign, error, device, config, verdict ...) that reaches ``render_html`` is data, never
markup. Tried 2026-12-01 with the payload below in every string field: no hole found; this test
keeps it that way."""

from __future__ import annotations

import re

from campaign.html import render_html
from campaign.leaderboard import Entry, Leaderboard, SummaryRow

X = "</script><img src=x onerror=alert(1)><svg/onload=alert(2)>\"'<b>"


def test_stored_strings_are_escaped_everywhere():
    arch = "sm_90a" + X
    e = Entry(kernel=X, base=X, family="other", arch=arch, provider="p" + X, model=X,
              who="p:" + X, campaign=X, cell_id=1, status="done", error=X, device=X,
              baseline_config=X, origin=X, verdict=X, static_reason=X, outcome="win",
              speedup=2.0, baseline_ms=1.0, candidate_ms=0.5, baseline_roofline=0.5,
              candidate_roofline=0.6, finished_at=X)
    lb = Leaderboard(generated_at=X, campaigns=[X], archs=[arch], rows=[X], entries=[e],
                     best={X: {arch: 0}},
                     summary=[SummaryRow(arch=arch, who="p:" + X, cells=1, timed=1,
                                         geomean_speedup=2.0, win=1, tie=0, loss=0, static=0,
                                         invalid=0, failed=0, verifier_errors=0, cost_usd=None)])
    page = render_html(lb)
    assert "<script>" in page[:2000] or "<script" in page  # plotly.js is inlined first
    body = re.sub(r"<script>.*?</script>", "", page, count=1, flags=re.S)  # drop plotly.js
    for raw in ("<img", "<svg", "<b>"):  # escaped text "onerror=..." is inert
        assert raw not in body, (raw, body[max(0, body.find(raw) - 200):body.find(raw) + 80])
    # the page's own script blocks are the only ones: the payload never closes one
    assert body.count("</script>") == body.count("<script")
