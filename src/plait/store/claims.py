"""The worker rule in SQL (docs/architecture.md §11): which runs ``claim_work`` takes and which
runs ``gc`` deletes, for PostgreSQL and SQLite side by side so the two cannot drift.

PostgreSQL's statements lock what they pick (``FOR UPDATE ... SKIP LOCKED``) and take
lists as arrays; SQLite's run inside one ``BEGIN IMMEDIATE`` transaction, which already
excludes every other writer, and order ties by ``rowid``. The rule itself is the same;
each statement's comment says it once. This module holds SQL text only.
"""

from __future__ import annotations

from plait.store.sql import FINISHED

# Runnable runs whose lease is free or expired, oldest first; rows another transaction
# holds (a commit, another claimant) are skipped, not waited for.
PG_CLAIMABLE = (
    "SELECT r.run_id FROM runs r LEFT JOIN leases l ON l.run_id = r.run_id"
    " WHERE r.status = ANY(%s) AND (l.run_id IS NULL OR l.host IS NULL OR l.expires_ms <= %s)"
    " ORDER BY r.created_ms, r.row_order LIMIT %s FOR UPDATE OF r SKIP LOCKED"
)
# What a worker should drive now (``claim_work``): top-level runs with a free, released or
# expired lease that are queued, running with a lease row (their driver is gone), or
# parked/budget-exhausted with a wake time that has come. The status list matches the
# ``runs_unfinished`` partial index.
PG_CLAIM_WORK = (
    "SELECT r.run_id, r.created_ms, r.row_order FROM runs r"
    " LEFT JOIN leases l ON l.run_id = r.run_id"
    " WHERE r.status IN ('queued', 'running', 'parked', 'budget_exhausted')"
    " AND r.parent_run_id IS NULL AND r.run_id <> ALL(%(exclude)s)"
    " AND (l.run_id IS NULL OR l.host IS NULL OR l.expires_ms <= %(now)s)"
    " AND (r.status = 'queued' OR (r.status = 'running' AND l.run_id IS NOT NULL)"
    "      OR r.wake_ms <= %(now)s)"
    " ORDER BY r.created_ms, r.row_order LIMIT %(limit)s FOR UPDATE OF r SKIP LOCKED"
)
# ``claim_work`` in ONE statement (one round trip, one transaction): the runs PG_CLAIM_WORK
# picks (locked, others' skipped), their leases taken by the lease rule for a claimant that
# cannot tell a holder is gone (``lease.may_take_over`` with ``never_dead``: no lease row ->
# token 1; released or expired -> the next token; a live holder keeps it), and the claimed
# runs marked as PG_CLAIMED does, with the token they now hold (``runs.lease_token``, which
# a commit checks). The rule is applied by the upsert to the lease row as it
# is NOW, not as the statement's snapshot saw it: ``ON CONFLICT`` locks the current row
# (waiting for a writer still in flight) and its ``WHERE`` decides; a run whose lease was
# taken, renewed or created meanwhile returns no token and is not claimed.
PG_CLAIM_AND_LEASE = (
    "WITH picked AS MATERIALIZED ("
    f" {PG_CLAIM_WORK}),"
    " leased AS ("
    "  INSERT INTO leases (run_id, host, pid, started_ms, token, expires_ms)"
    "  SELECT run_id, %(host)s, %(pid)s, %(started_ms)s, 1, %(expires_ms)s FROM picked"
    "  ORDER BY created_ms, row_order"
    "  ON CONFLICT (run_id) DO UPDATE SET host = excluded.host, pid = excluded.pid,"
    "   started_ms = excluded.started_ms, token = leases.token + 1,"
    "   expires_ms = excluded.expires_ms"
    "  WHERE leases.host IS NULL OR leases.expires_ms <= %(now)s"
    "  RETURNING run_id, token),"
    " marked AS ("
    "  UPDATE runs SET wake_ms = NULL, status = CASE WHEN status IN"
    "   ('queued', 'parked', 'budget_exhausted') THEN 'running' ELSE status END,"
    "   updated_ms = CASE WHEN status IN ('queued', 'parked') THEN %(now)s ELSE updated_ms END,"
    "   lease_token = (SELECT token FROM leased WHERE leased.run_id = runs.run_id)"
    "  WHERE run_id IN (SELECT run_id FROM leased))"
    " SELECT l.run_id, l.token FROM leased l JOIN picked p ON p.run_id = l.run_id"
    " ORDER BY p.created_ms, p.row_order"
)
# Set (for its transaction only) before PG_CLAIM_AND_LEASE, so that its plan walks
# ``runs_unfinished`` in the claim's order and stops at the limit, finding each candidate's
# lease by ``leases_pkey``, whatever the table statistics say. Planned from estimates
# alone, it read every unfinished run at every claim when the statistics were missing (a
# server without autovacuum: a bitmap scan of the whole queue, a lease lookup for each
# run, a sort, then the first few kept) and scanned the whole leases table for each run
# when they said it was empty (made before the first claims): a claim then cost the
# server in proportion to the queue, not to the runs it took.
# JIT goes with them: a node the plan cannot do without (the sort of the few runs taken)
# keeps the cost the settings add to it, which would otherwise pass ``jit_above_cost``
# and have every claim compiled (~0.2 s).
PG_CLAIM_PLAN = (
    "SELECT set_config('enable_sort', 'off', true), set_config('enable_seqscan', 'off', true),"
    " set_config('jit', 'off', true)"
)
# Running top-level runs whose unexpired lease a process on the claimant's host holds: a
# claimant that can tell that process is gone (docs/architecture.md §5.7) takes them at once,
# as ``plait resume`` does, instead of waiting for the lease to lapse.
# Read without a lock: most are live (this host's own drives), and locking them would make
# another claimant's SKIP LOCKED pass over them meanwhile (a `--once` worker would find
# nothing to do). Only those whose holder is gone are locked (PG_LOCK_ORPHANS) and taken.
PG_CLAIM_ORPHANS = (
    "SELECT r.run_id, l.host, l.pid, l.started_ms FROM runs r JOIN leases l"
    " ON l.run_id = r.run_id WHERE r.status = 'running' AND r.parent_run_id IS NULL"
    " AND r.run_id <> ALL(%(exclude)s) AND l.host = %(host)s AND l.expires_ms > %(now)s"
    " ORDER BY r.created_ms, r.row_order"
)
PG_LOCK_ORPHANS = (
    "SELECT run_id FROM runs WHERE run_id = ANY(%s) AND status = 'running'"
    " ORDER BY created_ms, row_order FOR UPDATE SKIP LOCKED"
)
# A claimed run's wake time is consumed; a queued, parked or budget-exhausted one is
# running from now on: a worker that dies, or whose drive is refused (PLAIT-E010, a run
# started from Python), before the drive settles what was due leaves a running run whose
# lease lapses or was given up, which the next claim takes over. Left budget-exhausted
# without its wake time, a raised run would be claimed by nobody and deleted by gc. A
# budget-exhausted run keeps its last update: a drive that finds nothing raised (a cancel
# or message woke it) gives it back its status as it was (``Runtime.resume``).
PG_CLAIMED = (
    "UPDATE runs SET wake_ms = NULL, status = CASE WHEN status IN"
    " ('queued', 'parked', 'budget_exhausted') THEN 'running' ELSE status END,"
    " updated_ms = CASE WHEN status IN ('queued', 'parked') THEN %s ELSE updated_ms END"
    " WHERE run_id = ANY(%s)"
)
# Finished top-level runs old enough for gc, with nothing due and no live lease. Of the
# finished statuses only budget_exhausted is ever driven again (once raised): a wake time
# on any other (a cancel, message or answer journaled as or after the run finished) wants
# nothing, and must not keep the run forever.
PG_GC_ROOTS = (
    "SELECT r.run_id FROM runs r LEFT JOIN leases l ON l.run_id = r.run_id"
    " WHERE r.parent_run_id IS NULL AND r.status = ANY(%(finished)s)"
    " AND r.updated_ms < %(before)s AND (r.wake_ms IS NULL OR r.status <> 'budget_exhausted')"
    " AND (l.run_id IS NULL OR l.host IS NULL OR l.expires_ms <= %(now)s)"
    " ORDER BY r.run_id FOR UPDATE OF r SKIP LOCKED"
)
# Every run of those trees (children name their parent), and whether gc may delete it.
PG_GC_TREE = (
    "WITH RECURSIVE tree (run_id, root) AS ("
    "  SELECT id, id FROM unnest(%(roots)s::text[]) AS roots (id)"
    "  UNION ALL SELECT c.run_id, t.root FROM runs c JOIN tree t ON c.parent_run_id = t.run_id)"
    " SELECT t.run_id, t.root, c.status IN ('completed', 'failed', 'stalled', 'canceled',"
    "  'budget_exhausted') AND (c.wake_ms IS NULL OR c.status <> 'budget_exhausted')"
    "  AND (l.run_id IS NULL OR l.host IS NULL OR l.expires_ms <= %(now)s)"
    " FROM tree t JOIN runs c ON c.run_id = t.run_id LEFT JOIN leases l ON l.run_id = t.run_id"
)

# --- SQLite ---

SQLITE_FINISHED = ", ".join(f"'{status}'" for status in FINISHED)
# What a worker should drive now: see PG_CLAIM_WORK.
SQLITE_CLAIM_WORK = (
    "SELECT r.run_id FROM runs r LEFT JOIN leases l ON l.run_id = r.run_id"
    " WHERE r.status IN ('queued', 'running', 'parked', 'budget_exhausted')"
    " AND r.parent_run_id IS NULL"
    " AND (l.run_id IS NULL OR l.host IS NULL OR l.expires_ms <= :now)"
    " AND (r.status = 'queued' OR (r.status = 'running' AND l.run_id IS NOT NULL)"
    "      OR r.wake_ms <= :now)"
    " ORDER BY r.created_ms, r.rowid"
)
# Running top-level runs whose unexpired lease a process on the claimant's host holds:
# taken over at once if that process is gone (see PG_CLAIM_ORPHANS).
SQLITE_CLAIM_ORPHANS = (
    "SELECT r.run_id FROM runs r JOIN leases l ON l.run_id = r.run_id"
    " WHERE r.status = 'running' AND r.parent_run_id IS NULL"
    " AND l.host = :host AND l.expires_ms > :now"
    " ORDER BY r.created_ms, r.rowid"
)
# A claimed run's wake time is consumed; a queued, parked or budget-exhausted one is
# running from now on (see PG_CLAIMED).
SQLITE_CLAIMED = (
    "UPDATE runs SET wake_ms = NULL, status = CASE WHEN status IN"
    " ('queued', 'parked', 'budget_exhausted') THEN 'running' ELSE status END,"
    " updated_ms = CASE WHEN status IN ('queued', 'parked') THEN ? ELSE updated_ms END"
    " WHERE run_id = ?"
)
# Finished runs old enough for gc (see PG_GC_ROOTS for the wake time rule).
SQLITE_GC_ROOTS = (
    "SELECT r.run_id FROM runs r LEFT JOIN leases l ON l.run_id = r.run_id"
    f" WHERE r.parent_run_id IS NULL AND r.status IN ({SQLITE_FINISHED})"
    " AND r.updated_ms < :before AND (r.wake_ms IS NULL OR r.status <> 'budget_exhausted')"
    " AND (l.run_id IS NULL OR l.host IS NULL OR l.expires_ms <= :now)"
    " ORDER BY r.run_id"
)
SQLITE_GC_TREE = (
    "WITH RECURSIVE tree (run_id, root) AS ("
    "  SELECT value, value FROM json_each(:roots)"
    "  UNION ALL SELECT c.run_id, t.root FROM runs c JOIN tree t ON c.parent_run_id = t.run_id)"
    f" SELECT t.run_id, t.root, c.status IN ({SQLITE_FINISHED})"
    "  AND (c.wake_ms IS NULL OR c.status <> 'budget_exhausted')"
    "  AND (l.run_id IS NULL OR l.host IS NULL OR l.expires_ms <= :now)"
    " FROM tree t JOIN runs c ON c.run_id = t.run_id LEFT JOIN leases l ON l.run_id = t.run_id"
)
