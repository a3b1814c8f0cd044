"""The mutation corpus (``mutant_corpus.py``): every seeded bug is reported with its intended rule
id, every registered rule id has a mutant, the bases are clean and assemble with ptxas, and at
least ten real bugs of ``docs/ptx_rules.md`` §7 are reproduced. ``bench/mutant_table.py`` prints
the same corpus as a table."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from mutant_corpus import FIXTURES, MUTANTS, base_text, caught, run

from verifier import parse_ptx
from verifier.analysis import Property
from verifier.registry import RULES


def _flow_rules() -> set[str]:
    import verifier.rules as pkg  # noqa: F401 - the rule modules register their properties
    out: set[str] = set()
    stack = list(Property.__subclasses__())
    while stack:
        c = stack.pop()
        out |= set(getattr(c, "RULES", ()))
        stack.extend(c.__subclasses__())
    return out


FLOW_RULES = _flow_rules()


@pytest.mark.parametrize("m", MUTANTS, ids=lambda m: m.name)
def test_mutant_is_caught_with_the_intended_rule(m):
    report, base_report = run(m)
    assert not [f for f in base_report.findings if f.rule == m.rule
                and f.severity != "note"], base_report.render()
    assert caught(m, report), f"{m.name}: {m.what}\n" + report.render()
    hit = [f for f in report.findings if f.rule == m.rule and f.severity != "note"]
    if hit[0].severity == "error":
        assert not report.ok
    for f in hit:
        assert f.notes or m.rule == "P1", f"every finding of a seeded bug explains itself: {f}"
    # these rules also have non-flow checks (no witness path)
    if m.rule in FLOW_RULES and m.rule not in ("B7", "TM6", "MB5", "MB8"):
        assert any(n.message.startswith("witness path") for f in hit for n in f.notes), hit


def test_every_registered_rule_has_a_mutant():
    covered = {m.rule for m in MUTANTS}
    checks = {r for r, info in RULES.items() if info.status != "semantics"}
    assert checks <= covered, sorted(checks - covered)


def test_semantics_rows_have_no_mutant_and_report_nothing():
    """TC3 / TF1 / TF4 / B6 are guarantees the analyses model: no seeded defect, no finding
    ever."""
    sem = {r for r, info in RULES.items() if info.status == "semantics"}
    assert sem == {"TC3", "TF1", "TF4", "B6"}
    assert not sem & {m.rule for m in MUTANTS}
    for m in MUTANTS[:20]:
        report, _ = run(m)
        assert not [f for f in report.findings if f.rule in sem]
    for r in sem:
        doc = RULES[r].doc
        assert "Guarantee modeled by the analysis" in doc
        assert "rely on" in doc or "enforce" in doc


def test_at_least_ten_real_bugs_are_reproduced():
    bugs = {m.bug for m in MUTANTS if m.bug}
    assert len(bugs) >= 10, bugs


def test_flow_rule_errors_carry_a_witness_path():
    m = next(m for m in MUTANTS if m.rule == "TA4" and "deleted" in m.what)
    report, _ = run(m)
    (f,) = [f for f in report.findings if f.rule == "TA4"]
    path = [n.message for n in f.notes if n.message.startswith("witness path")]
    alloc = [n for n in f.notes if "columns allocated here" in n.message]
    assert path and alloc and alloc[0].line < f.line
    assert f.message == "tensor memory is not freed on this exit path (128 columns still allocated)"


BASES = sorted({m.base for m in MUTANTS if m.base.startswith("handwritten/")})


def _ptxas() -> str | None:
    """Triton's bundled ptxas when Triton is installed, else ``ptxas`` on PATH (or None)."""
    try:
        from harness._triton_compat import toolchain
    except ImportError:
        return shutil.which("ptxas")
    p = toolchain("sm_100a").ptxas_path
    return str(p) if p and Path(p).exists() else shutil.which("ptxas")


@pytest.mark.parametrize("base", BASES)
def test_handwritten_bases_assemble(base, tmp_path):
    ptxas = _ptxas()
    if ptxas is None:
        pytest.skip("no ptxas (Triton's bundled one or on PATH)")
    text = (FIXTURES / base).read_text()
    arch = parse_ptx(text).arch
    src = tmp_path / "k.ptx"
    src.write_text(text)
    r = subprocess.run([ptxas, f"-arch={arch}", str(src), "-o", str(tmp_path / "k.cubin")],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr


def test_corpus_edits_apply_to_the_current_bases():
    for m in MUTANTS:
        assert m.apply(base_text(m)) != base_text(m) or m.arch or m.threads, m.name
