"""Each rule on its fixture files (``fixtures/<FAMILY>/<ID>*.ptx``, Clang ``-verify`` style), the
registry's promises, the report and the public surface."""

from __future__ import annotations

import json
import re

import pytest
from verifier_testlib import FIXTURES, read_fixture

import verifier
from kernels.abi import ABIParam, KernelABI
from verifier import VerifierUsageError, rule_doc, verify
from verifier.registry import FAMILIES, RULES

RULE_FIXTURES = sorted(p for p in FIXTURES.glob("*/*.ptx") if p.parent.name in FAMILIES)


@pytest.mark.parametrize("path", RULE_FIXTURES, ids=lambda p: p.stem)
def test_rule_fixture(path):
    """Only the fixture's rule runs; its findings are exactly the ``expect-*`` comments."""
    rule = path.stem.split("_")[0]
    text, kwargs, expected = read_fixture(path)
    report = verify(text, select={rule}, **kwargs)
    got = {(f.line, f.severity, f.rule) for f in report.findings}
    assert got == expected, report.render()
    for f in report.errors:
        assert f.notes, f"every error carries a witness note: {f}"


@pytest.mark.parametrize("name, arch", [("hopper_style.ptx", "sm_90a"),
                                        ("blackwell_style.ptx", "sm_100a")])
def test_syntax_coverage_fixtures_have_no_v0_findings(name, arch):
    """These two v0 fixtures exercise the front end (they are not ptxas-checked kernels: v1 flags
    real synchronization bugs in them, see the next test); the v0 families stay clean."""
    report = verify((FIXTURES / name).read_text(), arch=arch, filename=name, threads=128,
                    select={"P", "G", "E", "D"})
    assert report.findings == [], report.render()


def test_v1_flags_the_bugs_of_the_syntax_fixture():
    """blackwell_style.ptx issues its MMA from a whole warp, reads lane quarter 0 from every
    warp and builds sm_100 descriptors without the fixed 0b001 bits: v1 reports exactly that."""
    report = verify((FIXTURES / "blackwell_style.ptx").read_text(), arch="sm_100a",
                    filename="blackwell_style.ptx", threads=128)
    assert {f.rule for f in report.errors} == {"TM1", "TM5", "TC1", "TL2"}


HANDWRITTEN = sorted((FIXTURES / "handwritten").glob("*.ptx"))


@pytest.mark.parametrize("path", HANDWRITTEN, ids=lambda p: p.stem)
def test_handwritten_kernels_are_clean(path):
    """The ptxas-checked hand-written kernels (the mutation bases) have no finding at all,
    except MB8's note on a tensor bulk copy (its byte count lives in the tensormap box)."""
    text = path.read_text()
    arch = next(ln.split()[1] for ln in text.splitlines() if ln.startswith(".target"))
    report = verify(text, arch=arch, filename=path.name)
    rest = [f for f in report.findings if not (f.rule == "MB8" and f.severity == "note"
                                               and "tensor copy" in f.message)]
    assert rest == [], report.render()


def test_every_fixture_family_is_a_registered_rule():
    for p in RULE_FIXTURES:
        assert p.stem.split("_")[0] in RULES


# ------------------------------------------------------------------------- E1/E2 with an ABI

PTX = """.version 8.4
.target sm_90a
.address_size 64
.visible .entry k(
\t.param .u64 .ptr .global .align 1 k_param_0,
\t.param .align 64 .b8 k_param_1[128],
\t.param .u32 k_param_2
)
.reqntid 128
{
\tret;
}
"""

ABI = KernelABI(entry="k", threads=128, arch="sm_90a", params=(
    ABIParam(name="k_param_0", ptx_type="u64", size=8, align=1, is_pointer=True, source="pointer"),
    ABIParam(name="k_param_1", ptx_type="b8", size=128, align=64, source="tensordesc"),
    ABIParam(name="k_param_2", ptx_type="u32", size=4, source="scalar"),
))


def findings(text, **kw):
    return verify(text, arch="sm_90a", abi=ABI, filename="k.ptx", **kw).findings


def test_abi_clean():
    assert findings(PTX) == []


def test_b64_and_u64_are_interchangeable_but_sizes_are_not():
    assert findings(PTX.replace(".param .u64 .ptr .global .align 1 k_param_0",
                                ".param .b64 k_param_0")) == []
    (f,) = findings(PTX.replace(".param .u32 k_param_2", ".param .u64 k_param_2"))
    assert (f.rule, f.line) == ("E2", 7)
    assert "parameter 2 of entry 'k'" in f.message and "'.param .u32 k_param_2'" in f.message
    assert f.fix == ".param .u32 k_param_2"


def test_array_ness_and_alignment():
    (f,) = findings(PTX.replace(".param .align 64 .b8 k_param_1[128]",
                                ".param .align 32 .b8 k_param_1[128]"))
    assert f.rule == "E2" and any("alignment is 32" in n.message for n in f.notes)
    fs = findings(PTX.replace(".param .align 64 .b8 k_param_1[128]",
                              ".param .align 64 .b64 k_param_1[16]"))
    assert fs == []  # 128 bytes, array, aligned: the same ABI slot
    (f,) = findings(PTX.replace(".param .u32 k_param_2", ".param .b8 k_param_2[4]"))
    assert any("array" in n.message for n in f.notes)


def test_param_count():
    fs = findings(PTX.replace(",\n\t.param .u32 k_param_2", ""))
    assert [(f.rule, f.line) for f in fs] == [("E2", 4)]
    assert "has 2 parameters, expected 3" in fs[0].message
    assert "missing parameter 2" in fs[0].notes[0].message


def test_renamed_entry():
    (f,) = findings(PTX.replace("entry k(", "entry k2("))
    assert (f.rule, f.line, f.fix) == ("E1", 4, "k")


def test_threads_argument_overrides_abi():
    assert [f.rule for f in findings(PTX, threads=256)] == ["E3"]


# ------------------------------------------------------------------------- G rules on arch

def test_requested_arch_must_match_exactly():
    (f,) = verify(PTX, arch="sm_100a").findings
    assert f.rule == "G4" and "'sm_90a'" in f.message and f.fix == ".target sm_100a"


def test_note_severity_does_not_fail():
    text = (FIXTURES / "G" / "G1_undecided.ptx").read_text()
    report = verify(text, arch="sm_100a", select={"G1"})
    assert [f.severity for f in report.findings] == ["note"] and report.ok


# ------------------------------------------------------------------------- select, registry

def test_select_by_family_and_unknown_ids():
    bad = PTX.replace(".target sm_90a", ".target sm_80").replace("entry k(", "entry k2(")
    rules = {f.rule for f in verify(bad, arch="sm_90a", abi=ABI, select={"E"}).findings}
    assert rules == {"E1"}
    with pytest.raises(VerifierUsageError):
        verify(PTX, arch="sm_90a", select={"Z9"})
    with pytest.raises(VerifierUsageError):
        verify(PTX, arch="sm90")


def test_syntax_error_is_a_p1_finding_even_when_not_selected():
    report = verify(PTX.replace("\tret;", "\tret"), arch="sm_90a", select={"D1"},
                    filename="k.ptx")
    (f,) = report.findings
    assert (f.rule, f.severity, f.line, f.col) == ("P1", "error", 12, 1)
    assert not report.ok


def test_registry_ids_families_and_docs():
    assert {"P1", "G1", "G2", "G3", "G4", "E1", "E2", "E3", "D1", "D2", "D3", "TA4", "TL4",
            "TM5", "TC1", "TF5", "MB5", "AP1", "W3", "CA2", "B2"} <= set(RULES)
    for rid, r in RULES.items():
        assert r.id == rid and r.family in FAMILIES and rid.startswith(r.family)
        doc = rule_doc(rid)
        for section in ("What it checks:", "Why it is bad:", "Example:", "Use instead:",
                        "ptxas:", "References:"):
            assert section in doc, (rid, section)
        assert not r.summary.endswith(".")


def test_messages_follow_clang_style():
    from mutant_corpus import MUTANTS, run
    reports = []
    for p in RULE_FIXTURES:
        text, kwargs, _ = read_fixture(p)
        reports.append(verify(text, **kwargs))
    reports += [run(m)[0] for m in MUTANTS]
    for report in reports:
        for f in report.findings:
            assert f.message[0].islower() or f.message[0] == "'", f.message
            assert not f.message.endswith("."), f.message
            assert not re.search(r'"', f.message), f.message


# ------------------------------------------------------------------------- report

def test_render_full_concise_and_json():
    text = PTX.replace(".param .u32 k_param_2", ".param .u64 k_param_2")
    report = verify(text, arch="sm_90a", abi=ABI, filename="k.ptx")
    full = report.render()
    lines = full.splitlines()
    assert lines[0].startswith("k.ptx:7:14: error[E2]: parameter 2 of entry 'k'")
    assert lines[1] == "    7 |     .param .u64 k_param_2"
    assert lines[2] == "      |                 ^"
    assert "= fix: .param .u32 k_param_2" in full and full.endswith("1 error generated.\n")
    assert report.render("concise") == lines[0] + "\n"
    d = json.loads(json.dumps(report.to_dict()))
    assert d["ok"] is False and d["counts"]["error"] == 1
    assert d["findings"][0]["rule"] == "E2" and d["findings"][0]["line"] == 7
    with pytest.raises(ValueError):
        report.render("sarif")


def test_public_names_match_all():
    public = {n for n in dir(verifier) if not n.startswith("_")}
    modules = {"ptx", "errors", "findings", "registry", "report", "context", "rules", "analysis",
               "tables"}
    assert set(verifier.__all__) == public - modules
