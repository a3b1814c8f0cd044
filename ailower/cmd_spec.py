"""``ailower spec init FILE.py::fn``: write a commented starter KernelSpec from a kernel's signature.

The file is read with :mod:`ast` only (:func:`kernels.source.signature_of`): a module that imports
torch or packages this host lacks is fine. The starter guesses from names and annotations
(``tl.constexpr`` parameters are constexprs, ``*_ptr`` / ``*ptr`` parameters pointers, ``out`` /
``y`` / ``dst`` / ``o`` pointers outputs, a ``None`` default a ``none`` parameter, other
parameters ``i32`` scalars) and marks every guess ``# TODO``; it is meant to be edited, then
checked with ``ailower lower FILE.yaml``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any

import typer

__all__ = ["starter_spec", "register"]

_OUT_NAMES = re.compile(r"(^|_)(out|output|y|o|dst|res|result|c|z)(_|$)", re.I)
_FLOAT_SCALARS = re.compile(r"(eps|scale|alpha|beta|gamma|lr|temp|temperature|momentum|decay"
                            r"|theta|sigma|softcap|sm_scale)", re.I)


def _yaml_value(text: str) -> str:
    """A Python default's source as a YAML scalar (bools lower-case, numbers as is, else quoted)."""
    if text in ("True", "False"):
        return text.lower()
    if re.fullmatch(r"-?\d+", text) or re.fullmatch(r"-?\d*\.\d+(e-?\d+)?|-?\d+e-?\d+", text):
        return text
    return '"' + text.replace('"', '\\"') + '"'


def starter_spec(file: Path, function: str, spec_dir: Path) -> str:
    """The starter spec's YAML text for ``function`` (``fn`` or ``Class.fn``) in ``file``.

    Args:
        file: the kernel's Python file (never executed).
        function: the kernel's name.
        spec_dir: where the spec will be written (``source.path`` is made relative to it).

    Raises:
        kernels.source.SourceExtractError: the file does not parse, has no such function, or the
            function takes ``*args`` / ``**kwargs``.
        OSError: the file cannot be read.
    """
    from kernels.source import signature_of

    sig = signature_of(file.read_text(), function, str(file))
    rel = os.path.relpath(Path(file).resolve(), spec_dir.resolve())
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", function.split(".")[-1].removesuffix("_kernel")
                  or function)
    block = next((n for n in sig.names if n in sig.constexpr and "BLOCK" in n.upper()), None)
    lines = [
        f"# KernelSpec for {function}() in {file.name} (written by 'ailower spec init'; edit the",
        "# TODO lines, then run: ailower lower THIS_FILE.yaml). Expressions (shapes, values,",
        "# grid, flops, bytes) are evaluated by ailower's safe evaluator over the names in",
        "# 'sizes', the autotune meta values, num_warps, num_stages and num_ctas.",
        f"name: {name}",
        f"description: \"{(sig.docstring.splitlines() or [''])[0][:100]}\"",
        "source:",
        f"  path: {rel}          # read with ast, never executed",
        f"  function: {function}",
        "params:                # every parameter of the kernel, in order",
    ]
    meta: dict[str, str] = {}
    for n in sig.names:
        default = sig.defaults.get(n)
        if n in sig.constexpr:
            if default is not None and default != "None":
                lines.append(f"  - {{name: {n}, kind: constexpr, value: {_yaml_value(default)}}}"
                             "   # fixed; or drop 'value' to autotune it under autotune.meta")
            else:
                guess = "[64, 128, 256]" if "BLOCK" in n.upper() else "[1]"
                meta[n] = guess
                lines.append(f"  - {{name: {n}, kind: constexpr}}   # from autotune.meta "
                             "(TODO: values)")
        elif default == "None":
            lines.append(f"  - {{name: {n}, kind: none}}   # passed as None (a constexpr None); "
                         "TODO: or a pointer")
        elif n.lower().endswith("ptr") or n.lower().endswith("_p"):
            role = "out" if _OUT_NAMES.search(n.removesuffix("_ptr").removesuffix("ptr")) else "in"
            lines.append(f"  - {{name: {n}, kind: pointer, dtype: fp32, shape: [N], role: {role}}}"
                         "   # TODO: dtype, shape, role (in | out | inout)")
        elif _FLOAT_SCALARS.search(n):
            lines.append(f"  - {{name: {n}, kind: scalar, dtype: fp32, value: "
                         f"{_yaml_value(default) if default else '1.0'}}}   # TODO: value")
        else:
            val = "N" if not n.lower().startswith("stride") else "1"
            lines.append(f"  - {{name: {n}, kind: scalar, dtype: i32, value: {val}}}"
                         "   # TODO: an expression over sizes (e.g. M * K)")
    grid = f'"cdiv(N, {block})"' if block else "1   # TODO: programs along x (and y, z)"
    lines += [
        "sizes:                 # named problem sizes: 'verify' is checked, 'bench' is timed",
        "  verify: {N: 1000}     # TODO: small and not a multiple of the block (tests masking)",
        "  bench: {N: 16777216}  # TODO: large enough to fill the GPU",
        f"grid: [{grid}]",
        "autotune:",
        "  meta:" + ("" if meta else " {}"),
        *(f"    {k}: {v}" for k, v in meta.items()),
        "  num_warps: [4, 8]",
        "  num_stages: [2, 3]",
        "flops: 0               # TODO: FLOPs of one launch (0 for memory-bound kernels)",
        "bytes: \"8 * N\"         # TODO: minimum DRAM bytes one launch moves",
        "# reference: ref.py::reference   # optional float64 NumPy reference "
        "f(inputs, dims) -> {out: array}",
    ]
    return "\n".join(lines) + "\n"


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
