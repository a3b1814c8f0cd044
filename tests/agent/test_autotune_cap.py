"""``AILOWER_AUTOTUNE_MAX_CONFIGS`` / ``LoopOptions.max_configs``: a GPU lowering autotunes at most
that many configs, the narrow space's first (issue 22: the widened spaces hold up to 448 configs,
too many to time in one device call)."""

from __future__ import annotations

import kernels
from agent.loop import LoopOptions
from harness.suite_baseline import capped_space as _capped
from common.settings import Settings


def test_cap_keeps_the_narrow_configs_first_and_the_count():
    wide = kernels.get("gemm.fp16", "wide")
    narrow = [c.key() for c in kernels.get("gemm.fp16", "narrow").configs()]
    assert len(wide.configs()) > 40
    picked = _capped(wide, 20)
    assert len(picked) == 20
    assert [c.key() for c in picked[:len(narrow)]] == narrow
    assert len({c.key() for c in picked}) == 20  # no config twice
    assert {c.key() for c in picked} <= {c.key() for c in wide.configs()}


def test_no_cap_is_the_whole_space():
    wide = kernels.get("bitdelta", "wide")
    assert [c.key() for c in _capped(wide, None)] == [c.key() for c in wide.configs()]


def test_setting_and_option(monkeypatch):
    monkeypatch.setenv("AILOWER_AUTOTUNE_MAX_CONFIGS", "24")
    assert Settings().autotune_max_configs == 24
    assert LoopOptions(max_configs=24).max_configs == 24
