"""Reading a workflow or flow file into values that remember their lines.

The file must be UTF-8 text of at most ``MAX_FILE_BYTES``; a ``.json`` file is
read as JSON, anything else as YAML. Problems are returned, never raised.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from plait import files
from plait.workflow.json_reader import parse_json
from plait.workflow.located import Found, plain
from plait.workflow.yaml_reader import parse_yaml

MAX_FILE_BYTES = files.DEFAULT_LIMIT


def read_text(path: Path) -> tuple[str | None, Found]:
    """The file's text (UTF-8, at most MAX_FILE_BYTES), or why it cannot be read: only a
    regular file is read, and never in a way that blocks (``plait.files``)."""
    try:
        return files.read_text(path, MAX_FILE_BYTES), []
    except files.UnreadableFile as exc:
        return None, [(exc.refusal.line, exc.refusal.reason)]


def parse_file(path: Path) -> tuple[Any, Found]:
    """The file's document (None when unreadable) and every problem met reading it."""
    text, found = read_text(path)
    if text is None:
        return None, found
    return parse_json(text) if path.suffix.lower() == ".json" else parse_yaml(text)


def flow_file(path: str, base_dir: Path) -> tuple[Any, Found, str]:
    """A governance flow file as plain values, its problems, and their code.

    Its steps are judged by plait.governance; here it only has to be a readable mapping.
    """
    full = base_dir / path
    refusal = files.file_refusal(full)
    if refusal is not None and refusal.missing:
        return None, [(None, f"flow file '{path}' not found")], "E004"
    if refusal is not None:
        return None, [(None, f"flow file '{files.shown(path)}': {refusal.reason}")], "E019"
    value, found = parse_file(full)
    found = [(None, f"flow file '{path}'{f' line {n}' if n else ''}: {m}") for n, m in found]
    if not found and not isinstance(value, Mapping):
        found = [(None, f"flow file '{path}': must hold a mapping (with steps)")]
    return (plain(value) if not found else None), found, "E027"
