"""What the CLI's commands share: the consoles, the user-error type, and the argument helpers.

Every ``ailower/cmd_*.py`` imports from here, never from :mod:`ailower.cli` (which only builds
the app and registers the commands), so the CLI package has no import circle. Settings come from
the shared room :mod:`common.settings`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from rich.markup import escape

from ailower._output import did_you_mean, make_console, table
from common.settings import Settings, get_settings

__all__ = ["ARCH_CHOICES", "PROVIDERS", "CliFailure", "Settings", "console", "err", "get_settings",
           "read_ptx_file", "user_error_types"]

console = make_console()  # piped: no colour, wide enough that no table cell is cut
"""stdout console of every command."""
err = make_console(stderr=True)
"""stderr console (progress, notes, errors)."""

ARCH_CHOICES = ("auto", "sm_89", "sm_90a", "sm_100a")
PROVIDERS = ("triton", "anthropic", "openai", "search", "expert", "replay")


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

    known = names("all")
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
    if name == "expert":
        from agent.providers.expert import ExpertProvider

        return ExpertProvider(cache_dir=settings.cache_dir)
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


_USER_ERRORS = (("ailower._outdir", "OutputError"), ("agent.providers.base", "ProviderError"), ("agent.store", "StoreError"),
                ("harness.errors", "HarnessError"), ("kernels.spec", "SpecError"),
                ("kernels.expr", "ExprError"), ("verifier.errors", "VerifierError"))


def user_error_types() -> tuple[type[BaseException], ...]:
    """Exception types that mean bad input or environment (exit 2 with a one-line message).

    Read from ``sys.modules`` so that a fast command (``verify``) never imports the packages it
    does not use: an exception of a class whose module was never imported cannot occur."""
    found: list[type[BaseException]] = [CliFailure]
    for module, name in _USER_ERRORS:
        mod = sys.modules.get(module)
        if mod is not None:
            found.append(getattr(mod, name))
    return tuple(found)
