"""The SHA-256 of a tool's module file, read again only when the file changed.

Tool code is live, so every run start records the digest of each tool's module file
(``tool_sources`` in its manifest). Reading and hashing the files at every start cost
about a seventh of parking a run; the file's identity and stamp (device, inode, size,
modification and change time, all from one ``stat``) say whether it can have changed
since it was last hashed, so an unchanged file is not read again and a changed one is.
"""

from __future__ import annotations

import inspect
import os
import stat as stat_module
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from plait.core.canonical import digest

_Stamp = tuple[int, int, int, int, int]
"""(st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns): what a rewrite of a file changes."""

_MAX_ENTRIES = 4096
"""Entries each cache keeps before it starts over (tools of many versions of many files)."""

_lock = threading.Lock()
_digests: dict[str, tuple[_Stamp, str]] = {}
_keys: dict[tuple[str, str, str, _Stamp], str] = {}
_files: dict[Callable[..., Any], str | None] = {}


def source_file(fn: Callable[..., Any]) -> str | None:
    """The file ``inspect.getsourcefile`` names for ``fn`` (None for a builtin): the
    function's code object, hence its file name, does not change, so it is asked once."""
    try:
        with _lock:
            if fn in _files:
                return _files[fn]
    except TypeError:  # an unhashable callable object: asked every time
        return _source_file(fn)
    found = _source_file(fn)
    with _lock:
        if len(_files) >= _MAX_ENTRIES:
            _files.clear()
        _files[fn] = found
    return found


def _source_file(fn: Callable[..., Any]) -> str | None:
    try:
        return inspect.getsourcefile(fn) or None
    except TypeError:  # a builtin or a C function: no source file
        return None


def stamp(path: str) -> _Stamp | None:
    """The stamp of a regular file, or None when ``path`` is not one (gone, a folder)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat_module.S_ISREG(st.st_mode):
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def file_digest(path: str, current: _Stamp) -> str:
    """The SHA-256 of the file at ``path`` whose stamp is ``current``: hashed again only
    when the stamp differs from the one it was last hashed with."""
    with _lock:
        known = _digests.get(path)
    if known is not None and known[0] == current:
        return known[1]
    value = digest(Path(path).read_bytes())
    with _lock:
        if len(_digests) >= _MAX_ENTRIES:
            _digests.clear()
        _digests[path] = (current, value)
    return value


def keyed(path: str, base_dir: Path, current: _Stamp, name: Callable[[Path, Path], str]) -> str:
    """``name(path, base_dir)`` (how the manifest names the file), remembered for the
    file with this stamp: resolving symbolic links stats every folder of the path. A
    relative path resolves against the working folder, which is part of the key then."""
    cwd = "" if os.path.isabs(path) else os.getcwd()
    key = (path, str(base_dir), cwd, current)
    with _lock:
        found = _keys.get(key)
    if found is not None:
        return found
    value = name(Path(path), base_dir)
    with _lock:
        if len(_keys) >= _MAX_ENTRIES:
            _keys.clear()
        _keys[key] = value
    return value
