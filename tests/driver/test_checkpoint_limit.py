"""PLAIT-E015: a checkpoint over ``PLAIT_MAX_CHECKPOINT_BYTES`` is refused before its wave
is committed. The store stays exactly as the wave before left it, the lease is given up,
a resume reaching the same wave is refused the same way, and one with the limit raised
finishes the run (docs/architecture.md §13, CONTRACT.md exit codes).

The CLI scenarios run ``plait`` in real processes: the store "as the wave before left it"
is the store of a driver killed (``PLAIT_CRASH_AT``) right after that wave's commit.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from contract.support import Cli, Done
from plait import PlaitError, Runtime, Workflow
from plait.store.records import LeaseOwner

FLOW = Path(__file__).parent / "bigflow" / "workflow.yaml"
PLAIT = str(Path(sys.executable).parent / "plait")
T0 = 1_767_225_600_000
LIMIT = {"PLAIT_MAX_CHECKPOINT_BYTES": "4096"}
"""Checkpoint 1 of bigflow is well under it; checkpoint 2, holding `big`'s 8000 x's, is not."""


def plait(*args: str, db: Path, env: dict[str, str] | None = None) -> Done:
    """``plait VERB ... --db DB --json`` in this process (``crashed`` is a real one)."""
    return Cli(db.parent).raw(*args, "--db", f"sqlite:///{db}", "--json", env=dict(env or {}))


def crashed(*args: str, db: Path, at: str) -> subprocess.CompletedProcess[str]:
    """``plait`` in a real process that ``PLAIT_CRASH_AT`` kills at ``at``."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PLAIT_")}
    environ |= {"PLAIT_NOW_MS": str(T0), "PLAIT_PRINCIPAL": "alice", "PLAIT_CRASH_AT": at}
    return subprocess.run(
        [PLAIT, *args, "--db", f"sqlite:///{db}", "--json"],
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
    )


def refused(done: Done, code: str) -> str:
    """The message of the one JSON error object of an exit-2 refusal with ``code``."""
    assert done.exit_code == 2, done
    assert done.code == code, done
    return str(done.data["error"]["message"])


def stored(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the store but its leases (a killed driver leaves its lease held)."""
    with closing(sqlite3.connect(db)) as conn:
        tables = ("runs", "manifests", "journal", "nodes")
        return {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in tables}


def journaled_after(db: Path, seq: int) -> list[tuple[str, str | None]]:
    """(item, record kind) of every journal row after ``seq``, in order."""
    with closing(sqlite3.connect(db)) as conn:
        query = "SELECT item, record_kind FROM journal WHERE seq > ? ORDER BY seq"
        return conn.execute(query, (seq,)).fetchall()


def lease_is_free(db: Path, run_id: str) -> bool:
    with closing(sqlite3.connect(db)) as conn:
        row = conn.execute("SELECT host, expires_ms FROM leases WHERE run_id = ?", (run_id,))
        return row.fetchone() == (None, 0)


def assert_names_the_problem(message: str) -> None:
    for words in (
        "run 'r'",
        "superstep 2",
        "over the limit of 4096 bytes",
        "PLAIT_MAX_CHECKPOINT_BYTES",
        "Keep large payloads out of the context",
    ):
        assert words in message, message


def test_the_refused_wave_leaves_the_store_as_the_wave_before_left_it(tmp_path: Path):
    before = tmp_path / "before.db"
    killed = crashed("run", str(FLOW), "--run-id", "r", db=before, at="intent:2")
    assert killed.returncode == -signal.SIGKILL, killed.stderr  # just after `big`'s intent

    db = tmp_path / "p.db"
    message = refused(plait("run", str(FLOW), "--run-id", "r", db=db, env=LIMIT), "PLAIT-E015")
    assert_names_the_problem(message)
    size = int(message.split(" is ")[1].split(" bytes")[0])
    assert size > 8000  # the canonical bytes of the checkpoint, `big`'s result included
    assert stored(db) == stored(before)
    assert lease_is_free(db, "r")

    verified = plait("verify", "r", db=db)
    assert verified.exit_code == 0, verified
    assert verified.data == {
        "run_id": "r",
        "verified": True,
        "checkpoints": 1,  # superstep 1's; then the intent of `big`, journaled in superstep 2
        "up_to": "superstep 2",
    }
    entries = plait("trace", "r", db=db).data["entries"]
    assert [(e["node"], e["status"]) for e in entries] == [
        ("small", "completed"),
        ("big", "pending"),
    ]


def test_resume_is_refused_the_same_way_until_the_limit_is_raised(tmp_path: Path):
    db = tmp_path / "p.db"
    first = refused(plait("run", str(FLOW), "--run-id", "r", db=db, env=LIMIT), "PLAIT-E015")
    journaled = stored(db)

    again = refused(plait("resume", "r", db=db, env=LIMIT), "PLAIT-E015")
    assert again == first
    # The resume's first wave journals that `big` runs again (as after any crash); the wave
    # of its result, the one the checkpoint closes, is refused again and writes nothing.
    after = stored(db)
    assert after["journal"][: len(journaled["journal"])] == journaled["journal"]
    assert journaled_after(db, len(journaled["journal"])) == [
        ("record", "feed"),
        ("record", "redelivery"),
    ]
    assert after["nodes"] == journaled["nodes"] and after["runs"] == journaled["runs"]
    assert lease_is_free(db, "r")
    assert plait("verify", "r", db=db).exit_code == 0

    raised = plait("resume", "r", db=db, env={"PLAIT_MAX_CHECKPOINT_BYTES": "65536"})
    assert raised.exit_code == 0, raised
    result = raised.data
    assert result["status"] == "completed" and len(result["context"]["blob"]) == 8000
    verified = plait("verify", "r", db=db)
    assert verified.exit_code == 0 and verified.data["up_to"] == "terminal"

    # A fork would start from a checkpoint over the limit: refused before it is made.
    fork = refused(plait("fork", "r", db=db, env=LIMIT), "PLAIT-E015")
    assert "no fork was made" in fork and "over the limit of 4096 bytes" in fork
    runs = plait("runs", db=db).data["runs"]
    assert [r["run_id"] for r in runs] == ["r"]


def test_a_malformed_limit_is_e019_naming_the_variable_and_writes_nothing(tmp_path: Path):
    db = tmp_path / "p.db"
    env = {"PLAIT_MAX_CHECKPOINT_BYTES": "4k"}
    message = refused(plait("run", str(FLOW), "--run-id", "r", db=db, env=env), "PLAIT-E019")
    assert "PLAIT_MAX_CHECKPOINT_BYTES" in message and "'4k'" in message
    assert not db.exists()  # refused before the store was opened


# --- through the Runtime -----------------------------------------------------------


def small() -> dict:
    return {"small": 1}


def big() -> dict:
    return {"blob": "x" * 8000}


def end() -> dict:
    return {"end": True}


def big_workflow() -> Workflow:
    return (
        Workflow.new("big")
        .node("small", tool=small)
        .node("big", tool=big)
        .node("end", tool=end)
        .edge("small", "big")
        .edge("big", "end")
    )


def ticking():
    ticks = iter(range(10_000, 10_000_000, 3))
    return lambda: next(ticks)


def test_runtime_refuses_the_wave_and_gives_the_lease_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    url = f"sqlite:///{tmp_path}/p.db"
    wf = big_workflow()
    monkeypatch.setenv("PLAIT_MAX_CHECKPOINT_BYTES", "4096")
    with Runtime(url, clock=ticking(), principal="p") as rt:
        assert rt.max_checkpoint_bytes == 4096
        with pytest.raises(PlaitError) as err:
            rt.run_sync(wf, run_id="r")
        assert err.value.code == "E015"
        journal = rt.store.load_journal("r")
        assert [m.superstep for m in journal.checkpoints] == [1]
        assert [i.key.node for i in journal.intents] == ["small", "big"]
        assert [k.node for k in journal.results] == ["small"]
        # Given up: another live owner takes the lease at once, then gives it back.
        token = rt.store.acquire_lease(
            "r", LeaseOwner("elsewhere", 1, 1), 20_000_000, 60_000, lambda o: True
        )
        rt.store.release_lease("r", token)
    monkeypatch.delenv("PLAIT_MAX_CHECKPOINT_BYTES")
    with Runtime(url, clock=ticking(), principal="p") as rt:
        assert rt.max_checkpoint_bytes == 256 * 1024 * 1024
        result = rt.resume_sync("r", workflow=wf)
        assert result.status == "completed" and result.context["end"] is True
        assert rt.verify("r", workflow=wf).verified


@pytest.mark.parametrize("value", ["lots", "0", "-4096", "1e6", "4096.0", "٤٠٩٦"])
def test_runtime_refuses_a_malformed_limit_when_it_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
):
    monkeypatch.setenv("PLAIT_MAX_CHECKPOINT_BYTES", value)
    with pytest.raises(PlaitError) as err:
        Runtime(f"sqlite:///{tmp_path}/p.db", principal="p")
    assert err.value.code == "E019" and "PLAIT_MAX_CHECKPOINT_BYTES" in str(err.value)
    assert repr(value) in str(err.value)
    assert not (tmp_path / "p.db").exists()


@pytest.mark.parametrize("value", ["soon", "-1", "1.5e12"])
def test_a_malformed_clock_is_e019_naming_the_variable_and_opens_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
):
    monkeypatch.setenv("PLAIT_NOW_MS", value)
    with pytest.raises(PlaitError) as err:
        Runtime(f"sqlite:///{tmp_path}/p.db", principal="p")
    assert err.value.code == "E019" and "PLAIT_NOW_MS must be" in str(err.value)
    assert repr(value) in str(err.value)
    assert not (tmp_path / "p.db").exists()


def test_a_malformed_lease_ttl_is_e019_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("PLAIT_LEASE_TTL_MS", "30s")
    url = f"sqlite:///{tmp_path}/p.db"
    with Runtime(url, clock=ticking(), principal="p") as rt, pytest.raises(PlaitError) as err:
        rt.run_sync(big_workflow(), run_id="r")
    assert err.value.code == "E019" and "PLAIT_LEASE_TTL_MS" in str(err.value)
    assert "'30s'" in str(err.value)
