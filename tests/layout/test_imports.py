"""The rooms' import graph: imports point down only, and no circle joins two rooms.

Rooms, bottom to top (the project's layering, README "Layout"): ``common`` (shared settings) ->
``kernels`` -> ``harness`` / ``verifier`` / ``emulator`` -> ``agent`` / ``search`` / ``export`` ->
``campaign`` -> ``server`` -> ``ailower`` (the CLI). A module may import a room of its own level or
below; imports between rooms of one level must not form a circle. Every ``import``/``from ...
import`` in every ``.py`` file of a room counts, including imports inside functions (a lazy import
is still a dependency). The graph comes from ``ast``: nothing is imported.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

LEVEL = {"common": 0, "kernels": 1, "harness": 2, "verifier": 2, "emulator": 2, "agent": 3,
         "search": 3, "export": 3, "campaign": 4, "server": 5, "ailower": 6}
"""Room -> level; a room may import rooms of a level <= its own."""


def imported_rooms(path: Path) -> list[tuple[int, str]]:
    """(line, imported room) for every absolute import of a project room in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            mods = [node.module]
        else:
            continue
        found += [(node.lineno, m.split(".")[0]) for m in mods if m.split(".")[0] in LEVEL]
    return sorted(found)


def room_graph() -> tuple[dict[str, set[str]], list[str]]:
    """(room -> rooms it imports, upward imports as 'file:line: a -> b' lines)."""
    edges: dict[str, set[str]] = defaultdict(set)
    upward = []
    for room, level in LEVEL.items():
        for path in sorted((ROOT / room).rglob("*.py")):
            for line, other in imported_rooms(path):
                if other == room:
                    continue
                edges[room].add(other)
                if LEVEL[other] > level:
                    upward.append(f"{path.relative_to(ROOT)}:{line}: {room} imports {other}")
    return edges, upward


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One circle of rooms (first room repeated at the end), or None (depth-first search)."""
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(edges.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state and (c := visit(m)):
                return c
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(edges):
        if n not in state and (c := visit(n)):
            return c
    return None


def test_every_room_exists():
    for room in LEVEL:
        assert (ROOT / room / "__init__.py").is_file(), room


def test_imports_point_down_only():
    _, upward = room_graph()
    assert upward == [], "imports from a lower room into a higher one:\n" + "\n".join(upward)


def test_no_circle_between_rooms():
    edges, _ = room_graph()
    assert find_cycle(edges) is None, f"import circle between rooms: {' -> '.join(find_cycle(edges))}"


def test_cli_commands_never_import_the_app_module():
    bad = [f"{p.name}:{line}" for p in sorted((ROOT / "ailower").glob("*.py")) if p.name != "__main__.py"
           for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
           if isinstance(node, ast.ImportFrom) and node.module == "ailower.cli"
           for line in [node.lineno]]
    assert bad == [], f"modules importing ailower.cli (use ailower._common): {bad}"


def test_the_checker_sees_a_circle_and_an_upward_import(tmp_path):
    # the checks can fail: a two-room circle and a three-room one are found, a DAG is not
    assert find_cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}}) is None
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from ailower.cli import app\nimport kernels.spec, os\n")
    assert imported_rooms(f) == [(2, "ailower"), (3, "kernels")]
