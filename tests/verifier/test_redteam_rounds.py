"""Red team rounds 11 to 16 (``fixtures/redteam11`` ... ``fixtures/redteam16``, READMEs
there):
each file gets the verdict of
``ailower verify FILE --arch ARCH`` without ``--kernel`` or a launch file - ``flag`` when the
static verifier reports an error or the happens-before check of the default launch
(:func:`emulator.check_default_launch`: tensor maps inferred, one cluster for cluster code)
reports an HB error; ``accept`` otherwise."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

import emulator
from verifier import verify

FIXTURES = Path(__file__).parent / "fixtures"
FOLDERS = ("redteam11", "redteam12", "redteam13", "redteam14", "redteam15", "redteam16")


def _rows(folder: str) -> list[tuple[str, str, str, str]]:
    with open(FIXTURES / folder / "expect.tsv", newline="") as fh:
        return [(folder, r["file"], r["arch"], r["expect"])
                for r in csv.DictReader(fh, delimiter="\t")]


ROWS = [r for f in FOLDERS for r in _rows(f)]


@pytest.mark.parametrize("folder", FOLDERS)
def test_every_file_has_an_expectation(folder):
    assert {r[1] for r in ROWS if r[0] == folder} == \
        {p.name for p in (FIXTURES / folder).glob("*.ptx")}


@pytest.mark.parametrize("folder,name,arch,expect", ROWS, ids=[f"{r[0]}/{r[1]}" for r in ROWS])
def test_verdict_of_ailower_verify(folder, name, arch, expect):
    text = (FIXTURES / folder / name).read_text()
    static = [f"{f.rule}:{f.line} {f.message}" for f in verify(text, arch=arch,
                                                               filename=name).errors]
    checks = emulator.check_default_launch(text, arch=arch, filename=name)
    hb = [f"{f.rule}:{f.line} {f.message}" for c in checks for f in c.findings
          if f.severity == "error"]
    if expect == "flag":
        assert static or hb, [c.render() for c in checks]
    else:
        assert not static and not hb, (static, hb)
        # a correct kernel is checked to the end (its tensor maps inferred, one cluster)
        assert all(c.status == "ok" for c in checks), [c.render() for c in checks]
