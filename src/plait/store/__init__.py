"""Where runs live: the ``Store`` protocol, its back ends, and ``open_store`` to pick one.

The driver talks only to ``Store`` (``base.py``) with the values of ``records.py``; which
database is behind it is decided here, from a URL, and nowhere else.
"""

from __future__ import annotations

import os

from plait.core.errors import PlaitError
from plait.store.base import Store
from plait.store.read_only import read_only_reason
from plait.store.records import (
    RUN_STATUSES,
    CheckpointMeta,
    CheckpointWrite,
    IntentRecord,
    IntentWrite,
    Journal,
    JournalItem,
    LeaseOwner,
    ManifestWrite,
    Record,
    RecordWrite,
    ResultRecord,
    ResultWrite,
    RunInfo,
    StatusWrite,
    Write,
)
from plait.store.sqlite import SqliteStore

__all__ = [
    "RUN_STATUSES",
    "CheckpointMeta",
    "CheckpointWrite",
    "IntentRecord",
    "IntentWrite",
    "Journal",
    "JournalItem",
    "LeaseOwner",
    "ManifestWrite",
    "Record",
    "RecordWrite",
    "ResultRecord",
    "ResultWrite",
    "RunInfo",
    "SqliteStore",
    "StatusWrite",
    "Store",
    "Write",
    "open_for_reading",
    "open_store",
    "sqlite_path",
]


def sqlite_path(url: str) -> str | None:
    """The file a SQLite URL names, or None when ``url`` is not a SQLite location.

    ``sqlite:///rel/path.db`` is relative, ``sqlite:////abs/path.db`` absolute,
    ``sqlite:///:memory:`` a private in-memory database, and a URL without a scheme a path
    (``sqlite:/x``, a scheme without its ``//``, is refused: PLAIT-E020).
    """
    if url.startswith("sqlite://"):
        rest = url[len("sqlite://") :]
        if not rest.startswith("/") or rest == "/":
            raise PlaitError("E020", f"storage error on {url}: expected sqlite:///<path>")
        return rest[1:]
    if "://" in url:
        return None
    if url.lower().startswith(("sqlite:", "postgresql:", "postgres:")):  # sqlite:/x, a typo
        raise PlaitError(
            "E020", f"storage error on {url}: expected sqlite:///<path> or postgresql://..."
        )
    return url


def open_store(url: str, *, durability: str = "normal") -> Store:
    """Open the store a URL or path names; SQLite's parent folders are created.

    ``postgresql://`` and ``postgres://`` URLs (libpq syntax) open a ``PostgresStore``;
    psycopg is imported only then, so SQLite users need not install it.
    """
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme in ("postgresql", "postgres"):
        try:
            from plait.store.postgres import PostgresStore
        except ImportError as exc:
            raise PlaitError(
                "E020",
                f"the PostgreSQL store needs psycopg ({exc}); install plait[postgres]",
            ) from exc
        return PostgresStore(url, durability=durability)
    path = sqlite_path(url)
    if path is None:
        raise PlaitError(
            "E020", f"unsupported store URL scheme '{scheme}' (expected sqlite or postgresql)"
        )
    return SqliteStore(os.path.expanduser(path), durability)


def open_for_reading(url: str) -> tuple[Store, str | None]:
    """Open a store to read it: a SQLite file this process cannot write (``read_only.py``)
    is opened read-only, and the reason is returned for the caller to say; else as
    ``open_store`` does (reason None)."""
    path = sqlite_path(url) if "://" not in url or url.startswith("sqlite://") else None
    if path is not None and path != ":memory:":
        full = os.path.expanduser(path)
        reason = read_only_reason(full)
        if reason is not None and os.path.exists(full):
            return SqliteStore(full, read_only=True), reason
    return open_store(url), None
