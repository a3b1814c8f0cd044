"""``ailower spec init FILE.py::fn``: write a commented starter KernelSpec from a kernel's signature.

The file is read with :mod:`ast` only (:mod:`kernels.starter`): a module that imports torch or
packages this host lacks is fine. The starter infers pointers, roles and scalar kinds from the
kernel's loads and stores, imports ``@triton.autotune`` configs and ``@triton.heuristics``, and
marks every guess ``# TODO``; it is meant to be edited, then checked with ``ailower lower
FILE.yaml``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

__all__ = ["starter_spec", "register"]

def starter_spec(file: Path, function: str, spec_dir: Path) -> str:
    """The starter spec's YAML text: :func:`kernels.starter.starter_spec` (inferred from the
    kernel's body and decorators)."""
    from kernels.starter import starter_spec as build

    return build(file, function, spec_dir)


def register(app: Any) -> None:
    """Add ``ailower spec init FILE.py::fn [--out FILE.yaml] [--force]`` to the typer ``app``.

    Exit status 0 when the spec was written, 2 for a bad argument (no ``::``, unreadable file,
    no such function, an existing output without ``--force``).
    """
    spec_app = typer.Typer(no_args_is_help=True, help="KernelSpec helpers.")

    @spec_app.command("init")
    def init(
        kernel: Annotated[str, typer.Argument(help="FILE.py::function or FILE.py::Class.function")],
        out: Annotated[Path | None, typer.Option(help="spec file to write (default "
                                                      "<function>.yaml here)")] = None,
        force: Annotated[bool, typer.Option("--force", help="overwrite an existing file")] = False,
    ) -> None:
        """Write a commented starter spec for KERNEL, read from its signature (file not run)."""
        from ailower._common import CliFailure
        from kernels.source import SourceExtractError

        file, sep, fn = kernel.partition("::")
        if not sep or not fn:
            raise CliFailure(f"KERNEL {kernel!r}: use FILE.py::function")
        target = out or Path(f"{fn.split('.')[-1]}.yaml")
        if target.exists() and not force:
            raise CliFailure(f"--out {target}: the file exists; pass --force to overwrite it")
        try:
            text = starter_spec(Path(file), fn, target.parent)
        except SourceExtractError as exc:
            raise CliFailure(str(exc)) from None
        except OSError as exc:
            raise CliFailure(f"{file}: cannot read: {exc.strerror}") from None
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        import shlex

        typer.echo(f"wrote {target}: edit the TODO lines, then run: ailower lower "
                   f"{shlex.quote(str(target))}")

    app.add_typer(spec_app, name="spec")
