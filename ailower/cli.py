"""The ``ailower`` command line (typer + rich).

Exit codes (``style.md`` section 6): 0 clean, 1 findings (no valid candidate, verifier errors),
2 ailower could not do its job (bad input, no ptxas, provider credentials missing, ...).
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from ailower._output import did_you_mean, make_console, print_json, table
from ailower.settings import Settings, get_settings

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="ailower: lower Triton kernels to verified, measured PTX.")
console = make_console()  # piped: no colour, wide enough that no table cell is cut
err = make_console(stderr=True)


def _version_callback(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            v = version("ailower")
        except PackageNotFoundError:  # running from a source tree that was never installed
            v = "unknown (not installed)"
        print(f"ailower {v}")
        raise typer.Exit()


@app.callback()
def _main_options(
    _version: Annotated[bool, typer.Option("--version", callback=_version_callback, is_eager=True,
                                           help="print ailower's version and exit")] = False,
) -> None:
    """ailower: lower Triton kernels to verified, measured PTX."""

ARCH_CHOICES = ("auto", "sm_89", "sm_90a", "sm_100a")
PROVIDERS = ("triton", "anthropic", "openai", "search", "replay")


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
        ks = load_spec(spec_file)
        if kernel not in (ks.name, str(spec_file)):  # never ignore the KERNEL given
            _fail(f"KERNEL {kernel!r} is not the kernel of --spec {spec_file} (its name is "
                  f"{ks.name!r}); give {ks.name!r}, FILE.py::function, or the spec file alone")
        return ks
    if kernel.endswith((".yaml", ".yml", ".json")):
        return load_spec(kernel)
    from kernels import names

    known = names()
    if kernel not in known:
        _fail(f"no suite kernel {kernel!r}" + (did_you_mean(kernel, known)
                                                or "; 'ailower kernels' lists them"))
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
    if name == "search":
        from agent.providers.search import SearchProvider

        try:
            return SearchProvider(cache_dir=settings.cache_dir, max_ptx_version=settings.max_ptx_version,
                                  ptxas=settings.ptxas)
        except ValueError as exc:
            _fail(f"--provider search: {exc}")
    if name == "replay":  # --model is the transcript.jsonl to replay
        from agent.providers.replay import ReplayProvider

        if model is None:
            _fail("--provider replay needs the transcript: --model PATH/transcript.jsonl")
        return ReplayProvider(model)  # type: ignore[arg-type]
    if model is None:
        _fail(f"--provider {name} needs a model: pass --model or set AILOWER_MODEL")
    if name == "anthropic":
        from agent.providers.anthropic import AnthropicProvider

        from agent.providers.budget import wrap_budget

        return wrap_budget(AnthropicProvider(model=model, base_url=base_url), settings, model)  # type: ignore[arg-type]
    if name == "openai":
        from agent.providers.openai import OpenAIProvider

        from agent.providers.budget import wrap_budget

        return wrap_budget(OpenAIProvider(model=model, base_url=base_url), settings, model)  # type: ignore[arg-type]
    _fail(f"--provider {name!r}: choose one of {', '.join(PROVIDERS)}")


@app.command()
def lower(
    kernel: Annotated[str, typer.Argument(help="suite name, spec file, or path.py::function (with --spec)")],
    spec: Annotated[Path | None, typer.Option("--spec", help="KernelSpec YAML/JSON file")] = None,
    arch: Annotated[str, typer.Option(help="auto | sm_89 | sm_90a | sm_100a")] = "auto",
    provider: Annotated[str | None, typer.Option(help="triton | anthropic | openai | search | replay")] = None,
    model: Annotated[str | None, typer.Option(help="model name for anthropic/openai")] = None,
    base_url: Annotated[str | None, typer.Option(help="API base URL (OpenAI-compatible servers)")] = None,
    iterations: Annotated[int | None, typer.Option(min=1, help="iteration budget")] = None,
    out: Annotated[Path | None, typer.Option(help="output folder (default ./ailower-out/KERNEL-ARCH)")] = None,
    no_gpu: Annotated[bool, typer.Option("--no-gpu", help="skip GPU evaluation even if a GPU is present")] = False,
) -> None:
    """Lower KERNEL to PTX: propose, assemble, verify, evaluate; write the best PTX, cubin, report."""
    from agent.loop import LoopOptions
    from agent.store import RunStore
    from ailower._run import execute_run, select_evaluator

    settings = get_settings()
    ks = _load_spec(kernel, spec)
    ks.load_reference()  # a broken reference fails now, not after the work (SpecError)
    target, dev = _resolve_arch(arch)
    prov_name = provider or settings.provider
    prov = _make_provider(prov_name, model or settings.model, base_url, settings)
    store = RunStore(settings.database_url)  # a bad database URL fails before any work
    evaluator, gpu_note = select_evaluator(target, dev, no_gpu=no_gpu, settings=settings)
    out_dir = out or Path("ailower-out") / f"{ks.name}-{target}"
    opts = LoopOptions(iterations=iterations or settings.iterations, gpu=evaluator is not None,
                       ptxas=settings.ptxas, cache_dir=settings.cache_dir,
                       max_ptx_version=settings.max_ptx_version)
    console.print(f"[bold]ailower lower[/] {escape(ks.name)} -> {target} with provider "
                  f"[cyan]{escape(prov_name)}[/] (up to {opts.iterations} iterations)")
    if gpu_note and evaluator is None:
        console.print(f"[yellow]{escape(gpu_note)}[/]: static path (compile, assemble, verify) and "
                      "emulated correctness on the CPU")
    elif gpu_note:
        console.print(escape(gpu_note))
    result, _report, _run_id, _folder = execute_run(
        ks, target, prov, opts, evaluator=evaluator, gpu_note=gpu_note, out_dir=out_dir,
        model=model or settings.model, store=store, console=console, print_result=_print_result)
    if result.iterations and all(r.verdict == "rejected-provider" for r in result.iterations):
        _fail(f"the provider {prov_name!r} produced no candidate: "
              f"{result.iterations[-1].provider_error}")
    if result.best_candidate is None:
        console.print("[red]no valid candidate[/]")
        raise typer.Exit(1)


def _print_result(result: Any, console: Any = console) -> None:
    """The iterations table and the best candidate's line (on ``console``)."""
    t = table(f"{result.kernel} on {result.arch} ({result.provider})",
              ("#", "origin", "verdict", "regs", "ptxas", "verifier", "correct", "speedup"),
              keys=("#", "origin"))
    for r in result.iterations:
        asm = r.assembly or {}
        ver = r.verifier or {}
        ev = r.evaluation or {}
        cand = next((k for k in ev.get("kernels", []) if k.get("role") == "candidate"), None)
        n_err = sum(1 for f in ver.get("findings", []) if f.get("severity") == "error")
        t.add_row(
            str(r.iteration), escape(r.origin or "-"), r.verdict,
            str(asm.get("registers") or "-"),
            "ok" if asm.get("ok") else ("-" if not asm else "FAIL"),
            "-" if not ver else ("ok" if n_err == 0 else f"{n_err} error(s)"),
            ("-" if not r.emulation else
             f"emulated: {r.emulation.get('verdict', r.emulation.get('status'))}") if cand is None
            else ("yes" if cand.get("status") == "ok" else cand.get("status")),
            f"{r.speedup:.3f}x" if r.speedup else "-")
    console.print(t)
    for r in result.iterations:
        if r.verdict.startswith("rejected"):
            console.print(f"iteration {r.iteration} {r.verdict}: {_rejection_reason(r)}",
                          markup=False)
    if not result.iterations and result.stop_reason:
        console.print(f"no iteration ran: {result.stop_reason}", markup=False)
    best = result.best
    if best is not None:
        console.print(f"best: iteration {best.iteration} ({best.origin}), verdict {best.verdict}"
                      + (f", speedup {best.speedup:.3f}x vs autotuned Triton" if best.speedup else ""),
                      markup=False)
    if result.gpu_note:
        console.print(f"[yellow]{escape(result.gpu_note)}[/]")


def _rejection_reason(r: Any) -> str:
    """The first line that says why iteration record ``r`` was rejected (ptxas error, first
    verifier error with file:line:col, emulation or GPU evaluation failure, provider error)."""
    if r.verdict == "rejected-provider":
        return str(r.provider_error or "no candidate")
    if r.verdict == "rejected-assembly":
        asm = r.assembly or {}
        d = next((d for d in asm.get("diagnostics", []) if d.get("severity") in
                  ("fatal", "error")), None)
        if d is not None:
            return (f"ptxas {d['severity']}" + (f" at line {d['line']}" if d.get("line") else "")
                    + f": {d.get('message')}")[:300]
        return f"ptxas failed (exit status {asm.get('returncode')})"
    if r.verdict == "rejected-verifier":
        errs = [f for f in (r.verifier or {}).get("findings", []) if f.get("severity") == "error"]
        if errs:
            f = errs[0]
            more = f" (+{len(errs) - 1} more)" if len(errs) > 1 else ""
            return (f"{f.get('file')}:{f.get('line')}:{f.get('col')}: [{f.get('rule')}] "
                    f"{f.get('message')}{more}")
    # evaluation: the emulation or GPU line of the feedback that says FAIL
    lines = [ln.strip() for ln in (r.feedback or "").splitlines() if ln.strip()]
    bad = next((ln for ln in lines if "FAIL" in ln or "REJECTED" in ln or "HANG" in ln or
                "CRASH" in ln), None) or next((ln for ln in lines if ": error:" in ln), None)
    return (bad or (lines[-1] if lines else "no reason recorded"))[:300]


@app.command()
def kernels(
    json_out: Annotated[bool, typer.Option("--json", help="print the kernels as JSON")] = False,
) -> None:
    """List the suite kernels with their sizes and autotune spaces."""
    from kernels import all_specs

    specs = all_specs()
    if json_out:
        print_json([{"name": s.name, "description": s.description, "spec_id": s.identity(),
                     "sizes": s.sizes, "configs": [c.key() for c in s.configs()],
                     "grid": [str(g) for g in s.grid]} for s in specs])
        return
    t = table("ailower kernel suite",
              ("name", "description", "verify size", "bench size", "configs", "grid"),
              keys=("name",))
    for s in specs:
        t.add_row(escape(s.name), escape(s.description),
                  ", ".join(f"{k}={v}" for k, v in s.sizes["verify"].items()),
                  ", ".join(f"{k}={v}" for k, v in s.sizes["bench"].items()),
                  str(len(s.configs())), escape(", ".join(str(g) for g in s.grid)))
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


def _register_commands() -> None:
    """Add the command groups that live in their own modules (one per area)."""
    from ailower import (cmd_baseline, cmd_cache, cmd_eval, cmd_export, cmd_leaderboard, cmd_runs,
                         cmd_server, cmd_spec, cmd_suite, cmd_verify)

    app.command("verify")(cmd_verify.verify_command)
    cmd_verify.register(app)
    cmd_server.register(app)
    cmd_baseline.register(app)
    cmd_runs.register(app)
    cmd_eval.register(app)
    cmd_export.register(app)
    cmd_cache.register(app)
    cmd_spec.register(app)
    cmd_suite.register(app)
    cmd_leaderboard.register(app)


_register_commands()


_USER_ERRORS = (("ailower._outdir", "OutputError"), ("agent.providers.base", "ProviderError"), ("agent.store", "StoreError"),
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
        err.print("aborted", markup=False)
        sys.exit(130)
    except Exception as exc:
        pyd = sys.modules.get("pydantic")
        if isinstance(exc, _user_error_types()):
            err.print(f"[red]error:[/] {escape(str(exc))}")
        elif pyd is not None and isinstance(exc, pyd.ValidationError):  # settings from the env
            lines = [f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors()]
            err.print(f"[red]error:[/] invalid setting ({escape(exc.title)}): "
                      + escape("; ".join(lines)))
        elif isinstance(exc, OSError):  # the file system said no (data dir, output folder, ...)
            err.print(f"[red]error:[/] {escape(str(exc.strerror or exc))}: "
                      f"{escape(str(exc.filename or ''))}")
        else:  # an ailower bug: say so, with the repro command
            err.print("[red bold]ailower bug[/]: an unexpected error; please report it with this output")
            err.print(f"command: {' '.join(sys.argv)}", markup=False, highlight=False)
            err.print(traceback.format_exc(), markup=False, highlight=False)
        sys.exit(2)
