"""Hand-written PTX entries of the ``fast`` family: each is a :class:`KernelSpec` (float64
reference, sizes, grid, a Triton baseline of exactly the same ABI) plus a :class:`HandPTX` record
naming the PTX file (``kernels/fast/ptx/<file>``) and the launch it needs (threads, dynamic shared
memory, cluster, global scratch, the meta values its grid takes).

The point of these entries is the PTX itself: code in the style of expert Hopper/Blackwell
kernels (TMA + mbarrier rings, warp specialization with ``setmaxnreg``, wgmma from swizzled
shared-memory descriptors, clusters with multicast and remote arrivals, tcgen05 with TMEM).
The verifier must pass them with no error, the emulator must run them (issue 18).

ABI choice: the harness launcher packs pointers, scalars and Triton's two scratch pointers; it
cannot pass a host ``CUtensorMap`` (``harness.evaluate.kernel_under_test`` raises for
``tensordesc`` parameters). So the TMA kernels take plain pointers (the ABI of
``fast.gemm_device_desc``'s Triton kernel) and build their tensor maps on the device: the
128-byte object is written in shared memory with ``tensormap.replace`` and copied to the CTA's
global scratch with ``tensormap.cp_fenceproxy`` (PTX ISA 9.1, the ``tensormap.replace`` and
``tensormap.cp_fenceproxy`` instructions), as Triton's own device-side descriptors do.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["HAND_PTX", "HandPTX", "PTX_DIR", "hand_ptx"]

PTX_DIR = Path(__file__).resolve().parent / "ptx"
"""The folder holding the hand-written PTX files."""


class HandPTX(BaseModel):
    """The hand-written PTX of one ``fast`` entry and the launch it needs.

    Attributes:
        name: the registry name (``fast.ptx_gemm_ws_sm90``); its spec is ``kernels.get(name)``.
        file: the PTX file name inside :data:`PTX_DIR`.
        arch: the target it is written for (``sm_90a`` / ``sm_100a``; the ``.target``).
        threads: threads per CTA (the entry's ``.reqntid``).
        dynamic_smem: dynamic shared memory per CTA, bytes.
        cluster_dims: CTAs per cluster (x, y, z); the grid's x extent is multiplied by x.
        global_scratch_size: bytes of global scratch per CTA the kernel uses (tensor maps).
        global_scratch_align: their alignment, bytes (a CUtensorMap needs 64).
        meta: meta values that feed the spec's grid for this kernel (e.g. a cluster's rows).
        emulate_meta: meta for emulated checks, over ``meta`` (a persistent kernel's grid made
            small enough that every CTA loops over several tiles at the verify size, so ring
            laps, phase flips and staging-buffer reuse are exercised).
        features: the PTX features the file exercises (for the docs and the listing).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    file: str
    arch: str
    threads: int = Field(gt=0, le=1024)
    dynamic_smem: int = Field(default=0, ge=0)
    cluster_dims: tuple[int, int, int] = (1, 1, 1)
    global_scratch_size: int = Field(default=0, ge=0)
    global_scratch_align: int = Field(default=1, ge=1)
    meta: dict[str, Any] = Field(default_factory=dict)
    emulate_meta: dict[str, Any] = Field(default_factory=dict)
    features: tuple[str, ...] = ()

    @property
    def path(self) -> Path:
        """The PTX file's path."""
        return PTX_DIR / self.file

    def emulation_meta(self) -> dict[str, Any] | None:
        """The grid meta for an emulated run (``meta`` updated by ``emulate_meta``; None when
        both are empty: the spec's own config)."""
        return {**self.meta, **self.emulate_meta} or None

    def text(self) -> str:
        """The PTX text.

        Raises:
            FileNotFoundError: the file is missing from :data:`PTX_DIR`.
        """
        return self.path.read_text()


HAND_PTX: dict[str, HandPTX] = {
    h.name: h for h in (
        HandPTX(name="fast.ptx_gemm_ws_sm90", file="gemm_ws_sm90.ptx", arch="sm_90a",
                threads=384, dynamic_smem=165376, global_scratch_size=384,
                global_scratch_align=128, emulate_meta={"NUM_SMS": 2},
                features=("TMA loads/stores (device-built tensor maps)", "4-stage full/empty "
                          "mbarrier ring", "producer warp: elect.sync, setmaxnreg.dec",
                          "2 consumer warpgroups: setmaxnreg.inc, wgmma m64n128k16 from "
                          "128B-swizzled descriptors", "named barriers per warpgroup",
                          "persistent static tile schedule", "smem epilogue + TMA store, "
                          "bulk wait_group.read")),
        HandPTX(name="fast.ptx_gemm_cluster_sm90", file="gemm_cluster_sm90.ptx", arch="sm_90a",
                threads=384, dynamic_smem=165376, cluster_dims=(2, 1, 1),
                global_scratch_size=384, global_scratch_align=128, meta={"BLOCK_M": 256},
                features=("2-CTA cluster (.reqnctapercluster, %cluster_ctarank)",
                          "B tile halves TMA-multicast (.multicast::cluster, ctaMask 0b11)",
                          "stage release on both CTAs' empty barriers: mapa + "
                          "mbarrier.arrive.release.cluster.shared::cluster",
                          "fence.mbarrier_init + barrier.cluster at start and before exit",
                          "wgmma consumers, TMA store epilogue")),
        HandPTX(name="fast.ptx_gemm_splitk_sm90", file="gemm_splitk_sm90.ptx", arch="sm_90a",
                threads=384, dynamic_smem=198656, global_scratch_size=384,
                global_scratch_align=128,
                features=("split-K work units (tile, K half) on a zero-filled fp32 output",
                          "TMA reduction: cp.reduce.async.bulk.tensor .add.tile.bulk_group "
                          "from an fp32 shared staging tile", "warp-specialized TMA/wgmma "
                          "ring as fast.ptx_gemm_ws_sm90", "a work unit with no k-tile "
                          "leaving without touching the output")),
        HandPTX(name="fast.ptx_gemm_tc_sm100", file="gemm_tc_sm100.ptx", arch="sm_100a",
                threads=128, dynamic_smem=132352, global_scratch_size=256,
                global_scratch_align=128,
                features=("tcgen05.alloc / relinquish_alloc_permit / dealloc (256 columns)",
                          "tcgen05.cp 128x256b: the A operand from shared into tensor memory",
                          "tcgen05.mma kind::f16, A from TMEM, B from a 128B-swizzled "
                          "descriptor", "tcgen05.commit to the ring's empty barriers and to "
                          "acc_full", "tcgen05.ld 32x32b.x32 + wait::ld epilogue",
                          "tcgen05.fence before/after thread syncs", "TMA producer warp")),
        HandPTX(name="fast.ptx_softmax_ws_sm90", file="softmax_ws_sm90.ptx", arch="sm_90a",
                threads=384, dynamic_smem=65664, meta={"ROWS": 16},
                features=("producer warp: non-tensor cp.async.bulk row loads with "
                          "mbarrier complete_tx", "named barriers bar.sync/bar.arrive (160 "
                          "threads) handing slots back", "per-warpgroup named barriers for "
                          "cross-warp reductions", "shfl.sync butterflies, ex2.approx")),
    )
}
"""Registry name -> its hand-written PTX (each name is also in ``kernels.registry.FAST``)."""


def hand_ptx(name: str) -> HandPTX | None:
    """The hand-written PTX record of ``name``, or None for an entry that is Triton code."""
    return HAND_PTX.get(name)
