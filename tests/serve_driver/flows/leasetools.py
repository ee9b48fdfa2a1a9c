"""Tools that log each execution with the lease it ran under, for the two-server test.

One ``os.write`` of one line per execution on an ``O_APPEND`` file (lines of concurrent
servers never interleave): run id, node, idempotency key, this process's pid, and the
lease row's token and pid as the store holds it while the tool runs.
"""

import os

import psycopg

from plait import current_call


def _log(log_file: str, db: str) -> None:
    call = current_call()
    with psycopg.connect(db) as conn:
        token, holder = conn.execute(
            "SELECT token, pid FROM leases WHERE run_id = %s", (call.run_id,)
        ).fetchone()
    line = f"{call.run_id} {call.node} {call.idempotency_key} {os.getpid()} {token} {holder}\n"
    fd = os.open(log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def first(log_file: str, db: str) -> dict:
    _log(log_file, db)
    return {"first": True}


def third(log_file: str, db: str) -> dict:
    _log(log_file, db)
    return {"third": True}
