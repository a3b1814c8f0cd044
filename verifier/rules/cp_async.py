"""CA: Ampere-style ``cp.async`` rules. CA5 (write-after-read on a stage, cp.async results
feeding async-proxy readers) is covered by W5/TM8/AP1 for the proxy part; its WAR part
(registered as CA5) lives in :mod:`verifier.rules.hazards`. Sources: PTX ISA 9.1 §9.7.9.25.3 and
``docs/ptx_rules.md`` §5.
"""

from __future__ import annotations

from verifier.analysis import Property
from verifier.analysis.values import defs_uses
from verifier.context import Context
from verifier.findings import Finding, Note
from verifier.rules._flow import each_function, event_findings, is_cta_barrier, is_smem_read

__all__ = [
    "cp_async_same_dst",
    "cp_async_size_invalid",
    "cp_async_unpublished",
    "cp_async_wait_before_commit",
]


def _cp(ins) -> bool:
    p = ins.parts
    return p[0] == "cp" and len(p) > 2 and p[1] == "async" and p[2] in ("ca", "cg")


def _cp_any(ins) -> bool:
    p = ins.parts
    return p[0] == "cp" and len(p) > 2 and p[1] == "async" and p[2] in (
        "ca", "cg", "commit_group", "wait_group", "wait_all")


def cp_async_size_invalid(ctx: Context) -> list[Finding]:
    """``cp.async`` copy size not 4, 8 or 16 (16 for ``.cg``) (CA1).

    What it checks:
        The cp-size operand (third) is 4, 8 or 16 bytes; with ``.cg`` only 16.

    Why it is bad:
        Not assemblable.

    Example:
        ``cp.async.cg.shared.global [%r1], [%rd1], 8;``

    Use instead:
        ``cp.async.ca.shared.global [%r1], [%rd1], 8;`` or size 16 with ``.cg``.

    ptxas:
        ERR.

    References:
        PTX ISA 9.1 §9.7.9.25.3.1; docs/ptx_rules.md CA1.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, _cp):
        for i, ins in enumerate(fa.cfg.instrs):
            if not _cp(ins) or len(ins.operands) < 3:
                continue
            c = fa.values.const(ins.operands[2], i)
            if c is None:
                continue
            allowed = {16} if ins.parts[2] == "cg" else {4, 8, 16}
            if c not in allowed:
                out.append(ctx.finding("CA1", ins.operands[2].line, ins.operands[2].col,
                                       f"'cp.async.{ins.parts[2]}' copy size {c} is not one of "
                                       f"{sorted(allowed)}"))
    return out


class CpAsync(Property):
    """Fact: (uncommitted cp.async issued, landed data not yet published by a barrier,
    destinations of the current group, destinations of cp.async not followed by any
    ``cp.async.wait_group``/``wait_all`` yet)."""

    RULES = ("CA2", "CA3", "CA4")

    def initial(self):
        return (False, False, frozenset(), frozenset())

    def relevant(self, ins):
        return _cp_any(ins) or is_cta_barrier(ins) or is_smem_read(ins)

    def relevant_index(self, i):
        return self.relevant(self.cfg.instrs[i]) or bool(self._redefs(i))

    def _redefs(self, i) -> frozenset:
        """Register keys of cp.async destination bases that instruction ``i`` (re)defines.

        A destination known only as "register + offset" names a new address once its register
        is written again (the next trip of a loop computing ``dst = base + f(i)``): keys of that
        register are dropped there, so two trips are not taken for the same destination."""
        bases = self.__dict__.get("_bases")
        if bases is None:
            bases = set()
            for k, ins in enumerate(self.cfg.instrs):
                if _cp(ins) and ins.operands and ins.operands[0].kind == "address":
                    b = ins.operands[0].base
                    if b is not None and b.name:
                        bases.add(self.cfg.reg_key(b.name, k))
            self._bases = bases
        if not bases:
            return frozenset()
        ins = self.cfg.instrs[i]
        if _cp_any(ins):
            return frozenset()
        defs, _ = defs_uses(ins)
        return frozenset(k for k in (self.cfg.reg_key(r.name, i) for d in defs
                                     for r in d.registers()) if k in bases)

    def _key(self, d, i):
        if d is None or d.kind != "address":
            return None
        v = self.values.op_val(d, i)
        if v is not None:
            return v
        if d.base is None or not d.base.name:
            return (None, d.value)
        return ("reg", self.cfg.reg_key(d.base.name, i), d.value)

    def transfer(self, i, ins, fact, report):
        unc, landed, dsts, unwaited = fact
        red = self._redefs(i)
        if red:
            def live(k):
                return not (isinstance(k, tuple) and len(k) == 3 and k[0] == "reg" and k[1] in red)
            dsts = frozenset(k for k in dsts if live(k))
            unwaited = frozenset(k for k in unwaited if live(k))
            fact = (unc, landed, dsts, unwaited)
            if not (_cp_any(ins) or is_cta_barrier(ins) or is_smem_read(ins)):
                return fact
        p = ins.parts
        if _cp(ins):
            key = self._key(ins.operands[0] if ins.operands else None, i)
            if key is not None and key in dsts:
                report("CA4", "two 'cp.async' in one group write the same destination; their "
                              "order is undefined")
            if key is not None and len(unwaited) < 64:
                unwaited = unwaited | {key}
            return (True, landed, (dsts | {key}) if key is not None and len(dsts) < 64 else dsts,
                    unwaited)
        if p[0] == "cp" and p[2] == "commit_group":
            return (False, landed, frozenset(), unwaited)
        if p[0] == "cp" and p[2] in ("wait_group", "wait_all"):
            if unc and p[2] == "wait_group":
                report("CA2", "'cp.async.wait_group' does not cover 'cp.async' issued after the "
                              "last 'cp.async.commit_group'")
            return (unc and p[2] == "wait_group", True,
                    dsts if p[2] == "wait_group" else frozenset(), frozenset())
        if is_cta_barrier(ins):
            return (unc, False, dsts, unwaited)
        if unwaited:
            src = [o for o in ins.operands if o.kind == "address"]
            key = self._key(src[0], i) if src else None
            if key is not None and key in unwaited:
                report("CA3", f"'{ins.opcode}' reads the destination of a 'cp.async' with no "
                              "'cp.async.wait_group'/'wait_all' on the path (a barrier does not "
                              "wait for the copy)")
        if landed:
            report("CA3", f"'{ins.opcode}' reads shared memory filled by other threads' "
                          "'cp.async' without a barrier after their wait")
        return fact

    def describe(self, i, ins, old, new):
        return None if old == new else ins.opcode


def cp_async_wait_before_commit(ctx: Context) -> list[Finding]:
    """``cp.async.wait_group`` with uncommitted ``cp.async`` (CA2).

    What it checks:
        Every ``cp.async`` is committed (``cp.async.commit_group``) before the next
        ``cp.async.wait_group``.

    Why it is bad:
        The wait covers nothing (csarofeen/pytorch#2457): the data is read before it lands.

    Example:
        ``cp.async.ca.shared.global [%r1], [%rd1], 16; cp.async.wait_group 0;``

    Use instead:
        ``cp.async...; cp.async.commit_group; cp.async.wait_group 0;``

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.9.25.3.2-3; docs/ptx_rules.md CA2.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, _cp):
        out += event_findings(ctx, fi, fa, CpAsync, "CA2",
                              "insert 'cp.async.commit_group;' before the wait")
    return out


def cp_async_unpublished(ctx: Context) -> list[Finding]:
    """Shared memory read after ``cp.async`` wait without a CTA barrier (CA3).

    What it checks:
        After ``cp.async.wait_group``/``wait_all``, a CTA barrier precedes any ``ld.shared`` /
        ``ldmatrix`` on every path; and a read of a ``cp.async`` destination (same address
        expression) has a ``wait_group``/``wait_all`` between the copy and the read on every path
        (``bar.sync`` does not wait for the copies: NVIDIA/Fuser#3428).

    Why it is bad:
        The wait only makes a thread's own copies visible to itself; other threads read stale
        shared memory.

    Example:
        ``cp.async.wait_group 0; ldmatrix.sync.aligned.m8n8.x4.shared.b16 {...}, [%r1];``

    Use instead:
        ``cp.async.wait_group 0; bar.sync 0; ldmatrix...``

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.9.25.3.3; docs/ptx_rules.md CA3.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, _cp):
        out += event_findings(ctx, fi, fa, CpAsync, "CA3",
                              "insert 'bar.sync 0;' after the wait")
    return out


def cp_async_same_dst(ctx: Context) -> list[Finding]:
    """Two ``cp.async`` of one group write the same destination (CA4).

    What it checks:
        Within one commit group, destination addresses (resolved, or the same register and
        offset) are distinct.

    Why it is bad:
        There is no ordering among the copies of a group: undefined behaviour.

    Example:
        the same ``cp.async.cg.shared.global [%r1], [%rd1], 16;`` twice before a commit.

    Use instead:
        one copy per destination per group.

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.9.25.3.2; docs/ptx_rules.md CA4.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, _cp):
        out += event_findings(ctx, fi, fa, CpAsync, "CA4")
    return out


_ = Note
