"""The verifier's mutation corpus: seeded bugs in correct PTX, each expected to be reported with
one rule id.

Bases (all assemble with ptxas, CUDA 13.0): hand-written kernels in ``fixtures/handwritten/``
(tcgen05 GEMM tile, 2-CTA TMEM pair, wgmma + bulk copies, named-barrier producer/consumer) and
Triton 3.6 output in ``fixtures/triton36/``. A mutant is a list of textual edits (regular
expression -> replacement, first match; every edit must apply) plus optional ``verify`` overrides
(``arch``, ``threads``, an ABI built from the base). ``bug`` names the public issue of
``docs/ptx_rules.md`` §7 a mutant reproduces.

Used by ``tests/verifier/test_verifier_mutants.py`` and ``bench/mutant_table.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"

T = "handwritten/tc_gemm_sm100a.ptx"
P = "handwritten/tc_pair_sm100a.ptx"
W = "handwritten/wg_gemm_sm90a.ptx"
N = "handwritten/named_barriers_sm80.ptx"
TM = "handwritten/tensormap_sm90a.ptx"
CS = "handwritten/cp_async_scale_sm80.ptx"
M80 = "triton36/matmul_sm_80.ptx"
M90 = "triton36/matmul_sm_90a.ptx"
M100 = "triton36/matmul_sm_100a.ptx"
S80 = "triton36/softmax_sm_80.ptx"

WAIT1 = (r"\$L_wait1:\n\tmbarrier\.try_wait\.parity\.shared::cta\.b64 %p6, \[%r5\], 0;\n"
         r"\t@!%p6 bra \t\$L_wait1;\n")


@dataclass(frozen=True)
class Mutant:
    """One seeded bug.

    Attributes:
        rule: the rule id that must report it.
        base: fixture path relative to ``fixtures/``.
        what: one line describing the mutation.
        edits: ``(regex, replacement)`` pairs applied in order (first match each).
        arch: requested architecture (default: the base's ``.target``).
        threads: launch threads per CTA (default: from ``.reqntid``).
        abi: pass an ABI built from the *base* PTX (for E rules).
        bug: the ``docs/ptx_rules.md`` §7 issue it reproduces, if any.
    """

    rule: str
    base: str
    what: str
    edits: tuple[tuple[str, str], ...] = ()
    arch: str | None = None
    threads: int | None = None
    abi: bool = False
    bug: str | None = None
    extra: dict = field(default_factory=dict, hash=False, compare=False)

    @property
    def name(self) -> str:
        """Stable test id: ``<rule>-<base stem>-<index-free slug>``."""
        slug = re.sub(r"[^a-z0-9]+", "-", self.what.lower()).strip("-")[:40]
        return f"{self.rule}-{Path(self.base).stem}-{slug}"

    def apply(self, text: str) -> str:
        """The mutated text.

        Raises:
            ValueError: an edit's pattern does not match (the base changed).
        """
        for pat, rep in self.edits:
            new, n = re.subn(pat, rep, text, count=1)
            if n != 1:
                raise ValueError(f"mutant {self.name}: pattern {pat!r} not found in {self.base}")
            text = new
        return text


def _m(rule, base, what, *edits, **kw) -> Mutant:
    return Mutant(rule, base, what, tuple(edits), **kw)


MUTANTS: list[Mutant] = [
    # ---------------------------------------------------------------- P / G / E / D (v0 rules)
    _m("P1", T, "missing semicolon", (r"bar\.sync \t0;", "bar.sync \t0")),
    _m("G1", T, "tcgen05 on an sm_90a target", (r"\.target sm_100a", ".target sm_90a"),
       arch="sm_90a"),
    _m("G2", W, "wgmma on sm_90 (no 'a')", (r"\.target sm_90a", ".target sm_90"), arch="sm_90"),
    _m("G3", W, "multicast bulk copy on sm_90", (r"\.target sm_90a", ".target sm_90"),
       (r"complete_tx::bytes \[%r3\]", "complete_tx::bytes.multicast::cluster [%r3]"),
       arch="sm_90"),
    _m("G4", W, "requested sm_100a, PTX for sm_90a", arch="sm_100a"),
    _m("E1", T, "second entry in the module", (r"\Z", "\n.visible .entry other()\n{\n\tret;\n}\n")),
    _m("E2", T, "parameter type changed", (r"\.param \.u64 \.ptr \.global \.align 16 tc_gemm_param_1",
                                           ".param .u32 tc_gemm_param_1"), abi=True),
    _m("E3", T, "launch with 256 threads, .reqntid 128", threads=256),
    _m("D1", T, "register past the declared range", (r"mov\.b32 \t%r17, 0;", "mov.b32 \t%r50, 0;")),
    _m("D2", T, "branch to a missing label", (r"@!%p3 bra \t\$L_wait0;", "@!%p3 bra \t$L_wait9;")),
    _m("D3", T, "label defined twice", (r"\tret;", "$L_wait1:\n\tret;")),
    # ---------------------------------------------------------------- TA
    _m("TA1", P, "alloc of 96 columns via a register",
       (r"@%p1 tcgen05\.alloc\.cta_group::2\.sync\.aligned\.shared::cta\.b32 \[%r2\], 64;",
        "mov.b32 \t%r9, 96;\n\t@%p1 tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 "
        "[%r2], %r9;")),
    _m("TA2", T, "alloc guarded by a one-thread predicate",
       (r"@%p1 tcgen05\.alloc", "@%p2 tcgen05.alloc")),
    _m("TA3", T, "TMEM address read without the barrier",
       (r"\ttcgen05\.fence::before_thread_sync;\n\tbar\.sync \t0;\n\ttcgen05\.fence::after_thread_"
        r"sync;\n\tld\.shared\.b32 \t%r6, \[tslot\];", "\tld.shared.b32 \t%r6, [tslot];"),
       bug="NVIDIA/cutlass#2835"),
    _m("TA4", T, "dealloc deleted",
       (r"\t@%p1 tcgen05\.dealloc[^\n]*\n", "")),
    _m("TA4", T, "early ret before the dealloc",
       (r"(ld\.shared\.b32 \t%r6, \[tslot\];\n)",
        r"\1\tsetp.eq.u32 \t%p8, %r6, 0;\n\t@%p8 ret;\n")),
    _m("TA5", T, "dealloc size mismatch", (r"%r6, 128;", "%r6, 64;")),
    _m("TA6", T, "relinquish before alloc",
       (r"(\t@%p1 tcgen05\.alloc[^\n]*\n)(\t@%p1 tcgen05\.relinquish[^\n]*\n)", r"\2\1")),
    _m("TA7", T, "second, larger allocation",
       (r"(@%p1 tcgen05\.alloc\.cta_group::1\.sync\.aligned\.shared::cta\.b32 \[%r3\]), 128;",
        r"\1, 64;\n\t\1, 128;")),
    _m("TA8", T, "commit with cta_group::2", (r"commit\.cta_group::1", "commit.cta_group::2")),
    _m("TA9", P, "paired alloc without the cluster barrier",
       (r"\tbarrier\.cluster\.arrive\.release\.aligned;\n\tbarrier\.cluster\.wait\.acquire\."
        r"aligned;\n\tmov\.u32", "\tmov.u32"), bug="NVIDIA/cutlass#3316"),
    _m("TA10", T, "barrier before the dealloc deleted",
       (r"(st\.global\.v4\.b32 [^\n]*\n)\ttcgen05\.fence::before_thread_sync;\n\tbar\.sync \t0;\n"
        r"\ttcgen05\.fence::after_thread_sync;\n", r"\1")),
    _m("TA11", T, "relinquish deleted", (r"\t@%p1 tcgen05\.relinquish[^\n]*\n", "")),
    # ---------------------------------------------------------------- TL
    _m("TL1", T, "tcgen05.ld by one lane", (r"\ttcgen05\.ld\.", "\t@%p2 tcgen05.ld.")),
    _m("TL2", T, "every warp reads lane quarter 0",
       (r"add\.u32 \t%r16, %r6, %r15;", "add.u32 \t%r16, %r6, 0;")),
    _m("TL3", T, "ld vector too short",
       (r"x4\.b32 \{%r20, %r21, %r22, %r23\}", "x4.b32 {%r20, %r21}")),
    _m("TL4", T, "wait::ld deleted", (r"\ttcgen05\.wait::ld\.sync\.aligned;\n", ""),
       bug="NVIDIA/cutlass#2525"),
    _m("TL4", M100, "Triton: wait::ld deleted", (r"\ttcgen05\.wait::ld\.sync\.aligned;\n", "")),
    _m("TL5", T, "wait::st deleted", (r"\ttcgen05\.wait::st\.sync\.aligned;\n", "")),
    _m("TL5", M100, "Triton: wait::st deleted", (r"\ttcgen05\.wait::st\.sync\.aligned;\n", "")),
    _m("TL6", T, "wait::ld run by warp 0 only",
       (r"\ttcgen05\.wait::ld\.sync\.aligned;", "\t@%p1 tcgen05.wait::ld.sync.aligned;")),
    _m("TL6", M100, "Triton: wait::ld run by warp 0 only",
       (r"\ttcgen05\.wait::ld\.sync\.aligned;", "\t@%p1 tcgen05.wait::ld.sync.aligned;")),
    # ---------------------------------------------------------------- TM
    _m("TM1", T, "mma issued by all lanes", (r"@%p5 tcgen05\.mma", "tcgen05.mma")),
    _m("TM1", M100, "Triton: mma issued by all lanes",
       (r"@%p\d+ (tcgen05\.mma\.cta_group)", r"\1")),
    _m("TM2", P, "cta_group::2 shift after the last cluster barrier, then exit",
       (r"(\ttcgen05\.fence::after_thread_sync;\n)(\t@%p1 tcgen05\.dealloc)",
        "\\1\telect.sync \t%r10|%p2, -1;\n\tand.pred \t%p3, %p1, %p2;\n"
        "\t@%p3 tcgen05.shift.cta_group::2.down [%r3];\n\\2")),
    _m("TM3", T, "N = 136 with M = 128", (r"%r12, 136314896;", "%r12, 136445968;")),
    _m("TM4", T, "sparsity flag set on a dense mma", (r"%r12, 136314896;", "%r12, 136314900;")),
    _m("TM5", T, "smem descriptor swizzle 3", (r"%r11, 1073758272;", "%r11, 1610629184;")),
    _m("TM6", T, "ld past the allocated columns",
       (r"x4\.b32 \{%r20, %r21, %r22, %r23\}, \[%r16\]", "x4.b32 {%r20, %r21, %r22, %r23}, "
                                                         "[%r16+126]")),
    _m("TM7", T, "shift with a lane not aligned to 32",
       (r"(\t@%p5 tcgen05\.commit)", "\tadd.u32 \t%r18, %r6, 65536;\n"
                                     "\t@%p5 tcgen05.shift.cta_group::1.down [%r18];\n\\1")),
    _m("TM8", T, "generic smem write before the mma, no fence",
       (r"(\tbfe\.u32 \t%r8)", "\tst.shared.b32 \t[smem], %r1;\n\\1"),
       bug="sgl-project/sglang#39124"),
    # ---------------------------------------------------------------- TC / TF
    _m("TC1", T, "commit by all lanes", (r"@%p5 tcgen05\.commit", "tcgen05.commit")),
    _m("TC2", T, "commit deleted", (r"\t@%p5 tcgen05\.commit[^\n]*\n", "")),
    _m("TC4", T, "multicast commit without a cluster barrier after the init",
       (r"(\.reg \.b64 \t%rd<16>;\n)", "\\1\t.reg .b16 \t%rs<2>;\n"),
       (r"\t@%p5 tcgen05\.commit\.cta_group::1\.mbarrier::arrive::one\.shared::cluster\.b64 "
        r"\[%r5\];", "\tmov.b16 \t%rs1, 1;\n\t@%p5 tcgen05.commit.cta_group::1.mbarrier::arrive::"
                      "one.shared::cluster.multicast::cluster.b64 [%r5], %rs1;"),
       bug="facebookexperimental/triton#652"),
    _m("TC4", T, "multicast commit with a 32-bit mask register",
       (r"\t@%p5 tcgen05\.commit\.cta_group::1\.mbarrier::arrive::one\.shared::cluster\.b64 "
        r"\[%r5\];", "\t@%p5 tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster"
                      ".multicast::cluster.b64 [%r5], %r13;")),
    _m("TF2", T, "mbarrier wait before the ld deleted", (WAIT1, "")),
    _m("TF3", T, "relaxed arrive after wait::ld without fence::before",
       (r"(\ttcgen05\.wait::ld\.sync\.aligned;\n)",
        "\\1\t@%p2 mbarrier.arrive.relaxed.cta.shared::cta.b64 \t%rd9, [%r5];\n")),
    # TF4 is a semantics row (no defect): the TMEM address alloc writes is published by the
    # barrier alone, PTX ISA 9.1 §9.7.16.6.1 (its former mutant, the fence::after_thread_sync
    # before the address load deleted, is correct code)
    _m("TF5", T, "relaxed wait without fence::after before tcgen05.ld",
       (r"try_wait\.parity\.shared::cta\.b64 %p6", "try_wait.parity.relaxed.cta.shared::cta.b64 %p6"),
       (r"(@!%p6 bra \t\$L_wait1;\n)\ttcgen05\.fence::after_thread_sync;\n", r"\1")),
    # ---------------------------------------------------------------- MB
    _m("MB1", T, "mbarrier at a 4-byte offset", (r"add\.u32 \t%r5, %r4, 8;", "add.u32 \t%r5, %r4, 4;")),
    _m("MB2", T, "init count 0", (r"mbarrier\.init\.shared::cta\.b64 \[%r5\], 1;",
                                  "mbarrier.init.shared::cta.b64 [%r5], 0;")),
    _m("MB3", T, "init deleted", (r"\t@%p2 mbarrier\.init\.shared::cta\.b64 \[%r5\], 1;\n", "")),
    _m("MB3", T, "inval while the commit may still arrive",
       (r"(\t@%p5 tcgen05\.commit[^\n]*\n)", "\\1\t@%p2 mbarrier.inval.shared::cta.b64 [%r5];\n"),
       bug="triton-lang/triton#10409"),
    _m("MB4", W, "barrier after init deleted",
       (r"\tbar\.sync \t0;\n(\tmov\.u32 \t%r3, smem;)", r"\1")),
    _m("MB5", W, "first wait with parity 1", (r"\[%r2\], 0;\n\t@!%p2", "[%r2], 1;\n\t@!%p2"),
       bug="Dao-AILab/flash-attention#1317"),
    _m("MB6", W, "expect_tx arrive issued twice for one phase",
       (r"(\t@%p1 mbarrier\.arrive\.expect_tx[^\n]*\n)", r"\1\1")),
    _m("MB7", W, "init count 2, one arrival", (r"\[%r2\], 1;", "[%r2], 2;"),
       bug="deepseek-ai/DeepGEMM#51"),
    _m("MB8", W, "expect_tx bytes too small", (r"_, \[%r2\], 8192;", "_, [%r2], 4096;"),
       bug="NVIDIA/cutlass#851"),
    _m("MB9", W, "relaxed wait then ld.shared without acquire fence",
       (r"try_wait\.parity\.shared::cta\.b64 %p2", "try_wait.parity.relaxed.cta.shared::cta.b64 %p2"),
       (r"(@!%p2 bra \t\$L_wait;\n)", "\\1\tld.shared.b32 \t%r10, [smem];\n")),
    _m("MB10", W, "try_wait not retried", (r"\t@!%p2 bra \t\$L_wait;\n", "")),
    # ---------------------------------------------------------------- AP
    _m("AP1", W, "proxy fence and barrier before the bulk store deleted",
       (r"\tfence\.proxy\.async\.shared::cta;\n\tbar\.sync \t0;\n", ""),
       bug="MoonshotAI/FlashKDA#24"),
    _m("AP2", W, "ld.shared then a bulk load into it, no proxy fence",
       (r"(\t@%p1 mbarrier\.inval)", "\tld.shared.b32 \t%r10, [smem];\n\t@%p1 cp.async.bulk.shared"
        "::cluster.global.mbarrier::complete_tx::bytes [smem], [%rd1], 8192, [%r2];\n\\1"),
       bug="deepseek-ai/DeepEP#642"),
    _m("AP3", W, "bulk-load destination read without waiting",
       (r"\$L_wait:\n\tmbarrier\.try_wait[^\n]*\n\t@!%p2 bra \t\$L_wait;\n",
        "\tld.shared.b32 \t%r10, [smem];\n")),
    _m("AP4", W, "st.global then a bulk load, no proxy fence",
       (r"(\t@%p1 mbarrier\.arrive\.expect_tx)", "\tst.global.b32 \t[%rd1], %r1;\n\\1")),
    _m("AP5", W, "wait_group.read deleted", (r"\t@%p1 cp\.async\.bulk\.wait_group\.read 0;\n", "")),
    _m("AP6", W, "bulk commit_group deleted", (r"\t@%p1 cp\.async\.bulk\.commit_group;\n", "")),
    _m("AP7", W, "bulk copy size 8200 via a register",
       (r"(\t@%p1 cp\.async\.bulk\.shared::cluster[^\n]*)8192, \[%r2\];",
        "\tmov.b32 \t%r11, 8200;\n\\1%r11, [%r2];")),
    _m("AP8", TM, "multicast tensor copy masks a CTA outside the 2-CTA cluster",
       (r"(\.reqntid 128\n)", "\\1.explicitcluster\n.reqnctapercluster 2, 1, 1\n"),
       (r"(\.reg \.b64 \t%rd<8>;\n)", "\\1\t.reg .b16 \t%rs<2>;\n"),
       (r"\t(@%p3 cp\.async\.bulk\.tensor[^\n]*bytes) ([^\n]*), \[%r2\];",
        "\tmov.b16 \t%rs1, 5;\n\t\\1.multicast::cluster \\2, [%r2], %rs1;")),
    _m("AP9", TM, "release fence after tensormap.replace deleted",
       (r"\t@%p1 fence\.proxy\.tensormap::generic\.release\.gpu;\n", ""),
       bug="deepseek-ai/DeepGEMM#343"),
    _m("AP9", TM, "acquire fence before the tensor copy deleted",
       (r"\t@%p1 fence\.proxy\.tensormap::generic\.acquire[^\n]*\n", "")),
    # ---------------------------------------------------------------- W
    _m("W1", W, "mma_async by one lane", (r"\twgmma\.mma_async", "\t@%p1 wgmma.mma_async")),
    _m("W2", W, "wgmma.fence deleted", (r"\twgmma\.fence\.sync\.aligned;\n", "")),
    _m("W3", W, "wait_group deleted before the accumulator read",
       (r"\twgmma\.wait_group\.sync\.aligned 0;\n", ""), bug="HazyResearch/ThunderKittens#33"),
    _m("W4", W, "commit_group deleted", (r"\twgmma\.commit_group\.sync\.aligned;\n", ""),
       bug="NVIDIA/Fuser#3561"),
    _m("W5", W, "generic smem write right before the wgmma",
       (r"(\twgmma\.fence\.sync\.aligned;)", "\tst.shared.b32 \t[smem], %r1;\n\\1")),
    _m("W6", W, "stage overwritten before wait_group retires the wgmma",
       (r"(\twgmma\.commit_group\.sync\.aligned;\n)", "\\1\tst.shared.b32 \t[%r5], %r1;\n"),
       bug="tile-ai/tilelang#2613"),
    _m("W7", W, "epilogue reads another thread's result without a barrier",
       (r"(\tst\.shared\.f32 \t\[%r9\], %f33;\n)", "\\1\tld.shared.f32 \t%f34, [obuf+4];\n")),
    _m("W8", W, "descriptor reserved bit 46 set",
       (r"or\.b64 \t%rd4, %rd3, 4611686293305294848;", "or.b64 \t%rd4, %rd3, 4611756662049472512;")),
    # ---------------------------------------------------------------- CA
    _m("CA1", M80, "Triton: cp.async.cg of 8 bytes", (r"(cp\.async\.cg\.shared\.global [^\n]*), 0x10,",
                                                      r"\1, 0x8,")),
    _m("CA2", M80, "Triton: last prologue commit_group deleted before the loop's wait",
       (r"\tcp\.async\.commit_group;\n((?:[^\n]*\n){0,2}\s*@%p1 bra \t\$L__BB0_2;)", r"\1"),
       bug="csarofeen/pytorch#2457"),
    _m("CA3", M80, "Triton: barrier after the first wait deleted",
       (r"(cp\.async\.wait_group \t2;\n)\tbar\.sync \t0;\n", r"\1")),
    _m("CA4", M80, "Triton: cp.async duplicated",
       (r"(\tcp\.async\.cg\.shared\.global [^\n]*\n)", r"\1\1")),
    _m("CA5", CS, "write-after-read barrier before the refill deleted",
       (r"(\tld\.shared\.f32 \t%f1, \[scale\];\n)\tbar\.sync \t0;\n", r"\1")),
    # ---------------------------------------------------------------- B
    _m("B1", N, "named barrier count 200 via a register",
       (r"\$L_consumer:\n\tbar\.sync \t1, 256;",
        "$L_consumer:\n\tmov.b32 \t%r15, 200;\n\tbar.sync \t1, %r15;")),
    _m("B2", N, "CTA barrier under a lane predicate", (r"\tbar\.sync \t0;", "\t@%p3 bar.sync \t0;"),
       bug="mlc-ai/TIRx-kernels#21"),
    _m("B3", N, "consumer uses count 512 on a 256-thread CTA",
       (r"\$L_consumer:\n\tbar\.sync \t1, 256;", "$L_consumer:\n\tbar.sync \t1, 512;"),
       bug="deepseek-ai/FlashMLA#57"),
    _m("B4", N, "__syncthreads inside the producer branch",
       (r"\tbra\.uni \t\$L_done;", "\tbar.sync \t0;\n\tbra.uni \t$L_done;"),
       bug="flashinfer-ai/flashinfer#2996"),
    _m("B5", N, "producer arrives twice without waiting", (r"\tbar\.sync \t2, 256;\n", ""),
       bug="vllm-project/vllm#26026"),
    _m("B7", P, "cluster barrier only in warp 0",
       (r"\tbarrier\.cluster\.arrive\.release\.aligned;", "\t@%p1 barrier.cluster.arrive.release"
                                                         ".aligned;"),
       bug="triton-lang/triton#9456"),
    _m("B9", S80, "first reduction barrier removed (read after write across warps)",
       (r"(\t@%p5 st\.shared\.b32 \[ %r18 \+ 0 \], %r19;\n\t// end inline asm\n)\tbar\.sync \t0;\n",
        "\\1")),
    _m("B9", S80, "barrier before the second reduction removed (write after read across warps)",
       (r"(\$L__tmp18:\n[^\n]*\n)\tbar\.sync \t0;\n", "\\1")),
    _m("B8", W, "setmaxnreg by one lane",
       (r"(\tmov\.u32 \t%r1, %tid\.x;\n\tsetp\.eq\.u32 \t%p1, %r1, 0;\n)",
        "\\1\t@%p1 setmaxnreg.dec.sync.aligned.u32 40;\n")),
    # ---- MS: module-scope state (issue 9: launch counter in module-scope .global memory)
    Mutant("MS1", M90, "a module-scope launch counter bumped by every CTA",
           ((r"(\.extern \.shared)", r".global .align 4 .u32 ailower_launches;\n\1"),
            (r"(\n\tld\.param\.b32 \t%r25, \[matmul_kernel_param_5\];)",
             r"\1\n\tatom.global.add.u32 %r25, [ailower_launches], 1;"))),
]


def base_text(m: Mutant) -> str:
    """The base PTX of a mutant."""
    return (FIXTURES / m.base).read_text()


def run(m: Mutant):
    """Verify the mutant; returns ``(report, base report)``."""
    from kernels.abi import ABIParam, KernelABI
    from verifier import parse_ptx, verify

    base = base_text(m)
    text = m.apply(base)
    arch = m.arch or parse_ptx(base).arch
    kw: dict = {"arch": arch, "filename": Path(m.base).name}
    if m.threads is not None:
        kw["threads"] = m.threads
    if m.abi:
        fn = parse_ptx(base).entries[0]
        kw["abi"] = KernelABI(entry=fn.name, arch=arch, threads=128, params=tuple(
            ABIParam(name=p.name, ptx_type=p.type, size=p.size, is_pointer=p.is_ptr,
                     align=p.align if p.align is not None else p.ptr_align,
                     source="pointer" if p.is_ptr else "scalar") for p in fn.params))
    barch = parse_ptx(base).arch
    return verify(text, **kw), verify(base, arch=barch, filename=Path(m.base).name)


def caught(m: Mutant, report) -> bool:
    """The intended rule reported the mutant as an error or warning."""
    return any(f.rule == m.rule and f.severity in ("error", "warning") for f in report.findings)
