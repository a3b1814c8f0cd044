"""``ailower cache info|clear``: ailower's on-disk caches under ``AILOWER_DATA_DIR/cache``.

Parts: ``reference`` (Triton's compile of each (kernel, config, arch): IRs, PTX, cubin, ABI),
``inputs`` (bench-size input tensors memoised as ``.npy``), ``sources`` (kernel sources submitted
as text). Each is rebuilt on demand, so clearing costs only time. The run database
(``AILOWER_DB_URL``) is not a cache and is never touched. Triton's own cache
(``TRITON_CACHE_DIR``, default ``~/.triton/cache``) is shown by ``info`` but not cleared.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Annotated

import typer

__all__ = ["register", "cache_app", "PARTS", "usage"]

PARTS = ("reference", "inputs", "sources")
"""The cache's sub-folders, in the order they are listed."""

cache_app = typer.Typer(no_args_is_help=True, help="Show or clear ailower's on-disk caches.")


def usage(folder: Path) -> tuple[int, int]:
    """``(entries, bytes)`` of a folder: top-level entries, total size of the files below it.

    A missing folder is ``(0, 0)``; files that vanish while walking are skipped."""
    if not folder.is_dir():
        return 0, 0
    entries = sum(1 for _ in folder.iterdir())
    total = 0
    for dirpath, _dirs, files in os.walk(folder):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except FileNotFoundError:
                continue
    return entries, total


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    raise AssertionError("unreachable")


@cache_app.command("info")
def cache_info(
    json_out: Annotated[bool, typer.Option("--json", help="print the sizes as JSON")] = False,
) -> None:
    """Where the caches are and how big they are (entries, bytes)."""
    from ailower._output import print_json, table
    from ailower._common import console, get_settings

    root = get_settings().cache_dir
    triton_dir = Path(os.environ.get("TRITON_CACHE_DIR") or Path.home() / ".triton" / "cache")
    rows = []
    for part in PARTS:
        n, size = usage(root / part)
        rows.append({"part": part, "path": str(root / part), "entries": n, "bytes": size})
    tn, tsize = usage(triton_dir)
    doc = {"cache_dir": str(root), "parts": rows,
           "total_bytes": sum(r["bytes"] for r in rows),
           "triton_cache": {"path": str(triton_dir), "entries": tn, "bytes": tsize}}
    if json_out:
        print_json(doc)
        return
    t = table(f"ailower cache in {root}", ("part", "entries", "size", "path"),
              keys=("part", "path"))
    for r in rows:
        t.add_row(r["part"], str(r["entries"]), _human(r["bytes"]), r["path"])
    console.print(t)
    console.print(f"total {_human(doc['total_bytes'])}; Triton's own cache: {triton_dir} "
                  f"({tn} entries, {_human(tsize)}; not managed by ailower)", markup=False)


@cache_app.command("clear")
def cache_clear(
    part: Annotated[list[str] | None, typer.Option(
        "--part", help="only these parts: reference, inputs, sources (repeatable)")] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="do not ask for confirmation")] = False,
) -> None:
    """Delete ailower's caches (all parts, or --part ones). The run database is kept."""
    from ailower._output import did_you_mean
    from ailower._common import CliFailure, console, get_settings

    chosen = list(part or PARTS)
    for p in chosen:
        if p not in PARTS:
            raise CliFailure(f"--part {p!r}: not a cache part" + (did_you_mean(p, PARTS) or
                                                                  f"; choose from {', '.join(PARTS)}"))
    root = get_settings().cache_dir
    sizes = {p: usage(root / p) for p in chosen}
    total = sum(b for _n, b in sizes.values())
    if total == 0 and not any(n for n, _b in sizes.values()):
        console.print(f"nothing to clear in {root}", markup=False)
        return
    if not yes:
        import sys

        if not sys.stdin.isatty():
            raise CliFailure("cache clear: pass --yes to delete without a prompt")
        typer.confirm(f"delete {', '.join(chosen)} in {root} ({_human(total)})?", abort=True)
    for p in chosen:
        folder = root / p
        if folder.is_symlink():  # never follow a link out of the cache: drop the link only
            folder.unlink()
        elif folder.is_dir():
            # rename first, so a concurrent reader sees either the whole entry or none
            doomed = folder.with_name(f".{p}.deleting-{os.getpid()}")
            os.replace(folder, doomed)
            shutil.rmtree(doomed)
    console.print(f"cleared {', '.join(chosen)} in {root}: {_human(total)} freed", markup=False)


def register(app: typer.Typer) -> None:
    """Add the ``cache`` group (``info``, ``clear``) to ``app``."""
    app.add_typer(cache_app, name="cache")
