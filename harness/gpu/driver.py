"""A thin layer over ``cuda.bindings.driver`` for the evaluation worker.

Only the worker process imports this module's GPU paths: on a machine without a driver, touching
``cuda.bindings`` handles can raise and a retry can deadlock (``triton_toolchain.md`` section 11),
so the parent process only ever calls :func:`probe_gpu`, which uses ``ctypes`` on ``libcuda``.

Every driver call goes through :func:`check`, which raises :class:`CudaError` naming the call and
the ``CUresult``.
"""

from __future__ import annotations

import ctypes
import time
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CudaError",
    "check",
    "probe_gpu",
    "device_arch",
    "DeviceInfo",
    "Context",
    "DeviceBuffer",
    "GuardedBuffer",
    "Kernel",
    "LaunchSpec",
]


class CudaError(RuntimeError):
    """A CUDA driver call failed.

    Attributes:
        call: the driver function name.
        code: the ``CUresult`` name (``CUDA_ERROR_ILLEGAL_ADDRESS``).
        sticky: the error poisons the context (every later call fails); the worker must exit.
    """

    _STICKY = {"CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_FAILED", "CUDA_ERROR_MISALIGNED_ADDRESS",
               "CUDA_ERROR_ILLEGAL_INSTRUCTION", "CUDA_ERROR_HARDWARE_STACK_ERROR",
               "CUDA_ERROR_INVALID_PC", "CUDA_ERROR_ASSERT", "CUDA_ERROR_LAUNCH_TIMEOUT",
               "CUDA_ERROR_ECC_UNCORRECTABLE", "CUDA_ERROR_CONTEXT_IS_DESTROYED"}

    def __init__(self, call: str, code: str):
        self.call, self.code = call, code
        self.sticky = code in self._STICKY
        super().__init__(f"{call} failed: {code}")

    def __reduce__(self):
        return (CudaError, (self.call, self.code))


def check(result: Any, call: str = "cuda call") -> Any:
    """Unpack a ``cuda.bindings`` ``(CUresult, *values)`` tuple; raise :class:`CudaError` on error."""
    from cuda.bindings import driver as cu

    err, *vals = result if isinstance(result, tuple) else (result,)
    if err != cu.CUresult.CUDA_SUCCESS:
        name = cu.cuGetErrorName(err)
        code = name[1].decode() if isinstance(name, tuple) and name[1] else str(err)
        raise CudaError(call, code)
    if not vals:
        return None
    return vals[0] if len(vals) == 1 else tuple(vals)


def probe_gpu() -> tuple[bool, str]:
    """Is a CUDA driver with at least one device present? Safe in any process (uses ctypes only).

    Returns:
        ``(available, reason)``: reason says what is missing, or names the device count.
    """
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False, "no CUDA driver (libcuda.so.1 not found)"
    if lib.cuInit(0) != 0:
        return False, "cuInit failed: the driver found no usable GPU"
    count = ctypes.c_int(0)
    if lib.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value < 1:
        return False, "the CUDA driver reports no device"
    major, minor = ctypes.c_int(0), ctypes.c_int(0)
    # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75, _MINOR = 76 (cuda.h)
    lib.cuDeviceGetAttribute(ctypes.byref(major), 75, 0)
    lib.cuDeviceGetAttribute(ctypes.byref(minor), 76, 0)
    arch = f"sm_{major.value}{minor.value}" + ("a" if major.value >= 9 else "")
    return True, f"{count.value} CUDA device(s); device 0 is {arch}"


def device_arch() -> str | None:
    """The ``a`` target of device 0 (``sm_90a`` on an H200), or None without a GPU."""
    ok, reason = probe_gpu()
    return reason.rsplit(" is ", 1)[1] if ok else None


@dataclass(frozen=True)
class DeviceInfo:
    """Properties of the device (read with ``cuDeviceGetAttribute``).

    Attributes:
        name: e.g. ``NVIDIA H200``.
        cc: compute capability, e.g. (9, 0).
        sm_count: multiprocessors.
        l2_bytes: L2 cache size, bytes.
        smem_optin_bytes: maximum shared memory per block with opt-in, bytes.
        driver_version: ``cuDriverGetVersion`` (13000 = CUDA 13.0).
        total_mem_bytes: device memory, bytes.
    """

    name: str
    cc: tuple[int, int]
    sm_count: int
    l2_bytes: int
    smem_optin_bytes: int
    driver_version: int
    total_mem_bytes: int

    @property
    def arch(self) -> str:
        """The ``a`` target of this device: ``sm_90a`` for (9, 0)."""
        major, minor = self.cc
        return f"sm_{major}{minor}" + ("a" if major >= 9 else "")


class Context:
    """The primary context of device 0 and one non-blocking stream owned by the harness."""

    def __init__(self, device_index: int = 0):
        from cuda.bindings import driver as cu

        self.cu = cu
        check(cu.cuInit(0), "cuInit")
        self.device = check(cu.cuDeviceGet(device_index), "cuDeviceGet")
        self.ctx = check(cu.cuDevicePrimaryCtxRetain(self.device), "cuDevicePrimaryCtxRetain")
        check(cu.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
        self.stream = check(cu.cuStreamCreate(cu.CUstream_flags.CU_STREAM_NON_BLOCKING.value),
                            "cuStreamCreate")
        # a second harness stream: perturbation work that runs concurrently with a candidate
        self.side_stream = check(cu.cuStreamCreate(cu.CUstream_flags.CU_STREAM_NON_BLOCKING.value),
                                 "cuStreamCreate")
        self.device_index = device_index
        self.info = self._info()

    def _attr(self, name: str) -> int:
        cu = self.cu
        return int(check(cu.cuDeviceGetAttribute(getattr(cu.CUdevice_attribute, name), self.device),
                         f"cuDeviceGetAttribute({name})"))

    def _info(self) -> DeviceInfo:
        cu = self.cu
        raw = check(cu.cuDeviceGetName(256, self.device), "cuDeviceGetName")
        name = bytes(raw).split(b"\0", 1)[0].decode(errors="replace")
        return DeviceInfo(
            name=name,
            cc=(self._attr("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR"),
                self._attr("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR")),
            sm_count=self._attr("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
            l2_bytes=self._attr("CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE"),
            smem_optin_bytes=self._attr("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
            driver_version=int(check(cu.cuDriverGetVersion(), "cuDriverGetVersion")),
            total_mem_bytes=int(check(cu.cuDeviceTotalMem(self.device), "cuDeviceTotalMem")),
        )

    def reset_persisting_l2(self) -> None:
        """Drop any persisting-L2 carve-out and reset persisting lines (harness_threats.md #17)."""
        cu = self.cu
        check(cu.cuCtxSetLimit(cu.CUlimit.CU_LIMIT_PERSISTING_L2_CACHE_SIZE, 0), "cuCtxSetLimit")
        check(cu.cuCtxResetPersistingL2Cache(), "cuCtxResetPersistingL2Cache")

    def synchronize(self, timeout_s: float) -> bool:
        """Wait for the stream; False when it is still busy after ``timeout_s`` (a hang)."""
        cu = self.cu
        deadline = time.monotonic() + timeout_s
        sleep = 1e-5
        while True:
            res = cu.cuStreamQuery(self.stream)
            err = res[0] if isinstance(res, tuple) else res
            if err == cu.CUresult.CUDA_SUCCESS:
                return True
            if err != cu.CUresult.CUDA_ERROR_NOT_READY:
                check(res, "cuStreamQuery")
            if time.monotonic() > deadline:
                return False
            time.sleep(sleep)
            sleep = min(sleep * 2, 2e-3)

    def event(self) -> Any:
        """A new timing event."""
        return check(self.cu.cuEventCreate(0), "cuEventCreate")

    def record(self, ev: Any, stream: Any = None) -> None:
        """Record ``ev`` on the harness stream (or ``stream``)."""
        check(self.cu.cuEventRecord(ev, self.stream if stream is None else stream), "cuEventRecord")

    def synchronize_all(self, timeout_s: float) -> bool:
        """Wait for both harness streams; False on a hang (see :meth:`synchronize`)."""
        ok = self.synchronize(timeout_s)
        if not ok:
            return False
        saved, self.stream = self.stream, self.side_stream
        try:
            return self.synchronize(timeout_s)
        finally:
            self.stream = saved

    def elapsed_ms(self, start: Any, end: Any) -> float:
        return float(check(self.cu.cuEventElapsedTime(start, end), "cuEventElapsedTime"))


class _DeviceBytes:
    """Copy and fill operations shared by :class:`DeviceBuffer` and :class:`GuardedBuffer`: a
    subclass sets ``ctx``, ``ptr`` (device address of the data) and ``nbytes`` (data size, bytes).
    """

    ctx: "Context"
    ptr: int
    nbytes: int

    def download(self, arr: Any) -> Any:
        """Copy the buffer into NumPy array ``arr`` (synchronous) and return it.

        Raises:
            ValueError: ``arr`` is not exactly ``nbytes`` bytes.
        """
        if arr.nbytes != self.nbytes:
            raise ValueError(f"download of {self.nbytes} B into a {arr.nbytes} B array")
        check(self.ctx.cu.cuMemcpyDtoH(arr.ctypes.data, self.ptr, self.nbytes), "cuMemcpyDtoH")
        return arr

    def fill_byte(self, value: int, stream: Any = None) -> None:
        """Set every data byte to ``value`` (asynchronous on ``stream`` when given)."""
        cu = self.ctx.cu
        if stream is None:
            check(cu.cuMemsetD8(self.ptr, value, self.nbytes), "cuMemsetD8")
        else:
            check(cu.cuMemsetD8Async(self.ptr, value, self.nbytes, stream), "cuMemsetD8Async")

    def copy_from(self, other: "_DeviceBytes") -> None:
        """Device-to-device copy of ``other`` (same size) on the harness stream."""
        check(self.ctx.cu.cuMemcpyDtoDAsync(self.ptr, other.ptr, self.nbytes, self.ctx.stream),
              "cuMemcpyDtoDAsync")


class DeviceBuffer(_DeviceBytes):
    """A ``cuMemAlloc`` buffer with guard bands on both sides for out-of-bounds write detection.

    The usable region starts ``guard`` bytes into the allocation (256-byte aligned, like the
    driver's own allocations); the guards are filled with :attr:`GUARD_BYTE` and
    :meth:`guards_intact` checks them.
    """

    GUARD_BYTE = 0xA5

    def __init__(self, ctx: Context, nbytes: int, guard: int = 4096):
        self.ctx, self.nbytes, self.guard = ctx, int(nbytes), guard
        cu = ctx.cu
        self._base = check(cu.cuMemAlloc(max(1, self.nbytes + 2 * guard)), "cuMemAlloc")
        self.ptr = int(self._base) + guard
        if guard:
            check(cu.cuMemsetD8(int(self._base), self.GUARD_BYTE, guard), "cuMemsetD8")
            check(cu.cuMemsetD8(self.ptr + self.nbytes, self.GUARD_BYTE, guard), "cuMemsetD8")

    def upload(self, arr: Any) -> None:
        """Copy a C-contiguous NumPy array of exactly ``nbytes`` to the buffer (synchronous)."""
        if arr.nbytes != self.nbytes:
            raise ValueError(f"upload of {arr.nbytes} B into a {self.nbytes} B buffer")
        check(self.ctx.cu.cuMemcpyHtoD(self.ptr, arr.ctypes.data, self.nbytes), "cuMemcpyHtoD")

    def guards_intact(self) -> bool:
        """True when neither guard band was written."""
        if not self.guard:
            return True
        import numpy as np

        for start in (int(self._base), self.ptr + self.nbytes):
            buf = np.empty(self.guard, dtype=np.uint8)
            check(self.ctx.cu.cuMemcpyDtoH(buf.ctypes.data, start, self.guard), "cuMemcpyDtoH")
            if not np.all(buf == self.GUARD_BYTE):
                return False
        return True

    def free(self) -> None:
        if self._base is not None:
            check(self.ctx.cu.cuMemFree(self._base), "cuMemFree")
            self._base = None


class GuardedBuffer(_DeviceBytes):
    """A buffer mapped through the CUDA virtual memory management API, between unmapped guard pages.

    Layout of the reserved range (``g`` = allocation granularity, 2 MiB on an H200)::

        [ g unmapped ][ mapped: slack | data | slack ][ g unmapped ]

    The data sit at the *end* of the mapped pages (``align="end"``: a read or write past the end
    faults with ``CUDA_ERROR_ILLEGAL_ADDRESS``; the slack in front, below 2 MiB, is filled with
    :attr:`CANARY` and checked) or at the *start* (``align="start"``: an access below the start
    faults; the slack behind is checked). The start is always 256-byte aligned, so the tail slack
    of an end-aligned buffer is below 256 bytes. :meth:`set_read_only` maps the pages with
    ``CU_MEM_ACCESS_FLAGS_PROT_READ``: any kernel store into the buffer faults (harness_threats.md
    #4, #16; CUDA driver API, "Virtual Memory Management": cuMemCreate, cuMemMap, cuMemSetAccess).

    Raises:
        CudaError: a driver call failed (out of memory, VMM not supported).
    """

    CANARY = 0xA5

    def __init__(self, ctx: Context, nbytes: int, align: str = "end"):
        cu = ctx.cu
        self.ctx, self.nbytes, self.align = ctx, int(nbytes), align
        prop = cu.CUmemAllocationProp()
        prop.type = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        prop.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        prop.location.id = ctx.device_index
        g = int(check(cu.cuMemGetAllocationGranularity(
            prop, cu.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM),
            "cuMemGetAllocationGranularity"))
        self.granularity = g
        padded = max(256, (self.nbytes + 255) // 256 * 256)
        self.mapped = (padded + g - 1) // g * g
        self.reserved = self.mapped + 2 * g
        self._va = int(check(cu.cuMemAddressReserve(self.reserved, g, 0, 0), "cuMemAddressReserve"))
        self._map = self._va + g
        self._handle = check(cu.cuMemCreate(self.mapped, prop, 0), "cuMemCreate")
        check(cu.cuMemMap(self._map, self.mapped, 0, self._handle, 0), "cuMemMap")
        self.read_only = True
        self.set_read_only(False)
        if align == "end":
            self.ptr = self._map + self.mapped - padded
        elif align == "start":
            self.ptr = self._map
        else:
            raise ValueError(f"align must be 'start' or 'end', not {align!r}")
        self._slack = [(self._map, self.ptr - self._map),
                       (self.ptr + self.nbytes, self._map + self.mapped - self.ptr - self.nbytes)]
        for start, n in self._slack:
            if n:
                check(cu.cuMemsetD8(start, self.CANARY, n), "cuMemsetD8")
        check(cu.cuCtxSynchronize(), "cuCtxSynchronize")

    def set_read_only(self, read_only: bool) -> None:
        """Map the pages read-only (kernel stores fault) or read-write."""
        if read_only == self.read_only:
            return
        cu = self.ctx.cu
        d = cu.CUmemAccessDesc()
        d.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        d.location.id = self.ctx.device_index
        d.flags = (cu.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READ if read_only
                   else cu.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
        check(cu.cuMemSetAccess(self._map, self.mapped, [d], 1), "cuMemSetAccess")
        self.read_only = read_only

    def upload(self, arr: Any) -> None:
        """Copy a C-contiguous array of exactly ``nbytes`` in (synchronous; read-only buffers are
        made writable for the copy and read-only again after it)."""
        import numpy as np

        arr = np.ascontiguousarray(arr)
        if arr.nbytes != self.nbytes:
            raise ValueError(f"upload of {arr.nbytes} B into a {self.nbytes} B buffer")
        ro = self.read_only
        self.set_read_only(False)
        check(self.ctx.cu.cuMemcpyHtoD(self.ptr, arr.ctypes.data, self.nbytes), "cuMemcpyHtoD")
        # a pageable-memory copy may still be in flight when cuMemcpyHtoD returns; it must land
        # before the pages turn read-only and before a kernel on a non-blocking stream reads them
        check(self.ctx.cu.cuCtxSynchronize(), "cuCtxSynchronize")
        self.set_read_only(ro)

    def guards_intact(self) -> bool:
        """True when the canary slack around the data was not written."""
        import numpy as np

        for start, n in self._slack:
            if not n:
                continue
            buf = np.empty(n, dtype=np.uint8)
            check(self.ctx.cu.cuMemcpyDtoH(buf.ctypes.data, start, n), "cuMemcpyDtoH")
            if not np.all(buf == self.CANARY):
                return False
        return True

    def free(self) -> None:
        """Unmap, release and unreserve (idempotent)."""
        if self._handle is None:
            return
        cu = self.ctx.cu
        check(cu.cuMemUnmap(self._map, self.mapped), "cuMemUnmap")
        check(cu.cuMemRelease(self._handle), "cuMemRelease")
        check(cu.cuMemAddressFree(self._va, self.reserved), "cuMemAddressFree")
        self._handle = None


@dataclass
class LaunchSpec:
    """Grid, block, dynamic shared memory and cluster of one launch."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_smem: int
    cluster: tuple[int, int, int] = (1, 1, 1)


class Kernel:
    """A loaded cubin's entry function, launchable with packed parameters."""

    def __init__(self, ctx: Context, cubin: bytes, entry: str, dynamic_smem: int):
        cu = ctx.cu
        self.ctx, self.entry = ctx, entry
        self.module = check(cu.cuModuleLoadData(cubin), "cuModuleLoadData")
        self.fn = check(cu.cuModuleGetFunction(self.module, entry.encode()), "cuModuleGetFunction")
        fa = cu.CUfunction_attribute
        self.registers = int(check(cu.cuFuncGetAttribute(fa.CU_FUNC_ATTRIBUTE_NUM_REGS, self.fn),
                                   "cuFuncGetAttribute"))
        self.static_smem = int(check(cu.cuFuncGetAttribute(
            fa.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, self.fn), "cuFuncGetAttribute"))
        self.local_bytes = int(check(cu.cuFuncGetAttribute(
            fa.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, self.fn), "cuFuncGetAttribute"))
        self.max_threads = int(check(cu.cuFuncGetAttribute(
            fa.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, self.fn), "cuFuncGetAttribute"))
        if dynamic_smem > 48 * 1024:
            check(cu.cuFuncSetAttribute(self.fn, fa.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                        dynamic_smem), "cuFuncSetAttribute(MAX_DYNAMIC_SHARED)")

    def launch(self, spec: LaunchSpec, params: list[Any], stream: Any = None) -> None:
        """Launch on the harness stream. ``params``: ctypes scalars, one per ``.param``, in order.

        Raises:
            CudaError: the launch was refused (bad block size, too much shared memory, ...).
        """
        cu = self.ctx.cu
        cfg = cu.CUlaunchConfig()
        cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = (int(spec.grid[i] * spec.cluster[i]) for i in range(3))
        cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = spec.block
        cfg.sharedMemBytes = int(spec.dynamic_smem)
        cfg.hStream = self.ctx.stream if stream is None else stream
        attrs = []
        if spec.cluster != (1, 1, 1):
            a = cu.CUlaunchAttribute()
            a.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
            a.value.clusterDim.x, a.value.clusterDim.y, a.value.clusterDim.z = spec.cluster
            attrs.append(a)
        cfg.attrs = attrs
        cfg.numAttrs = len(attrs)
        ptrs = (ctypes.c_void_p * max(1, len(params)))(*[ctypes.addressof(p) for p in params])
        check(cu.cuLaunchKernelEx(cfg, self.fn, ctypes.addressof(ptrs), 0), "cuLaunchKernelEx")

    def unload(self) -> None:
        check(self.ctx.cu.cuModuleUnload(self.module), "cuModuleUnload")
