"""A worker opens its connections when it starts, not inside its first claims and drives."""

from __future__ import annotations

import secrets

import psycopg
import pytest

from plait import Runtime
from plait.driver.worker import Worker


def backends(admin: psycopg.Connection, application: str) -> int:
    row = admin.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (application,)
    ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize(("concurrency", "pooled"), [(2, 3), (8, 4)])
def test_open_connects_the_listener_and_one_pooled_connection_per_run_in_flight_plus_one(
    postgres_url: str, concurrency: int, pooled: int
) -> None:
    application = f"plait-open-{secrets.token_hex(4)}"
    with (
        psycopg.connect(postgres_url, autocommit=True) as admin,
        Runtime(f"{postgres_url}&application_name={application}", principal="t") as rt,
    ):
        worker = Worker(rt, concurrency=concurrency, once=True)
        assert backends(admin, application) == 1  # the store's first connection only

        worker.open()
        assert backends(admin, application) == pooled + 1  # at most the pool's 4, + LISTEN

        worker.open()  # once only
        assert backends(admin, application) == pooled + 1

        worker.run()  # its claim (nothing to claim) opens no connection of its own
        assert backends(admin, application) <= pooled + 1
