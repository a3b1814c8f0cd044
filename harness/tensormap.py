"""Host tensor descriptors for the GPU launcher: the ``cuTensorMapEncodeTiled`` arguments of each
``tensordesc`` parameter, built in the parent from the spec and the reference's ABI, and the
encode itself, done in the worker over the buffer it allocated.

A ``tensordesc`` parameter is passed as ``1 + 2 * rank`` entry parameters (Triton 3.6 and 3.9, see
:func:`harness.reference.compile_reference`): the 128-byte CUtensorMap by value, then the shape
(``rank`` x i32, elements, outermost first) and the strides (``rank`` x i64, elements). The
CUtensorMap is encoded as Triton's own launcher does (``make_tensordesc_arg`` and
``fillTMADescriptorTiled`` in ``triton/backends/nvidia/``): element type, swizzle and box from
``metadata.tensordesc_meta`` (:class:`kernels.abi.TensorMapLayout`; the box is *not* the Python
block shape), global dimensions and byte strides innermost first, element strides 1, no
interleave, L2 promotion 128B, out-of-bound fill none (the spec has no NaN padding), and the
version-dependent details of :func:`harness._triton_compat.tensordesc_launch`.

Candidates are launched with the reference's ABI, so they receive exactly the same descriptors.
The encode rules checked before the driver sees anything are those of the CUDA driver API,
``cuTensorMapEncodeTiled`` (CUDA 13 driver API reference, "Tensor Map Object Management").
"""

from __future__ import annotations

import ctypes
from typing import Any

from pydantic import BaseModel, ConfigDict

from harness import _triton_compat as compat
from harness.errors import UsageError
from kernels.abi import TensorMapLayout
from kernels.dtypes import dtype as dtype_info
from kernels.expr import evaluate
from kernels.spec import Config, KernelSpec, Param

__all__ = ["TensorMapArgs", "tensor_map_args", "check_tensor_map_args", "encode_tensor_map",
           "param_slot", "TENSOR_MAP_BYTES", "TENSOR_MAP_ALIGN", "L2_PROMOTION_128B",
           "DATA_TYPE_BYTES"]

TENSOR_MAP_BYTES = 128
"""Size of a CUtensorMap (``CU_TENSOR_MAP_NUM_QWORDS`` = 16 64-bit words, CUDA driver API)."""
TENSOR_MAP_ALIGN = 64
"""Alignment of a CUtensorMap (``cuTensorMapEncodeTiled``: "tensorMap address must be aligned to
64 bytes"; the PTX parameter is ``.param .align 64 .b8 [128]``)."""
L2_PROMOTION_128B = 2
"""``CU_TENSOR_MAP_L2_PROMOTION_L2_128B``: what Triton 3.6 and 3.9 pass for every descriptor."""

DATA_TYPE_BYTES = {0: 1, 1: 2, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 4, 11: 4, 12: 4}
"""Host ``CUtensorMapDataType`` value -> element bytes (UINT8 .. TFLOAT32_FTZ; CUDA driver API).
The packed types 13-15 (16U4_ALIGN8B, 16U4_ALIGN16B, 16U6_ALIGN16B) are not launchable here."""

_SWIZZLE_SPAN = {1: 32, 2: 64, 3: 128, 4: 128, 5: 128, 6: 128}
"""``CUtensorMapSwizzle`` -> the most bytes the box's inner dimension may span (cuTensorMapEncodeTiled:
32B <= 32, 64B <= 64, the 128B modes <= 128)."""


class TensorMapArgs(BaseModel):
    """The arguments of one ``cuTensorMapEncodeTiled`` call (minus the address) and the pieces
    passed after the CUtensorMap, for one tensordesc parameter at one size.

    Attributes:
        param: the spec's tensordesc parameter.
        data_type: host ``CUtensorMapDataType`` value.
        elem_size: bytes per element.
        global_dim: tensor extents in elements, innermost first.
        global_strides: byte strides of dimensions 1 .. rank-1, innermost first.
        box_dim: TMA box in elements, innermost first.
        element_strides: traversal steps, one per dimension (all 1).
        interleave, swizzle, l2_promotion, oob_fill: the enum values (``CUtensorMapInterleave``,
            ``CUtensorMapSwizzle``, ``CUtensorMapL2promotion``, ``CUtensorMapFloatOOBfill``).
        clear_bit21: clear bit 21 of the descriptor's 64-bit word 1 after encoding when the
            driver is <= 13.1 (Triton 3.9's small-tensor workaround; see
            :class:`harness._triton_compat.TensorDescLaunch`).
        shape_tail: the ``.u32`` parameters after the CUtensorMap (elements, outermost first).
        stride_tail: the ``.u64`` parameters (element strides, outermost first).
        nbytes: bytes of the tensor the map covers (the buffer must hold at least these).
    """

    model_config = ConfigDict(frozen=True)

    param: str
    data_type: int
    elem_size: int
    global_dim: tuple[int, ...]
    global_strides: tuple[int, ...]
    box_dim: tuple[int, ...]
    element_strides: tuple[int, ...]
    interleave: int = 0
    swizzle: int
    l2_promotion: int = L2_PROMOTION_128B
    oob_fill: int = 0
    clear_bit21: bool = False
    shape_tail: tuple[int, ...]
    stride_tail: tuple[int, ...]
    nbytes: int

    @property
    def rank(self) -> int:
        """Number of dimensions."""
        return len(self.global_dim)


def tensor_map_args(spec: KernelSpec, p: Param, layout: TensorMapLayout, size: str,
                    cfg: Config) -> TensorMapArgs:
    """The encode arguments of tensordesc parameter ``p`` at ``size``.

    Args:
        spec: the kernel spec (``p`` is one of its tensordesc parameters over a contiguous
            row-major tensor of ``spec.shape(p, size)``).
        p: the parameter.
        layout: its :class:`~kernels.abi.TensorMapLayout` from the reference's ABI.
        size: ``verify`` or ``bench``.
        cfg: the config whose meta-parameters evaluate ``p.block_shape`` (the box must tile it).

    Raises:
        UsageError: a rule of ``cuTensorMapEncodeTiled`` is broken (see
            :func:`check_tensor_map_args`), the metadata's element size differs from the spec
            dtype's, the box does not tile the block, or the descriptor is fp4-padded.
    """
    where = f"{spec.name}: tensordesc {p.name} at size {size!r}"
    if layout.fp4_padded:
        raise UsageError(f"{where}: fp4-padded descriptors (Triton's tensordesc_meta fp4_padded) "
                         "cannot be launched yet")
    itemsize = dtype_info(p.dtype or "").itemsize
    if itemsize != layout.elem_size:
        raise UsageError(f"{where}: the spec dtype {p.dtype} has {itemsize}-byte elements but "
                         f"Triton's descriptor metadata says {layout.elem_size}")
    shape = spec.shape(p, size)
    if len(layout.box) != len(shape):
        raise UsageError(f"{where}: box {list(layout.box)} has {len(layout.box)} dimensions, the "
                         f"tensor {len(shape)}")
    env = spec.env(cfg, size)
    block = tuple(int(evaluate(e, env)) for e in (p.block_shape or ()))
    if len(block) != len(shape) or any(b <= 0 or b % x for b, x in zip(block, layout.box)):
        raise UsageError(f"{where}: Triton's TMA box {list(layout.box)} does not tile the spec's "
                         f"block_shape {list(block)}")
    strides_el = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides_el[i] = strides_el[i + 1] * shape[i + 1]
    rev = list(reversed(shape))
    gstrides = tuple(layout.elem_size * s for s in reversed(strides_el[:-1]))
    last = sum((d - 1) * (layout.elem_size if i == 0 else gstrides[i - 1])
               for i, d in enumerate(rev)) if all(shape) else -1
    launch = compat.tensordesc_launch()
    args = TensorMapArgs(
        param=p.name, data_type=layout.elem_type, elem_size=layout.elem_size,
        global_dim=tuple(rev), global_strides=gstrides, box_dim=tuple(reversed(layout.box)),
        element_strides=(1,) * len(shape), swizzle=layout.swizzle,
        clear_bit21=launch.clears_small_tensor_bit21 and last + 1 < compat.SMALL_TENSOR_BYTES,
        shape_tail=tuple(shape), stride_tail=tuple(strides_el),
        nbytes=layout.elem_size * (strides_el[0] * shape[0] if shape else 0))
    check_tensor_map_args(args, where)
    return args


def check_tensor_map_args(args: TensorMapArgs, where: str | None = None) -> None:
    """Check ``args`` against the rules of ``cuTensorMapEncodeTiled`` (CUDA driver API) that do not
    depend on the address, plus what the entry parameters can carry.

    Rules: rank 1..5; data type 0..12 with ``elem_size`` its size; every global dimension in
    [1, 2^32]; byte strides multiples of 16 below 2^40; every box dimension in [1, 256], the inner
    one spanning a multiple of 16 bytes and, with a swizzle, at most the swizzle span (32/64/128
    bytes); element strides in [1, 8]; interleave none; the shape tail fits i32.

    Raises:
        UsageError: the first broken rule, naming the parameter (``where`` prefixes the message).
    """
    w = where or f"tensordesc {args.param}"

    def bad(msg: str) -> UsageError:
        return UsageError(f"{w}: {msg} (cuTensorMapEncodeTiled rules, CUDA driver API)")

    rank = args.rank
    if not 1 <= rank <= 5:
        raise bad(f"rank {rank}; a tensor map has 1 to 5 dimensions")
    if args.data_type not in DATA_TYPE_BYTES:
        raise bad(f"CUtensorMapDataType {args.data_type} is not supported (packed types are not)")
    if DATA_TYPE_BYTES[args.data_type] != args.elem_size:
        raise bad(f"CUtensorMapDataType {args.data_type} has {DATA_TYPE_BYTES[args.data_type]}-byte "
                  f"elements, not {args.elem_size}")
    if len(args.global_strides) != rank - 1 or len(args.box_dim) != rank or \
            len(args.element_strides) != rank:
        raise bad("global strides, box and element strides must have rank-1, rank, rank entries")
    for i, d in enumerate(args.global_dim):
        if not 1 <= d <= 2**32:
            raise bad(f"globalDim[{i}] = {d}; each extent must be in [1, 2^32] (an empty tensor "
                      "cannot be described)")
    for i, s in enumerate(args.global_strides):
        if s % 16 or not 0 < s < 2**40:
            raise bad(f"globalStrides[{i}] = {s} bytes; strides must be positive multiples of 16 "
                      "below 2^40 (make the row length a multiple of 16 bytes)")
    for i, b in enumerate(args.box_dim):
        if not 1 <= b <= 256:
            raise bad(f"boxDim[{i}] = {b}; each box dimension must be in [1, 256]")
    inner = args.box_dim[0] * args.elem_size
    if args.interleave != 0:
        raise bad("only CU_TENSOR_MAP_INTERLEAVE_NONE is supported")
    if inner % 16:
        raise bad(f"the box's inner dimension spans {inner} bytes; it must be a multiple of 16")
    span = _SWIZZLE_SPAN.get(args.swizzle)
    if args.swizzle and span is None:
        raise bad(f"unknown CUtensorMapSwizzle {args.swizzle}")
    if span is not None and inner > span:
        raise bad(f"the box's inner dimension spans {inner} bytes, more than the {span}-byte "
                  f"swizzle (CUtensorMapSwizzle {args.swizzle}) allows")
    for i, e in enumerate(args.element_strides):
        if not 1 <= e <= 8:
            raise bad(f"elementStrides[{i}] = {e}; must be in [1, 8]")
    for i, d in enumerate(args.shape_tail):
        if d >= 2**31:
            raise bad(f"shape[{i}] = {d} does not fit the entry's i32 shape parameter")


def encode_tensor_map(args: TensorMapArgs, address: int, driver_version: int,
                      cu: Any = None) -> bytes:
    """Encode the CUtensorMap of ``args`` over device memory at ``address``; the 128 bytes.

    Args:
        args: from :func:`tensor_map_args`.
        address: the tensor's device address (16-byte aligned).
        driver_version: ``cuDriverGetVersion`` (13000 = CUDA 13.0): Triton 3.9's bit-21 workaround
            applies up to 13010.
        cu: the ``cuda.bindings.driver`` module (imported here when None; a test may pass a
            stand-in with the same names).

    Raises:
        UsageError: ``address`` is not 16-byte aligned (cuTensorMapEncodeTiled: "globalAddress
            ... must be 16 byte aligned").
        RuntimeError: the driver refused the arguments (the message lists them).
    """
    if address % 16:
        raise UsageError(f"tensordesc {args.param}: buffer address {address:#x} is not 16-byte "
                         "aligned (cuTensorMapEncodeTiled)")
    if cu is None:
        from cuda.bindings import driver as cu  # lazy: the parent process never imports it
    res = cu.cuTensorMapEncodeTiled(
        cu.CUtensorMapDataType(args.data_type), args.rank, address,
        [cu.cuuint64_t(d) for d in args.global_dim],
        [cu.cuuint64_t(s) for s in args.global_strides],
        [cu.cuuint32_t(b) for b in args.box_dim],
        [cu.cuuint32_t(e) for e in args.element_strides],
        cu.CUtensorMapInterleave(args.interleave), cu.CUtensorMapSwizzle(args.swizzle),
        cu.CUtensorMapL2promotion(args.l2_promotion), cu.CUtensorMapFloatOOBfill(args.oob_fill))
    err, tmap = res
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuTensorMapEncodeTiled refused tensordesc {args.param}: {err!r} "
                           f"(address {address:#x}, {args.model_dump()})")
    words = [int(w) for w in tmap.opaque]
    if len(words) != TENSOR_MAP_BYTES // 8:
        raise RuntimeError(f"CUtensorMap has {len(words)} words, expected {TENSOR_MAP_BYTES // 8}")
    if args.clear_bit21 and driver_version <= compat.SMALL_TENSOR_MAX_DRIVER:
        words[1] &= ~(1 << 21)
    return b"".join(w.to_bytes(8, "little") for w in words)


def param_slot(data: bytes) -> ctypes.Array:
    """A ctypes byte array holding ``data`` (a CUtensorMap) at a 64-byte-aligned host address, as
    Triton's launcher copies it, for ``kernelParams``. The returned object keeps its backing
    storage alive.

    Raises:
        ValueError: ``data`` is not 128 bytes.
    """
    if len(data) != TENSOR_MAP_BYTES:
        raise ValueError(f"a CUtensorMap is {TENSOR_MAP_BYTES} bytes, got {len(data)}")
    raw = (ctypes.c_uint8 * (TENSOR_MAP_BYTES + TENSOR_MAP_ALIGN))()
    off = (-ctypes.addressof(raw)) % TENSOR_MAP_ALIGN
    slot = (ctypes.c_uint8 * TENSOR_MAP_BYTES).from_buffer(raw, off)
    ctypes.memmove(ctypes.addressof(slot), data, TENSOR_MAP_BYTES)
    return slot
