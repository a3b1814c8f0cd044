"""CA4 (two ``cp.async`` of one commit group write the same destination) across loop trips.

A destination known only as "register + offset" names a new address once the register is
written again: a loop that issues ``cp.async [%r5]`` and then advances ``%r5`` writes distinct
bytes on every trip, even with one commit for the whole loop (the expert conv2d candidate's
window fill, ``kernels/expert/conv2d.fp16/sm_90a``). Two copies through the same, unchanged
register in one group are still an error (PTX ISA 9.1 §9.7.9.25.3.2: no order within a group).
"""

from __future__ import annotations

import pytest

from verifier import verify

_KERNEL = """.version 8.7
.target sm_80
.address_size 64

.visible .entry cpl(
	.param .u64 .ptr .global .align 16 cpl_param_0
)
.reqntid 128
{{
	.reg .pred 	%p<4>;
	.reg .b32 	%r<16>;
	.reg .b64 	%rd<8>;
	.shared .align 16 .b8 buf[8192];

	ld.param.u64 	%rd1, [cpl_param_0];
	mov.u32 	%r1, %tid.x;
	shl.b32 	%r2, %r1, 4;
	mov.u32 	%r3, buf;
	add.s32 	%r5, %r3, %r2;
	mov.u32 	%r6, 0;
$L_loop:
	cvt.u64.u32 	%rd2, %r6;
	add.s64 	%rd3, %rd1, %rd2;
	cp.async.cg.shared.global [%r5], [%rd3], 16;
{advance}
	add.s32 	%r6, %r6, 2048;
	setp.lt.u32 	%p1, %r6, 8192;
	@%p1 bra 	$L_loop;
	cp.async.commit_group;
	cp.async.wait_group 0;
	bar.sync 	0;
	ret;
}}
"""


def _ca4(advance: str) -> list:
    rep = verify(_KERNEL.format(advance=advance), arch="sm_80", threads=128, select={"CA4"})
    return [f for f in rep.findings if f.rule == "CA4"]


def test_loop_advancing_the_destination_register_is_not_ca4():
    assert _ca4("\tadd.s32 \t%r5, %r5, 2048;") == []


@pytest.mark.parametrize("advance", ["", "\tadd.s32 \t%r7, %r5, 2048;"])
def test_loop_reusing_the_destination_register_is_ca4(advance):
    found = _ca4(advance)
    assert found and all(f.severity == "error" for f in found)
