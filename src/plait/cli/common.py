"""Options and helpers shared by the verbs that touch the store."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated

import typer

from plait.core.errors import PlaitError
from plait.driver.defaults import default_db

if TYPE_CHECKING:
    from plait.driver.deltas import DeltaObserver
    from plait.driver.runtime import Runtime
    from plait.driver.wave import Observer

JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]
DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        metavar="URL",
        help="Store URL (default $PLAIT_DB, else sqlite:///.plait/plait.db).",
    ),
]
AsOption = Annotated[
    str | None,
    typer.Option("--as", metavar="PRINCIPAL", help="Act as this principal."),
]
CursorOption = Annotated[
    str | None,
    typer.Option("--cursor", metavar="C", help="The next page: a page's next_cursor."),
]


@contextmanager
def runtime(
    db: str | None,
    principal: str | None = None,
    *,
    observer: Observer | None = None,
    durability: str | None = None,
    deltas: DeltaObserver | None = None,
    reading: bool = False,
) -> Iterator[Runtime]:
    """A Runtime on ``--db`` (or the default store), closed when the verb is done.

    ``reading``: the verb only reads, so a store this process cannot write is opened
    read-only (``store.read_only``), with a note on stderr saying so."""
    url = db or default_db()
    from plait.driver.runtime import Runtime  # imported when a verb opens the store
    from plait.store import open_for_reading

    store = None
    if reading:
        store, reason = open_for_reading(url)
        if reason is not None:
            sys.stderr.write(f"plait: {reason}: reading {url} read-only\n")
            sys.stderr.flush()
    rt = Runtime(
        url,
        store=store,
        principal=principal,
        observer=observer,
        durability=durability,
        deltas=deltas,
    )
    try:
        yield rt
    except PlaitError as exc:
        if exc.code != "E017" or not exc.detail.startswith("unknown run id"):
            raise
        # A person who mistyped --db (or forgot PLAIT_DB) learns where plait looked.
        raise PlaitError("E017", f"{exc.detail} in store {store_location(rt)}") from None
    finally:
        rt.close()


def store_location(rt: Runtime) -> str:
    """Where a runtime's store is, for a person: a SQLite file's path, a PostgreSQL
    server and database (never its password)."""
    store = rt.store
    return str(getattr(store, "where", None) or getattr(store, "path", None) or store)
