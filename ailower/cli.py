"""The ``ailower`` command line (typer + rich): the app, its commands, and the entry point.

This module only builds the app and registers the commands; each command (or command group)
lives in its own ``ailower/cmd_NAME.py``, which imports what commands share from
:mod:`ailower._common` and never imports this module.

Adding a command is one line: write ``ailower/cmd_NAME.py`` with a ``register(app)`` function
that adds its command(s) to the typer ``app`` (``app.command("NAME")(fn)`` or
``app.add_typer(group, name="NAME")``), then add ``"cmd_NAME"`` to :data:`COMMANDS` below.
``ailower --help`` lists plain commands in the order of :data:`COMMANDS`, then the groups.

Exit codes (``style.md`` section 6): 0 clean, 1 findings (no valid candidate, verifier errors),
2 ailower could not do its job (bad input, no ptxas, provider credentials missing, ...).
"""

from __future__ import annotations

import importlib
import sys
import traceback
from typing import Annotated, Any

import typer
from rich.markup import escape

from ailower._common import err, user_error_types

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="ailower: lower Triton kernels to verified, measured PTX.")

COMMANDS = ("cmd_lower", "cmd_kernels", "cmd_verify", "cmd_server", "cmd_baseline", "cmd_runs",
            "cmd_eval", "cmd_export", "cmd_cache", "cmd_spec", "cmd_suite", "cmd_leaderboard",
            "cmd_prompt", "cmd_mcp")
"""The modules under ``ailower/`` whose ``register(app)`` adds the commands, in help order."""


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


def _register_commands() -> None:
    """Import every module of :data:`COMMANDS` and call its ``register(app)``."""
    for name in COMMANDS:
        importlib.import_module(f"ailower.{name}").register(app)


def _tidy_help(t: typer.Typer) -> None:
    """Help text that reads as prose, for every command of ``t`` and of its groups.

    Typer's rich help keeps a docstring's line breaks (sentences broke mid-line at the source's
    100 columns): each paragraph of a command's docstring becomes one line, which the terminal
    wraps.
    """
    import inspect

    for info in t.registered_commands:
        if info.callback is None:
            continue
        doc = info.help or inspect.getdoc(info.callback) or ""
        info.help = "\n\n".join(" ".join(par.split()) for par in doc.split("\n\n")) or None
    for group in t.registered_groups:
        if group.typer_instance is not None:
            _tidy_help(group.typer_instance)


def build_command() -> Any:
    """The click command of the app, with no type shown for flags in help.

    Typer (0.2x) shows ``<bool>`` in the type column of every flag, ``--help`` included; a flag
    takes no value, so its column is left empty (each command's ``get_params`` is wrapped).
    """
    cmd = typer.main.get_command(app)

    def untype_flags(c: Any) -> None:  # typer's own (vendored) click classes: duck-typed
        orig = c.get_params

        def get_params(ctx: Any) -> list[Any]:
            params = orig(ctx)
            for p in params:
                if getattr(p, "is_flag", False):
                    p.display_type_rich = lambda ctx: None  # type: ignore[attr-defined]
            return params

        c.get_params = get_params  # type: ignore[method-assign]
        for sub in getattr(c, "commands", {}).values():
            untype_flags(sub)

    untype_flags(cmd)
    return cmd


_register_commands()
_tidy_help(app)


def main() -> None:
    """Console-script entry: run the app, turning known errors into exit status 2.

    Usage errors (unknown option, bad value) are handled by typer itself (exit status 2).
    """
    try:
        build_command()()
    except KeyboardInterrupt:
        err.print("aborted", markup=False)
        sys.exit(130)
    except Exception as exc:
        pyd = sys.modules.get("pydantic")
        if isinstance(exc, user_error_types()):
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
