"""The ``ailower`` command line (typer + rich).

Exit codes (``style.md`` section 6): 0 clean, 1 findings (no valid candidate, verifier errors),
2 ailower could not do its job (bad input, no ptxas, provider credentials missing, ...).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from ailower.settings import Settings, get_settings

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="ailower: lower Triton kernels to verified, measured PTX.")
console = Console()
err = Console(stderr=True)

ARCH_CHOICES = ("auto", "sm_89", "sm_90a", "sm_100a")
PROVIDERS = ("triton", "anthropic", "openai")


class CliFailure(Exception):
    """A user-facing error: printed as ``error: ...`` and exit status 2."""


def _fail(msg: str) -> None:
    raise CliFailure(msg)


def _load_spec(kernel: str, spec_file: Path | None) -> Any:
    from kernels import get, load_spec

    if "::" in kernel:
        if spec_file is None:
            _fail(f"KERNEL {kernel!r} is a path::function; give its spec with --spec FILE")
        return load_spec(spec_file, source=kernel)  # type: ignore[arg-type]
    if spec_file is not None:
        return load_spec(spec_file)
    if kernel.endswith((".yaml", ".yml", ".json")):
        return load_spec(kernel)
    return get(kernel)


def _resolve_arch(arch: str) -> tuple[str, str | None]:
    """(arch, device arch or None)."""
    from harness import device_arch

    dev = device_arch()
    if arch == "auto":
        if dev is None:
            return "sm_90a", None
        if dev not in ("sm_89", "sm_90a", "sm_100a"):
            _fail(f"--arch auto: the GPU is {dev}, which ailower does not target; pass --arch")
        return dev, dev
    if arch not in ARCH_CHOICES:
        _fail(f"--arch {arch!r}: choose one of {', '.join(ARCH_CHOICES)}")
    return arch, dev


def _make_provider(name: str, model: str | None, base_url: str | None, settings: Settings) -> Any:
    if name not in PROVIDERS:
        _fail(f"--provider {name!r}: choose one of {', '.join(PROVIDERS)}")
    if name == "triton":
        from agent.providers.triton import TritonProvider

        return TritonProvider(cache_dir=settings.cache_dir, max_ptx_version=settings.max_ptx_version)
    if model is None:
        _fail(f"--provider {name} needs a model: pass --model or set AILOWER_MODEL")
    if name == "anthropic":
        from agent.providers.anthropic import AnthropicProvider

        return AnthropicProvider(model=model, base_url=base_url)  # type: ignore[arg-type]
    if name == "openai":
        from agent.providers.openai import OpenAIProvider

        return OpenAIProvider(model=model, base_url=base_url)  # type: ignore[arg-type]
    _fail(f"--provider {name!r}: choose one of {', '.join(PROVIDERS)}")


@app.command()
def lower(
    kernel: Annotated[str, typer.Argument(help="suite name, spec file, or path.py::function (with --spec)")],
    spec: Annotated[Path | None, typer.Option("--spec", help="KernelSpec YAML/JSON file")] = None,
    arch: Annotated[str, typer.Option(help="auto | sm_89 | sm_90a | sm_100a")] = "auto",
    provider: Annotated[str | None, typer.Option(help="triton | anthropic | openai")] = None,
    model: Annotated[str | None, typer.Option(help="model name for anthropic/openai")] = None,
    base_url: Annotated[str | None, typer.Option(help="API base URL (OpenAI-compatible servers)")] = None,
    iterations: Annotated[int | None, typer.Option(min=1, help="iteration budget")] = None,
    out: Annotated[Path | None, typer.Option(help="output folder (default ./ailower-out/KERNEL-ARCH)")] = None,
    no_gpu: Annotated[bool, typer.Option("--no-gpu", help="skip GPU evaluation even if a GPU is present")] = False,
) -> None:
    """Lower KERNEL to PTX: propose, assemble, verify, evaluate; write the best PTX, cubin, report."""
    from agent.loop import LoopOptions, Transcript, build_report, lower as run_lower
    from agent.store import RunStore
    from harness import GPUEvaluator, gpu_available

    settings = get_settings()
    ks = _load_spec(kernel, spec)
    ks.load_reference()  # a broken reference fails now, not after the work (SpecError)
    target, dev = _resolve_arch(arch)
    prov_name = provider or settings.provider
    prov = _make_provider(prov_name, model or settings.model, base_url, settings)
    store = RunStore(settings.database_url)  # a bad database URL fails before any work
    gpu_ok, why = gpu_available()
    gpu_note = ""
    evaluator = None
    if no_gpu:
        gpu_note = "GPU evaluation skipped: --no-gpu"
    elif not gpu_ok:
        gpu_note = f"GPU evaluation skipped: {why}"
    elif dev != target:
        gpu_note = f"GPU evaluation skipped: the GPU is {dev}, the target is {target}"
    else:
        evaluator = GPUEvaluator(hang_timeout_s=settings.hang_timeout_s,
                                 job_timeout_s=settings.job_timeout_s, input_cache=settings.cache_dir)
    out_dir = out or Path("ailower-out") / f"{ks.name}-{target}"
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _fail(f"--out {out_dir}: cannot create the folder: {exc.strerror}")
    if not os.access(out_dir, os.W_OK):
        _fail(f"--out {out_dir}: the folder is not writable")
    # the transcript is written beside the old one and replaces it only when the run ends
    transcript_path = out_dir / "transcript.jsonl"
    partial = out_dir / "transcript.jsonl.partial"
    partial.unlink(missing_ok=True)
    opts = LoopOptions(iterations=iterations or settings.iterations, gpu=evaluator is not None,
                       ptxas=settings.ptxas, cache_dir=settings.cache_dir,
                       max_ptx_version=settings.max_ptx_version)
    console.print(f"[bold]ailower lower[/] {ks.name} -> {target} with provider [cyan]{prov_name}[/]"
                  f" (up to {opts.iterations} iterations)")
    if gpu_note:
        console.print(f"[yellow]{gpu_note}[/]: static path (compile, assemble, verify) and "
                      "emulated correctness on the CPU")

    def progress(kind: str, data: dict[str, Any]) -> None:
        if kind == "reference_compiled":
            console.print(f"  Triton compiled {data['configs']} configs in {data['seconds']:.1f} s")
        elif kind == "baseline":
            console.print(f"  autotuned baseline: [{data['config']}] {data['median_ms']:.4f} ms")
        elif kind == "iteration":
            console.print(f"  iteration {data['iteration']}: {data['origin'] or '-'} -> {data['verdict']}"
                          + (f" ({data['speedup']:.3f}x)" if data.get("speedup") else "")
                          + (f": {data['provider_error']}" if data.get("provider_error") else ""))

    result = run_lower(ks, target, prov, opts, evaluator=evaluator,
                       transcript=Transcript(partial), on_event=progress)
    result.gpu_note = gpu_note
    report = build_report(result)
    os.replace(partial, transcript_path)
    files = {"report": out_dir / "report.json", "transcript": transcript_path}
    stale = [out_dir / f"{ks.name}.ptx", out_dir / f"{ks.name}.cubin"]
    if result.best_candidate is not None:
        files["ptx"] = stale[0]
        files["ptx"].write_text(result.best_candidate.ptx)
        if result.best_cubin:
            files["cubin"] = stale[1]
            files["cubin"].write_bytes(result.best_cubin)
    for f in stale:  # files of an earlier run into this folder (its record keeps them)
        if f.exists() and f not in files.values():
            f.unlink()
            console.print(f"  removed {f} from an earlier run (its PTX stays in the database)")
    report["files"] = {k: str(v) for k, v in files.items()}
    # the report reaches the disk before the database: a database failure loses nothing
    files["report"].write_text(json.dumps(report, indent=2, default=str))
    run_id = store.record(result, report, model=model or settings.model, out_dir=out_dir)
    report["run_id"] = run_id
    files["report"].write_text(json.dumps(report, indent=2, default=str))
    _print_result(result)
    for k, v in files.items():
        console.print(f"  {k:<10} {v}")
    console.print(f"  run #{run_id} recorded in {store._safe_url()}")
    if result.iterations and all(r.verdict == "rejected-provider" for r in result.iterations):
        _fail(f"the provider {prov_name!r} produced no candidate: "
              f"{result.iterations[-1].provider_error}")
    if result.best_candidate is None:
        console.print("[red]no valid candidate[/]")
        raise typer.Exit(1)


def _print_result(result: Any) -> None:
    t = Table(title=f"{result.kernel} on {result.arch} ({result.provider})")
    for col in ("#", "origin", "verdict", "regs", "ptxas", "verifier", "correct", "speedup"):
        t.add_column(col)
    for r in result.iterations:
        asm = r.assembly or {}
        ver = r.verifier or {}
        ev = r.evaluation or {}
        cand = next((k for k in ev.get("kernels", []) if k.get("role") == "candidate"), None)
        n_err = sum(1 for f in ver.get("findings", []) if f.get("severity") == "error")
        t.add_row(
            str(r.iteration), r.origin or "-", r.verdict,
            str(asm.get("registers") or "-"),
            "ok" if asm.get("ok") else ("-" if not asm else "FAIL"),
            "-" if not ver else ("ok" if n_err == 0 else f"{n_err} error(s)"),
            ("-" if not r.emulation else f"emulated: {r.emulation.get('status')}") if cand is None
            else ("yes" if cand.get("status") == "ok" else cand.get("status")),
            f"{r.speedup:.3f}x" if r.speedup else "-")
    console.print(t)
    best = result.best
    if best is not None:
        console.print(f"best: iteration {best.iteration} ({best.origin}), verdict {best.verdict}"
                      + (f", speedup {best.speedup:.3f}x vs autotuned Triton" if best.speedup else ""))
    if result.gpu_note:
        console.print(f"[yellow]{result.gpu_note}[/]")


@app.command()
def kernels() -> None:
    """List the suite kernels with their sizes and autotune spaces."""
    from kernels import all_specs

    t = Table(title="ailower kernel suite")
    for col in ("name", "description", "verify size", "bench size", "configs", "grid"):
        t.add_column(col)
    for s in all_specs():
        t.add_row(s.name, s.description,
                  ", ".join(f"{k}={v}" for k, v in s.sizes["verify"].items()),
                  ", ".join(f"{k}={v}" for k, v in s.sizes["bench"].items()),
                  str(len(s.configs())), ", ".join(str(g) for g in s.grid))
    console.print(t)


MAX_PTX_BYTES = 64 << 20
"""``ailower verify`` refuses larger files (64 MiB); the largest Triton PTX is well under 1 MiB."""


def read_ptx_file(file: Path) -> str:
    """Read a PTX file as UTF-8 text; raises :class:`CliFailure` naming the file and the problem."""
    try:
        st = file.stat()
    except OSError as exc:
        _fail(f"{file}: cannot read: {exc.strerror}")
    import stat

    if not stat.S_ISREG(st.st_mode):
        _fail(f"{file}: not a regular file")
    if st.st_size > MAX_PTX_BYTES:
        _fail(f"{file}: {st.st_size} bytes is over the {MAX_PTX_BYTES >> 20} MiB limit for PTX")
    try:
        return file.read_bytes().decode("utf-8")
    except OSError as exc:
        _fail(f"{file}: cannot read: {exc.strerror}")
    except UnicodeDecodeError as exc:
        _fail(f"{file}: not UTF-8 text (byte {exc.start}): PTX is ASCII text")
    raise AssertionError("unreachable")


@app.command()
def runs(
    kernel: Annotated[str | None, typer.Option(help="only this kernel")] = None,
    limit: Annotated[int, typer.Option(min=1)] = 20,
) -> None:
    """List recorded lowering runs, newest first."""
    from agent.store import RunStore

    store = RunStore(get_settings().database_url)
    t = Table(title=f"runs in {store._safe_url()}")
    for col in ("id", "when", "kernel", "arch", "provider", "gpu", "baseline", "best", "speedup"):
        t.add_column(col)
    for r in store.runs(kernel=kernel, limit=limit):
        t.add_row(str(r.id), r.created_at.strftime("%Y-%m-%d %H:%M"), r.kernel, r.arch, r.provider,
                  r.device or ("no" if not r.gpu else "yes"),
                  r.baseline_config if r.baseline_ms else "- (not autotuned)",
                  r.best_origin or "-", f"{r.best_speedup:.3f}x" if r.best_speedup else "-")
    console.print(t)


def _register_commands() -> None:
    """Add the command groups that live in their own modules (one per area)."""
    from ailower import cmd_baseline, cmd_server, cmd_verify

    app.command("verify")(cmd_verify.verify_command)
    cmd_verify.register(app)
    cmd_server.register(app)
    cmd_baseline.register(app)


_register_commands()


_USER_ERRORS = (("agent.providers.base", "ProviderError"), ("agent.store", "StoreError"),
                ("harness.errors", "HarnessError"), ("kernels.spec", "SpecError"),
                ("kernels.expr", "ExprError"), ("verifier.errors", "VerifierError"))


def _user_error_types() -> tuple[type[BaseException], ...]:
    """Exception types that mean bad input or environment (exit 2 with a one-line message).

    Read from ``sys.modules`` so that a fast command (``verify``) never imports the packages it
    does not use: an exception of a class whose module was never imported cannot occur."""
    found: list[type[BaseException]] = [CliFailure]
    for module, name in _USER_ERRORS:
        mod = sys.modules.get(module)
        if mod is not None:
            found.append(getattr(mod, name))
    return tuple(found)


def main() -> None:
    """Console-script entry: run the app, turning known errors into exit status 2.

    Usage errors (unknown option, bad value) are handled by typer itself (exit status 2).
    """
    try:
        app()
    except KeyboardInterrupt:
        err.print("aborted")
        sys.exit(130)
    except Exception as exc:
        pyd = sys.modules.get("pydantic")
        if isinstance(exc, _user_error_types()):
            err.print(f"[red]error:[/] {exc}")
        elif pyd is not None and isinstance(exc, pyd.ValidationError):  # settings from the env
            lines = [f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors()]
            err.print(f"[red]error:[/] invalid setting ({exc.title}): " + "; ".join(lines))
        elif isinstance(exc, OSError):  # the file system said no (data dir, output folder, ...)
            err.print(f"[red]error:[/] {exc.strerror or exc}: {exc.filename or ''}")
        else:  # an ailower bug: say so, with the repro command
            err.print("[red bold]ailower bug[/]: an unexpected error; please report it with this output")
            err.print(f"command: {' '.join(sys.argv)}")
            err.print(traceback.format_exc())
        sys.exit(2)
