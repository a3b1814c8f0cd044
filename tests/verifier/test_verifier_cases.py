"""Bug-kind reproducers: every file in ``fixtures/cases`` (the shared real-world reproducers,
copied from ``shared/cases/verifier``) and ``fixtures/kinds`` (this project's own flag/fixed pairs
per kind) gets the verdict of its ``expect.tsv``: ``flag`` = at least one error, ``accept`` = no
error. ``fixtures/kinds/expect.tsv`` also names the rule that must flag the file."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from verifier import verify

FIXTURES = Path(__file__).parent / "fixtures"


def _rows(folder: str) -> list[tuple[str, str, str, str | None]]:
    with open(FIXTURES / folder / "expect.tsv", newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    return [(folder, r["file"], r["arch"], r["expect"], r.get("rule") or None) for r in rows]


ROWS = _rows("cases") + _rows("kinds")


def test_every_case_file_has_an_expectation():
    for folder in ("cases", "kinds"):
        listed = {r[1] for r in ROWS if r[0] == folder}
        on_disk = {p.name for p in (FIXTURES / folder).glob("*.ptx")}
        assert listed == on_disk, folder


@pytest.mark.parametrize("folder,name,arch,expect,rule", ROWS,
                         ids=[f"{r[0]}/{r[1]}" for r in ROWS])
def test_case_verdict(folder, name, arch, expect, rule):
    text = (FIXTURES / folder / name).read_text()
    report = verify(text, arch=arch, filename=name)
    errors = report.errors
    shown = [f"{f.rule}:{f.line} {f.message}" for f in errors]
    if expect == "flag":
        assert errors, f"{name}: expected an error, got none"
        if rule is not None:
            assert rule in {f.rule for f in errors}, shown
    else:
        assert expect == "accept"
        assert not errors, shown
