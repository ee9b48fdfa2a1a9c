"""Two servers with drivers on one PostgreSQL store never drive one run at once: every
effect runs once, in the process that holds the run's lease, and each run's effects run
under lease tokens that only grow (a drive is never interleaved with an older one)."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

from serve_driver.support import cli, copy_flows, served

RUNS = 24


def test_two_servers_on_one_postgresql_store_never_drive_one_run_at_once(
    tmp_path: Path, postgres_url: str
):
    copy_flows(tmp_path)
    log_file = tmp_path / "effects.log"
    given = {"log_file": str(log_file), "db": postgres_url}
    with (
        served(tmp_path, postgres_url, "--workers", "2", name="a") as a,
        served(tmp_path, postgres_url, "--workers", "2", name="b") as b,
    ):
        servers = [a, b]
        for n in range(RUNS):  # started through both, claimed by whichever driver is first
            body = {"workflow": a.flow("fenced"), "run_id": f"r{n}", "input": given}
            assert servers[n % 2].post("/runs", body).status_code == 202
        for n in range(RUNS):
            servers[n % 2].wait_status(f"r{n}", "parked")
        for n in range(RUNS):  # answered through the other one
            servers[(n + 1) % 2].respond(servers[n % 2].asks(f"r{n}")[0], {"go": True})
        for n in range(RUNS):
            servers[n % 2].wait_status(f"r{n}", "completed")
        pids = {a.proc.pid, b.proc.pid}
    verified = cli("verify", "--all", "--db", postgres_url, "--json", cwd=tmp_path)

    lines = [line.split() for line in log_file.read_text().splitlines()]
    assert Counter(key for _, _, key, _, _, _ in lines).most_common(1)[0][1] == 1
    assert len(lines) == 2 * RUNS  # first and third of every run, once each
    tokens: dict[str, list[int]] = defaultdict(list)
    for run_id, _node, _key, pid, token, holder in lines:
        assert pid == holder and int(pid) in pids  # run by the lease's holder, a server
        tokens[run_id].append(int(token))
    for run_id, seen in tokens.items():
        assert seen == sorted(seen) and seen[0] < seen[-1], (run_id, seen)  # two drives
    report = json.loads(verified.stdout)
    assert verified.returncode == 0 and report["verified"] == RUNS, verified.stdout
