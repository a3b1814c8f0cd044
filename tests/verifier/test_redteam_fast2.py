"""tests/verifier/redteam_fast2/: the correct hand-written kernels verify clean (static: no error
or warning; the happens-before check on the default launch: no finding, ran to the end). The two
correct kernels that drew a false HB1 while bar.warp.sync was no rendezvous for diverged lanes
(issue 18) must stay clean too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from ailower import cmd_verify

APP = typer.Typer()
cmd_verify.register(APP)
RUN = CliRunner()
DIR = Path(__file__).resolve().parent / "redteam_fast2"

CLEAN = ["ok_bulk_ring.ptx", "ok_bulk_store.ptx", "ok_wgmma_pipe.ptx",
         "ok_tcgen05_commit_wait.ptx", "ok_warpsync_divergent.ptx"]
FALSE_ALARM = ["ok_warpsync_divergent_backjoin.ptx", "triton_ws_gemm_bias_relu_sm90a.ptx"]


def _arch(p: Path) -> str:
    return next(ln.split()[1] for ln in p.read_text().splitlines() if ln.startswith(".target"))


def _verify(name: str) -> dict:
    p = DIR / name
    res = RUN.invoke(APP, ["verify", str(p), "--arch", _arch(p), "--json"])
    return json.loads(res.output)


def _clean(doc: dict) -> bool:
    hb = doc["happens_before"][0]
    return (doc["counts"]["error"] == 0 and doc["counts"]["warning"] == 0
            and hb["status"] == "ok" and not hb["findings"])


@pytest.mark.parametrize("name", CLEAN)
def test_correct_kernel_has_no_finding(name):
    assert _clean(_verify(name))


@pytest.mark.parametrize("name", FALSE_ALARM)
def test_correct_kernel_false_alarm(name):
    assert _clean(_verify(name))
