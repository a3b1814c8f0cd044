"""G: target / version gating (PTX ISA 9.1 "Target ISA notes"; docs/ptx_rules.md §0)."""

from __future__ import annotations

from verifier.context import Context
from verifier.findings import Finding, Note

__all__ = ["TCGEN05_TARGETS", "target_mismatch", "tcgen05_needs_sm100a", "wgmma_needs_sm90a"]

#: Targets on which tcgen05.* assembles (arch-specific ``a`` and family ``f`` variants).
TCGEN05_TARGETS = frozenset({"sm_100a", "sm_101a", "sm_103a", "sm_110a",
                             "sm_100f", "sm_101f", "sm_103f", "sm_110f"})


def _target_note(ctx: Context) -> list[Note]:
    d = ctx.module.directive("target")
    if d is None:
        return []
    return [Note(message=f"target declared here as '{', '.join(d.args)}'", line=d.line,
                 col=d.col)]


def target_mismatch(ctx: Context) -> list[Finding]:
    """Missing or wrong ``.target`` (G4).

    What it checks:
        The module has a ``.target`` directive and its first entry (the architecture) equals the
        requested one exactly. ``sm_90`` is not ``sm_90a``: the ``a`` suffix enables the
        architecture-specific instructions (wgmma, setmaxnreg, tcgen05 on ``sm_100a``).

    Why it is bad:
        PTX for another architecture is JIT-compiled or rejected at load time, and arch-specific
        instructions fail to assemble; the candidate would not be the kernel that is measured.

    Example:
        ``.target sm_90`` when the request is ``sm_90a``.

    Use instead:
        ``.target sm_90a``

    ptxas:
        ERR when an instruction needs a newer target; otherwise accepted for whatever target is
        named (the mismatch with the request is invisible to ptxas).

    References:
        PTX ISA 9.1 §11.3.2 (``.target``); docs/ptx_rules.md §0.
    """
    mod = ctx.module
    if not mod.targets:
        v = mod.directive("version")
        line, col = (v.line, v.col) if v else (1, 1)
        return [ctx.finding("G4", line, col, "missing '.target' directive",
                            notes=[Note(message=f"the requested architecture is '{ctx.arch}'")],
                            fix=f".target {ctx.arch}")]
    if mod.arch != ctx.arch:
        d = mod.directive("target")
        assert d is not None
        notes = [Note(message=f"the requested architecture is '{ctx.arch}'")]
        if mod.arch + "a" == ctx.arch or mod.arch.rstrip("af") == ctx.arch.rstrip("af"):
            notes.append(Note(message=f"'{mod.arch}' and '{ctx.arch}' are different targets; "
                                      "the 'a'/'f' suffix selects architecture-specific features"))
        rest = [t for t in mod.targets[1:]]
        fix = ".target " + ", ".join([ctx.arch] + rest)
        return [ctx.finding("G4", d.line, d.col,
                            f"target '{mod.arch}' does not match the requested architecture "
                            f"'{ctx.arch}'", notes=notes, fix=fix)]
    return []


def _gated(ctx: Context, rule: str, family: str, allowed: frozenset[str], need: str) -> list[Finding]:
    uses = [ins for fi in ctx.functions for ins, _ in fi.instructions if ins.parts[0] == family]
    if not uses:
        return []
    first = uses[0]
    arch = ctx.module.arch
    if arch is None:
        return [ctx.finding(rule, first.line, first.col,
                            f"cannot check that '{family}' instructions are supported: the module "
                            "has no '.target' directive", severity="note")]
    if arch in allowed:
        return []
    notes = _target_note(ctx)
    if len(uses) > 1:
        notes.append(Note(message=f"{len(uses) - 1} more '{family}' instructions in the module"))
    return [ctx.finding(rule, first.line, first.col,
                        f"'{first.opcode}' requires {need}, but the target is '{arch}'",
                        notes=notes)]


def wgmma_needs_sm90a(ctx: Context) -> list[Finding]:
    """``wgmma.*`` without ``.target sm_90a`` (G2).

    What it checks:
        Every ``wgmma.*`` instruction (``fence``, ``mma_async``, ``commit_group``, ``wait_group``)
        appears in a module whose ``.target`` is ``sm_90a``.

    Why it is bad:
        wgmma exists only on the architecture-specific Hopper target; the module does not assemble.

    Example:
        ``.target sm_90`` with ``wgmma.fence.sync.aligned;``

    Use instead:
        ``.target sm_90a``

    ptxas:
        ERR.

    References:
        PTX ISA 9.1 §9.7.15 (wgmma), target ISA notes; docs/ptx_rules.md §0 (G2).
    """
    return _gated(ctx, "G2", "wgmma", frozenset({"sm_90a"}), "'.target sm_90a'")


def tcgen05_needs_sm100a(ctx: Context) -> list[Finding]:
    """``tcgen05.*`` without a Blackwell ``a``/``f`` target (G1).

    What it checks:
        Every ``tcgen05.*`` instruction appears in a module whose ``.target`` is ``sm_100a``,
        ``sm_101a`` (= ``sm_110a``), ``sm_103a`` or a family target ``sm_100f``/``sm_101f``/
        ``sm_103f``/``sm_110f``.

    Why it is bad:
        The 5th-generation tensor core instructions do not exist elsewhere; the module does not
        assemble.

    Example:
        ``.target sm_90a`` with ``tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r1], 128;``

    Use instead:
        ``.target sm_100a``

    ptxas:
        ERR.

    References:
        PTX ISA 9.1 §9.7.16 (tcgen05), target ISA notes; docs/ptx_rules.md §0 (G1).
    """
    return _gated(ctx, "G1", "tcgen05", TCGEN05_TARGETS,
                  "'.target sm_100a', 'sm_101a', 'sm_103a' or a family target")
