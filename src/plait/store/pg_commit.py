"""PostgreSQL's commit: a whole batch of journal writes in ONE statement (``COMMITS``).

One statement is one round trip and one implicit transaction (autocommit): its update of
the run row checks the fencing token against the run's held lease (``runs.lease_token``,
which every lease write keeps in its own transaction, holding the run row's lock), so
the check is made in the same transaction as the writes, on the row as it is when
locked; only when the token is current does it reserve the seqs the batch takes
(``UPDATE runs ... RETURNING``, which also applies the status write) and insert the
journal rows, manifests and nodes numbered from them (nodes with ``ON CONFLICT DO
NOTHING`` in hash order: two commits sharing nodes cannot deadlock). A stale token or
an unknown run writes nothing; a key already journaled fails the statement, which
writes nothing either. This module builds the statement and its
parameters; ``PostgresStore.commit`` runs it and reads its answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from plait.store.base import POLLED_KINDS
from plait.store.pg_params import bytea_array, column_arrays, integer_array, text, text_array
from plait.store.pg_prepared import Statement
from plait.store.rows import JOURNAL_COLUMNS, Row

_INTEGER_COLUMNS = ("superstep", "clock_ms", "journal_bytes", "size")  # the rest are text
_JOURNAL_KEYS = ("pos", *JOURNAL_COLUMNS)
# A batch's journal rows as ``commit_query`` sends them, an array per column, unnested in
# the select list: the server steps through the arrays together (ProjectSet), where
# ``unnest(...)`` in FROM (ROWS FROM) copies each array's elements into a tuplestore of its
# own and builds a row type per array on every call (about 40 k of 640 k server
# instructions a commit). Arrays of different lengths would be padded with NULLs either
# way; a batch's are all as long.
_JOURNAL_ROWS = ", ".join(
    f"unnest(%(j_{c})s::{'bigint' if c in _INTEGER_COLUMNS else 'text'}[])" for c in JOURNAL_COLUMNS
)
# A whole commit in one statement, so one round trip and one implicit transaction
# (autocommit): if the token is the run's held lease's (``runs.lease_token``, kept by
# every lease write in the transaction that makes it; schema.py, migration 13) or none
# was given, reserve the seqs the batch takes and apply the status write in one UPDATE
# of the run row (which locks it: a statement may not update a row twice, and the check
# is made again on the row as it is once a writer in flight has committed); then insert
# the journal rows, manifests and nodes (in hash order: two commits sharing nodes cannot
# deadlock) numbered from the reserved base; nothing is inserted when nothing was
# reserved. The answer is the run's polled_seq, or NULL: an unknown run or a token that
# is not current, which ``PostgresStore.commit`` tells apart afterwards.
# The rows travel as arrays, one per column (``commit_query``), and the scalars as text,
# all typed by the casts here, so the parameter types never depend on the write mix. The
# inserts of manifests and nodes, and the lease's release, are in the statement only when
# the batch has some or gives the lease up (``COMMITS``): most waves do neither, and each
# write in a statement costs the server its set-up (the table and its indexes opened,
# its plan nodes built) on every call.
_RESERVED = (
    "WITH reserved AS ("
    "  UPDATE runs SET last_seq = last_seq + %(n)s::bigint,"
    "   status = COALESCE(%(status)s::text, status),"
    "   outcome = CASE WHEN %(status)s::text IS NULL THEN outcome ELSE %(outcome)s::text END,"
    "   updated_ms = COALESCE(%(updated_ms)s::bigint, updated_ms),"
    "   polled_seq = COALESCE(last_seq + %(polled)s::bigint, polled_seq){release}"
    "  WHERE run_id = %(run_id)s"
    "   AND (%(token)s::bigint IS NULL OR lease_token = %(token)s::bigint)"
    "  RETURNING last_seq - %(n)s::bigint AS base, polled_seq),"
)
_JOURNAL_INSERT = (
    " journal_rows AS ("
    f"  INSERT INTO journal (run_id, seq, {', '.join(JOURNAL_COLUMNS)})"
    f"  SELECT %(run_id)s, reserved.base + unnest(%(j_pos)s::bigint[]), {_JOURNAL_ROWS}"
    "  FROM reserved),"
)
_MANIFEST_ROWS = (
    " manifest_rows AS ("
    "  INSERT INTO manifests (run_id, seq, payload)"
    "  SELECT %(run_id)s, reserved.base + unnest(%(m_pos)s::bigint[]),"
    "  unnest(%(m_payload)s::text[]) FROM reserved),"
)
_NODE_ROWS = (
    " node_rows AS ("
    "  INSERT INTO nodes (hash, data, run_id) SELECT n.hash, n.data, %(run_id)s FROM reserved"
    "  CROSS JOIN unnest(%(hash)s::text[], %(data)s::bytea[]) AS n (hash, data)"
    "  ORDER BY n.hash ON CONFLICT (hash) DO NOTHING),"
)
_RELEASED = (
    # The end of a drive gives the lease up with its last commit (``release``): the run
    # row (its lease_token, in ``reserved``), then the lease row.
    " released AS ("
    "  UPDATE leases SET host = NULL, pid = NULL, started_ms = NULL, expires_ms = 0"
    "  WHERE run_id = %(run_id)s AND token = %(token)s::bigint"
    "   AND host IS NOT NULL AND EXISTS (SELECT 1 FROM reserved)),"
)
_ANSWER = (
    # The run's polled_seq with this batch (the last record a driver polls for between
    # waves: the poll after this commit needs no round trip of its own; schema.py,
    # migration 13); NULL when nothing was reserved.
    " SELECT (SELECT polled_seq FROM reserved)"
)
_PARAMS = ("run_id", "token", "n", "status", "outcome", "updated_ms", "polled",
           *(f"j_{c}" for c in _JOURNAL_KEYS))  # fmt: skip
_MANIFEST_PARAMS = ("m_pos", "m_payload")
_NODE_PARAMS = ("hash", "data")
_JOURNAL_INTEGERS = tuple(c in _INTEGER_COLUMNS for c in JOURNAL_COLUMNS)
_MANIFEST_INTEGERS = (True, False)
_BINARY = {"m_payload", "hash", "data"} | {
    f"j_{c}" for c, integer in zip(JOURNAL_COLUMNS, _JOURNAL_INTEGERS, strict=True) if not integer
}
"""The parameters sent in binary (``pg_params``: arrays of texts and of bytes)."""


def _numbered(text: str, names: Sequence[str]) -> str:
    """``text`` with each ``%(name)s`` written as libpq's ``$n``, ``n`` its place in
    ``names``."""
    for place, name in enumerate(names, 1):
        text = text.replace(f"%({name})s", f"${place}")
    assert "%(" not in text, text
    return text


def _commit_statement(manifests: bool, nodes: bool, release: bool) -> Statement:
    """The commit statement for a batch with manifests?, with nodes?, giving the lease
    up?, prepared under a name of its own."""
    text = (
        _RESERVED.format(release=",   lease_token = NULL" if release else "")
        + _JOURNAL_INSERT
        + (_MANIFEST_ROWS if manifests else "")
        + (_NODE_ROWS if nodes else "")
        + (_RELEASED if release else "")
    ).rstrip(",") + _ANSWER
    names = _PARAMS + (_MANIFEST_PARAMS if manifests else ()) + (_NODE_PARAMS if nodes else ())
    return Statement(
        f"plait_commit_{int(manifests)}{int(nodes)}{int(release)}".encode(),
        _numbered(text, names).encode(),
        tuple(int(name in _BINARY) for name in names),
    )


COMMITS = {
    (manifests, nodes, release): _commit_statement(manifests, nodes, release)
    for manifests in (False, True)
    for nodes in (False, True)
    for release in (False, True)
}
"""The commit statement for a batch (with manifests?, with nodes?, giving the lease up?):
one text each, prepared once per connection, so the server keeps its plan."""


def commit_query(
    run_id: str,
    token: int | None,
    ops: Sequence[Row],
    nodes: dict[str, bytes],
    encoding: str,
    release: bool = False,
) -> tuple[Statement, list[bytes | None]]:
    """The statement (``COMMITS``) and its parameters, in order and as libpq sends them
    (``encoding``: the connection's), for the rows ``write_row`` made, in write order.

    Journal rows and manifest supersessions take the batch's seqs in turn (``pos``
    1, 2, ... added to the reserved base); status writes take none, and the last one is
    the one that counts (each sets the whole status, outcome and update time). The
    batch's last record of a kind in ``POLLED_KINDS`` moves the run's ``polled_seq`` to
    its seq (``polled``: its ``pos``, NULL for none). Journal
    rows and manifests go as one array per column (``unnest``; ``pg_params``: texts and
    bytes binary, integers as literals), so the parameters' types do not depend on the
    write mix. Arrays rather than one JSON document: the server reads an array once,
    where a ``json`` parameter is parsed twice (checked on input, then read by
    ``json_to_recordset``). ``release``: the lease (``token``) is given up in the same
    statement.
    """
    journal: list[Row] = []
    places: list[int] = []  # each journal row's pos
    manifests: list[Row] = []
    status: Row = (None, None, None)
    taken = 0
    polled = None
    for op in ops:
        item = op[0]
        if item == "status":
            status = op[1:]
            continue
        taken += 1
        if item == "manifest":
            manifests.append((taken, op[1]))
            continue
        journal.append(op)
        places.append(taken)
        if item == "record" and op[3] in POLLED_KINDS:
            polled = taken
    params = [
        text(run_id, encoding),
        None if token is None else str(token).encode(),
        str(taken).encode(),
        None if status[0] is None else text(status[0], encoding),
        None if status[1] is None else text(status[1], encoding),
        None if status[2] is None else str(status[2]).encode(),
        None if polled is None else str(polled).encode(),
        # 1, 2, ... n unless manifests took places between the journal's rows
        _first_places(len(journal)) if len(journal) == taken else integer_array(places),
        *column_arrays(journal, _JOURNAL_INTEGERS, encoding),
    ]
    if manifests:
        params += column_arrays(manifests, _MANIFEST_INTEGERS, encoding)
    if nodes:
        hashes = sorted(nodes)
        params += (text_array(hashes, encoding), bytea_array([nodes[h] for h in hashes]))
    return COMMITS[bool(manifests), bool(nodes), release and token is not None], params


@lru_cache(maxsize=64)
def _first_places(count: int) -> bytes:
    """``1, 2, ... count`` as a ``bigint[]`` literal: the places of most batches' rows."""
    return integer_array(range(1, count + 1))
