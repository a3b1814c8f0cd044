"""Imports inside the verifier point down (issue 21): ``verifier.tables`` (name tables) <-
``verifier.analysis`` (CFG, values, dataflow) <- ``verifier.context`` <- ``verifier.rules``;
no analysis module imports the context, the rules or the registry (the old
``verifier/context.py`` <-> ``verifier/analysis/`` circle)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "verifier"
UP = {"analysis": ("verifier.context", "verifier.rules", "verifier.registry", "verifier._api"),
      "tables": ("verifier.context", "verifier.analysis", "verifier.rules", "verifier.registry")}


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
    return out


def test_analysis_and_tables_import_nothing_above_them():
    files = {"tables": [ROOT / "tables.py"], "analysis": sorted((ROOT / "analysis").glob("*.py"))}
    bad = [(f.name, m) for layer, fs in files.items() for f in fs for m in _imports(f)
           if m.startswith(UP[layer])]
    assert not bad, bad
    assert files["analysis"]          # the folder is where the test expects it
