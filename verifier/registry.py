"""The one place that assigns rule ids.

``RULES`` maps an id to a :class:`RuleInfo` (family, default severity, status, one-line summary, the
rule function whose docstring is the rule's documentation). Ids are never reused; a renamed id keeps
an entry in ``REDIRECTS``. New rules start in ``preview``. Status ``semantics`` marks a
guarantee row of ``docs/ptx_rules.md`` (TC3, TF1, B6): semantics the analyses model, not a defect;
its check reports nothing and its documentation names the rules that enforce the consequences. Families are selectable groups
(``select={"E"}`` runs E1-E3), like Clang's warning groups.

Source of the rules: PTX ISA 9.1 (sections cited in each rule's docstring) and
``docs/ptx_rules.md``.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from verifier.context import Context
from verifier.errors import VerifierUsageError
from verifier.findings import Finding, Severity
from verifier.rules import async_proxy as ap
from verifier.rules import barriers as br
from verifier.rules import cp_async as ca
from verifier.rules import hazards as hz
from verifier.rules import mbarrier as mb
from verifier.rules import races as rc
from verifier.rules import tcgen05 as tc
from verifier.rules import wgmma as wg
from verifier.rules.decls import duplicate_definition, undeclared_name, undefined_target
from verifier.rules.entry import entry_missing, entry_params_mismatch, launch_threads_mismatch
from verifier.rules.module_state import module_global_write
from verifier.rules.syntax import syntax_error
from verifier.rules.target import target_mismatch, tcgen05_needs_sm100a, wgmma_needs_sm90a

__all__ = [
    "FAMILIES",
    "REDIRECTS",
    "RULES",
    "RuleInfo",
    "Status",
    "get_rule",
    "rule_doc",
    "select_rules",
]

Status = Literal["preview", "stable", "deprecated", "removed", "semantics"]
RuleFn = Callable[[Context], list[Finding]]


@dataclass(frozen=True)
class RuleInfo:
    """One registered rule.

    Attributes:
        id: the rule id (``E2``); its leading letters are the family.
        name: the defect, CamelCase (``EntryParamsMismatch``).
        family: the family letter(s) (``E``).
        severity: default severity of its findings.
        status: ``preview``, ``stable``, ``deprecated`` or ``removed``.
        summary: one line.
        check: the pure rule function ``(ctx) -> list[Finding]``.
    """

    id: str
    name: str
    family: str
    severity: Severity
    status: Status
    summary: str
    check: RuleFn

    @property
    def doc(self) -> str:
        """The rule function's docstring (What it checks / Why it is bad / ... / References)."""
        return inspect.cleandoc(self.check.__doc__ or "")


#: Family letter -> description.
FAMILIES: dict[str, str] = {
    "P": "parsing",
    "G": "target and version gating",
    "E": "entry and launch ABI",
    "D": "declarations and names",
    "TA": "tcgen05 TMEM allocation lifecycle",
    "TL": "tcgen05.ld / st / wait",
    "TM": "tcgen05.mma / cp / shift and their descriptors",
    "TC": "tcgen05.commit",
    "TF": "tcgen05 ordering and fences",
    "MB": "mbarrier",
    "AP": "async proxy, bulk copies (TMA)",
    "W": "wgmma",
    "CA": "cp.async",
    "B": "bar / barrier / cluster barrier / elect.sync / setmaxnreg",
    "MS": "module-scope state",
}


def _r(id: str, name: str, severity: Severity, summary: str, check: RuleFn,
       status: Status = "preview") -> tuple[str, RuleInfo]:
    family = re.match(r"[A-Z]+", id).group(0)  # type: ignore[union-attr]
    return id, RuleInfo(id, name, family, severity, status, summary, check)


RULES: dict[str, RuleInfo] = dict([
    _r("P1", "SyntaxError", "error", "the PTX does not parse", syntax_error),
    _r("G1", "Tcgen05NeedsSm100a", "error",
       "tcgen05.* used but the target is not sm_100a/sm_101a/sm_103a (or a family target)",
       tcgen05_needs_sm100a),
    _r("G2", "WgmmaNeedsSm90a", "error", "wgmma.* used but the target is not sm_90a",
       wgmma_needs_sm90a),
    _r("G4", "TargetMismatch", "error",
       "'.target' missing or its architecture differs from the requested one", target_mismatch),
    _r("E1", "EntryMissing", "error",
       "the ABI's entry is missing, or the module does not define exactly one '.entry'",
       entry_missing),
    _r("E2", "EntryParamsMismatch", "error",
       "entry parameters differ from the ABI (count, size, array-ness, alignment)",
       entry_params_mismatch),
    _r("E3", "LaunchThreadsMismatch", "error",
       "'.reqntid'/'.maxntid' inconsistent with the launch's threads per CTA",
       launch_threads_mismatch),
    _r("D1", "UndeclaredName", "error", "use of an undeclared register or identifier",
       undeclared_name),
    _r("D2", "UndefinedTarget", "error", "branch or call target label/function not defined",
       undefined_target),
    _r("D3", "DuplicateDefinition", "error",
       "label, register, variable, parameter or function defined twice in one scope",
       duplicate_definition),
    _r("G3", "MulticastNeedsArchTarget", "warning",
       "'.multicast::cluster' bulk copy on a target without the 'a'/'f' suffix",
       br.multicast_needs_arch_target),
    # ---- TA: TMEM allocation
    _r("TA1", "TmemNcolsInvalid", "error", "alloc/dealloc nCols not a power of two in [32, 512]",
       tc.tmem_ncols_invalid),
    _r("TA2", "TmemAllocNotOneWarp", "error",
       "alloc/dealloc/relinquish not executed by exactly one converged warp",
       tc.tmem_alloc_not_one_warp),
    _r("TA3", "TmemAddrUnpublished", "error",
       "TMEM address read from shared memory without a barrier after the alloc",
       tc.tmem_addr_unpublished),
    _r("TA4", "TmemLeakOnExit", "error", "TMEM not freed on some path to an exit",
       tc.tmem_leak_on_exit),
    _r("TA5", "TmemDeallocMismatch", "error",
       "dealloc without a matching allocation (double free, nCols or address mismatch)",
       tc.tmem_dealloc_mismatch),
    _r("TA6", "TmemAllocAfterRelinquish", "error", "alloc after relinquish_alloc_permit",
       tc.tmem_alloc_after_relinquish),
    _r("TA7", "TmemNcolsIncrease", "error", "column count increases between allocations",
       tc.tmem_ncols_increase),
    _r("TA8", "TmemMixedCtaGroup", "error", "different .cta_group values in one kernel",
       tc.tmem_mixed_cta_group),
    _r("TA9", "TmemPairAllocWithoutClusterSync", "error",
       "cta_group::2 alloc without a prior cluster barrier", tc.tmem_pair_alloc_without_cluster_sync),
    _r("TA10", "TmemDeallocUnordered", "error",
       "dealloc not ordered after the TMEM accesses by a barrier", tc.tmem_dealloc_unordered),
    _r("TA11", "TmemNoRelinquish", "warning", "allocation permit never relinquished",
       tc.tmem_no_relinquish),
    # ---- TL: tcgen05.ld/st/wait
    _r("TL1", "TmemAccessDivergent", "error", "tcgen05.ld/st/wait in lane-divergent code",
       tc.tmem_access_divergent),
    _r("TL2", "TmemLaneQuarter", "error", "tcgen05.ld/st outside the warp's TMEM lane quarter",
       tc.tmem_lane_quarter),
    _r("TL3", "TmemVectorLength", "error", "tcgen05.ld/st vector length != shape x num",
       tc.tmem_vector_length),
    _r("TL4", "TmemLdWithoutWait", "error", "missing tcgen05.wait::ld after tcgen05.ld",
       tc.tmem_ld_without_wait),
    _r("TL5", "TmemStWithoutWait", "error", "missing tcgen05.wait::st after tcgen05.st",
       tc.tmem_st_without_wait),
    _r("TL6", "TmemWaitOtherThreads", "error",
       "tcgen05.wait::ld/st run by fewer threads than the ld/st it should cover",
       hz.tmem_wait_other_threads),
    # ---- TM: mma/cp/shift
    _r("TM1", "MmaIssuedByWarp", "error", "tcgen05.mma/cp/shift issued by every lane",
       tc.mma_issued_by_warp),
    _r("TM2", "PairPeerNotRunning", "error",
       "cta_group::2 mma/cp/shift/commit while the peer CTA may not be running",
       hz.pair_op_peer_running),
    _r("TM3", "MmaShapeInvalid", "error", "tcgen05.mma M/N illegal for kind and cta_group",
       tc.mma_shape_invalid),
    _r("TM4", "MmaIdescInvalid", "error", "invalid field in a constant instruction descriptor",
       tc.mma_idesc_invalid),
    _r("TM5", "MmaSdescInvalid", "error", "invalid constant field in an sm_100 smem descriptor",
       tc.mma_sdesc_invalid),
    _r("TM6", "TmemOutOfBounds", "error", "TMEM access outside the allocated columns",
       tc.tmem_out_of_bounds),
    _r("TM7", "TcOperandRules", "error", "tcgen05.shift lane alignment / tcgen05.cp warpx",
       tc.tc_operand_rules),
    _r("TM8", "TcSmemUnfenced", "error",
       "tcgen05.mma/cp reads generic-proxy smem writes without fence.proxy.async",
       ap.tc_smem_unfenced),
    # ---- TC: commit
    _r("TC1", "CommitNotIssuer", "error", "tcgen05.commit not issued by the MMA thread",
       tc.commit_not_issuer),
    _r("TC2", "CommitMissing", "error", "MMA kernel waits on an mbarrier nothing arrives on",
       tc.commit_missing),
    _r("TC3", "CommitIsFence", "note",
       "guarantee: tcgen05.commit acts as fence::before_thread_sync for its ops",
       hz.commit_is_fence_semantics, status="semantics"),
    _r("TC4", "CommitMulticastInvalid", "error",
       "multicast commit: mask not a .b16 register, mbar not shared::cluster, or init not "
       "cluster-synced", hz.commit_multicast_invalid),
    _r("TF1", "TcPipelinedPairs", "note",
       "guarantee: pipelined tcgen05 pairs of one thread execute in issue order",
       hz.pipelined_pairs_semantics, status="semantics"),
    # ---- TF: ordering
    _r("TF2", "TmemMmaReadRace", "error",
       "TMEM touched while an issued MMA is not known complete", tc.tmem_mma_read_race),
    _r("TF3", "TcFenceBeforeSignal", "warning",
       "TMEM results signalled without tcgen05.fence::before_thread_sync",
       tc.tc_fence_before_signal),
    _r("TF4", "TcAllocPublication", "note",
       "guarantee: the TMEM address tcgen05.alloc writes is published by a CTA barrier like a "
       "shared store (alloc is synchronous, PTX ISA 9.1 §9.7.16.6.1)",
       tc.tc_alloc_fence_sandwich, status="semantics"),
    _r("TF5", "TcWaitWithoutFenceAfter", "warning",
       "tcgen05 op after an mbarrier wait without fence::after_thread_sync (error if relaxed)",
       tc.tc_wait_without_fence_after),
    # ---- MB: mbarrier
    _r("MB1", "MbarObjectInvalid", "error", "mbarrier misaligned or in the wrong state space",
       mb.mbar_object_invalid),
    _r("MB2", "MbarCountOutOfRange", "error", "init count or tx-count out of range",
       mb.mbar_count_out_of_range),
    _r("MB3", "MbarLifecycle", "error",
       "mbarrier used before init / after inval, double init, inval while in use",
       mb.mbar_lifecycle),
    _r("MB4", "MbarInitNotVisible", "error", "mbarrier used before its init is visible",
       mb.mbar_init_not_visible),
    _r("MB5", "MbarParity", "error", "mbarrier wait with the wrong phase parity", mb.mbar_parity),
    _r("MB6", "MbarPhaseRunAhead", "error",
       "a thread arrives twice on one mbarrier without waiting in between",
       hz.mbar_phase_run_ahead),
    _r("MB7", "MbarArrivalCount", "error", "arrivals per phase differ from the init count",
       mb.mbar_arrival_count),
    _r("MB8", "MbarTxCount", "error", "expect_tx bytes differ from the bulk-copy bytes",
       mb.mbar_tx_count),
    _r("MB9", "MbarRelaxedWait", "error", "data read after a relaxed wait without acquire fence",
       mb.mbar_relaxed_wait),
    _r("MB10", "MbarTryWaitNoRetry", "error", "try_wait result not retried in a loop",
       mb.mbar_try_wait_no_retry),
    # ---- AP: async proxy
    _r("AP1", "GenericWriteAsyncRead", "error",
       "generic smem writes read by a bulk copy without fence.proxy.async",
       ap.generic_write_async_read),
    _r("AP2", "GenericReadAsyncWrite", "error",
       "generic smem reads then a bulk copy overwriting them without fence.proxy.async",
       ap.generic_read_async_write),
    _r("AP3", "BulkDstReadEarly", "error", "bulk-load destination read before completion",
       ap.bulk_dst_read_early),
    _r("AP4", "GlobalWriteTmaRead", "warning",
       "generic global writes then a bulk load without fence.proxy.async.global",
       ap.global_write_tma_read),
    _r("AP5", "BulkSourceReuse", "error", "bulk-store source modified or abandoned in flight",
       ap.bulk_source_reuse),
    _r("AP6", "BulkGroupUncommitted", "error", "bulk wait_group with uncommitted copies",
       ap.bulk_group_uncommitted),
    _r("AP7", "BulkSizeInvalid", "error", "bulk copy size/address not a multiple of 16",
       ap.bulk_size_invalid),
    _r("AP8", "TensorCopyCtaRules", "error",
       "bulk tensor copy: multicast window/ctaMask outside the cluster, cta_group::2 without a "
       "pair", hz.tensor_copy_cta_rules),
    _r("AP9", "TensormapProxyFence", "error",
       "modified tensormap used by TMA without the tensormap proxy release/acquire fences",
       hz.tensormap_proxy_fence),
    # ---- W: wgmma
    _r("W1", "WgmmaDivergent", "error", "wgmma in lane-divergent code", wg.wgmma_divergent),
    _r("W2", "WgmmaFenceMissing", "error", "mma_async without a preceding wgmma.fence",
       wg.wgmma_fence_missing),
    _r("W3", "WgmmaAccInFlight", "error", "registers of an in-flight mma_async touched",
       wg.wgmma_acc_in_flight),
    _r("W4", "WgmmaUncommitted", "error", "mma_async not committed before a wait or the exit",
       wg.wgmma_uncommitted),
    _r("W6", "WgmmaStageWar", "error",
       "shared-memory stage overwritten while a wgmma reading it is in flight",
       hz.wgmma_stage_war),
    _r("W7", "WgmmaResultsUnsynced", "error",
       "wgmma results stored to shared memory and read back without a barrier",
       hz.wgmma_results_unsynced),
    _r("W5", "WgmmaSmemUnfenced", "error",
       "wgmma reads generic-proxy smem writes without fence.proxy.async", ap.wgmma_smem_unfenced),
    _r("W8", "WgmmaShapeInvalid", "error", "wgmma shape or descriptor reserved bits invalid",
       wg.wgmma_shape_invalid),
    # ---- CA: cp.async
    _r("CA1", "CpAsyncSizeInvalid", "error", "cp.async size not 4/8/16 (.cg: 16)",
       ca.cp_async_size_invalid),
    _r("CA2", "CpAsyncWaitBeforeCommit", "error", "cp.async.wait_group with uncommitted copies",
       ca.cp_async_wait_before_commit),
    _r("CA3", "CpAsyncUnpublished", "error",
       "smem read after cp.async wait without a CTA barrier", ca.cp_async_unpublished),
    _r("CA4", "CpAsyncSameDst", "error", "two cp.async of one group write the same address",
       ca.cp_async_same_dst),
    _r("CA5", "CpAsyncWar", "error",
       "cp.async overwrites shared memory read by other threads without a barrier after the "
       "reads", hz.cp_async_war),
    # ---- B: barriers
    _r("B1", "BarrierOperandsInvalid", "error", "barrier id/count invalid",
       br.barrier_operands_invalid),
    _r("B2", "BarrierDivergent", "error", "aligned barrier in lane-divergent code",
       br.barrier_divergent),
    _r("B3", "BarrierCountMismatch", "error", "named-barrier counts inconsistent",
       br.barrier_count_mismatch),
    _r("B4", "BarrierPartialCta", "error",
       "CTA-wide barrier reached by only some warps / skipped by an early exit",
       br.barrier_partial_cta),
    _r("B5", "BarrierArriveReuse", "error", "barrier reused after bar.arrive before a wait",
       br.barrier_arrive_reuse),
    _r("B6", "BarrierScope", "note",
       "guarantee: bar.* orders generic memory only, not async-proxy or tcgen05 work",
       hz.barrier_scope_semantics, status="semantics"),
    _r("B7", "ClusterBarrierPartial", "error",
       "cluster barrier not executed by every thread, or arrive/wait unpaired",
       br.cluster_barrier_partial),
    _r("B8", "ElectSetmaxnregInvalid", "error", "elect.sync mask / setmaxnreg misuse",
       br.elect_setmaxnreg_invalid),
    _r("B9", "SmemCrossWarpRace", "error",
       "shared memory written and read by different warps with no barrier between",
       rc.smem_war_across_warps),
    # ---- MS: module-scope state
    _r("MS1", "ModuleGlobalWrite", "error",
       "module-scope .global variable written (state persists across launches)",
       module_global_write),
])

#: Old id -> new id, for renamed rules.
REDIRECTS: dict[str, str] = {}


def get_rule(rule_id: str) -> RuleInfo:
    """The rule registered as ``rule_id`` (redirects followed).

    Raises:
        VerifierUsageError: no such rule.
    """
    rid = REDIRECTS.get(rule_id, rule_id)
    try:
        return RULES[rid]
    except KeyError:
        raise VerifierUsageError(
            f"unknown rule id '{rule_id}'; known: {', '.join(RULES)}") from None


def select_rules(select: Iterable[str] | None) -> list[RuleInfo]:
    """Rules enabled by ``select`` (rule ids or family letters; None: all), in registry order.

    Raises:
        VerifierUsageError: a selector matches no rule id or family.
    """
    if select is None:
        return [r for r in RULES.values() if r.status != "removed"]
    if isinstance(select, str):
        select = {select}
    ids: set[str] = set()
    for s in select:
        s = REDIRECTS.get(s, s)
        if s in RULES:
            ids.add(s)
        elif s in FAMILIES:
            ids.update(r.id for r in RULES.values() if r.family == s)
        else:
            raise VerifierUsageError(
                f"unknown rule or family '{s}' in select; rules: {', '.join(RULES)}; "
                f"families: {', '.join(FAMILIES)}")
    return [r for r in RULES.values() if r.id in ids and r.status != "removed"]


def rule_doc(rule_id: str) -> str:
    """Documentation of one rule: a header line, the summary and the docstring.

    Raises:
        VerifierUsageError: no such rule.
    """
    r = get_rule(rule_id)
    return (f"{r.id} {r.name} [{FAMILIES[r.family]}; {r.severity}; {r.status}]\n"
            f"{r.summary}\n\n{r.doc}\n")
