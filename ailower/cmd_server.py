"""``ailower serve`` and ``ailower keys create|list|revoke`` (the REST service's commands).

``register(app)`` adds them; see ``docs/rest.md``.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.markup import escape

from ailower._output import make_console, table

__all__ = ["register", "keys_app"]

console = make_console()  # piped: wide enough that no key id or name is cut
keys_app = typer.Typer(no_args_is_help=True, help="Manage the REST service's API keys.")


def _session():
    from ailower.settings import get_settings
    from server.db import make_engine, make_sessionmaker

    return make_sessionmaker(make_engine(get_settings().database_url))()


@keys_app.command("create")
def keys_create(
    name: Annotated[str, typer.Argument(help="a label for the key (who uses it)")],
    rate_per_minute: Annotated[int | None, typer.Option(min=1, help="submissions per minute")] = None,
    max_concurrent: Annotated[int | None, typer.Option(min=1, help="queued + running jobs")] = None,
    max_body_bytes: Annotated[int | None, typer.Option(min=1024, help="request body bytes")] = None,
    max_ptx_bytes: Annotated[int | None, typer.Option(min=1024, help="PTX bytes for /v1/verify")] = None,
    max_source_bytes: Annotated[int | None, typer.Option(min=256, help="Triton source bytes")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print {key_id, key} as JSON")] = False,
) -> None:
    """Create an API key and print it once (only its argon2 hash is stored)."""
    from server.keys import KeyLimits, create_key
    from server.settings import ServerSettings

    d = KeyLimits.defaults(ServerSettings())
    limits = KeyLimits(rate_per_minute or d.rate_per_minute, max_concurrent or d.max_concurrent,
                       max_body_bytes or d.max_body_bytes, max_ptx_bytes or d.max_ptx_bytes,
                       max_source_bytes or d.max_source_bytes)
    with _session() as s:
        try:
            plain, row = create_key(s, name, limits)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="NAME") from None
    if json_out:
        print(json.dumps({"key_id": row.key_id, "name": row.name, "key": plain}))
        return
    console.print(f"API key [bold]{escape(row.key_id)}[/] ({escape(row.name)}); shown once, keep it secret:")
    print(plain)


@keys_app.command("list")
def keys_list(
    json_out: Annotated[bool, typer.Option("--json", help="print the keys as JSON")] = False,
) -> None:
    """List the keys (ids, names, limits, revocation; never the keys or hashes)."""
    from server.keys import list_keys

    if json_out:
        with _session() as s:
            print(json.dumps([{"key_id": k.key_id, "name": k.name,
                               "created_at": k.created_at.isoformat(),
                               "revoked": k.revoked_at is not None,
                               "rate_per_minute": k.rate_per_minute,
                               "max_concurrent": k.max_concurrent,
                               "max_body_bytes": k.max_body_bytes,
                               "max_ptx_bytes": k.max_ptx_bytes,
                               "max_source_bytes": k.max_source_bytes} for k in list_keys(s)]))
        return

    t = table("API keys", ("key id", "name", "created", "revoked", "rate/min", "concurrent",
                           "body B", "ptx B", "source B"), keys=("key id", "name"))
    with _session() as s:
        for k in list_keys(s):
            t.add_row(k.key_id, k.name, k.created_at.strftime("%Y-%m-%d %H:%M"),
                      k.revoked_at.strftime("%Y-%m-%d %H:%M") if k.revoked_at else "-",
                      str(k.rate_per_minute), str(k.max_concurrent), str(k.max_body_bytes),
                      str(k.max_ptx_bytes), str(k.max_source_bytes))
    console.print(t)


@keys_app.command("revoke")
def keys_revoke(key_id: Annotated[str, typer.Argument(help="the key's id (ail_<id>_...)")]) -> None:
    """Revoke a key; requests with it get 401 at once. Exit status 2 for an unknown id."""
    from server.keys import revoke_key

    if key_id.startswith("ail_"):
        key_id = key_id.split("_")[1]
    with _session() as s:
        try:
            row = revoke_key(s, key_id)
        except LookupError as exc:
            console.print(f"[red]error:[/] {escape(str(exc))}")
            raise typer.Exit(2) from None
    console.print(f"revoked {row.key_id} ({row.name})", markup=False)


def serve(
    host: Annotated[str | None, typer.Option(help="listen address (AILOWER_SERVER_HOST)")] = None,
    port: Annotated[int | None, typer.Option(help="port (AILOWER_SERVER_PORT)")] = None,
    no_workers: Annotated[bool, typer.Option("--no-workers",
                                             help="API only; run `python -m server.workers` elsewhere")] = False,
    log_level: Annotated[str, typer.Option(help="uvicorn log level")] = "info",
) -> None:
    """Run the REST service (FastAPI + uvicorn) with its job slots."""
    from server import serve as run

    run(host, port, workers=not no_workers, log_level=log_level)


def register(app: typer.Typer) -> None:
    """Add ``serve`` and the ``keys`` sub-app to ``app``."""
    app.command("serve")(serve)
    app.add_typer(keys_app, name="keys")
