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


def test_an_unchanged_tool_file_is_read_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "tools_read_once.py"
    path.write_text("def hello() -> dict:\n    return {'z': 1}\n")
    module = _load(path, "tools_read_once")
    wf = Workflow.new("digests").node("hello", tool=module.hello)
    reads: list[Path] = []
    read_bytes = Path.read_bytes

    def counting(self: Path) -> bytes:
        reads.append(self)
        return read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", counting)
    sources = [tool_sources(wf) for _ in range(3)]
    assert sources[0] == sources[1] == sources[2]
    assert [p for p in reads if p.name == path.name] == [path]


def test_a_tool_file_rewritten_in_place_with_the_same_size_is_hashed_again(
    tmp_path: Path,
) -> None:
    path = tmp_path / "tools_same_size.py"
    path.write_text("def hello() -> dict:\n    return {'a': 1}\n")
    module = _load(path, "tools_same_size")
    wf = Workflow.new("digests").node("hello", tool=module.hello)
    first = tool_sources(wf)
    assert list(first.values()) == [digest(path.read_bytes())]
    assert tool_sources(wf) == first  # unchanged: the same digest

    stat = path.stat()
    with path.open("r+") as f:  # same inode, same size, same modification time
        f.write("def hello() -> dict:\n    return {'a': 2}\n")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    second = tool_sources(wf)
    assert list(second.values()) == [digest(path.read_bytes())] != list(first.values())


def test_a_tool_file_replaced_by_another_is_hashed_again(tmp_path: Path) -> None:
    path = tmp_path / "tools_replaced.py"
    path.write_text("def hello() -> dict:\n    return {'b': 1}\n")
    module = _load(path, "tools_replaced")
    wf = Workflow.new("digests").node("hello", tool=module.hello)
    before = tool_sources(wf)
    stat = path.stat()
    fresh = tmp_path / "fresh.py"
    fresh.write_text("def hello() -> dict:\n    return {'b': 3}\n")
    os.utime(fresh, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    fresh.replace(path)  # a new inode with the old name, size and modification time
    after = tool_sources(wf)
    assert list(after.values()) == [digest(path.read_bytes())] != list(before.values())


def test_a_tool_file_removed_is_no_longer_recorded(tmp_path: Path) -> None:
    path = tmp_path / "tools_removed.py"
    path.write_text("def hello() -> dict:\n    return {'c': 1}\n")
    module = _load(path, "tools_removed")
    wf = Workflow.new("digests").node("hello", tool=module.hello)
    assert len(tool_sources(wf)) == 1
    path.unlink()
    assert tool_sources(wf) == {}
