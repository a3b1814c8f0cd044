"""Red team round 11 (``fixtures/redteam11``, README there): each file gets the verdict of
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

FIX = Path(__file__).parent / "fixtures" / "redteam11"
with open(FIX / "expect.tsv", newline="") as fh:
    ROWS = [(r["file"], r["arch"], r["expect"]) for r in csv.DictReader(fh, delimiter="\t")]


def test_every_file_has_an_expectation():
    assert {r[0] for r in ROWS} == {p.name for p in FIX.glob("*.ptx")}


@pytest.mark.parametrize("name,arch,expect", ROWS, ids=[r[0] for r in ROWS])
def test_verdict_of_ailower_verify(name, arch, expect):
    text = (FIX / name).read_text()
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
