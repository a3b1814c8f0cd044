"""Run suite kernels on the CPU with Triton's interpreter and compare with the float64 reference.

Usage: ``TRITON_INTERPRET=1 python -m tests.kernels.interp_check [NAME ...] [--all-configs]``
(needs torch, CPU build; it is not a project dependency). Each kernel runs at its ``verify`` size
on seed 0 with its first and last autotune configs; outputs are checked with ``harness.compare``
under the spec's tolerance, inputs must come back unchanged. Prints one line per (kernel, config)
and exits 1 when any fails.

The interpreter executes each program with NumPy semantics (fp16 dots rounded like the tensor
cores' fp32-accumulated results, exp/log exact to double rounding), so it checks the kernel's
indexing, masking and math, not the GPU's approximate-function error.
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("TRITON_INTERPRET", "1")

import numpy as np

__all__ = ["main", "run_one"]


def _torch_tensor(arr: np.ndarray, dt: str):
    import torch

    if dt in ("fp8e4nv", "fp8e5"):
        t = torch.from_numpy(np.ascontiguousarray(arr).view(np.uint8).copy())
        return t.view(torch.float8_e4m3fn if dt == "fp8e4nv" else torch.float8_e5m2)
    if dt == "bf16":
        return torch.from_numpy(np.ascontiguousarray(arr).view(np.uint16).copy()).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(arr).copy())


def _to_numpy(t, dt: str) -> np.ndarray:
    import torch

    from kernels.dtypes import dtype

    if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2, torch.bfloat16):
        raw = t.view(torch.uint8 if t.element_size() == 1 else torch.int16).numpy()
        return raw.view(dtype(dt).np)
    return t.numpy()


def run_one(name: str, cfg_index: int, seed: int = 0) -> tuple[bool, str]:
    """Run suite kernel ``name`` with its config ``cfg_index`` in the interpreter.

    Returns:
        ``(ok, message)``.
    """
    import importlib

    import kernels
    from harness import compare, make_inputs, reference_outputs
    from kernels.dtypes import dtype

    spec = kernels.get(name)
    cfg = spec.configs()[cfg_index]
    mod = importlib.import_module(spec.source.module)  # type: ignore[arg-type]
    fn = getattr(mod, spec.source.function)
    ins = make_inputs(spec, "verify", seed)
    ref = reference_outputs(spec, "verify", ins)
    args = []
    tensors = {}
    for p in spec.params:
        if p.kind == "pointer":
            if p.name in ins:
                t = _torch_tensor(ins[p.name], p.dtype)
            else:  # outputs: NaN / 0xFF sentinel as the GPU worker does
                shape = spec.shape(p, "verify")
                t = _torch_tensor(np.full(shape, 0xFF, dtype=np.uint8).view(np.uint8)
                                  .reshape(-1).repeat(dtype(p.dtype).itemsize)
                                  .view(dtype(p.dtype).np).reshape(shape), p.dtype)
            tensors[p.name] = t
            args.append(t)
        elif p.kind == "scalar":
            v = spec.scalar_value(p, cfg, "verify")
            args.append(float(v) if p.dtype.startswith(("fp", "bf")) else int(v))
    ce = spec.constexprs(cfg, "verify")
    grid = spec.grid_dims("verify", cfg.meta)
    t0 = time.perf_counter()
    fn[grid](*args, **ce, num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    dt_s = time.perf_counter() - t0
    msgs = []
    ok = True
    for p in spec.outputs():
        got = _to_numpy(tensors[p.name], p.dtype)
        r = compare(got, ref[p.name], spec.tolerance(p.dtype))
        if not r.ok:
            ok = False
        msgs.append(f"{p.name}: {'ok' if r.ok else 'FAIL ' + r.reason} "
                    f"(norm err {r.norm_err:.2e}, max |err| {r.max_abs_err:.2e})")
    for p in spec.tensors():
        if p.role == "in":
            after = _to_numpy(tensors[p.name], p.dtype)
            if not np.array_equal(after.view(np.uint8), ins[p.name].view(np.uint8)):
                ok = False
                msgs.append(f"input {p.name} changed")
    return ok, f"[{cfg.key()}] {dt_s:.1f}s " + "; ".join(msgs)


def main(argv: list[str] | None = None) -> int:
    """Check the named suite kernels (default: all); exit status 1 when one fails."""
    import kernels

    argv = list(sys.argv[1:] if argv is None else argv)
    all_cfgs = "--all-configs" in argv
    names = [a for a in argv if not a.startswith("--")] or kernels.names()
    bad = 0
    for name in names:
        n_cfg = len(kernels.get(name).configs())
        idxs = range(n_cfg) if all_cfgs else sorted({0, n_cfg - 1})
        for i in idxs:
            ok, msg = run_one(name, i)
            bad += not ok
            print(f"{'PASS' if ok else 'FAIL'} {name} {msg}", flush=True)
    print(f"{bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
