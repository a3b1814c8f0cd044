"""MB8's byte sum (expect_tx vs the bulk copies completing on the mbarrier) is an error only
when every copy's mbarrier is resolved: a copy that completes on a ``mapa`` address (a CTA
pair's or a peer's barrier) or multicasts may deliver the bytes the sum misses (2026-12-04:
the CTA-pair GEMM's TMA got "expects 20480 transaction bytes but the copies deliver 0")."""

from __future__ import annotations

import pytest

from verifier import verify

_PTX = """.version 8.7
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 src)
.reqntid 32, 1, 1
.reqnctapercluster 2, 1, 1
{{
  .reg .b32 %r<16>;
  .reg .b64 %rd<8>;
  .reg .pred %p<4>;
  .shared .align 128 .b8 buf[4096];
  .shared .align 8 .b64 bar;
  ld.param.u64 %rd1, [src];
  mov.u32 %r1, %tid.x;
  setp.eq.u32 %p1, %r1, 0;
  mov.u32 %r2, bar;
  mov.u32 %r3, buf;
  @%p1 mbarrier.init.shared::cta.b64 [%r2], 1;
  @%p1 fence.mbarrier_init.release.cluster;
  barrier.cluster.arrive.release.aligned;
  barrier.cluster.wait.acquire.aligned;
  mapa.shared::cluster.u32 %r4, %r2, 0;
  @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r2], 4096;
  @%p1 cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r3], [%rd1], {size}, [{bar}];
WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r2], 0;
  @!%p2 bra WAIT;
  barrier.cluster.arrive.release.aligned;
  barrier.cluster.wait.acquire.aligned;
  ret;
}}
"""


def _mb8(size: int, bar: str) -> list[str]:
    rep = verify(_PTX.format(size=size, bar=bar), arch="sm_90a", threads=32, select={"MB8"})
    return [f.severity for f in rep.findings if f.rule == "MB8"]


@pytest.mark.parametrize("size,bar,want", [
    (4096, "%r2", []),              # the copy's bytes are the expected ones
    (2048, "%r2", ["error"]),       # resolved and short: sure
    (4096, "%r4", ["note"]),        # completes through mapa: the sum cannot see it
])
def test_mb8_sum_is_an_error_only_when_every_copy_is_resolved(size, bar, want):
    assert _mb8(size, bar) == want
