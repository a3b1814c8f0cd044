"""Result records of GPU evaluation, shared by the worker process and its parent (JSON on the wire)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from harness.correctness import Arbitration, CompareResult
from harness.tensormap import TensorMapArgs
from harness.timing import TimingStats

__all__ = ["DeviceSummary", "SeedCheck", "KernelRun", "EvalResult", "KernelUnderTest", "PipelineTiming",
           "RunStatus"]

RunStatus = Literal["ok", "incorrect", "implausible", "load_error", "launch_error", "hang", "crash",
                    "resource_error", "not_run"]


class KernelUnderTest(BaseModel):
    """One cubin plus how to launch it, as sent to the worker.

    Attributes:
        label: display name (``reference [BLOCK_SIZE=1024,w4,s1,c1]`` or ``candidate``).
        role: ``reference`` or ``candidate``.
        cubin_b64: the cubin, base64.
        entry: the entry function to load (the ABI's entry: a candidate must keep it).
        threads: block x.
        dynamic_smem: bytes.
        cluster: CTAs per cluster.
        grid: size name -> programs (x, y, z) before the cluster multiplication.
        params: the packed ``.param`` values, in order: ``["buf", name]`` for a tensor,
            ``["scalar", ctype, value]`` per size (see ``scalars``), ``["scratch", "global"]`` /
            ``["scratch", "profile"]``, ``["tensordesc", name]`` for the CUtensorMap of a host
            tensor descriptor over tensor ``name`` (its shape and stride pieces are scalars).
        scalars: size name -> param index -> (ctype, value).
        tensor_maps: size name -> param index of a ``tensordesc`` entry -> its
            ``cuTensorMapEncodeTiled`` arguments (the worker encodes them over its buffer).
        global_scratch_bytes: global scratch per CTA, bytes (0: NULL).
        global_scratch_align: alignment, bytes.
    """

    model_config = ConfigDict(frozen=True)

    label: str
    role: Literal["reference", "candidate"]
    cubin_b64: str
    entry: str
    threads: int
    dynamic_smem: int = 0
    cluster: tuple[int, int, int] = (1, 1, 1)
    grid: dict[str, tuple[int, int, int]]
    params: list[tuple[str, str]]
    scalars: dict[str, dict[int, tuple[str, float | int]]] = Field(default_factory=dict)
    tensor_maps: dict[str, dict[int, TensorMapArgs]] = Field(default_factory=dict)
    global_scratch_bytes: int = 0
    global_scratch_align: int = 1


class DeviceSummary(BaseModel):
    """The GPU the worker ran on, and the ceilings it measured."""

    name: str
    cc: tuple[int, int]
    sm_count: int
    l2_bytes: int
    smem_optin_bytes: int
    driver_version: int
    copy_gbps: float = 0.0
    peak_tflops: float | None = None


class SeedCheck(BaseModel):
    """Correctness evidence for one seed at the ``verify`` size.

    Attributes:
        seed: the input seed.
        sentinel: the byte every output was pre-filled with.
        vs_reference: candidate vs the Triton reference run (per output name).
        vs_float64: this kernel vs the spec's float64 NumPy reference (per output name).
        inputs_unchanged: every ``in`` tensor was bitwise unchanged after the launch.
        guards_intact: no write landed in the guard bands around any buffer.
        deterministic: the second run gave bitwise the same outputs (candidates run twice; the
            second run is perturbed: another stream occupies SMs, seeds run in reverse order).
        unwritten: per output, elements still holding the poison byte pattern after the launch
            (never written), when any.
        secret: this seed was drawn from ``os.urandom`` by the worker (not chosen by the caller).
        ok: every check passed.
    """

    seed: int
    sentinel: int
    vs_reference: dict[str, CompareResult] = Field(default_factory=dict)
    vs_float64: dict[str, CompareResult] = Field(default_factory=dict)
    inputs_unchanged: bool = True
    guards_intact: bool = True
    deterministic: bool | None = None
    unwritten: dict[str, int] = Field(default_factory=dict)
    secret: bool = False
    ok: bool = True


class KernelRun(BaseModel):
    """Everything measured for one kernel under test.

    ``arbitration`` holds, for a candidate that disagreed with the reference kernel at the bench
    size, the float64 arbitration of each output per bench input set
    (:meth:`harness.gpu.worker.Worker.arbitrate`); empty when there was no disagreement.
    """

    label: str
    role: Literal["reference", "candidate"]
    status: RunStatus = "not_run"
    message: str = ""
    load_ms: float | None = None
    registers: int | None = None
    static_smem: int | None = None
    local_bytes: int | None = None
    checks: list[SeedCheck] = Field(default_factory=list)
    timing: TimingStats | None = None
    bench_check: dict[str, CompareResult] = Field(default_factory=dict)
    achieved_tflops: float | None = None
    achieved_gbps: float | None = None
    roofline_fraction: float | None = None
    roofline_bound: str | None = None
    timed_launches_checked: int = 0
    final_check: CompareResult | None = None
    arbitration: list[Arbitration] = Field(default_factory=list)


class PipelineTiming(BaseModel):
    """The candidate and the reference timed in a pipeline context (issue 22 item 5), next to the
    isolated timing of the same evaluate job.

    Each timed step, in ABBA pairs over the two bench input sets, after the isolated timing's
    preparation (output poison, ``evict_normal`` demotion of the inputs, a write of >= 2x L2):
    a **producer** writes the kernel's inputs (a device-to-device copy of each input from its
    read-only original into a writable twin the kernel then reads; in-out tensors are restored
    from their pristine copy at this point), the kernel, then a **consumer** reads its outputs (a
    device-to-device copy of each output into a sink), as in a model step where the previous
    layer wrote the activations and the next one reads the result. Every timed launch's output is
    still compared with the reference's on the device.

    Attributes:
        producer, consumer: what they do, in words.
        pairs: interleaved (reference, candidate) steps timed.
        reference_kernel, candidate_kernel: the kernel alone inside the step (events around it).
        reference_step, candidate_step: producer + kernel + consumer.
        speedup, speedup_ci: reference / candidate kernel time in context, median of the paired
            ratios and its 95% interval (as ``EvalResult.speedup``).
        step_speedup, step_speedup_ci: the same for the whole step.
        isolated_speedup: the same job's isolated speedup, for the comparison.
        survives: the whole step is faster with the candidate at 95% confidence
            (``step_speedup_ci[0] > 1``): a gain that only moves time into the producer or the
            consumer (cache lines kept or evicted for them) does not survive.
    """

    producer: str
    consumer: str
    pairs: int
    reference_kernel: TimingStats
    candidate_kernel: TimingStats
    reference_step: TimingStats
    candidate_step: TimingStats
    speedup: float
    speedup_ci: tuple[float, float]
    step_speedup: float
    step_speedup_ci: tuple[float, float]
    isolated_speedup: float | None = None
    survives: bool


class EvalResult(BaseModel):
    """The outcome of one worker job.

    Attributes:
        status: ``ok`` (the job ran to its end), ``hang`` (a kernel never finished; the worker was
            killed), ``crash`` (the worker died: a sticky CUDA error or a signal), ``error`` (a
            harness problem: message says what).
        message: human-readable detail for a non-ok status.
        device: the GPU.
        kernels: per kernel under test.
        speedup: median over interleaved pairs of reference time / candidate time (evaluate jobs,
            when both were timed).
        speedup_ci: distribution-free 95% confidence interval of that median (order statistics of
            the paired ratios); timing stops once it is within ``ci_target`` of the median.
        timing_pairs: interleaved (reference, candidate) pairs timed.
        best: label of the fastest correct kernel (autotune jobs).
        pipeline: the pipeline-context timing (evaluate jobs with ``pipeline``), else None.
        seconds: wall-time breakdown: ``load``, ``correctness``, ``timing``, ``total``.
        stage: the last stage reached (``load``, ``correctness``, ``timing``, ``done``).
    """

    status: Literal["ok", "hang", "crash", "error"] = "ok"
    message: str = ""
    device: DeviceSummary | None = None
    kernels: list[KernelRun] = Field(default_factory=list)
    speedup: float | None = None
    speedup_ci: tuple[float, float] | None = None
    timing_pairs: int = 0
    inputs_read_only: bool | None = None
    best: str | None = None
    pipeline: PipelineTiming | None = None
    seconds: dict[str, float] = Field(default_factory=dict)
    stage: str = ""

    def kernel(self, label: str) -> KernelRun | None:
        """The run with ``label``, or None."""
        return next((k for k in self.kernels if k.label == label), None)

    @property
    def candidate(self) -> KernelRun | None:
        """The first candidate run, or None."""
        return next((k for k in self.kernels if k.role == "candidate"), None)
