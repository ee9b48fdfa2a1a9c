"""The one schema of both SQL back ends: a single append-only list of migrations.

Migration ``n`` is the same step on SQLite and PostgreSQL, written once where they agree
and per dialect where they differ: PostgreSQL has ``BIGINT`` for every integer, ``BYTEA``
for node bytes and an identity column ``runs.row_order`` standing in for SQLite's
implicit ``rowid`` (the tie-break of ``list_runs``); SQLite's tables keyed by
``(run_id, seq)`` are ``WITHOUT ROWID``. A migration may have no statements for one
dialect (migrations 4 and 5 tune SQLite's write path and have none for PostgreSQL).

A database records in ``schema_version`` the number of the last migration it has had;
a dialect's version is the number of its last migration with statements, so PostgreSQL
was at 3 and SQLite at 5 until migration 6 (schedules), which both have. The runners
(``sqlite_schema.py``, ``postgres_schema.py``) apply the missing ones at open, the
dialect's own way. Never edit or reorder a migration that has shipped: append a new one
(SQLite keeps each CREATE statement's text in its catalog, so even whitespace counts).
This module holds DDL only; it never reads or writes run data.
"""

from __future__ import annotations

from dataclasses import dataclass

DIALECTS = ("sqlite", "postgres")

_TYPES = {
    "sqlite": {"int": "INTEGER", "blob": "BLOB", "order": "", "rowid": " WITHOUT ROWID",
               "row_order": ""},
    "postgres": {"int": "BIGINT", "blob": "BYTEA", "order": ", row_order", "rowid": "",
                 "row_order": ",\n            row_order BIGINT GENERATED ALWAYS AS IDENTITY"},
}  # fmt: skip
"""What the ``{int}``, ``{blob}``, ``{order}``, ``{rowid}`` and ``{row_order}`` fields of
a shared statement become in each dialect."""


@dataclass(frozen=True)
class Migration:
    """One step of the schema: shared statements (with ``_TYPES`` fields), or per dialect.

    ``only`` names the one dialect the step is for (the other has nothing to do).
    """

    statements: tuple[str, ...]
    only: str | None = None

    def for_dialect(self, dialect: str) -> tuple[str, ...]:
        if self.only is not None and self.only != dialect:
            return ()
        return tuple(statement.format(**_TYPES[dialect]) for statement in self.statements)


_STATUSES = (
    "'queued','running','parked','completed','failed','stalled','canceled','budget_exhausted'"
)

_JOURNAL_COLUMNS = (
    "run_id, seq, item, journal_key, executor, record_kind, superstep, clock_ms,"
    " idempotency_key, journal_bytes, sha256, size, payload"
)

MIGRATIONS: tuple[Migration, ...] = (
    # 1: runs, manifests, the journal, content-addressed nodes, leases.
    Migration((
        f"""CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            workflow TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN ({_STATUSES})),
            principal TEXT NOT NULL,
            parent_run_id TEXT,
            created_ms {{int}} NOT NULL,
            updated_ms {{int}} NOT NULL,
            outcome TEXT,
            last_seq {{int}} NOT NULL DEFAULT 0{{row_order}}
        )""",
        "CREATE INDEX runs_by_created ON runs (created_ms{order})",
        "CREATE INDEX runs_by_status ON runs (status, created_ms{order})",
        # seq 0 is the original manifest; a supersession takes the next journal seq.
        """CREATE TABLE manifests (
            run_id TEXT NOT NULL,
            seq {int} NOT NULL,
            payload TEXT NOT NULL,
            PRIMARY KEY (run_id, seq)
        ){rowid}""",
        # One row per journal item; payload is the canonical text of an encoded form
        # (chunks.py): small values inline, large ones a reference into nodes.
        """CREATE TABLE journal (
            run_id TEXT NOT NULL,
            seq {int} NOT NULL,
            item TEXT NOT NULL CHECK (item IN ('intent', 'result', 'checkpoint', 'record')),
            journal_key TEXT,
            executor TEXT,
            record_kind TEXT,
            superstep {int},
            clock_ms {int},
            idempotency_key TEXT,
            journal_bytes {int},
            sha256 TEXT,
            size {int},
            payload TEXT NOT NULL,
            PRIMARY KEY (run_id, seq)
        ){rowid}""",
        """CREATE UNIQUE INDEX journal_intent_keys ON journal (run_id, journal_key)
            WHERE item = 'intent'""",
        """CREATE UNIQUE INDEX journal_result_keys ON journal (run_id, journal_key)
            WHERE item = 'result'""",
        # run_id is the run whose commit first stored the node (for stored_bytes).
        """CREATE TABLE nodes (
            hash TEXT PRIMARY KEY,
            data {blob} NOT NULL,
            run_id TEXT NOT NULL
        )""",
        """CREATE TABLE leases (
            run_id TEXT PRIMARY KEY,
            host TEXT,
            pid {int},
            started_ms {int},
            token {int} NOT NULL,
            expires_ms {int} NOT NULL
        )""",
    )),
    # 2: workers (docs/architecture.md §11). wake_ms: when a parked (or budget-exhausted) run
    # wants driving again: its earliest timer or ask expiry, or "now" once an answer, a
    # cancel or a budget raise is journaled; NULL while nothing is due. The partial index
    # keeps claiming cheap however many finished runs the table holds.
    Migration((
        "ALTER TABLE runs ADD COLUMN wake_ms {int}",
        """CREATE INDEX runs_unfinished ON runs (created_ms{order})
            WHERE status IN ('queued', 'running', 'parked', 'budget_exhausted')""",
    )),
    # 3: a driver polls for cancels and steering messages between waves: find the
    # records of a kind after a seq without scanning the run's whole journal.
    Migration((
        """CREATE INDEX journal_records ON journal (run_id, record_kind, seq)
            WHERE item = 'record'""",
    )),
    # 4 (SQLite): fewer pages written per wave. One unique index for intents and results
    # (a wave writes both), feed records (one per wave, never searched by kind) kept out
    # of the records index, and runs.last_seq no longer maintained: a commit takes the
    # next seq from the journal and manifests themselves (see SqliteStore.commit).
    Migration((
        "DROP INDEX journal_intent_keys",
        "DROP INDEX journal_result_keys",
        """CREATE UNIQUE INDEX journal_effect_keys ON journal (run_id, journal_key, item)
            WHERE journal_key IS NOT NULL""",
        "DROP INDEX journal_records",
        """CREATE INDEX journal_records ON journal (run_id, record_kind, seq)
            WHERE item = 'record' AND record_kind <> 'feed'""",
    ), only="sqlite"),
    # 5 (SQLite): the journal's CHECK on item written as comparisons. SQLite evaluates a
    # CHECK's IN (...) list by building a temporary table for every row inserted, which
    # cost more than the rest of a wave's inserts; OR-ed comparisons are evaluated in
    # place. A CHECK cannot be altered, so the table is rebuilt (same columns, rows and
    # indexes).
    Migration((
        """CREATE TABLE journal_5 (
            run_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            item TEXT NOT NULL CHECK (item = 'intent' OR item = 'result'
                                      OR item = 'checkpoint' OR item = 'record'),
            journal_key TEXT,
            executor TEXT,
            record_kind TEXT,
            superstep INTEGER,
            clock_ms INTEGER,
            idempotency_key TEXT,
            journal_bytes INTEGER,
            sha256 TEXT,
            size INTEGER,
            payload TEXT NOT NULL,
            PRIMARY KEY (run_id, seq)
        ) WITHOUT ROWID""",
        f"INSERT INTO journal_5 ({_JOURNAL_COLUMNS}) SELECT {_JOURNAL_COLUMNS} FROM journal",
        "DROP TABLE journal",
        "ALTER TABLE journal_5 RENAME TO journal",
        """CREATE UNIQUE INDEX journal_effect_keys ON journal (run_id, journal_key, item)
            WHERE journal_key IS NOT NULL""",
        """CREATE INDEX journal_records ON journal (run_id, record_kind, seq)
            WHERE item = 'record' AND record_kind <> 'feed'""",
    ), only="sqlite"),
    # 6: schedules (docs/operating.md "Schedules"). next_ms is the schedule's next slot,
    # the cursor every worker moves forward; a slot row is written in the same
    # transaction as its run, so (schedule, slot_ms) is fired exactly once.
    Migration((
        """CREATE TABLE schedules (
            name TEXT PRIMARY KEY,
            spec TEXT NOT NULL,
            paused {int} NOT NULL DEFAULT 0,
            next_ms {int} NOT NULL,
            last_slot_ms {int},
            last_run_id TEXT,
            last_error TEXT,
            created_ms {int} NOT NULL,
            updated_ms {int} NOT NULL
        )""",
        "CREATE INDEX schedules_due ON schedules (next_ms) WHERE paused = 0",
        """CREATE TABLE schedule_slots (
            schedule TEXT NOT NULL,
            slot_ms {int} NOT NULL,
            run_id TEXT NOT NULL,
            PRIMARY KEY (schedule, slot_ms)
        ){rowid}""",
        "CREATE INDEX schedule_slots_by_run ON schedule_slots (run_id)",
    )),
    # 7: API tokens (docs/security.md): a principal's role and the SHA-256 of its token,
    # never the token itself; the digest is how a request's token is found.
    Migration((
        """CREATE TABLE tokens (
            principal TEXT PRIMARY KEY,
            role TEXT NOT NULL CHECK (role IN ('viewer', 'operator', 'approver', 'admin')),
            digest TEXT NOT NULL UNIQUE,
            created_ms {int} NOT NULL
        )""",
    )),
    # 8: the console and `plait runs --workflow` page through one workflow's runs newest
    # first (store/run_pages.py): a keyset range on this index, however many runs there are.
    Migration((
        "CREATE INDEX runs_by_workflow ON runs (workflow, created_ms{order})",
    )),
    # 9: conversations (docs/chat.md). A run that is a turn of a conversation gets
    # a row here in the same transaction as its run row; position orders the turns.
    Migration((
        """CREATE TABLE conversation_runs (
            conversation TEXT NOT NULL,
            position {int} NOT NULL,
            run_id TEXT NOT NULL UNIQUE,
            PRIMARY KEY (conversation, position)
        )""",
    )),
    # 10: the console and `plait runs --sort updated` page through runs by their last
    # update (store/run_pages.py), all of them or one status's: keyset ranges on these.
    Migration((
        "CREATE INDEX runs_by_updated ON runs (updated_ms{order})",
        "CREATE INDEX runs_by_status_updated ON runs (status, updated_ms{order})",
    )),
    # 11: rows an older plait cannot read (issue #22): a parked run's checkpoint kept
    # deflated (store/packed.py), a manifest's shared part in nodes (manifest_rows.py),
    # checkpoints digested by their Merkle root (engine epoch 3). The version is the
    # point: an older plait refuses this store (PLAIT-E020, "upgrade plait") rather than
    # reading those rows as corrupted; the table names the forms, for a person looking.
    Migration((
        "CREATE TABLE row_forms (form TEXT PRIMARY KEY, since {int} NOT NULL)",
        "INSERT INTO row_forms (form, since) VALUES ('packed-checkpoint', 11),"
        " ('shared-manifest', 11), ('merkle-digest', 11)",
    )),
    # 12 (PostgreSQL): the same CHECKs on runs.status and journal.item, kept by domains.
    # PostgreSQL rebuilds a table's CHECK expressions from their stored text (and plans
    # them) in every statement that writes the table, and every wave's commit writes both
    # tables: about 13% of the commit's server work. A domain's constraint is compiled
    # once per session (the type cache). The columns change type without a rewrite (a
    # domain with no constraint yet is the same text); the constraints are added NOT
    # VALID because the CHECKs they replace held for every row already there.
    Migration((
        "CREATE DOMAIN plait_run_status AS TEXT",
        "CREATE DOMAIN plait_journal_item AS TEXT",
        "ALTER TABLE runs DROP CONSTRAINT runs_status_check,"
        " ALTER COLUMN status TYPE plait_run_status",
        "ALTER TABLE journal DROP CONSTRAINT journal_item_check,"
        " ALTER COLUMN item TYPE plait_journal_item",
        "ALTER DOMAIN plait_run_status ADD CONSTRAINT plait_run_status_check"
        f" CHECK (VALUE IN ({_STATUSES})) NOT VALID",
        "ALTER DOMAIN plait_journal_item ADD CONSTRAINT plait_journal_item_check"
        " CHECK (VALUE IN ('intent', 'result', 'checkpoint', 'record')) NOT VALID",
        "DROP INDEX journal_records",
        """CREATE INDEX journal_records ON journal (run_id, record_kind, seq)
            WHERE item = 'record' AND record_kind <> 'feed'""",
    ), only="postgres"),
    # 13 (PostgreSQL): what a wave's commit reads, kept on the run row it updates anyway
    # (pg_commit.py), so the commit touches no other row to read it. polled_seq: the seq
    # of the run's last record of a kind a driver polls for between waves (store/base.py
    # POLLED_KINDS: cancel, inbox; 0 for none), moved by the commit (every journal row is
    # written by it) and returned: the poll after a wave needs no look-up of the journal.
    # lease_token: the token of the run's lease while it is held (host set), else NULL,
    # written with the lease row in the same transaction under the run row's lock: the
    # commit checks its fencing token on the run row alone. Runs already there are
    # backfilled. A change of POLLED_KINDS needs a migration that computes polled_seq again.
    Migration((
        "ALTER TABLE runs ADD COLUMN polled_seq BIGINT NOT NULL DEFAULT 0,"
        " ADD COLUMN lease_token BIGINT",
        """UPDATE runs SET polled_seq = polled.seq FROM (SELECT run_id, MAX(seq) AS seq
            FROM journal WHERE item = 'record' AND record_kind <> 'feed'
            AND record_kind IN ('cancel', 'inbox') GROUP BY run_id) AS polled
            WHERE runs.run_id = polled.run_id""",
        """UPDATE runs SET lease_token = leases.token FROM leases
            WHERE leases.run_id = runs.run_id AND leases.host IS NOT NULL""",
    ), only="postgres"),
)  # fmt: skip


def migrations(dialect: str) -> tuple[tuple[str, ...], ...]:
    """The statements of each migration in ``dialect``, up to its last one with any:
    the ``n``-th entry takes a database from version ``n - 1`` to ``n``."""
    steps = [migration.for_dialect(dialect) for migration in MIGRATIONS]
    while steps and not steps[-1]:
        steps.pop()
    return tuple(steps)
