"""What the ``gen.py`` scripts of Triton-formulated expert entries share (kernels/expert/).

:func:`generate` compiles a hand-written Triton formulation of a suite kernel with the suite
spec's own parameters (so the ``.entry`` name and ``.param`` list are Triton's for that kernel,
scratch pointers included) through the harness's reference compile (the same Triton options,
PTX ISA cap and ptxas), then writes ``kernel.ptx`` and ``launch.yaml`` next to the formulation.

Run a ``gen.py`` from the repository root: ``python kernels/expert/gemm.fp8/sm_90a/gen.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def generate(folder: Path, kernel: str, arch: str, function: str, constexprs: dict[str, Any],
             num_warps: int, num_stages: int, grid_meta: dict[str, Any], summary: str,
             max_ptx_version: int = 90) -> dict[str, Any]:
    """Compile ``folder/formulation.py::function`` as suite kernel ``kernel`` for ``arch``.

    Args:
        folder: the entry folder (``kernels/expert/<kernel>/<arch>``), holding formulation.py.
        kernel: the suite entry whose spec (parameters, signature) the formulation must keep.
        arch: the target (``sm_90a``).
        function: the ``@triton.jit`` function's name; it must be the suite kernel's (the
            ``.entry`` name follows it) and take the same parameters (checked by the spec).
        constexprs: the constexpr values the formulation is compiled with (its tile shape).
        num_warps, num_stages: Triton compile options.
        grid_meta: the meta values ``launch.yaml`` gives the spec's grid expression.
        summary: ``launch.yaml``'s one-line summary.
        max_ptx_version: PTX ISA cap (90 = 9.0, what the CUDA 13.0 driver takes).

    Returns:
        Triton's metadata for the compile (``shared`` bytes, ``global_scratch_size``, ...).

    Raises:
        harness.ReferenceCompileError: Triton could not compile the formulation.
        kernels.SpecError: the formulation's parameters differ from the spec's.
    """
    import yaml

    from harness import compile_reference
    from kernels import AutotuneSpace, Config, SourceRef, get

    spec = get(kernel)
    src = SourceRef(path=str(folder / "formulation.py"), function=function)
    cfg = Config(meta=dict(constexprs), num_warps=num_warps, num_stages=num_stages)
    mine = spec.model_copy(update={"source": src, "autotune": AutotuneSpace(configs=(cfg,))})
    art = compile_reference(mine, arch, cfg, max_ptx_version=max_ptx_version)
    abi = art.abi
    (folder / "kernel.ptx").write_text(art.ptx)
    launch = {
        "kernel": kernel, "arch": arch, "entry": abi.entry, "threads": abi.threads,
        "meta": dict(grid_meta), "dynamic_smem": abi.dynamic_smem,
        "cluster_dims": [abi.num_ctas, 1, 1],
        "global_scratch_size": abi.global_scratch_size,
        "global_scratch_align": abi.global_scratch_align,
        "source": "gen.py", "summary": summary,
    }
    head = (f"# written by gen.py (Triton {art.triton_version}; constexprs {dict(constexprs)}, "
            f"num_warps={num_warps}, num_stages={num_stages}); see NOTES.md\n")
    (folder / "launch.yaml").write_text(head + yaml.safe_dump(launch, sort_keys=False, width=200))
    return dict(art.metadata)
