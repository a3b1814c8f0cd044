"""The embedded default provider is `search` (issue 11: the offline default once it wins)."""

from __future__ import annotations

import json

from ailower.settings import Settings
from tests.cli.test_cli import ailower


def test_default_provider_is_search(monkeypatch, tmp_path):
    monkeypatch.delenv("AILOWER_PROVIDER", raising=False)
    monkeypatch.setenv("AILOWER_DATA_DIR", str(tmp_path / "data"))
    assert Settings().provider == "search"
    out = tmp_path / "o"
    r = ailower("lower", "relu.fp16", "--iterations", "2", "--out", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    rep = json.loads((out / "report.json").read_text())
    assert rep["provider"] == "search"
    assert [i["origin"] for i in rep["iterations"]][0] == "search:baseline"
    assert all(i["origin"].startswith("search:") for i in rep["iterations"])
    # an explicit provider still wins over the default
    monkeypatch.setenv("AILOWER_PROVIDER", "triton")
    assert Settings().provider == "triton"
