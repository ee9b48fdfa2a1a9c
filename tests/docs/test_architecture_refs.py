"""docs/architecture.md answers the code: every section the code cites (``§3.5``,
``docs/architecture.md §11``) is a heading of that file, and every module it names exists
(a module renamed or split fails here until the document follows it)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "plait"
ARCHITECTURE = ROOT / "docs" / "architecture.md"

CITATION = re.compile(r"§(\d+(?:\.\d+)?[a-z]?)")
SECTION_HEADING = re.compile(r"^#{1,6}\s+§(\d+(?:\.\d+)?[a-z]?)\s", re.M)
MODULE = re.compile(r"`((?:[a-z_]+/)+[a-z_]+\.py)`")
"""A module named in backticks: relative to src/plait (``core/step.py``), or to the
repository when it starts with one of ELSEWHERE (``tests/core/test_purity.py``)."""
ELSEWHERE = ("tests/", "bench/", "examples/")


def cited_sections() -> dict[str, list[str]]:
    """Section number -> the source files citing it."""
    cited: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for number in CITATION.findall(path.read_text(encoding="utf-8")):
            cited.setdefault(number, []).append(str(path.relative_to(ROOT)))
    return cited


def test_the_code_cites_sections() -> None:
    assert cited_sections(), "no § citation found under src/plait: is the pattern stale?"


def test_every_cited_section_is_a_heading_of_docs_architecture() -> None:
    headings = set(SECTION_HEADING.findall(ARCHITECTURE.read_text(encoding="utf-8")))
    missing = {
        number: sorted(set(files))
        for number, files in cited_sections().items()
        if number not in headings
    }
    assert not missing, f"cited in src/plait, not a heading of docs/architecture.md: {missing}"


def test_every_module_docs_architecture_names_exists() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    named = set(MODULE.findall(text))
    assert named, "docs/architecture.md names no module: is the pattern stale?"
    gone = sorted(
        m for m in named if not (ROOT / m if m.startswith(ELSEWHERE) else PACKAGE / m).is_file()
    )
    assert not gone, f"docs/architecture.md names modules that do not exist in src/plait: {gone}"
