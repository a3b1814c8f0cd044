"""Writes ``kernel.ptx`` of the expert softmax (sm_90a): hand-written PTX, unrolled by this script.

The PTX below is written by hand; this script only repeats its per-chunk and per-element blocks
(4 chunks of 8 fp16 per thread, 32 elements) so that the unrolled text has no copy-paste slips.
Run: ``python kernels/expert/softmax/sm_90a/gen.py`` (rewrites kernel.ptx next to it).

ABI (the one Triton's ``softmax_kernel`` is launched with, kernels/abi.py): out_ptr, in_ptr,
n_rows (u32), n_cols (u32), global_scratch, profile_scratch; 128 threads, one CTA per row
(grid = M), BLOCK_N = 4096 (so n_cols <= 4096), n_cols a multiple of 16 (the spec's
divisibility, which Triton's own PTX assumes too: a chunk of 8 is wholly in or out of the row).
"""

from __future__ import annotations

from pathlib import Path

THREADS = 128
CHUNKS = 4  # BLOCK_N / (THREADS * 8)
E = "softmax_kernel"
LOG2E = "0f3FB8AA3B"  # log2(e) = 1.4426950 as an f32 bit pattern
SENTINEL = "0fFF61B1E6"  # -3.0e38: a finite "minus infinity" (no inf - inf = NaN in the combine)


def build() -> str:
    n_el = CHUNKS * 8
    out: list[str] = []
    w = out.append
    w("//\n// expert softmax for sm_90a: one pass, the row held in registers (hand-written PTX,\n"
      "// unrolled by gen.py). See NOTES.md.\n//\n")
    w(".version 8.0\n.target sm_90a\n.address_size 64\n")
    w(f".visible .entry {E}(")
    w(f"\t.param .u64 .ptr .global .align 1 {E}_param_0,")
    w(f"\t.param .u64 .ptr .global .align 1 {E}_param_1,")
    w(f"\t.param .u32 {E}_param_2,")
    w(f"\t.param .u32 {E}_param_3,")
    w(f"\t.param .u64 .ptr .global .align 1 {E}_param_4,")
    w(f"\t.param .u64 .ptr .global .align 1 {E}_param_5")
    w(")")
    w(f".reqntid {THREADS}\n{{")
    w("\t.reg .pred %p<8>;\n\t.reg .b16 %h<40>;\n\t.reg .b32 %r<64>;\n\t.reg .f32 %f<200>;"
      "\n\t.reg .b64 %rd<24>;")
    w("\t.shared .align 16 .b8 red[32];  // (max, sum) of each of the 4 warps")
    w(f"\tld.param.u64 %rd1, [{E}_param_0];")
    w(f"\tld.param.u64 %rd2, [{E}_param_1];")
    w(f"\tld.param.u32 %r1, [{E}_param_3];           // n_cols")
    w("\tmov.u32 %r2, %ctaid.x;                  // row")
    w("\tmov.u32 %r3, %tid.x;")
    w("\tmul.wide.u32 %rd3, %r2, %r1;            // row * n_cols (elements)")
    w("\tshl.b64 %rd3, %rd3, 1;                  // bytes")
    w("\tmul.wide.u32 %rd4, %r3, 16;             // this thread's first 16-byte chunk")
    w("\tadd.s64 %rd3, %rd3, %rd4;")
    w("\tadd.s64 %rd5, %rd2, %rd3;               // &in[row, 8 * tid]")
    w("\tadd.s64 %rd6, %rd1, %rd3;               // &out[row, 8 * tid]")
    w("\tshl.b32 %r4, %r3, 3;                    // first column of chunk 0")
    # loads: chunk c covers columns 8 * (c * THREADS + tid) .. +7
    for c in range(CHUNKS):
        w(f"\tadd.s32 %r5, %r4, {c * THREADS * 8};")
        w(f"\tsetp.lt.u32 %p{c}, %r5, %r1;")
        regs = ", ".join(f"%r{10 + 4 * c + i}" for i in range(4))
        for i in range(4):
            w(f"\tmov.b32 %r{10 + 4 * c + i}, 0xFC00FC00;   // -inf, -inf outside the row")
        w(f"\t@%p{c} ld.global.nc.L1::no_allocate.v4.b32 {{{regs}}}, [%rd5+{c * THREADS * 16}];")
    # to f32, scaled by log2(e): y = x * log2(e); local max
    for k in range(n_el // 2):
        w(f"\tmov.b32 {{%h{2 * k}, %h{2 * k + 1}}}, %r{10 + k};")
    for k in range(n_el):
        w(f"\tcvt.f32.f16 %f{k}, %h{k};")
        w(f"\tmul.f32 %f{k}, %f{k}, {LOG2E};")
    w(f"\tmov.b32 %f40, {SENTINEL};")
    for k in range(n_el):
        w(f"\tmax.f32 %f40, %f40, %f{k};              // m: this thread's max (log2 units)")
    # e_k = 2^(y_k - m), s = sum e_k
    w("\tmov.f32 %f41, 0f00000000;")
    for k in range(n_el):
        w(f"\tsub.f32 %f{50 + k}, %f{k}, %f40;")
        w(f"\tex2.approx.ftz.f32 %f{50 + k}, %f{50 + k};")
        w(f"\tadd.f32 %f41, %f41, %f{50 + k};")
    # warp: combine (m, s) pairs by butterfly; M = max, S = s_a 2^(m_a - M) + s_b 2^(m_b - M)
    w("\tmov.f32 %f42, %f40;                     // running (M, S) = (m, s)")
    w("\tmov.f32 %f43, %f41;")
    for step in (16, 8, 4, 2, 1):
        w(f"\tshfl.sync.bfly.b32 %f44, %f42, {step}, 31, -1;")
        w(f"\tshfl.sync.bfly.b32 %f45, %f43, {step}, 31, -1;")
        _combine(w)
    # CTA: lane 0 of each warp publishes its pair; one barrier; every thread combines the four
    w("\tand.b32 %r6, %r3, 31;")
    w("\tshr.u32 %r7, %r3, 5;")
    w("\tsetp.eq.u32 %p5, %r6, 0;")
    w("\tmov.u32 %r8, red;")
    w("\tshl.b32 %r9, %r7, 3;")
    w("\tadd.u32 %r9, %r8, %r9;")
    w("\t@%p5 st.shared.v2.f32 [%r9], {%f42, %f43};")
    w("\tbar.sync 0;")
    w("\tld.shared.v2.f32 {%f42, %f43}, [%r8];")
    for wi in range(1, THREADS // 32):
        w(f"\tld.shared.v2.f32 {{%f44, %f45}}, [%r8+{8 * wi}];")
        _combine(w)
    # scale = 2^(m - M) / S (one division per thread); out_k = e_k * scale
    w("\tsub.f32 %f46, %f40, %f42;")
    w("\tex2.approx.ftz.f32 %f46, %f46;")
    w("\tdiv.rn.f32 %f47, %f46, %f43;")
    for k in range(n_el):
        w(f"\tmul.f32 %f{100 + k}, %f{50 + k}, %f47;")
    for k in range(n_el // 2):
        # cvt.rn.f16x2.f32 d, a, b puts a in the upper half: the higher column goes first
        w(f"\tcvt.rn.f16x2.f32 %r{30 + k}, %f{100 + 2 * k + 1}, %f{100 + 2 * k};")
    for c in range(CHUNKS):
        regs = ", ".join(f"%r{30 + 4 * c + i}" for i in range(4))
        w(f"\t@%p{c} st.global.cs.v4.b32 [%rd6+{c * THREADS * 16}], {{{regs}}};")
    w("\tret;\n}\n")
    return "\n".join(out)


def _combine(w) -> None:
    """(M, S) in %f42, %f43 with (m', s') in %f44, %f45 -> the combined pair in %f42, %f43."""
    w("\tmax.f32 %f48, %f42, %f44;")
    w("\tsub.f32 %f49, %f42, %f48;")
    w("\tex2.approx.ftz.f32 %f49, %f49;")
    w("\tsub.f32 %f44, %f44, %f48;")
    w("\tex2.approx.ftz.f32 %f44, %f44;")
    w("\tmul.f32 %f45, %f45, %f44;")
    w("\tfma.rn.f32 %f43, %f43, %f49, %f45;")
    w("\tmov.f32 %f42, %f48;")


if __name__ == "__main__":
    Path(__file__).with_name("kernel.ptx").write_text(build())
