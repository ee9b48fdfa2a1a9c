"""``PreparedStatements``: the commit statement run through libpq directly.

A superstep on PostgreSQL is one statement (``pg_commit.COMMITS``), and psycopg's Python
around one ``execute`` (a cursor, the named parameters mapped to positions and dumped one
by one, its prepared-statement bookkeeping, the row loaders) cost the client about as
much as the rest of the commit. Here the statement is prepared once per connection under
a name of its own; each call then sends the parameters, already text (a few binary),
with ``send_query_prepared`` and waits for the answer with psycopg's own wait, the one
its ``execute`` uses: interrupting it cancels the statement, and a connection the server
closed mid-statement is reported as psycopg reports it (an ``OperationalError``, the
connection ``broken``). A failed statement raises the error class psycopg would
(``psycopg.errors.error_from_result``: ``UniqueViolation`` with its ``diag``). This
module never builds SQL and never retries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from weakref import WeakKeyDictionary

import psycopg
from psycopg import errors as pg_errors
from psycopg import pq
from psycopg.generators import execute

from plait.store.pg_pool import Connection

_TUPLES_OK = pq.ExecStatus.TUPLES_OK
_COMMAND_OK = pq.ExecStatus.COMMAND_OK
_FATAL_ERROR = pq.ExecStatus.FATAL_ERROR


@dataclass(frozen=True)
class Statement:
    """A statement prepared as ``name``: ``$1``, ``$2``, ... its parameters, their types
    read by the server from the statement's casts and columns, each sent in the format
    ``formats`` gives it (0 text, 1 binary)."""

    name: bytes
    text: bytes
    formats: tuple[int, ...]


class PreparedStatements:
    """The statements each connection has prepared, so each is prepared once per
    connection (a new connection, or one the pool replaced, prepares again)."""

    def __init__(self) -> None:
        self._prepared: WeakKeyDictionary[Connection, tuple[str, set[bytes]]] = WeakKeyDictionary()

    def encoding(self, conn: Connection) -> str:
        """The connection's client encoding, the one its parameters must be sent in."""
        return self._state(conn)[0]

    def run(
        self, conn: Connection, statement: Statement, params: Sequence[bytes | None]
    ) -> pq.abc.PGresult:
        """The result of ``statement`` run with ``params`` (in its ``formats``); a failed
        statement raises the error psycopg's ``execute`` would."""
        pgconn = conn.pgconn
        with conn.lock:
            encoding, prepared = self._state(conn)
            if statement.name not in prepared:
                pgconn.send_prepare(statement.name, statement.text)
                _check(conn.wait(execute(pgconn)), encoding, _COMMAND_OK)
                prepared.add(statement.name)
            pgconn.send_query_prepared(statement.name, params, statement.formats)
            return _check(conn.wait(execute(pgconn)), encoding, _TUPLES_OK)

    def _state(self, conn: Connection) -> tuple[str, set[bytes]]:
        """The connection's client encoding and the names it has prepared."""
        state = self._prepared.get(conn)
        if state is None:
            state = self._prepared[conn] = (conn.info.encoding, set())
        return state


def _check(results: list[pq.abc.PGresult], encoding: str, ok: int) -> pq.abc.PGresult:
    """The statement's one result, or the error it stands for (as psycopg raises it)."""
    for result in results:
        if result.status == _FATAL_ERROR:
            raise pg_errors.error_from_result(result, encoding=encoding)
    if len(results) != 1 or results[0].status != ok:
        raise psycopg.InternalError(f"unexpected results: {[r.status for r in results]}")
    return results[0]
