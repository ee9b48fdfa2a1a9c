"""The documentation keeps its promises: the README's Python example runs, and every
relative link in README.md and docs/*.md leads to a file (and heading) that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = sorted([README, *(ROOT / "docs").glob("*.md")])

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")
INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.M)
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.I)


def first_python_block(markdown: str) -> str:
    match = re.search(r"^```python\n(.*?)^```", markdown, re.M | re.S)
    assert match is not None, "README.md has no ```python block"
    return match.group(1)


def prose(markdown: str) -> str:
    """The text outside fenced code blocks, with inline code blanked out."""
    return INLINE_CODE.sub("``", FENCE.sub("", markdown))


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lowercase, punctuation dropped, spaces to '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    found: set[str] = set(HTML_ANCHOR.findall(text))
    seen: dict[str, int] = {}
    for heading in HEADING.findall(FENCE.sub("", text)):
        slug = github_slug(heading)
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def relative_links(path: Path) -> list[str]:
    text = prose(path.read_text(encoding="utf-8"))
    targets = INLINE_LINK.findall(text) + REFERENCE_LINK.findall(text)
    return [t for t in targets if not re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", t)]


def test_readme_python_example_completes_and_verifies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code = first_python_block(README.read_text(encoding="utf-8"))
    monkeypatch.chdir(tmp_path)
    for name in ("PLAIT_DB", "PLAIT_CRASH_AT", "PLAIT_NOW_MS", "PLAIT_LEASE_TTL_MS"):
        monkeypatch.delenv(name, raising=False)

    exec(compile(code, str(README), "exec"), {"__name__": "readme_example"})

    lines = capsys.readouterr().out.splitlines()
    assert lines, "the README example printed nothing"
    assert lines[0].split()[0] == "completed", lines
    assert lines[-1] == "True", lines
    assert (tmp_path / "runs.db").is_file()


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_points_to_an_existing_file_and_heading(doc: Path) -> None:
    broken = []
    for target in relative_links(doc):
        file_part, _, fragment = target.partition("#")
        linked = (doc.parent / file_part).resolve() if file_part else doc
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
            broken.append(f"{target}: no heading #{fragment} in {linked.name}")
    assert not broken, f"{doc.relative_to(ROOT)}: " + "; ".join(broken)
