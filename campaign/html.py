"""The leaderboard as one self-contained HTML page (no network at view time).

Tables: the study matrix (rows = kernels, columns = archs: best speedup or the static verdict),
the per-provider summary (geometric-mean speedup, win/tie/loss) and every cell in detail. Every
table sorts by a click on a column header (a small inline script; numbers sort numerically, empty
cells last); the page also opens sorted when its URL carries ``#sort=<table id>:<column>:<asc|desc>``.

Plots (plotly, https://plotly.com/python/, with plotly.js inlined once): the speedup of every
timed cell per kernel and provider/model (error bars: the speedup range implied by the two
interquartile ranges), and the baseline's vs the candidate's roofline fraction per kernel.
"""

from __future__ import annotations

import html
import json
from typing import Any

from campaign.leaderboard import Entry, Leaderboard, speedup_text

__all__ = ["render_html", "SORT_JS"]

SORT_JS = r"""
(function () {
  function cellValue(td) {
    var v = td.getAttribute('data-sort');
    if (v === null) v = td.textContent.trim();
    if (v === '' || v === '-') return null;
    var n = Number(v);
    return isNaN(n) ? v.toLowerCase() : n;
  }
  function sortTable(table, col, dir) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = cellValue(a.cells[col]), y = cellValue(b.cells[col]);
      if (x === null && y === null) return 0;
      if (x === null) return 1;
      if (y === null) return -1;
      if (typeof x !== typeof y) { x = String(x); y = String(y); }
      var r = x < y ? -1 : (x > y ? 1 : 0);
      return dir === 'desc' ? -r : r;
    });
    rows.forEach(function (r) { body.appendChild(r); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
      th.setAttribute('aria-sort', i === col ? (dir === 'desc' ? 'descending' : 'ascending') : 'none');
    });
    table.setAttribute('data-sorted', col + ':' + dir);
  }
  window.ailowerSort = sortTable;
  document.querySelectorAll('table.sortable').forEach(function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
      th.addEventListener('click', function () {
        var cur = th.getAttribute('aria-sort');
        sortTable(table, i, cur === 'ascending' ? 'desc' : 'asc');
      });
    });
  });
  var m = /#sort=([\w-]+):(\d+):(asc|desc)/.exec(window.location.hash);
  if (m) {
    var t = document.getElementById(m[1]);
    if (t) sortTable(t, Number(m[2]), m[3]);
  }
})();
"""

_CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: right; white-space: nowrap; }
th { background: #f0f0f0; cursor: pointer; user-select: none; }
th[aria-sort=ascending]::after { content: " \\25B2"; }
th[aria-sort=descending]::after { content: " \\25BC"; }
td.l, th.l { text-align: left; }
.win { background: #d8f5d8; } .loss { background: #f8d8d8; } .tie { background: #f4f4d8; }
.static { background: #e4ecf7; } .invalid, .failed { background: #eee; color: #a00; }
.note { color: #555; font-size: 13px; max-width: 70em; }
"""


def _f(x: float | None, fmt: str = "{:.4f}") -> str:
    return "-" if x is None else fmt.format(x)


def _td(text: str, *, sort: Any = None, cls: str = "") -> str:
    attrs = f' class="{cls}"' if cls else ""
    if sort is not None:
        attrs += f' data-sort="{html.escape(str(sort), quote=True)}"'
    return f"<td{attrs}>{html.escape(text)}</td>"


def _matrix_cell(e: Entry) -> tuple[str, str, Any]:
    if e.outcome in ("win", "tie", "loss"):
        return f"{e.speedup:.3f}x ({e.who})", e.outcome, e.speedup
    if e.outcome == "static":
        return (f"static: verifier {e.verifier_errors} err / {e.verifier_warnings} warn",
                "static", None)
    if e.outcome == "invalid" and (e.provider_note or "").startswith("none:"):
        return "none (no candidate to propose)", "invalid", None
    if e.outcome == "invalid":
        return f"no valid candidate ({e.verifier_errors_all} verifier err)", "invalid", None
    return f"failed: {(e.error or '')[:60]}", "failed", None


def _table(tid: str, head: list[str], rows: list[str], left: int = 1) -> str:
    ths = "".join(f'<th class="{"l" if i < left else ""}">{html.escape(h)}</th>'
                  for i, h in enumerate(head))
    return (f'<table id="{tid}" class="sortable"><thead><tr>{ths}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>')


def _figures(lb: Leaderboard) -> list[tuple[str, str, Any]]:
    import plotly.graph_objects as go

    timed = [e for e in lb.entries if e.outcome in ("win", "tie", "loss")]
    figs = []
    sp = go.Figure()
    for who in sorted({e.who for e in timed}):
        for a in lb.archs:
            es = [e for e in timed if e.who == who and e.arch == a]
            if not es:
                continue
            lo, hi = [], []
            for e in es:  # speedup range implied by the IQRs: r_q1/c_q3 .. r_q3/c_q1
                r1, r3 = e.baseline_q1_ms or e.baseline_ms, e.baseline_q3_ms or e.baseline_ms
                c1, c3 = e.candidate_q1_ms or e.candidate_ms, e.candidate_q3_ms or e.candidate_ms
                lo.append(max(0.0, e.speedup - r1 / c3) if c3 else 0.0)
                hi.append(max(0.0, r3 / c1 - e.speedup) if c1 else 0.0)
            sp.add_trace(go.Bar(name=f"{who} {a}", x=[e.kernel for e in es],
                                y=[e.speedup for e in es],
                                error_y={"type": "data", "symmetric": False, "array": hi,
                                         "arrayminus": lo},
                                hovertext=[f"{e.outcome}; {e.origin}" for e in es]))
    sp.add_hline(y=1.0, line_dash="dash", line_color="#888")
    sp.update_layout(title="Speedup over autotuned Triton per kernel (timed cells)",
                     barmode="group", yaxis_title="speedup (x)", height=460,
                     xaxis={"categoryorder": "array", "categoryarray": lb.rows},
                     margin={"l": 60, "r": 20, "t": 50, "b": 120})
    figs.append(("plot-speedup", "speedup", sp))
    rf = go.Figure()
    for who in sorted({e.who for e in timed}):
        es = [e for e in timed if e.who == who and e.baseline_roofline is not None
              and e.candidate_roofline is not None]
        if es:
            rf.add_trace(go.Scatter(name=who, mode="markers+text",
                                    x=[e.baseline_roofline for e in es],
                                    y=[e.candidate_roofline for e in es],
                                    text=[e.kernel for e in es], textposition="top center",
                                    hovertext=[f"{e.kernel} {e.arch}" for e in es]))
    rf.add_shape(type="line", x0=0, y0=0, x1=1.1, y1=1.1, line={"dash": "dot", "color": "#888"})
    rf.update_layout(title="Roofline fraction: autotuned Triton (x) vs candidate (y)",
                     xaxis_title="baseline roofline fraction",
                     yaxis_title="candidate roofline fraction", height=460,
                     xaxis_range=[0, 1.15], yaxis_range=[0, 1.15])
    figs.append(("plot-roofline", "roofline", rf))
    if not timed:
        for _, _, f in figs:
            f.add_annotation(text="no GPU timings: every cell ran the static path", x=0.5,
                             y=0.5, xref="paper", yref="paper", showarrow=False)
    return figs


def render_html(lb: Leaderboard) -> str:
    """The page for ``lb`` (UTF-8 text; plotly.js inlined, about 5 MB).

    Raises:
        ImportError: plotly is not installed (it is a dependency of ailower).
    """
    import plotly.offline

    esc = html.escape
    # the matrix: rows = kernels, columns = archs
    mrows = []
    for k in lb.rows:
        fam = next(e.family for e in lb.entries if e.kernel == k)
        tds = [_td(k, cls="l"), _td(fam, cls="l")]
        for a in lb.archs:
            i = lb.best.get(k, {}).get(a)
            if i is None:
                tds.append(_td("-"))
                continue
            text, cls, sort = _matrix_cell(lb.entries[i])
            tds.append(_td(text, sort=sort, cls=cls))
        mrows.append(f'<tr data-kernel="{esc(k, quote=True)}">{"".join(tds)}</tr>')
    matrix = _table("matrix", ["kernel", "family", *lb.archs], mrows, left=2)
    srows = []
    for s in lb.summary:
        srows.append("<tr>" + "".join([
            _td(s.arch, cls="l"), _td(s.who, cls="l"), _td(str(s.cells)), _td(str(s.timed)),
            _td(_f(s.geomean_speedup, "{:.3f}"), sort=s.geomean_speedup), _td(str(s.win)),
            _td(str(s.tie)), _td(str(s.loss)), _td(str(s.static)), _td(str(s.invalid)),
            _td(str(s.failed)), _td(str(s.verifier_errors)),
            _td(_f(s.cost_usd, "${:.4f}"), sort=s.cost_usd)]) + "</tr>")
    summary = _table("summary", ["arch", "provider/model", "cells", "timed", "geomean speedup",
                                 "win", "tie", "loss", "static", "no valid", "failed",
                                 "verifier errors", "cost"], srows, left=2)
    drows = []
    for e in lb.entries:
        static = e.outcome == "static"
        drows.append(f'<tr class="{e.outcome}" data-kernel="{esc(e.kernel, quote=True)}">' + "".join([
            _td(e.kernel, cls="l"), _td(e.arch, cls="l"), _td(e.who, cls="l"),
            _td(e.baseline_config, cls="l"),
            _td("static" if static else _f(e.baseline_ms), sort=e.baseline_ms),
            _td("static" if static else _f(e.candidate_ms), sort=e.candidate_ms),
            _td(speedup_text(e), sort=e.speedup),
            _td(e.outcome, cls="l"),
            _td(_f(e.baseline_roofline, "{:.2f}"), sort=e.baseline_roofline),
            _td(_f(e.candidate_roofline, "{:.2f}"), sort=e.candidate_roofline),
            _td(e.vendor_note or f"{e.vendor_ms:.4f} ({_f(e.vendor_ratio, '{:.2f}x')})",
                sort=e.vendor_ms, cls="l" if e.vendor_note else ""),
            _td(e.verdict or (e.error or "-")[:80], cls="l"),
            _td(f"{e.verifier_errors}/{e.verifier_warnings}", sort=e.verifier_errors),
            _td(str(e.seeds_checked)), _td(_f(e.iteration, "{}"), sort=e.iteration),
            _td(_f(e.cost_usd, "${:.4f}"), sort=e.cost_usd),
            _td(e.static_reason or e.device or "", cls="l"),
            _td(e.baseline_space or "-", cls="l"),
            _td("-" if e.pipeline_step_speedup is None else
                f"{e.pipeline_step_speedup:.3f}x "
                f"{'survives' if e.pipeline_survives else 'not faster in context'}",
                sort=e.pipeline_step_speedup, cls="l")]) + "</tr>")
    detail = _table("cells", ["kernel", "arch", "provider/model", "Triton config",
                              "Triton ms", "candidate ms", "speedup [95% CI]", "outcome",
                              "Triton roofline", "candidate roofline",
                              "vendor ms (vendor/candidate)", "verdict",
                              "verifier err/warn", "seeds", "iteration", "cost",
                              "GPU / static reason", "baseline space",
                              "pipeline step speedup"], drows, left=4)
    plots = "".join(
        f'<div class="plot" data-plot="{name}">'
        + fig.to_html(full_html=False, include_plotlyjs=False, div_id=div,
                      config={"displaylogo": False, "responsive": True})
        + "</div>" for div, name, fig in _figures(lb))
    data = json.dumps(lb.model_dump(mode="json")).replace("<", "\\u003c")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>ailower leaderboard</title><style>{_CSS}</style>
<script>{plotly.offline.get_plotlyjs()}</script></head>
<body>
<h1>ailower leaderboard</h1>
<p class="note">Campaigns: {esc(', '.join(lb.campaigns) or '(none)')}. Generated
{esc(lb.generated_at)}. Speedup = autotuned Triton median / candidate median in the same
interleaved evaluation job (ms, CUDA events); {esc(lb.baseline_rule)}. {esc(lb.tie_rule)}. "static": the arch had no GPU,
so the cell was compiled, assembled and verified only (no times). Click a column header to sort.</p>
<h2>Kernels &times; archs (best verified candidate)</h2>{matrix}
<h2>Summary per provider/model and arch</h2>{summary}
<h2>Plots</h2>{plots}
<h2>Every cell</h2>{detail}
<script type="application/json" id="leaderboard-data">{data}</script>
<script>{SORT_JS}</script>
</body></html>
"""
