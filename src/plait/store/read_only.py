"""Why a SQLite store cannot be written here, and opening it for reading when it cannot.

A store on a read-only file system (a mounted snapshot, a read-only volume), or in a
folder or file this user may not write, cannot take a write — and SQLite in WAL mode
cannot even open it for writing ("unable to open database file"). Inspection verbs
(``show``, ``runs``, ``trace``, ``asks``, ``verify``) only read: they open such a store
read-only (SQLite ``mode=ro``) and say so; every other verb is told plainly that the
store is read-only here (PLAIT-E020), instead of SQLite's words.
"""

from __future__ import annotations

import os


def read_only_reason(path: str) -> str | None:
    """Why the SQLite file ``path`` cannot be written by this process (None: it can)."""
    if path == ":memory:":
        return None
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        return None  # a folder that does not exist yet: a writer creates it
    if _read_only_fs(folder):
        return "the file system is read-only"
    if os.path.exists(path) and not os.access(path, os.W_OK):
        return "the store file is not writable by this user"
    if os.path.exists(path) and not os.access(folder, os.W_OK):
        # WAL mode keeps its -wal and -shm files beside the store
        return "the store's folder is not writable by this user"
    return None


def read_only_query(path: str) -> str:
    """The URI query that opens ``path`` read-only. ``mode=ro``, unless SQLite could not
    open it so: a WAL-mode file whose ``-shm`` index is missing in a folder it cannot
    write. Then, when no ``-wal`` file holds commits the main file lacks, ``immutable=1``
    reads the main file as it is (nothing else can be in it: nothing can write there)."""
    folder = os.path.dirname(os.path.abspath(path))
    wal, shm = f"{path}-wal", f"{path}-shm"
    writable = os.access(folder, os.W_OK) and not _read_only_fs(folder)
    wal_empty = not os.path.exists(wal) or os.path.getsize(wal) == 0
    if not writable and not os.path.exists(shm) and wal_empty:
        return "mode=ro&immutable=1"
    return "mode=ro"


def _read_only_fs(folder: str) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def read_only_message(path: str, reason: str) -> str:
    """The PLAIT-E020 detail of a write refused because the store is read-only here."""
    return (
        f"storage error on {path}: the store is read-only here ({reason}); only the"
        " inspection verbs (show, runs, trace, asks, verify) can read it"
    )
