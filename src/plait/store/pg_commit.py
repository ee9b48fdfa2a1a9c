"""PostgreSQL's commit: a whole batch of journal writes in ONE statement (``COMMIT``).

One statement is one round trip and one implicit transaction (autocommit): it locks the
run row and, with a token, the lease row (``FOR UPDATE``), so the fencing token is
checked in the same transaction as the writes; only when it is current does it reserve
the seqs the batch takes (``UPDATE runs ... RETURNING``, which also applies the status
write) and insert the journal rows, manifests and nodes numbered from them (nodes with
``ON CONFLICT DO NOTHING`` in hash order: two commits sharing nodes cannot deadlock).
A stale token or an unknown run writes nothing; a key already journaled fails the
statement, which writes nothing either. This module builds the statement and its
parameters; ``PostgresStore.commit`` runs it and reads its answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from plait.core.canonical import dumps
from plait.store.rows import JOURNAL_COLUMNS, Row
from plait.store.sql import LEASE_LIST

_LEASE_COLUMNS = LEASE_LIST

_INTEGER_COLUMNS = ("superstep", "clock_ms", "journal_bytes", "size")  # the rest are text
_JOURNAL_RECORD = ", ".join(  # a journal row as ``commit_params`` sends it
    ["pos bigint"]
    + [f"{c} {'bigint' if c in _INTEGER_COLUMNS else 'text'}" for c in JOURNAL_COLUMNS]
)
_JOURNAL_KEYS = ("pos", *JOURNAL_COLUMNS)
# A whole commit in one statement, so one round trip and one implicit transaction
# (autocommit): lock the run row, then (with a token) its lease row; if the token is the
# lease's current one (or none was given), reserve the seqs the batch takes and apply the
# status write (one UPDATE of the run row: a statement may not update a row twice); then
# insert the journal rows, manifests and nodes (in hash order: two commits sharing nodes
# cannot deadlock) numbered from the reserved base; nothing is inserted when nothing was
# reserved. The answer says whether the run exists, the base (NULL: the token was not
# current) and the lease as it was found, for PLAIT-E017/E021 without another query.
# The rows travel as JSON (``commit_params``) and the scalars as text, typed by the casts
# here, so the parameter types never depend on the write mix and the statement psycopg
# prepares serves every commit (one more with node bytes, a binary bytea[]).
COMMIT = (
    "WITH run AS MATERIALIZED ("
    "  SELECT run_id FROM runs WHERE run_id = %(run_id)s FOR UPDATE),"
    " lease AS MATERIALIZED ("
    f"  SELECT {_LEASE_COLUMNS} FROM run CROSS JOIN LATERAL (SELECT {_LEASE_COLUMNS}"
    "   FROM leases WHERE leases.run_id = run.run_id AND %(token)s::bigint IS NOT NULL"
    "   FOR UPDATE) l),"
    " reserved AS ("
    "  UPDATE runs SET last_seq = last_seq + %(n)s::bigint,"
    "   status = COALESCE(%(status)s::text, status),"
    "   outcome = CASE WHEN %(status)s::text IS NULL THEN outcome ELSE %(outcome)s::text END,"
    "   updated_ms = COALESCE(%(updated_ms)s::bigint, updated_ms)"
    "  WHERE run_id = %(run_id)s AND (%(token)s::bigint IS NULL OR EXISTS (SELECT 1 FROM lease"
    "   WHERE lease.token = %(token)s::bigint AND lease.host IS NOT NULL))"
    "  RETURNING last_seq - %(n)s::bigint AS base),"
    " journal_rows AS ("
    f"  INSERT INTO journal (run_id, seq, {', '.join(JOURNAL_COLUMNS)})"
    f"  SELECT %(run_id)s, reserved.base + w.pos, {', '.join('w.' + c for c in JOURNAL_COLUMNS)}"
    f"  FROM reserved CROSS JOIN json_to_recordset(%(journal)s::json) AS w ({_JOURNAL_RECORD})),"
    " manifest_rows AS ("
    "  INSERT INTO manifests (run_id, seq, payload)"
    "  SELECT %(run_id)s, reserved.base + m.pos, m.payload FROM reserved"
    "  CROSS JOIN json_to_recordset(%(manifests)s::json) AS m (pos bigint, payload text)),"
    " node_rows AS ("
    "  INSERT INTO nodes (hash, data, run_id) SELECT n.hash, n.data, %(run_id)s FROM reserved"
    "  CROSS JOIN unnest(%(hash)s::text[], %(data)b::bytea[]) AS n (hash, data)"
    "  ORDER BY n.hash ON CONFLICT (hash) DO NOTHING),"
    # The end of a drive gives the lease up with its last commit (``release``).
    " released AS ("
    "  UPDATE leases SET host = NULL, pid = NULL, started_ms = NULL, expires_ms = 0"
    "  WHERE %(release)s::boolean AND run_id = %(run_id)s AND token = %(token)s::bigint"
    "   AND host IS NOT NULL AND EXISTS (SELECT 1 FROM reserved))"
    " SELECT EXISTS (SELECT 1 FROM run), (SELECT base FROM reserved),"
    # The last record of the kinds a driver polls for between waves (records_after), as
    # of this statement: the poll after the commit needs no round trip of its own. One
    # backward step of the ``journal_records`` index per kind, however long the run.
    "  (SELECT max(last.seq) FROM unnest(%(watched)s::text[]) AS k (kind)"
    "   CROSS JOIN LATERAL (SELECT seq FROM journal WHERE run_id = %(run_id)s"
    "   AND item = 'record' AND record_kind = k.kind ORDER BY seq DESC LIMIT 1) last),"
    f" {', '.join('l.' + c for c in _LEASE_COLUMNS.split(', '))}"
    " FROM (VALUES (1)) AS one (x) LEFT JOIN lease l ON true"
)


def commit_params(
    run_id: str,
    token: int | None,
    ops: Sequence[Row],
    nodes: dict[str, bytes],
    release: bool = False,
) -> dict[str, Any]:
    """The parameters of ``COMMIT`` for the rows ``write_row`` made, in write order.

    Journal rows and manifest supersessions take the batch's seqs in turn (``pos``
    1, 2, ... added to the reserved base); status writes take none, and the last one is
    the one that counts (each sets the whole status, outcome and update time). Journal
    rows and manifests go as one JSON array each (``json_to_recordset``), integers as
    text and node bytes as a binary array, so the parameters' types do not depend on
    the write mix and one prepared statement serves every commit. ``release``: the
    lease (``token``) is given up in the same statement.
    """
    journal: list[dict[str, Any]] = []
    manifests: list[dict[str, Any]] = []
    status: Row = (None, None, None)
    taken = 0
    for op in ops:
        if op[0] == "status":
            status = op[1:]
            continue
        taken += 1
        if op[0] == "manifest":
            manifests.append({"pos": taken, "payload": op[1]})
        else:
            journal.append(dict(zip(_JOURNAL_KEYS, (taken, *op), strict=True)))
    hashes = sorted(nodes)
    return {
        "run_id": run_id,
        "token": None if token is None else str(token),
        "n": str(taken),
        "status": status[0],
        "outcome": status[1],
        "updated_ms": None if status[2] is None else str(status[2]),
        "journal": dumps(journal),
        "manifests": dumps(manifests),
        # No nodes (most waves): a NULL array and an empty literal, nothing to adapt.
        "hash": text_array(hashes),
        "data": [nodes[digest] for digest in hashes] if hashes else None,
        "release": "true" if release and token is not None else "false",
    }


def text_array(items: Sequence[str]) -> str:
    """``items`` as a PostgreSQL array literal, for a ``%s::text[]`` parameter: a string
    costs the client less to send than a list, which psycopg adapts element by element."""
    quoted = (item.replace("\\", "\\\\").replace('"', '\\"') for item in items)
    return "{" + ",".join(f'"{item}"' for item in quoted) + "}"
