"""The README and ``docs/``: every relative link and anchor resolves, nothing is fetched.

Anchors are GitHub's: a heading's text without markup, lower-cased, with every character that is
not a letter, digit, ``_``, ``-`` or space dropped and spaces turned into ``-`` (a repeated
heading gets ``-1``, ``-2``, ...), plus explicit ``<a id="...">`` tags. Links inside code
(fenced blocks and backtick spans) are not links. External links (``http:``, ``https:``,
``mailto:``) are not fetched. Also: the README stays at most 150 lines with exactly two set-up
commands, and every REST error type has the entry its ``url`` points at.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_ID = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")


def _prose(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code, with inline code spans blanked."""
    out, fence = [], False
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        if not fence:
            out.append((n, re.sub(r"`[^`]*`", lambda m: " " * len(m.group()), line)))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = re.sub(r"[`*_]{1,2}(?=\S)|(?<=\S)[`*_]{1,2}", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor a page defines (headings and ``<a id>``)."""
    text = path.read_text(encoding="utf-8")
    seen: dict[str, int] = {}
    found = set(_ID.findall(text))
    fence = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
        m = None if fence else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            found.add(s if n == 0 else f"{s}-{n}")
    return found


def broken_links(page: Path) -> list[str]:
    """'page:line: target (why)' for every relative link of ``page`` that does not resolve."""
    bad = []
    for n, line in _prose(page.read_text(encoding="utf-8")):
        for target in _LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: ...
                continue
            path_part, _, frag = target.partition("#")
            dest = (page.parent / path_part).resolve() if path_part else page
            where = f"{page.relative_to(ROOT)}:{n}: {target}"
            if not dest.exists():
                bad.append(f"{where} (no such file)")
            elif frag and dest.suffix == ".md" and frag not in anchors(dest):
                bad.append(f"{where} (no anchor #{frag} in {dest.name})")
    return bad


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_links_and_anchors_resolve(page):
    assert broken_links(page) == []


def test_the_checker_finds_broken_links(tmp_path):
    (tmp_path / "b.md").write_text("# Title `x` here\n## Again\n## Again\n<a id=\"raw\"></a>\n")
    (tmp_path / "a.md").write_text(
        "[ok](b.md#title-x-here) [ok](b.md#again-1) [ok](b.md#raw) [ok](#local) [web](https://x.y/z)\n"
        "`[code](missing.md)`\n```\n[fenced](missing.md)\n```\n# Local\n"
        "[gone](missing.md) [bad anchor](b.md#nope)\n")
    global ROOT
    old, ROOT = ROOT, tmp_path
    try:
        bad = broken_links(tmp_path / "a.md")
    finally:
        ROOT = old
    assert bad == ["a.md:7: missing.md (no such file)", "a.md:7: b.md#nope (no anchor #nope in b.md)"]


def test_readme_is_short_with_two_setup_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    setup = text.split("## Set-up: the two commands", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", setup, re.S)
    assert len(blocks) == 2 and all(len(b.strip().splitlines()) == 1 for b in blocks), blocks
    assert "ailower lower" in blocks[0] and "pytest" in blocks[1]
    assert all("venv" in b for b in blocks)


def test_every_rest_error_type_has_its_documented_entry():
    from server.errors import DOCS

    prefix = "https://github.com/ailower/ailower/blob/main/"
    assert DOCS.startswith(prefix)
    page = ROOT / DOCS[len(prefix):]
    assert page.is_file(), DOCS
    src = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "server").rglob("*.py"))
    types = set(re.findall(r"ApiError\(\s*\d+,\s*\"([a-z-]+)\"", src))
    types |= set(re.findall(r"_body\(\"([a-z-]+)\"", src))
    types |= set(re.findall(r"\d{3}: \"([a-z]+(?:-[a-z]+)+)\"", src))  # the HTTP-status names
    assert len(types) >= 25
    missing = sorted(t for t in types if f"error-{t}" not in anchors(page))
    assert missing == []


def test_rule_references_name_rows_of_the_catalogue():
    from verifier.registry import RULES
    import verifier

    catalogue = (ROOT / "docs" / "ptx_rules.md").read_text(encoding="utf-8")
    row_ids = set(re.findall(r"^\|\s*([A-Z]{1,3}\d+)\s*\|", catalogue, re.M))
    cited = 0
    for rid in RULES:
        doc = verifier.rule_doc(rid)
        assert "ptx_rules.md" not in doc.replace("docs/ptx_rules.md", ""), rid  # always the path
        for ref in re.findall(r"docs/ptx_rules\.md\s+([A-Z]{1,3}\d+)", doc):
            cited += 1
            assert ref in row_ids, f"{rid} cites docs/ptx_rules.md {ref}: no such row"
    assert cited >= 50
