"""Parameters as libpq sends them: bytes in the connection's client encoding, arrays of
text (and of bytes) in PostgreSQL's binary array format, arrays of integers as literals.

The commit (``pg_commit``) sends a batch's rows as one array per column. As an array
literal, every double quote and backslash of a text must be escaped by the client and
read back one character at a time by the server (``array_in``), and a journal row's
payload and key are JSON, full of quotes; in the binary format (``array_send``'s layout)
each text is its length and its bytes, as the server's ``array_recv`` reads it. Integers
need no escaping: their literal is short and the server's ``int8in`` checks their range
as it always did. A text holding a NUL is refused here as psycopg's own dumper refuses
it (libpq would cut a text parameter short at its first NUL).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Any

import psycopg

TEXT_OID = 25
BYTEA_OID = 17
_ONE_DIMENSION = struct.Struct("!iiIii")  # dimensions, has nulls, element type; size, from
_NO_DIMENSION = struct.Struct("!iiI")  # an empty array
_LENGTH = struct.Struct("!i")
_NULL = _LENGTH.pack(-1)
_NUL_REFUSED = "PostgreSQL text fields cannot contain NUL (0x00) bytes"
_NO_TEXTS = _NO_DIMENSION.pack(0, 0, TEXT_OID)
_NO_INTEGERS = b"{}"


def text(value: str, encoding: str) -> bytes:
    """One text parameter as libpq sends it (psycopg's refusal of a NUL kept)."""
    if "\x00" in value:
        raise psycopg.DataError(_NUL_REFUSED)
    return value.encode(encoding)


def text_array(items: Sequence[str | None], encoding: str) -> bytes:
    """``items`` as a binary ``text[]`` (None a null element)."""
    return column_arrays([(item,) for item in items], (False,), encoding)[0]


def column_arrays(
    rows: Sequence[Sequence[Any]], integers: Sequence[bool], encoding: str
) -> list[bytes]:
    """``rows`` as one array per column: a ``bigint[]`` literal for a column ``integers``
    marks (ASCII in every client encoding), a binary ``text[]`` for the others (None a
    null element). One loop over the cells, no call per column or per cell: this runs
    for every cell of every commit."""
    if not rows:
        return [_NO_INTEGERS if integer else _NO_TEXTS for integer in integers]
    head = _ONE_DIMENSION.pack(1, 0, TEXT_OID, len(rows), 1)
    pack = _LENGTH.pack
    arrays = []
    for column, integer in zip(zip(*rows, strict=True), integers, strict=True):
        if integer:
            arrays.append(integer_array(column))
            continue
        parts = [head]
        for item in column:
            if item is None:
                parts.append(_NULL)
                continue
            if "\x00" in item:
                raise psycopg.DataError(_NUL_REFUSED)
            data = item.encode(encoding)
            parts += (pack(len(data)), data)
        arrays.append(b"".join(parts))
    return arrays


def integer_array(items: Iterable[int | None]) -> bytes:
    """``items`` as a ``bigint[]`` literal (None a null element)."""
    return (
        "{" + ",".join(["NULL" if item is None else str(item) for item in items]) + "}"
    ).encode()


def bytea_array(items: Sequence[bytes]) -> bytes:
    """``items`` as a binary ``bytea[]``: the bytes travel as they are, not as hex text
    the server would decode."""
    if not items:
        return _NO_DIMENSION.pack(0, 0, BYTEA_OID)  # never sent: a batch without nodes
    parts = [_ONE_DIMENSION.pack(1, 0, BYTEA_OID, len(items), 1)]
    for item in items:
        parts += (_LENGTH.pack(len(item)), item)
    return b"".join(parts)
