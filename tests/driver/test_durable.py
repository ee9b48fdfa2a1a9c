"""Durable runs on SQLite: verify, tampering, identical chains, fork, leases, resume (§5)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable

import pytest

from plait import PlaitError, Runtime, Workflow
from plait.store.records import LeaseOwner


def count_to_three(n: int = 0) -> dict:
    return {"n": n + 1, "log": [n]}


def count_up(n: int = 0) -> dict:
    return {"n": n + 1}


def finish(n: int) -> dict:
    return {"done": n}


def counting(name: str, node: str, tool: Callable[..., dict], until: int, cycles: int) -> Workflow:
    """``node`` runs again while ``n < until`` (at most ``cycles`` times), then ``finish``."""
    return (
        Workflow.new(name)
        .node(node, tool=tool)
        .node("finish", tool=finish)
        .edge(node, node, when=f"n < {until}", max_cycles=cycles)
        .edge(node, "finish", when=f"n >= {until}")
    )


def loop_workflow() -> Workflow:
    return (
        Workflow.new("counter")
        .node("count", tool=count_to_three)
        .node("finish", tool=finish)
        .edge("count", "count", when="n < 3", max_cycles=5)
        .edge("count", "finish", when="n >= 3")
        .reducer("log", "extend")
    )


def fixed_clock():
    ticks = iter(range(1_000_000, 2_000_000, 7))
    return lambda: next(ticks)


@pytest.fixture
def runtime(tmp_path):
    rt = Runtime(f"sqlite:///{tmp_path}/plait.db", clock=fixed_clock(), principal="alice")
    yield rt
    rt.close()


def test_a_durable_run_completes_and_verifies(runtime):
    wf = loop_workflow()
    result = runtime.run_sync(wf, {"n": 0})
    assert result.status == "completed"
    assert result.context == {"n": 3, "log": [0, 1, 2], "done": 3}
    report = runtime.verify(result.run_id, workflow=wf)
    assert report.verified and report.up_to == "terminal"
    assert report.checkpoints == 5  # four superstep closes and the terminal checkpoint


def test_trace_lists_effects_in_dispatch_order(runtime):
    wf = loop_workflow()
    result = runtime.run_sync(wf, {"n": 0})
    entries = runtime.trace(result.run_id)
    assert [(e["node"], e["attempt"], e["status"]) for e in entries] == [
        ("count", 1, "completed"),
        ("count", 2, "completed"),
        ("count", 3, "completed"),
        ("finish", 1, "completed"),
    ]
    assert entries[0]["input"] == {"n": 0}
    assert entries[0]["result"] == {"n": 1, "log": [0]}


def test_tampering_with_a_journaled_result_fails_verify_naming_superstep_and_field(
    runtime, tmp_path
):
    wf = loop_workflow()
    result = runtime.run_sync(wf, {"n": 0})
    db = sqlite3.connect(tmp_path / "plait.db")
    rows = db.execute(
        "SELECT seq, payload FROM journal WHERE run_id = ? AND item = 'result' ORDER BY seq",
        (result.run_id,),
    ).fetchall()
    seq, payload = rows[1]
    # The store keeps small results inline; whatever its encoding, the list [1] is in there.
    marker = '"log":[1]' if '"log":[1]' in payload else '"l":[1]'
    assert marker in payload
    db.execute(
        "UPDATE journal SET payload = ? WHERE run_id = ? AND seq = ?",
        (payload.replace(marker, marker.replace("1", "7")), result.run_id, seq),
    )
    db.commit()
    db.close()
    report = runtime.verify(result.run_id, workflow=wf)
    assert not report.verified
    assert report.error.startswith("PLAIT-E009 superstep 2:")
    assert "scheduler.context.log" in report.error


def test_two_identical_runs_produce_identical_checkpoint_chains(tmp_path):
    chains = []
    for name in ("a", "b"):
        rt = Runtime(f"sqlite:///{tmp_path}/{name}.db", clock=fixed_clock(), principal="p")
        result = rt.run_sync(loop_workflow(), {"n": 0}, run_id="same-run")
        journal = rt.store.load_journal(result.run_id)
        chains.append([rt.store.read_checkpoint("same-run", m.seq) for m in journal.checkpoints])
        rt.close()
    assert chains[0] == chains[1]
    assert len(chains[0]) == 5


def dump_run(path, run_id):
    db = sqlite3.connect(path)
    rows = db.execute("SELECT * FROM journal WHERE run_id = ? ORDER BY seq", (run_id,)).fetchall()
    rows += db.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchall()
    db.close()
    return rows


def test_fork_runs_on_from_a_checkpoint_and_leaves_the_base_untouched(runtime, tmp_path):
    wf = loop_workflow()
    base = runtime.run_sync(wf, {"n": 0})
    before = dump_run(tmp_path / "plait.db", base.run_id)
    fork = runtime.fork_sync(base.run_id, at=2, workflow=wf)
    assert fork.run_id != base.run_id
    assert fork.status == "completed"
    assert fork.context == base.context
    assert dump_run(tmp_path / "plait.db", base.run_id) == before
    assert runtime.verify(fork.run_id, workflow=wf).verified
    # The fork re-ran only what came after superstep 2.
    assert [e["attempt"] for e in runtime.trace(fork.run_id)] == [3, 1]


def test_fork_with_edits_from_python_goes_on_with_them_made_by_the_principal_given(
    runtime, tmp_path
):
    wf = loop_workflow()
    base = runtime.run_sync(wf, {"n": 0})
    fork = runtime.fork_sync(base.run_id, at=1, workflow=wf, edits={"log": ["edited"]}, by="bob")
    assert fork.status == "completed"
    assert fork.context["log"][0] == "edited"  # replaced at the fork point, then extended
    assert fork.context["log"][1:] == base.context["log"][1:]
    assert runtime.store.get_run(fork.run_id).principal == "bob"
    assert runtime.verify(fork.run_id, workflow=wf).verified


def test_resuming_a_finished_run_reports_its_outcome_again(runtime):
    wf = loop_workflow()
    first = runtime.run_sync(wf, {"n": 0})
    again = runtime.resume_sync(first.run_id, workflow=wf)
    assert again.status == "completed" and again.context == first.context
    assert len(runtime.trace(first.run_id)) == 4


def test_a_second_driver_is_refused_while_the_lease_is_live(runtime):
    wf = loop_workflow()
    result = runtime.run_sync(wf, {"n": 0})
    other = LeaseOwner("another-host", 4242, 1)
    token = runtime.store.acquire_lease(result.run_id, other, 1_000, 60_000, lambda o: True)
    with pytest.raises(PlaitError) as err:
        runtime.store.acquire_lease(
            result.run_id, LeaseOwner("third-host", 1, 1), 2_000, 60_000, lambda o: True
        )
    assert err.value.code == "E021"
    # Once expired, it is taken over with a higher fencing token.
    taken = runtime.store.acquire_lease(
        result.run_id, LeaseOwner("third-host", 1, 1), 61_000, 60_000, lambda o: True
    )
    assert taken > token


def test_unknown_run_id_is_e017(runtime):
    with pytest.raises(PlaitError) as err:
        runtime.resume_sync("no-such-run")
    assert err.value.code == "E017"


def test_duplicate_run_id_is_e016(runtime):
    wf = loop_workflow()
    runtime.run_sync(wf, {"n": 0}, run_id="r1")
    with pytest.raises(PlaitError) as err:
        runtime.run_sync(wf, {"n": 0}, run_id="r1")
    assert err.value.code == "E016"


def test_checkpoints_decode_to_the_state_shown(runtime):
    wf = loop_workflow()
    result = runtime.run_sync(wf, {"n": 0})
    shown = runtime.show(result.run_id)
    assert shown.status == "completed"
    assert shown.context == result.context
    assert json.loads(json.dumps(shown.to_json()))["spent"]["supersteps"] == 4


def test_every_checkpoint_of_a_large_state_reads_back_byte_for_byte(runtime):
    """A state past the inline limit is cut into nodes; reading it back checks its SHA-256."""

    def grow(n: int = 0) -> dict:
        return {"n": n + 1, "log": [f"{n:03d}" + "x" * 3000]}

    wf = counting("big", "grow", grow, 6, 10).reducer("log", "extend")
    result = runtime.run_sync(wf, {"n": 0})
    store = runtime.store
    sizes = []
    for meta in store.load_journal(result.run_id).checkpoints:
        data = store.read_checkpoint(result.run_id, meta.seq)  # PLAIT-E010 on a mismatch
        assert len(data) == meta.size
        sizes.append(meta.size)
    assert max(sizes) > 3 * 4096  # large enough to be cut into nodes


def test_a_long_run_renews_its_lease_and_a_stale_driver_cannot_write(tmp_path):
    clock = {"now": 0}

    def tick() -> int:
        clock["now"] += 20_000  # 20 s between readings: a 30 s lease lapses unless renewed
        return clock["now"]

    rt = Runtime(f"sqlite:///{tmp_path}/p.db", clock=tick, principal="p")
    claims: list[str] = []

    def count(n: int = 0) -> dict:
        # Another host tries to take the run over while it is being driven.
        try:
            rt.store.acquire_lease("long", LeaseOwner("other", 9, 9), clock["now"], 30_000, bool)
            claims.append("taken")
        except PlaitError as exc:
            claims.append(exc.code)
        return {"n": n + 1}

    wf = (
        Workflow.new("long")
        .node("count", tool=count)
        .node("finish", tool=finish)
        .edge("count", "count", when="n < 6", max_cycles=10)
        .edge("count", "finish", when="n >= 6")
    )
    result = rt.run_sync(wf, {"n": 0}, run_id="long")
    assert result.status == "completed"
    assert claims == ["E021"] * 6  # renewed at every commit: never lapsed, never taken
    # A driver holding an old token is fenced out of every write.
    token = rt.store.acquire_lease("long", LeaseOwner("h", 1, 1), 10**9, 30_000, bool)
    with pytest.raises(PlaitError) as err:
        rt.store.commit("long", token - 1, [])
    assert err.value.code == "E021"
    rt.close()


def test_a_run_started_from_python_verifies_from_its_manifest_alone(runtime, tmp_path):
    result = runtime.run_sync(loop_workflow(), {"n": 0})
    # A new process with no workflow object, no file, no tool module: the manifest suffices.
    with Runtime(f"sqlite:///{tmp_path}/plait.db", principal="someone") as other:
        report = other.verify(result.run_id)
    assert report.verified and report.up_to == "terminal"


def test_verify_compares_every_checkpoint_of_a_long_run_read_in_batches(runtime, tmp_path):
    """Verify reads a run's checkpoints many at a time: a checkpoint far past the first
    batch that was rewritten consistently (bytes, size and SHA-256 agree with each other
    but not with the replay) is still found, at its own superstep."""
    wf = counting("long", "count", count_up, 600, 700)
    result = runtime.run_sync(wf, {"n": 0})
    assert runtime.verify(result.run_id, workflow=wf).verified
    db = sqlite3.connect(tmp_path / "plait.db")
    checkpoints = db.execute(
        "SELECT seq, payload FROM journal WHERE run_id = ? AND item = 'checkpoint' ORDER BY seq",
        (result.run_id,),
    ).fetchall()
    assert len(checkpoints) > 600
    seq, payload = checkpoints[550]
    assert payload.startswith('{"j":') and '"n":551' in payload
    changed = payload.replace('"n":551', '"n":552')
    data = changed[5:-1].encode()
    db.execute(
        "UPDATE journal SET payload = ?, sha256 = ?, size = ? WHERE run_id = ? AND seq = ?",
        (changed, hashlib.sha256(data).hexdigest(), len(data), result.run_id, seq),
    )
    db.commit()
    db.close()
    report = runtime.verify(result.run_id, workflow=wf)
    assert not report.verified and report.checkpoints == 550
    assert report.error == (
        f"PLAIT-E009 superstep 551: checkpoint {seq} differs from the replay in scheduler.context.n"
    ), report.error
