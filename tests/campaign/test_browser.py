"""A real browser (headless Chromium) loads the leaderboard page written by
``ailower leaderboard --html``: the tables have the expected rows, a header sort works, both plots
render (plotly drew SVG marks), and a screenshot is saved as a test artifact under
``$TMPDIR/ailower-test-artifacts/`` (``AILOWER_TEST_ARTIFACTS`` overrides; ``.ci/run`` sets it).

CI installs the Debian ``chromium`` package in ``.ci/run`` and sets ``AILOWER_REQUIRE_BROWSER=1``,
so there a missing browser fails instead of skipping."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import pytest

from .conftest import cli

pytestmark = pytest.mark.timeout(300)


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get("AILOWER_REQUIRE_BROWSER") == "1":
        pytest.fail("no chromium on PATH (CI installs the Debian package 'chromium')")
    pytest.skip("no chromium on PATH (apt-get install chromium)")


def _run_chromium(*args: str) -> subprocess.CompletedProcess:
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--disable-dev-shm-usage", "--no-first-run", "--virtual-time-budget=15000",
           # no network at all: the page must render from its own bytes
           "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
           "--user-data-dir=" + str(Path(os.environ.get("TMPDIR", "/tmp")) / "ailower-chromium"),
           *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


class _DOM(HTMLParser):
    """Collects table rows (cell texts) per table id, and per plot div the SVG marks drawn."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.table: str | None = None
        self.in_body = False
        self.row: list[str] | None = None
        self.cell: list[str] | None = None
        self.plot: str | None = None
        self.marks: dict[str, dict[str, int]] = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self.table = a.get("id")
            self.tables[self.table] = []
        elif tag == "tbody":
            self.in_body = True
        elif tag == "tr" and self.table and self.in_body:
            self.row = []
        elif tag == "td" and self.row is not None:
            self.cell = []
        elif tag == "div" and a.get("data-plot"):
            self.plot = a["data-plot"]
            self.marks[self.plot] = {"svg": 0, "bar": 0, "point": 0}
        if self.plot:
            cls = a.get("class") or ""
            if tag == "svg" and "main-svg" in cls:
                self.marks[self.plot]["svg"] += 1
            if tag in ("path", "g") and "point" in cls.split():  # a bar or a marker
                self.marks[self.plot]["point"] += 1
            if tag == "g" and "bars" in cls.split():
                self.marks[self.plot]["bar"] += 1

    def handle_endtag(self, tag):
        if tag == "td" and self.cell is not None and self.row is not None:
            self.row.append("".join(self.cell).strip())
            self.cell = None
        elif tag == "tr" and self.row is not None:
            self.tables[self.table].append(self.row)
            self.row = None
        elif tag == "tbody":
            self.in_body = False
        elif tag == "table":
            self.table = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def _dom(url: str) -> _DOM:
    r = _run_chromium("--dump-dom", url)
    assert r.returncode == 0 and "<html" in r.stdout, r.stderr[-2000:]
    d = _DOM()
    d.feed(r.stdout)
    return d


@pytest.fixture(scope="module")
def page(board_db) -> Path:
    out = board_db / "leaderboard.html"
    r = cli(["leaderboard", "--html", str(out)], board_db)
    assert r.returncode == 0, r.stderr
    return out


class _Refs(HTMLParser):
    """Every tag attribute that would make the browser fetch something (src, href, data)."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[tuple[str, str, str]] = []

    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            if k in ("src", "href", "data", "srcset") and v and not v.startswith("#"):
                self.refs.append((tag, k, v))


def test_page_is_self_contained(page):
    p = _Refs()
    p.feed(page.read_text())  # script bodies are CDATA to the parser: only real tags count
    assert p.refs == []


def test_tables_rows_and_plots_render_in_chromium(page):
    d = _dom(page.as_uri())
    matrix = d.tables["matrix"]
    assert [r[0] for r in matrix] == ["relu.fp16", "softmax", "vector_add"]
    by_kernel = {r[0]: r for r in matrix}
    assert by_kernel["vector_add"][2].startswith("static: verifier 0 err")  # sm_89 column
    assert by_kernel["vector_add"][3].startswith("2.000x (openai:fixture-model)")  # sm_90a
    assert len(d.tables["cells"]) == 8 and len(d.tables["summary"]) == 3
    # plotly drew into both plot divs: bars of the speedup plot, markers of the roofline plot
    assert d.marks["speedup"]["svg"] >= 1 and d.marks["speedup"]["point"] >= 5, d.marks
    assert d.marks["roofline"]["svg"] >= 1 and d.marks["roofline"]["point"] >= 5, d.marks


def test_sorting_in_chromium(page):
    # column 6 of the cells table is the speedup; static cells (no speedup) sort last
    d = _dom(page.as_uri() + "#sort=cells:6:desc")
    sp = [r[6] for r in d.tables["cells"]]
    nums = [float(x.split("x")[0]) for x in sp if x != "-"]  # "2.000x [1.980-2.020]"
    assert nums == sorted(nums, reverse=True) and len(nums) == 5
    assert sp[5:] == ["-", "-", "-"]
    d = _dom(page.as_uri() + "#sort=cells:6:asc")
    nums = [float(r[6].split("x")[0]) for r in d.tables["cells"] if r[6] != "-"]
    assert nums == sorted(nums)


def test_screenshot_artifact(page):
    # never the working directory (tests/_cwd_guard.py): a temp folder unless CI names one
    art = Path(os.environ.get("AILOWER_TEST_ARTIFACTS",
                              Path(tempfile.gettempdir()) / "ailower-test-artifacts"))
    art.mkdir(parents=True, exist_ok=True)
    shot = art / "leaderboard.png"
    shot.unlink(missing_ok=True)
    r = _run_chromium(f"--screenshot={shot}", "--window-size=1400,2200", page.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000  # a rendered page, not blank
