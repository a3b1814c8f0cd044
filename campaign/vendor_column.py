"""The leaderboard's vendor-library column (issue 22): each entry's vendor path time, measured by
``ailower baseline`` (:mod:`harness.vendor`), and the candidate's ratio to it.

The times come from a file, not from the campaign cells: ``ailower baseline --json FILE`` writes
them (key ``vendor``), as does ``python -m harness.vendor NAME ... > FILE`` (a JSON list). An
entry gets a time only when the file has its kernel, timed on the entry's device; otherwise its
``vendor_note`` says why (``n/a: torch not importable``, ``n/a: measured on another device``).
"""

from __future__ import annotations

import json
from pathlib import Path

from campaign.leaderboard import Leaderboard
from harness.vendor import VendorResult, ratio

__all__ = ["load_vendor", "apply_vendor"]


def load_vendor(path: Path) -> list[VendorResult]:
    """The vendor results in ``path``: a baseline report (its ``vendor`` list) or a JSON list.

    Raises:
        ValueError: unreadable file, bad JSON, or no vendor results in it (message names the file).
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read vendor results: {exc}") from None
    if isinstance(data, dict):
        data = data.get("vendor")
    if not isinstance(data, list):
        raise ValueError(f"{path}: no vendor results (want a list or a baseline report's 'vendor')")
    try:
        return [VendorResult.model_validate(d) for d in data]
    except ValueError as exc:
        raise ValueError(f"{path}: bad vendor result: {exc}") from None


def apply_vendor(lb: Leaderboard, results: list[VendorResult]) -> Leaderboard:
    """Fill ``vendor_ms`` / ``vendor_path`` / ``vendor_note`` / ``vendor_ratio`` of every entry of
    ``lb`` (in place; returned for chaining) from ``results``."""
    by = {r.kernel: r for r in results}
    for e in lb.entries:
        v = by.get(e.kernel)
        if v is None:
            e.vendor_note = "n/a: not measured"
            continue
        e.vendor_path = v.path
        if v.median_ms is None:
            e.vendor_note = v.reason or "n/a"
        elif e.device and v.device and e.device != v.device:
            e.vendor_note = f"n/a: measured on {v.device}, this cell ran on {e.device}"
        else:
            e.vendor_ms, e.vendor_note = v.median_ms, ""
            e.vendor_ratio = ratio(v.median_ms, e.candidate_ms)
    return lb
