"""Candidate: PTX text plus the launch settings the harness needs to run it."""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from kernels.abi import KernelABI

__all__ = ["Candidate"]


class Candidate(BaseModel):
    """One lowering candidate.

    Attributes:
        ptx: the PTX module text.
        threads: threads per CTA (block x); must match the entry's ``.reqntid`` if it has one.
        meta: meta-parameter values that feed the spec's grid expression (e.g. ``BLOCK_M``);
            also any the spec's constexprs need.
        dynamic_smem: dynamic shared memory per CTA, bytes (the harness opts in above 48 KiB).
        cluster_dims: CTAs per cluster (x, y, z); (1, 1, 1) without clusters. The grid's x extent
            is multiplied by ``cluster_dims[0]`` as Triton does for ``num_ctas``.
        global_scratch_size: bytes of global scratch per CTA the kernel expects (0: NULL pointer).
        global_scratch_align: alignment of the global scratch buffer, bytes.
        origin: who proposed it (``triton:BLOCK_SIZE=1024,w4,s1,c1``, ``anthropic:<model>``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    ptx: str = Field(min_length=1)
    threads: int = Field(gt=0, le=1024)
    meta: dict[str, Any] = Field(default_factory=dict)
    dynamic_smem: int = Field(default=0, ge=0, le=1 << 20)
    cluster_dims: tuple[int, int, int] = (1, 1, 1)
    global_scratch_size: int = Field(default=0, ge=0)
    global_scratch_align: int = Field(default=1, ge=1)
    origin: str = ""

    @classmethod
    def with_triton_launch(cls, ptx: str, abi: KernelABI, meta: dict[str, Any],
                           origin: str) -> Candidate:
        """``ptx`` launched as Triton launches the compiled config whose ABI is ``abi``: its
        threads (32 x num_warps), dynamic shared memory, ``num_ctas`` cluster and global scratch
        (:func:`harness.evaluate.reference_under_test` is the same launch for the reference)."""
        return cls(ptx=ptx, threads=abi.threads, meta=dict(meta), dynamic_smem=abi.dynamic_smem,
                   cluster_dims=(abi.num_ctas, 1, 1), global_scratch_size=abi.global_scratch_size,
                   global_scratch_align=abi.global_scratch_align, origin=origin)

    @field_validator("meta", mode="before")
    @classmethod
    def _meta_values(cls, v: Any) -> Any:
        """Meta values as the spec's constexprs take them: ints (``128``, ``"128"`` and
        ``128.0`` from a model's JSON included), bools, strings (``"vector"``: a string
        constexpr), tuples (from lists) or None."""
        if not isinstance(v, dict):
            return v
        out: dict[str, Any] = {}
        for k, x in v.items():
            if isinstance(x, float) and x.is_integer():
                x = int(x)
            elif isinstance(x, str) and x.strip().lstrip("-").isdigit():
                x = int(x)
            elif isinstance(x, list):
                x = tuple(x)
            if not (x is None or isinstance(x, bool | int | str | tuple)):
                raise ValueError(f"meta {k}={x!r}: use an int, bool, string, list or null")
            out[str(k)] = x
        return out

    @field_validator("cluster_dims")
    @classmethod
    def _positive(cls, v: tuple[int, int, int]) -> tuple[int, int, int]:
        if any(d < 1 for d in v):
            raise ValueError(f"cluster dims must be >= 1, got {v}")
        return v

    @property
    def num_ctas(self) -> int:
        """CTAs per cluster."""
        return self.cluster_dims[0] * self.cluster_dims[1] * self.cluster_dims[2]

    def digest(self) -> str:
        """sha256 (16 hex digits) of the PTX and launch settings: identifies the candidate."""
        h = hashlib.sha256(self.ptx.encode())
        h.update(self.model_dump_json(exclude={"ptx", "origin"}).encode())
        return h.hexdigest()[:16]
