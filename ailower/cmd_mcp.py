"""``ailower mcp``: the agent loop's tools over the Model Context Protocol (placeholder)."""

from __future__ import annotations

import typer

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``ailower mcp`` to ``app`` (filled in by the MCP server commit)."""
    return None
