"""A run records the digest of its tools' files as they are when it starts (tool code is
live), although an unchanged file is hashed once per process (workflow/source_digests.py)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

from plait.core.canonical import digest
from plait.workflow import Workflow
from plait.workflow.run_definition import tool_sources


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _counting_reads(monkeypatch: pytest.MonkeyPatch, name: str) -> list[Path]:
    """The reads of files called ``name`` through ``Path.read_bytes`` from now on."""
    reads: list[Path] = []
    read_bytes = Path.read_bytes

    def counting(self: Path) -> bytes:
        if self.name == name:
            reads.append(self)
        return read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", counting)
    return reads


def test_an_unchanged_tool_file_is_read_once_and_a_rewrite_in_place_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "tools_in_place.py"
    path.write_text("def hello() -> dict:\n    return {'a': 1}\n")
    module = _load(path, "tools_in_place")
    wf = Workflow.new("digests").node("hello", tool=module.hello)
    reads = _counting_reads(monkeypatch, path.name)
    first = [tool_sources(wf) for _ in range(3)]
    assert first[0] == first[1] == first[2]
    assert list(first[0].values()) == [digest(path.read_bytes())]
    assert len(reads) == 2  # hashed once, then read once more by this test

    stat = path.stat()
    with path.open("r+") as f:  # same inode, same size, same modification time
        f.write("def hello() -> dict:\n    return {'a': 2}\n")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    second = tool_sources(wf)
    assert list(second.values()) == [digest(path.read_bytes())] != list(first[0].values())
    assert len(reads) == 4


def test_a_tool_file_replaced_or_removed_is_seen_at_the_next_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "tools_replaced.py"
    path.write_text("def hello() -> dict:\n    return {'b': 1}\n")
    module = _load(path, "tools_replaced")
    wf = Workflow.new("digests").node("hello", tool=module.hello)
    reads = _counting_reads(monkeypatch, path.name)
    before = [tool_sources(wf) for _ in range(2)]
    assert before[0] == before[1] and len(reads) == 1

    stat = path.stat()
    fresh = tmp_path / "fresh.py"
    fresh.write_text("def hello() -> dict:\n    return {'b': 3}\n")
    os.utime(fresh, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    fresh.replace(path)  # a new inode with the old name, size and modification time
    after = tool_sources(wf)
    assert len(reads) == 2
    assert list(after.values()) == [digest(fresh_bytes := path.read_bytes())]
    assert list(after.values()) != list(before[0].values()) and fresh_bytes

    path.unlink()
    assert tool_sources(wf) == {}
