"""Nsight Compute (``ncu``) profiles of one launch: a fixed metric set, the command, the CSV parser.

The agent's feedback shows a small, fixed set of hardware metrics for the candidate and the
baseline side by side (issue 20): DRAM and L2 throughput, SM and tensor-pipe utilisation,
achieved occupancy, registers and shared memory per CTA, the top warp-stall reasons and the L2
hit rate. They come from one launch at the ``bench`` size, run by the GPU worker's
``launch_once`` job under::

    ncu --clock-control none --csv --page raw --print-units base \\
        --launch-count 1 --kernel-name <entry> --metrics <NCU_METRICS> \\
        python -m harness.gpu.worker --once

``--clock-control none`` leaves the GPU's clocks as the timed runs saw them (ncu locks them to
base clocks by default); ``--page raw --csv`` prints one row per profiled kernel with one column
per metric, after a header row of metric names and a row of units (Nsight Compute CLI docs,
"Command Line Options", sections *Profile* and *Console Output*).

:func:`parse_ncu_csv` reads that output, including the ``==PROF==`` / ``==ERROR==`` /
``==WARNING==`` lines ncu mixes in. Where ncu is missing, or the counters cannot be read
(``ERR_NVGPUCTRPERM``: profiling needs admin rights or the driver's
``NVreg_RestrictProfilingToAdminUsers=0``), the report says so (``available=False`` with the
reason) and the caller gives the rest of the feedback.
"""

from __future__ import annotations

import csv
import glob
import io
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

__all__ = ["NCU_METRICS", "STALL_METRICS", "NcuReport", "parse_ncu_csv", "ncu_command",
           "find_ncu", "profile_once", "profile_launch", "NcuParseError"]

_ROOT = str(Path(__file__).resolve().parent.parent)

NCU_METRICS: dict[str, str] = {
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "DRAM throughput %",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed": "L2 throughput %",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "SM throughput %",
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active": "tensor pipe active %",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved occupancy %",
    "launch__registers_per_thread": "registers / thread",
    "launch__shared_mem_per_block_static": "static smem / CTA (B)",
    "launch__shared_mem_per_block_dynamic": "dynamic smem / CTA (B)",
    "lts__t_sector_hit_rate.pct": "L2 hit rate %",
    "gpu__time_duration.sum": "duration (ns)",
}
"""Metric name -> table label, in table order (names as ``ncu --query-metrics`` lists them)."""

STALL_REASONS = ("long_scoreboard", "short_scoreboard", "barrier", "membar", "mio_throttle",
                 "lg_throttle", "math_pipe_throttle", "wait", "not_selected", "dispatch_stall",
                 "no_instruction", "drain", "imc_miss", "branch_resolving", "sleeping")
"""Warp-stall reasons of the WarpStateStats section (Nsight Compute Kernel Profiling Guide,
"Warp Scheduler States")."""

STALL_METRICS: dict[str, str] = {
    f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio": r for r in STALL_REASONS}
"""Stall metric name -> reason: warps stalled for that reason per issued instruction."""

_ERR_CODE = re.compile(r"\b(ERR_[A-Z_]+)\b")
_ID_COLUMNS = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context",
               "Stream", "Block Size", "Grid Size", "Device", "CC")


class NcuParseError(ValueError):
    """ncu's output is not the CSV it should be; the message names the line."""


class NcuReport(BaseModel):
    """The metrics of one profiled launch, or why there are none.

    Attributes:
        available: metrics were read.
        reason: why not (``ncu unavailable: ...``, or ncu's own error such as
            ``ERR_NVGPUCTRPERM - The user does not have permission ...``); '' when available.
        kernel: the profiled kernel's name as ncu printed it.
        metrics: metric name -> value in base units (``%``, bytes, ns, ratio); a metric ncu
            printed as ``n/a`` or left out is absent.
        units: metric name -> unit string from the CSV's unit row.
        command: the command line that produced it (a repro), when it was run here.
    """

    available: bool
    reason: str = ""
    kernel: str = ""
    metrics: dict[str, float] = Field(default_factory=dict)
    units: dict[str, str] = Field(default_factory=dict)
    command: list[str] = Field(default_factory=list)

    def stalls(self, top: int = 3) -> list[tuple[str, float]]:
        """The ``top`` stall reasons by warps stalled per issued instruction, largest first
        (ties by name), zero values left out."""
        vals = [(STALL_METRICS[m], v) for m, v in self.metrics.items() if m in STALL_METRICS]
        vals = [x for x in vals if x[1] > 0]
        return sorted(vals, key=lambda x: (-x[1], x[0]))[:top]


def _number(text: str) -> float | None:
    t = text.strip().replace(",", "")
    if not t or t.lower() in ("n/a", "nan", "(!) n/a"):
        return None
    try:
        return float(t)
    except ValueError:
        return None


def parse_ncu_csv(text: str, *, source: str = "ncu output") -> list[NcuReport]:
    """Parse ``ncu --csv --page raw [--print-units base]`` output.

    Args:
        text: ncu's stdout (and stderr, if merged): ``==PROF==`` / ``==ERROR==`` / ``==WARNING==``
            lines, then a CSV with a header row (``"ID","Process ID",...,metric names``), an
            optional unit row (first cell empty) and one row per profiled kernel.
        source: name used in error messages.

    Returns:
        One :class:`NcuReport` per profiled kernel, in order. With no kernel rows: one report
        with ``available=False`` and the reason (ncu's ``==ERROR==`` line, e.g.
        ``ERR_NVGPUCTRPERM - ...``, or ``no kernel was profiled``).

    Raises:
        NcuParseError: a CSV header without the ``Kernel Name`` column, or a row whose number of
            cells differs from the header's (message: ``<source>:<line>: ...``).
    """
    errors: list[str] = []
    warnings: list[str] = []
    csv_lines: list[tuple[int, str]] = []
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s:
            continue
        if s.startswith("==ERROR=="):
            errors.append(s.removeprefix("==ERROR==").strip())
        elif s.startswith("==WARNING=="):
            warnings.append(s.removeprefix("==WARNING==").strip())
        elif s.startswith("=="):
            continue
        elif s.startswith('"'):
            csv_lines.append((n, line))
    # ncu's first warning is often the clock note of --clock-control none; the one that says why
    # nothing was profiled comes last
    warn = next((w for w in reversed(warnings) if "profiled" in w.lower()),
                warnings[-1] if warnings else "")
    if not csv_lines:
        why = errors[0] if errors else (warn or "no kernel was profiled")
        return [NcuReport(available=False, reason=why)]
    rows = list(csv.reader(io.StringIO("\n".join(ln for _, ln in csv_lines))))
    header, line_of = rows[0], [n for n, _ in csv_lines]
    if "Kernel Name" not in header:
        raise NcuParseError(f"{source}:{line_of[0]}: CSV header without a 'Kernel Name' column "
                            "(expected ncu --csv --page raw)")
    k_col = header.index("Kernel Name")
    units: dict[str, str] = {}
    body = rows[1:]
    body_lines = line_of[1:]
    if body and body[0] and body[0][0] == "":
        units = {h: u for h, u in zip(header, body[0]) if h not in _ID_COLUMNS and u}
        body, body_lines = body[1:], body_lines[1:]
    out: list[NcuReport] = []
    for row, n in zip(body, body_lines):
        if len(row) != len(header):
            raise NcuParseError(f"{source}:{n}: {len(row)} cells, the header has {len(header)}")
        metrics: dict[str, float] = {}
        for h, cell in zip(header, row):
            if h in _ID_COLUMNS:
                continue
            v = _number(cell)
            if v is not None:
                metrics[h] = v
        out.append(NcuReport(available=True, kernel=row[k_col], metrics=metrics, units=units))
    if not out:
        why = errors[0] if errors else "no kernel was profiled"
        return [NcuReport(available=False, reason=why)]
    return out


def find_ncu() -> str | None:
    """``ncu``: ``AILOWER_NCU``, PATH, then ``$CUDA_HOME/bin`` and ``/usr/local/cuda*/bin``; None
    when absent."""
    env = os.environ.get("AILOWER_NCU")
    if env and os.access(env, os.X_OK):
        return env
    found = shutil.which("ncu")
    if found:
        return found
    roots = [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda",
             *sorted(glob.glob("/usr/local/cuda-*"), reverse=True)]
    for r in roots:
        c = os.path.join(r, "bin", "ncu") if r else ""
        if c and os.access(c, os.X_OK):
            return c
    return None


def ncu_command(ncu: str, python: str, kernel_name: str) -> list[str]:
    """The command line that profiles one launch of ``kernel_name`` in a ``--once`` worker.

    Args:
        ncu: path of ``ncu``.
        python: the worker's interpreter.
        kernel_name: the entry name (``--kernel-name``; the worker launches nothing else).

    Returns:
        The argument vector (see the module docstring).
    """
    metrics = ",".join([*NCU_METRICS, *STALL_METRICS])
    return [ncu, "--clock-control", "none", "--csv", "--page", "raw", "--print-units", "base",
            "--launch-count", "1", "--kernel-name", kernel_name, "--metrics", metrics,
            python, "-m", "harness.gpu.worker", "--once"]


def profile_once(request_json: str, kernel_name: str, *, python: str = sys.executable,
                 timeout_s: float = 120.0, ncu: str | None = None) -> NcuReport:
    """Profile the candidate of a ``launch_once`` worker request (one launch) under ncu.

    Args:
        request_json: a :class:`~harness.gpu.worker.WorkerRequest` as JSON, ``job`` =
            ``launch_once`` (``launch_size`` = ``bench`` for the bench size); its only
            ``candidate``-role kernel is launched once.
        kernel_name: the entry name.
        python: the worker's interpreter.
        timeout_s: wall limit for the profiled run.
        ncu: path of ncu (None: :func:`find_ncu`).

    Returns:
        The report; ``available=False`` with ``ncu unavailable: ...`` when there is no ncu, it
        timed out or exited without a CSV, or with ncu's own error (``ERR_NVGPUCTRPERM ...``).
    """
    tool = ncu or find_ncu()
    if tool is None:
        return NcuReport(available=False, reason="ncu unavailable: no ncu found (set AILOWER_NCU, "
                         "or put the CUDA toolkit's bin on PATH)")
    cmd = ncu_command(tool, python, kernel_name)
    env = dict(os.environ)
    env["PYTHONPATH"] = _ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, input=request_json + "\n", capture_output=True, text=True,
                           timeout=timeout_s, env=env, cwd=_ROOT, start_new_session=True)
    except subprocess.TimeoutExpired:
        return NcuReport(available=False, command=cmd,
                         reason=f"ncu unavailable: the profiled launch did not finish within "
                                f"{timeout_s:g} s")
    except OSError as exc:
        return NcuReport(available=False, command=cmd, reason=f"ncu unavailable: {exc}")
    # the worker's JSON result lines start with '{' and are skipped by the parser
    reports = parse_ncu_csv(p.stdout + "\n" + p.stderr, source=" ".join(cmd[:3]))
    rep = reports[0]
    if not rep.available and not _ERR_CODE.search(rep.reason):
        rep.reason = (f"ncu unavailable: exit {p.returncode} after {time.perf_counter() - t0:.1f} "
                      f"s: {rep.reason}")
    return rep.model_copy(update={"command": cmd})


def profile_launch(spec: Any, baseline: Any, candidate: Any | None, cubin: bytes | None,
                   evaluator: Any, *, seed: int = 0) -> NcuReport:
    """The ncu profile of one bench-size launch of ``candidate`` (or of the baseline).

    Args:
        spec: the :class:`~kernels.spec.KernelSpec`.
        baseline: the baseline's :class:`~harness.reference.ReferenceArtifacts` (its ABI is the
            contract both are launched with).
        candidate: the :class:`~harness.candidate.Candidate` (its launch settings), or None to
            profile the baseline itself.
        cubin: the candidate's cubin (ignored for the baseline).
        evaluator: the :class:`~harness.evaluate.GPUEvaluator` (interpreter, request builder).
        seed: input seed of the launch.

    Returns:
        The report; ``available=False`` with the reason when ncu or its counters are missing.
    """
    from harness.evaluate import kernel_under_test

    abi = baseline.abi
    if candidate is None:
        kw = dict(threads=abi.threads, dynamic_smem=abi.dynamic_smem, cluster=(abi.num_ctas, 1, 1),
                  meta=None, global_scratch_bytes=abi.global_scratch_size,
                  global_scratch_align=abi.global_scratch_align)
        binary = baseline.cubin
    else:
        kw = dict(threads=candidate.threads, dynamic_smem=candidate.dynamic_smem,
                  cluster=candidate.cluster_dims, meta=candidate.meta,
                  global_scratch_bytes=candidate.global_scratch_size,
                  global_scratch_align=candidate.global_scratch_align)
        binary = cubin or b""
    kut = kernel_under_test(spec, abi, binary, label="profiled", role="candidate",
                            config=baseline.config, **kw)
    req = evaluator.request(spec, "launch_once", [kut], seeds=[seed], time=False,
                            secret_seed=False, launch_size="bench")
    return profile_once(req.model_dump_json(), abi.entry, python=evaluator.python)
