"""Whether the tool code a run started with changed since: ``plait show`` says so.

A run pins the digests of its tools' module files (``tool_sources`` in its manifest);
reading them back needs no workflow loader, so showing a run does not import one.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from plait.core.canonical import digest


def changed_tool_sources(manifest: Mapping[str, Any]) -> list[str]:
    """The tool module files of a run that changed (or are gone) since it started."""
    recorded = manifest.get("tool_sources") or {}
    source = manifest.get("source")
    folder = Path(str(source)).parent if source else Path.cwd()
    changed = []
    for key in sorted(recorded):
        path = Path(key) if Path(key).is_absolute() else folder / key
        try:
            now = digest(path.read_bytes())
        except OSError:
            now = None
        if now != recorded[key]:
            changed.append(key)
    return changed
