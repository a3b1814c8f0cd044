"""``ailower verify`` (v1 options) and ``ailower rule``.

``register(app)`` adds ``ailower rule ID`` (prints a rule's documentation) and ``ailower rules``
(the registry table) and ``ailower verify`` (:func:`verify_command`): the arguments (``FILE``,
``--arch``, ``--kernel``, ``--threads``, ``--assemble``, ``--json``) plus ``--select``/``--ignore`` (rule ids or families, comma-separated),
``--output-format full|concise|json`` and ``--exit-zero``. Exit status: 0 clean, 1 an error
finding (or a ptxas error with ``--assemble``), 2 bad input (raised by the caller's handler).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

__all__ = ["register", "rule_command", "rules_command", "verify_command"]


def _ids(value: str | None) -> set[str] | None:
    if not value:
        return None
    return {x.strip() for x in value.split(",") if x.strip()}


def verify_command(
    file: Annotated[Path, typer.Argument(help="PTX file")],
    arch: Annotated[str | None, typer.Option(help="sm_89 | sm_90a | sm_100a (default: the .target)")] = None,
    kernel: Annotated[str | None, typer.Option(
        help="suite kernel (or spec file) whose reference ABI the entry must keep (E1/E2/E3)")] = None,
    threads: Annotated[int | None, typer.Option(min=1, max=1024, help="launch threads per CTA (E3)")] = None,
    assemble_too: Annotated[bool, typer.Option("--assemble", help="also assemble with ptxas")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
    select: Annotated[str | None, typer.Option(help="only these rule ids / families, e.g. 'TA,MB5'")] = None,
    ignore: Annotated[str | None, typer.Option(help="leave out these rule ids / families")] = None,
    output_format: Annotated[str, typer.Option(help="full | concise | json")] = "full",
    exit_zero: Annotated[bool, typer.Option(help="exit 0 even when errors are found")] = False,
    launch: Annotated[Path | None, typer.Option(
        help="without --kernel: YAML/JSON launch for the happens-before check (grid, block, "
             "scalars, buffers, tensor_maps, dynamic_smem, entry)")] = None,
    no_emulate: Annotated[bool, typer.Option(
        "--no-emulate", help="without --kernel: skip the happens-before check on a default "
                             "launch")] = False,
) -> None:
    """Run the static PTX verifier on FILE: compiler-style findings with witness paths; exit 1 on
    an error (or, with --assemble, a ptxas error). Without --kernel, each entry also runs on the
    CPU emulator on a default launch (zero-filled buffers behind pointer parameters, 2 CTAs,
    scalars from --launch or defaults) and its happens-before findings are printed; exit 1 on an
    HB error too. --no-emulate skips that."""
    import re

    import verifier
    from ailower._common import _load_spec, console, get_settings, read_ptx_file

    if output_format not in ("full", "concise", "json"):
        raise typer.BadParameter(f"--output-format must be full, concise or json, got {output_format!r}")
    text = read_ptx_file(file)
    if arch is None:
        m = re.search(r"^\s*\.target\s+(\w+)", text, re.MULTILINE)
        arch = m.group(1) if m else "sm_90a"
    abi = None
    if kernel is not None:
        from harness import compile_reference

        ks = _load_spec(kernel, None)
        settings = get_settings()
        from contextlib import nullcontext

        with (console.status(f"compiling {ks.name} with Triton for its reference ABI ...")
              if console.is_terminal else nullcontext()):
            abi = compile_reference(ks, arch, ks.configs()[0], cache_dir=settings.cache_dir,
                                    max_ptx_version=settings.max_ptx_version).abi
        if threads is None:
            # a hand-written fast entry is launched with its own threads, not Triton's
            from kernels.fast.hand_ptx import hand_ptx

            h = hand_ptx(ks.name)
            threads = h.threads if h is not None else None
    rep = verifier.verify(text, arch=arch, abi=abi, threads=threads, filename=str(file),
                          select=_ids(select), ignore=_ids(ignore))
    hb = None
    if kernel is None and not no_emulate and not any(f.rule == "P1" for f in rep.findings):
        hb = _hb_check(text, arch, file, launch)
    elif launch is not None and kernel is not None:
        raise typer.BadParameter("--launch is for the check without --kernel (a spec gives its "
                                 "own launch)")
    asm = None
    if assemble_too:
        from harness import assemble

        asm = assemble(text, arch, ptxas=get_settings().ptxas)
    if json_out or output_format == "json":
        doc = rep.to_dict()
        if asm is not None:
            doc["assembly"] = asm.model_dump(mode="json", exclude={"cubin"})
        if hb is not None:
            doc["happens_before"] = [c.to_dict() for c in hb]
        console.print_json(json.dumps(doc))
    else:
        out = rep.render(output_format)
        print(out if out else f"{file}: no findings")
        if abi is None and output_format == "full":
            print("note: no --kernel given: the entry name and parameters (E1/E2) and the launch "
                  "threads (E3) were not checked against a reference ABI")
        for c in hb or ():
            print(c.render())
        if asm is not None:
            print(asm.summary(text))
    hb_err = any(f.severity == "error" for c in hb or () for f in c.findings)
    if not exit_zero and (not rep.ok or hb_err or (asm is not None and not asm.ok)):
        raise typer.Exit(1)


def _hb_check(text: str, arch: str, file: Path, launch: Path | None):
    """The happens-before checks of every entry on a default launch (emulator.launchcheck);
    a bad launch file is bad input (exit 2)."""
    import emulator
    from verifier.errors import PTXSyntaxError

    try:
        cfg = emulator.load_launch(launch) if launch is not None else None
        return emulator.check_default_launch(text, arch=arch, launch=cfg, filename=str(file))
    except emulator.LaunchFileError as exc:
        raise typer.BadParameter(str(exc), param_hint="--launch") from None
    except PTXSyntaxError:
        return None  # the verifier's report already shows the syntax error


def rule_command(rule_id: Annotated[str, typer.Argument(help="rule id, e.g. TA4")]) -> None:
    """Print a rule's documentation (what it checks, why, example, fix, ptxas, references)."""
    import verifier
    from verifier.registry import REDIRECTS, RULES

    if rule_id not in RULES and rule_id not in REDIRECTS and rule_id.upper() in (*RULES, *REDIRECTS):
        rule_id = rule_id.upper()  # ids are upper case; 'ta4' means TA4
    if rule_id not in RULES and rule_id not in REDIRECTS:
        from ailower._output import did_you_mean
        from ailower._common import CliFailure

        raise CliFailure(f"unknown rule id {rule_id!r}"
                         + (did_you_mean(rule_id, [*RULES, *REDIRECTS])
                            or "; 'ailower rules' lists them"))
    print(verifier.rule_doc(rule_id))


def rules_command(
    json_out: Annotated[bool, typer.Option("--json", help="print the rules as JSON")] = False,
) -> None:
    """List every verifier rule: id, severity, status, summary."""
    from verifier.registry import FAMILIES, RULES

    if json_out:
        from ailower._output import print_json

        print_json([{"id": r.id, "name": r.name, "family": r.family, "family_name": FAMILIES[r.family],
                     "severity": r.severity, "status": r.status, "summary": r.summary}
                    for r in RULES.values()])
        return
    for r in RULES.values():
        print(f"{r.id:5} {r.severity:8} {r.status:8} [{FAMILIES[r.family]}] {r.summary}")


def register(app: typer.Typer) -> None:
    """Add ``verify``, ``rule`` and ``rules`` to ``app``."""
    app.command("verify")(verify_command)
    app.command("rule")(rule_command)
    app.command("rules")(rules_command)
