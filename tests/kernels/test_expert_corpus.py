"""The expert corpus loader (kernels/expert/): the real corpus loads, malformed entries are named."""

from __future__ import annotations

from pathlib import Path

import pytest

import kernels
from kernels.expert import ExpertError, entries, find, load

PTX = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry k_kernel(
\t.param .u64 k_kernel_param_0
)
{
\tret;
}
"""
YAML = """kernel: k
arch: sm_90a
entry: k_kernel
threads: 128
meta: {BLOCK: 1024}
summary: a test entry
"""


def _entry(root: Path, yaml: str = YAML, ptx: str = PTX, kernel: str = "k", arch: str = "sm_90a",
           notes: bool = True) -> Path:
    d = root / kernel / arch
    d.mkdir(parents=True)
    (d / "launch.yaml").write_text(yaml)
    (d / "kernel.ptx").write_text(ptx)
    if notes:
        (d / "NOTES.md").write_text("# notes\n")
    return d


def test_the_corpus_loads_and_names_suite_entries():
    got = entries()
    assert got, "kernels/expert/ has no entry"
    suite = set(kernels.names("all"))
    for e in got:
        assert e.kernel in suite, f"{e.folder}: {e.kernel!r} is not a suite entry"
        assert e.notes.is_file() and e.ptx == (e.folder / "kernel.ptx").read_text()
    assert find("softmax", "sm_90a") is not None
    assert find("softmax", "sm_89") is None and find("../softmax", "sm_90a") is None


def test_a_valid_entry_loads(tmp_path):
    d = _entry(tmp_path)
    e = load(d)
    assert (e.kernel, e.arch, e.launch.entry, e.launch.threads) == ("k", "sm_90a", "k_kernel", 128)
    assert e.launch.meta == {"BLOCK": 1024} and e.ptx == PTX
    assert [x.kernel for x in entries(tmp_path)] == ["k"] and find("k", "sm_90a", tmp_path) == e


@pytest.mark.parametrize("yaml,match", [
    (YAML.replace("threads: 128", "threads: 2000"), r"launch\.yaml:threads: "),
    (YAML.replace("arch: sm_90a", "arch: sm_75"), r"launch\.yaml:arch: .*sm_75"),
    (YAML + "warps: 4\n", r"launch\.yaml:warps: Extra inputs"),
    (YAML.replace("summary: a test entry\n", ""), r"launch\.yaml:summary: Field required"),
    (YAML.replace("kernel: k", "kernel: other"), r"launch\.yaml:kernel: 'other' but the folder"),
    (YAML.replace("entry: k_kernel", "entry: softmax_kernel"),
     r"kernel\.ptx: must define exactly the entry 'softmax_kernel'.*\['k_kernel'\]"),
    (YAML + "source: gen.py\n", r"launch\.yaml:source: 'gen.py' does not exist"),
    ("- a list\n", r"launch\.yaml: must be a mapping"),
    ("threads: [\n", r"launch\.yaml: not valid YAML"),
])
def test_malformed_entries_name_the_file_and_field(tmp_path, yaml, match):
    d = _entry(tmp_path, yaml=yaml)
    with pytest.raises(ExpertError, match=match):
        load(d)


def test_wrong_target_and_missing_notes(tmp_path):
    d = _entry(tmp_path, ptx=PTX.replace(".target sm_90a", ".target sm_100a"))
    with pytest.raises(ExpertError, match=r"kernel\.ptx: \.target is sm_100a.*'sm_90a'"):
        load(d)
    d2 = _entry(tmp_path, kernel="j", yaml=YAML.replace("kernel: k", "kernel: j"), notes=False)
    with pytest.raises(ExpertError, match=r"NOTES\.md: missing"):
        load(d2)


def test_the_init_fence_follows_every_mbarrier_init():
    from scripts.expert_gen import fence_mbarrier_inits

    src = ("\t@%p3 mbarrier.init.shared::cta.b64 [%r1], 1;\n\tbar.sync 0;\n"
           "\tmbarrier.init.shared.b64 [%r2], 128;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%r1], 0;\n")
    out, n = fence_mbarrier_inits(src)
    assert n == 2
    assert out.splitlines()[1].strip().startswith("fence.mbarrier_init.release.cluster;")
    assert out.splitlines()[4].strip().startswith("fence.mbarrier_init.release.cluster;")
    # the generated gemm entries carry it after each of their inits
    for e in entries():
        lines = e.ptx.splitlines()
        inits = [i for i, ln in enumerate(lines) if "mbarrier.init." in ln]
        if e.launch.source == "gen.py" and inits and "fence_inits=True" in (e.folder / "gen.py").read_text():
            assert all("fence.mbarrier_init" in lines[i + 1] for i in inits), e.folder


def test_the_tcgen05_fences_bracket_every_thread_sync():
    from scripts.expert_gen import fence_tcgen05_syncs

    src = ("\tbar.sync \t0;\n\tld.shared.b32 \t%r2, [global_smem];\n"
           "\t@%p3 mbarrier.arrive.shared::cta.b64 _, [%r1];\n\tbar.arrive 2, 128;\n"
           "\tbar.warp.sync \t-1;\n{\n\t.reg .pred complete;\n\twaitLoop:\n"
           "\tmbarrier.try_wait.parity.shared::cta.b64 complete, [%r1], %r4;\n"
           "\t@!complete bra.uni waitLoop;\n}\n"
           "\ttcgen05.ld.sync.aligned.32x32b.x32.b32 {%r5}, [%r2];\n")
    out, n = fence_tcgen05_syncs(src)
    got = [ln.split("//")[0].strip() for ln in out.splitlines()]
    before, after = "tcgen05.fence::before_thread_sync;", "tcgen05.fence::after_thread_sync;"
    assert got[:3] == [before, "bar.sync \t0;", after]
    assert got[4:6] == [before, "@%p3 mbarrier.arrive.shared::cta.b64 _, [%r1];"]
    assert got[6:8] == [before, "bar.arrive 2, 128;"]  # an arrive releases only: no after-fence
    assert got[8] == "bar.warp.sync \t-1;"  # not a CTA barrier: untouched
    assert got[13:15] == ["@!complete bra.uni waitLoop;", after]
    assert n == 5
    with pytest.raises(ValueError, match=r"line 1: 'mbarrier.try_wait' not followed"):
        fence_tcgen05_syncs("\tmbarrier.try_wait.parity.shared::cta.b64 p, [%r1], 0;\n\tret;\n")
    # the generated entries that ask for them carry them at every sync
    for e in entries():
        gen = e.folder / "gen.py"
        if e.launch.source != "gen.py" or "fence_tcgen05=True" not in gen.read_text():
            continue
        lines = e.ptx.splitlines()
        for i, ln in enumerate(lines):
            if "mbarrier.arrive" in ln or ln.strip().startswith(("bar.sync", "barrier.sync")):
                assert "before_thread_sync" in lines[i - 1], (e.folder, i + 1)
            if ln.strip().startswith("@!complete bra.uni waitLoop"):
                assert "after_thread_sync" in lines[i + 1], (e.folder, i + 1)


_TWO_CONSUMERS = """$L__BB0_13:
\tst.global.b32 [%rd1], %r1;
\tret;
$L__BB0_10:
\tsetmaxnreg.inc.sync.aligned.u32 232;
$L__BB0_12:
\twgmma.fence.sync.aligned;
\twgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%r1}, %rd1, %rd2, 1, 1, 1, 0, 0;
\twgmma.commit_group.sync.aligned;
\twgmma.wait_group.sync.aligned 0;
\tbar.sync 3, 128;
\t@%p1 bra $L__BB0_12;
\tbra.uni $L__BB0_13;
$L__BB0_6:
\tsetmaxnreg.inc.sync.aligned.u32 232;
$L__BB0_8:
\twgmma.fence.sync.aligned;
\twgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%r1}, %rd1, %rd2, 1, 1, 1, 0, 0;
\twgmma.commit_group.sync.aligned;
\twgmma.wait_group.sync.aligned 0;
\tbar.sync 2, 128;
\t@%p1 bra $L__BB0_8;
\tret;
"""


def test_the_pingpong_patch_passes_one_turn_between_the_two_consumers():
    from scripts.expert_gen import pingpong_wgmma_consumers

    out, n = pingpong_wgmma_consumers(_TWO_CONSUMERS)
    got = [ln.split("//")[0].strip() for ln in out.splitlines()]
    assert n == 6  # a turn and a hand-over per group, the first and the last turn
    mma = got[9]
    assert got[:2] == ["$L__BB0_13:", "bar.sync 4, 256;"]  # the first takes the last turn
    # the first consumer (named barrier 3, first in the file) waits on 4 and hands over on 5
    assert got[6:14] == ["$L__BB0_12:", "bar.sync 4, 256;", "wgmma.fence.sync.aligned;", mma,
                         "wgmma.commit_group.sync.aligned;", "bar.arrive 5, 256;",
                         "wgmma.wait_group.sync.aligned 0;", "bar.sync 3, 128;"]
    # the second gives the first turn at its start, then waits on 5 and hands over on 4
    assert got[16:26] == ["$L__BB0_6:", "setmaxnreg.inc.sync.aligned.u32 232;",
                          "bar.arrive 4, 256;", "$L__BB0_8:", "bar.sync 5, 256;",
                          "wgmma.fence.sync.aligned;", mma, "wgmma.commit_group.sync.aligned;",
                          "bar.arrive 4, 256;", "wgmma.wait_group.sync.aligned 0;"]
    with pytest.raises(ValueError, match=r"expected two wgmma consumers.*\[3\]"):
        pingpong_wgmma_consumers(_TWO_CONSUMERS.split("$L__BB0_6:")[0])
    # the sm_90a flash_attention entry carries it: 4 groups, 10 barrier instructions
    e = find("flash_attention.noncausal", "sm_90a")
    marks = [ln for ln in e.ptx.splitlines() if "expert gen.py: " in ln and "bar." in ln]
    assert len(marks) == 10
