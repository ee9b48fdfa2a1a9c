"""A PostgreSQL claim costs the server the runs it takes, not the length of the queue, even
on a server that never gathered statistics (autovacuum off)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from plait.store import LeaseOwner, RunInfo

try:
    from plait.store import claims
    from plait.store.postgres import PostgresStore
except ImportError as missing:  # the optional extra plait[postgres] is not installed
    if os.environ.get("PLAIT_REQUIRE_POSTGRES") == "1":
        raise
    pytest.skip(f"PostgreSQL tests need psycopg: {missing}", allow_module_level=True)

WORKER = LeaseOwner("host-a", 1, 1)
TTL = 30_000


def scans_of(plan: dict[str, Any], relation: str) -> list[dict[str, Any]]:
    found = [plan] if plan.get("Relation Name") == relation else []
    for child in plan.get("Plans", []):
        found += scans_of(child, relation)
    return found


def test_a_claim_reads_the_runs_it_takes_from_a_long_never_analyzed_queue(
    postgres_url: str,
) -> None:
    store = PostgresStore(postgres_url, pool_size=1)  # one connection: the claim's
    try:
        for i in range(300):
            info = RunInfo(f"r{i:03}", "wf", "queued", "alice", None, i + 1, i + 1)
            store.create_run(info, {"m": 1})
        claimed = store.claim_work(WORKER, 1_000, TTL, limit=2)
        assert [run_id for run_id, _ in claimed] == ["r000", "r001"]

        with store._connection() as conn:
            # The claim's planner settings ended with its transaction.
            assert conn.execute("SHOW enable_sort").fetchone() == ("on",)
            # Planned as claim_work plans it, the next claim walks the queue in order.
            params = {"now": 1_000, "limit": 2, "exclude": [], "host": "host-a", "pid": 1,
                      "started_ms": 1, "expires_ms": 1_000 + TTL}  # fmt: skip
            with conn.pipeline():
                conn.execute(claims.PG_CLAIM_PLAN)
                cursor = conn.execute(
                    "EXPLAIN (ANALYZE, FORMAT JSON) " + claims.PG_CLAIM_AND_LEASE, params
                )
            row = cursor.fetchone()
        assert row is not None
        assert "JIT" not in row[0][0]  # never compiled, whatever the settings cost the plan
        [scan] = [s for s in scans_of(row[0][0]["Plan"], "runs") if s.get("Alias") == "r"]
        assert scan["Node Type"] == "Index Scan" and scan["Index Name"] == "runs_unfinished"
        assert scan["Actual Rows"] == 4  # the 2 claimed before (leased) and 2: not all 300
    finally:
        store.close()
