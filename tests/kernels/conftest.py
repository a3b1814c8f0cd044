"""The ``slow`` marker: tests that compile whole autotune spaces or run the Triton interpreter.

They run only with ``AILOWER_RUN_SLOW=1`` (CI has 2 cores and a 90-minute budget for everything).
"""

from __future__ import annotations

import os

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: long; runs only with AILOWER_RUN_SLOW=1")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("AILOWER_RUN_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow: set AILOWER_RUN_SLOW=1 to run")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
