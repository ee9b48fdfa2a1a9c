"""The Store contract, run against every back end (see conftest.BACKENDS)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from plait.core.canonical import digest, dumpb
from plait.core.errors import PlaitError
from plait.core.keys import JournalKey
from plait.store import (
    CheckpointMeta,
    CheckpointWrite,
    IntentRecord,
    IntentWrite,
    LeaseOwner,
    ManifestWrite,
    Record,
    RecordWrite,
    ResultRecord,
    ResultWrite,
    RunInfo,
    StatusWrite,
    Store,
    Write,
)
from plait.store.base import WorkStore
from plait.store.lease import LeaseClaim
from plait.store.sqlite import SqliteStore

if TYPE_CHECKING:  # the fixture's type only; conftest is not imported at run time
    from conftest import Backend

HOST = "host-a"
ME = LeaseOwner(HOST, 100, 1_000)
OTHER = LeaseOwner(HOST, 200, 2_000)
ELSEWHERE = LeaseOwner("host-b", 100, 1_000)
TTL = 30_000


def alive(owner: LeaseOwner) -> bool:
    return True


def dead(owner: LeaseOwner) -> bool:
    return False


def run_info(run_id: str = "r1", created_ms: int = 1_000, status: str = "running") -> RunInfo:
    return RunInfo(run_id, "wf", status, "alice", None, created_ms, created_ms, None)


def new_run(store: Store, run_id: str = "r1", manifest: Any = None, **kw: Any) -> str:
    store.create_run(run_info(run_id, **kw), manifest or {"plan": {"nodes": ["a"]}})
    return run_id


def key(run_id: str = "r1", node: str = "a", effect_seq: int = 0, kind: str = "tool") -> JournalKey:
    return JournalKey(run_id, "", node, 1, effect_seq, kind)


def intent(k: JournalKey, value: Any = None, superstep: int = 1) -> IntentWrite:
    return IntentWrite(
        k, "tool:t", {"x": 1} if value is None else value, superstep, 5, "idem-" + k.node
    )


def result(k: JournalKey, value: Any = "ok") -> ResultWrite:
    return ResultWrite(k, {"Completed": {"result": value, "usage": {}}}, 7, 42)


def checkpoint(superstep: int, state: Any) -> CheckpointWrite:
    return CheckpointWrite(
        superstep, dumpb({"scheduler": state, "decisions": {"superstep": superstep}})
    )


def expect(code: str, action: Callable[[], object]) -> PlaitError:
    with pytest.raises(PlaitError) as caught:
        action()
    assert caught.value.code == code, caught.value
    return caught.value


def random_text(rng: random.Random, n_bytes: int) -> str:
    return rng.randbytes(n_bytes // 2).hex()


# --- runs and manifests ---


def test_every_back_end_implements_the_protocol(store: Store) -> None:
    assert isinstance(store, Store)
    assert isinstance(store, WorkStore)  # workers and gc call it without probing


def test_a_back_end_without_notifications_says_so_and_never_fails_to_notify(store: Store) -> None:
    assert isinstance(store, WorkStore)
    new_run(store)
    store.notify_runnable("r1")
    listener = store.listen()
    if isinstance(store, SqliteStore):
        assert listener is None  # workers on a file poll
    else:
        assert listener is not None
        listener.close()


def test_created_run_reads_back_as_written(store: Store) -> None:
    info = RunInfo("r1", "wf", "queued", "alice", "parent~1", 10, 11, None)
    store.create_run(info, {"plan": {"nodes": ["a", "b"]}, "budgets": {"max_usd": 1.0}})
    assert store.get_run("r1") == info
    assert store.manifests("r1") == [{"plan": {"nodes": ["a", "b"]}, "budgets": {"max_usd": 1.0}}]


def test_duplicate_run_id_is_refused_with_e016_and_the_first_run_is_kept(store: Store) -> None:
    new_run(store, "r1", manifest={"v": 1})
    error = expect("E016", lambda: store.create_run(run_info("r1", status="queued"), {"v": 2}))
    assert "'r1'" in str(error)
    assert store.get_run("r1").status == "running"
    assert store.manifests("r1") == [{"v": 1}]


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.get_run("nope"),
        lambda s: s.manifests("nope"),
        lambda s: s.load_journal("nope"),
        lambda s: s.latest_checkpoint("nope"),
        lambda s: s.read_checkpoint("nope", 1),
        lambda s: s.commit("nope", None, [RecordWrite("clock", {"ms": 1})]),
        lambda s: s.acquire_lease("nope", ME, 0, TTL, alive),
    ],
)
def test_unknown_run_id_is_e017(store: Store, call: Callable[[Store], object]) -> None:
    error = expect("E017", lambda: call(store))
    assert str(error) == "PLAIT-E017 unknown run id 'nope'"


def test_list_runs_is_newest_first_and_filters_by_status(store: Store) -> None:
    new_run(store, "old", created_ms=1, status="completed")
    new_run(store, "new", created_ms=3, status="running")
    new_run(store, "mid", created_ms=2, status="completed")
    assert [r.run_id for r in store.list_runs()] == ["new", "mid", "old"]
    assert [r.run_id for r in store.list_runs("completed")] == ["mid", "old"]
    assert store.list_runs("parked") == []


def test_status_write_updates_the_run_row_without_taking_a_seq(store: Store) -> None:
    new_run(store)
    outcome = {"Completed": {"context": {"n": 1}}}
    store.commit(
        "r1", None, [StatusWrite("completed", outcome, 99), RecordWrite("outcome", outcome)]
    )
    run = store.get_run("r1")
    assert (run.status, run.outcome, run.updated_ms, run.created_ms) == (
        "completed",
        outcome,
        99,
        1_000,
    )
    assert [r.seq for r in store.load_journal("r1").records] == [1]


def test_manifest_supersessions_follow_the_original_in_order(store: Store) -> None:
    new_run(store, manifest={"budgets": {"max_supersteps": 1}})
    store.commit("r1", None, [ManifestWrite({"budgets": {"max_supersteps": 2}})])
    store.commit("r1", None, [ManifestWrite({"budgets": {"max_supersteps": 3}})])
    assert [m["budgets"]["max_supersteps"] for m in store.manifests("r1")] == [1, 2, 3]


def _pinned(run_id: str, workflow: dict[str, Any]) -> dict[str, Any]:
    return {
        "engine_epoch": 2,
        "run_id": run_id,
        "input": {"order": run_id},
        "principal": "alice",
        "source": None,
        "workflow": workflow,
        "tool_schemas": {"t": {"type": "object", "title": "t", "properties": {}}},
        "tool_sources": {"tools.py": "ab" * 32},
    }


def test_runs_of_one_workflow_store_its_pinned_definition_once(store: Store) -> None:
    workflow = {"name": "wf", "nodes": [{"id": f"n{i}", "kind": "tool"} for i in range(40)]}
    first, second = _pinned("r1", workflow), _pinned("r2", workflow)
    new_run(store, "r1", manifest=first)
    new_run(store, "r2", manifest=second)
    assert store.manifests("r1") == [first] and store.manifests("r2") == [second]
    assert dumpb(store.manifests("r2")[0]) == dumpb(second)
    # The workflow, tool schemas and tool sources are counted once, for the first run.
    assert store.stored_bytes("r2") < len(dumpb(workflow)) < store.stored_bytes("r1")
    assert store.stored_bytes() == store.stored_bytes("r1") + store.stored_bytes("r2")


# --- the journal ---


def test_commit_numbers_items_per_run_in_write_order(store: Store) -> None:
    new_run(store, "r1")
    new_run(store, "r2")
    a, b = key("r1", "a"), key("r1", "b")
    store.commit("r1", None, [RecordWrite("clock", {"ms": 5}), intent(a), intent(b)])
    store.commit("r2", None, [RecordWrite("clock", {"ms": 1})])
    store.commit(
        "r1", None, [result(b), result(a), checkpoint(1, {"n": 1}), intent(key("r1", "c"))]
    )
    items = store.load_journal("r1").items()
    assert [item.seq for item in items] == list(range(1, 8))
    assert [type(item).__name__ for item in items] == [
        "Record", "IntentRecord", "IntentRecord",
        "ResultRecord", "ResultRecord", "CheckpointMeta", "IntentRecord",
    ]  # fmt: skip
    assert [r.seq for r in store.load_journal("r2").items()] == [1]


def test_a_wide_wave_of_mixed_rows_reads_back_in_order(store: Store) -> None:
    """More rows than one INSERT statement takes, in shapes that change row to row."""
    new_run(store)
    writes: list[Write] = []
    for n in range(25):
        k = key(node=f"n{n:02d}")
        writes += [intent(k, {"n": n}), result(k, n), RecordWrite("note", {"n": n})]
    writes.append(checkpoint(1, {"wide": True}))
    store.commit("r1", None, writes)
    journal = store.load_journal("r1")
    assert [item.seq for item in journal.items()] == list(range(1, 77))
    assert [i.input for i in journal.intents] == [{"n": n} for n in range(25)]
    assert [r.outcome["Completed"]["result"] for r in journal.results.values()] == list(range(25))
    assert [r.body for r in journal.records] == [{"n": n} for n in range(25)]
    assert [c.superstep for c in journal.checkpoints] == [1]


def test_a_duplicate_late_in_a_wide_wave_refuses_the_whole_wave(store: Store) -> None:
    new_run(store)
    store.commit("r1", None, [intent(key(node="dup"))])
    wide = [intent(key(node=f"n{n:02d}")) for n in range(40)] + [intent(key(node="dup"))]
    error = expect("E020", lambda: store.commit("r1", None, wide))
    assert "intent" in str(error)
    assert [i.key.node for i in store.load_journal("r1").intents] == ["dup"]


def test_journal_reads_back_every_field_exactly(store: Store) -> None:
    new_run(store)
    k = key(kind="llm", effect_seq=3)
    tricky = {
        "int": 1,
        "float": 1.0,
        "neg0": -0.0,
        "big": 2**70,
        "text": "žluťoučký 🐎 \u0000",
        "ref_lookalike": {"r": "0" * 64},
        "nested": [[], {}, [[1], [2.5]]],
        "none": None,
    }
    store.commit(
        "r1",
        None,
        [
            IntentWrite(k, "model:scripted", tricky, 4, 123, "idem"),
            ResultWrite(k, {"Failed": {"cause": "Timeout", "detail": "slow"}}, 456, 77),
            RecordWrite("answer", {"ask_id": "x", "value": tricky}),
        ],
    )
    journal = store.load_journal("r1")
    assert journal.run_id == "r1"
    assert journal.intents == [IntentRecord(1, k, "model:scripted", tricky, 4, 123, "idem")]
    assert journal.results == {
        k: ResultRecord(2, k, {"Failed": {"cause": "Timeout", "detail": "slow"}}, 456, 77)
    }
    assert journal.records == [Record(3, "answer", {"ask_id": "x", "value": tricky})]
    assert dumpb(journal.intents[0].input) == dumpb(tricky)  # 1 and 1.0 stay distinct


def test_a_reader_following_a_run_gets_only_the_items_after_a_seq(store: Store) -> None:
    new_run(store)
    rng = random.Random(3)
    context = {"docs": [random_text(rng, 1024) for _ in range(50)]}  # cut into nodes
    a, b = key(node="a"), key(node="b")
    store.commit("r1", None, [intent(a, context), result(a)])
    store.commit("r1", None, [checkpoint(1, {"n": 1}), intent(b, context), result(b)])
    everything = store.load_journal("r1").items()

    later = store.load_journal("r1", after_seq=2).items()

    assert [item.seq for item in everything] == [1, 2, 3, 4, 5]
    assert later == everything[2:]
    assert later[1].input == context  # its nodes were stored with the first intent
    assert store.load_journal("r1", after_seq=5).items() == []
    expect("E017", lambda: store.load_journal("nope", after_seq=5))


def test_large_intent_inputs_round_trip_and_share_storage(store: Store) -> None:
    new_run(store)
    rng = random.Random(7)
    context = {"docs": [random_text(rng, 1024) for _ in range(200)]}
    store.commit("r1", None, [intent(key(node="a"), context)])
    after_first = store.stored_bytes("r1")
    store.commit("r1", None, [intent(key(node="b"), context)])  # the same context again
    assert store.stored_bytes("r1") - after_first < 1_000
    assert [i.input for i in store.load_journal("r1").intents] == [context, context]


def test_second_intent_for_a_key_is_refused_and_the_whole_batch_is_absent(store: Store) -> None:
    new_run(store)
    store.commit("r1", None, [intent(key(node="a"))])
    error = expect(
        "E020",
        lambda: store.commit(
            "r1",
            None,
            [RecordWrite("clock", {"ms": 9}), intent(key(node="b")), intent(key(node="a"))],
        ),
    )
    assert "intent" in str(error)
    journal = store.load_journal("r1")
    assert [i.key.node for i in journal.intents] == ["a"]
    assert journal.records == []
    store.commit("r1", None, [RecordWrite("clock", {"ms": 10})])
    assert store.load_journal("r1").records[0].seq == 2  # the refused batch used no seq


def test_settled_names_the_keys_that_have_a_result(store: Store) -> None:
    new_run(store)
    new_run(store, "r2")
    done, pending, elsewhere = key(node="done"), key(node="pending"), key("r2", node="done")
    store.commit("r1", None, [intent(done), intent(pending), result(done)])
    store.commit("r2", None, [intent(elsewhere), result(elsewhere)])
    many = [key(node=f"n{n:04d}") for n in range(1200)]  # more than one statement takes

    assert store.settled("r1", [done, pending]) == {done}
    assert store.settled("r1", []) == set()
    assert store.settled("r1", [key(node="done", kind="llm")]) == set()  # another effect
    assert store.settled("r2", [done, pending]) == set()  # keys name their run
    assert store.settled("r1", [*many, done]) == {done}
    assert store.settled("nope", [done]) == set()


def test_second_result_for_a_key_is_refused(store: Store) -> None:
    new_run(store)
    k = key()
    store.commit("r1", None, [intent(k), result(k, "first")])
    expect("E020", lambda: store.commit("r1", None, [result(k, "second")]))
    assert store.load_journal("r1").results[k].outcome["Completed"]["result"] == "first"


def test_disk_full_mid_batch_leaves_nothing_written(backend: Backend, store: Store) -> None:
    new_run(store)
    store.commit("r1", None, [RecordWrite("clock", {"ms": 1})])
    backend.fill_disk(store)
    rng = random.Random(3)
    bulky = {"blob": [random_text(rng, 4096) for _ in range(64)]}
    batch: list[Write] = [
        RecordWrite("clock", {"ms": 2}),
        intent(key()),
        RecordWrite("inbox", bulky),
    ]
    error = expect("E020", lambda: store.commit("r1", None, batch))
    assert "storage error on" in str(error)
    journal = store.load_journal("r1")
    assert [item.seq for item in journal.items()] == [1]
    assert journal.intents == []


def test_nodes_of_a_refused_batch_are_stored_when_the_value_comes_again(store: Store) -> None:
    new_run(store)
    store.commit("r1", None, [intent(key(node="a"))])
    rng = random.Random(9)
    bulky = {"docs": [random_text(rng, 1024) for _ in range(50)]}
    refused: list[Write] = [RecordWrite("inbox", bulky), intent(key(node="a"))]
    expect("E020", lambda: store.commit("r1", None, refused))
    store.commit("r1", None, [RecordWrite("inbox", bulky)])
    assert store.load_journal("r1").records[0].body == bulky


def test_stored_bytes_count_one_run_or_all(store: Store) -> None:
    new_run(store, "r1")
    new_run(store, "r2")
    store.commit("r1", None, [RecordWrite("inbox", {"text": "a" * 5_000})])
    store.commit("r2", None, [RecordWrite("inbox", {"text": "b" * 3_000})])
    one, two = store.stored_bytes("r1"), store.stored_bytes("r2")
    assert one > 5_000 and two > 3_000
    assert store.stored_bytes() == one + two


def test_non_json_payload_is_refused_before_anything_is_written(store: Store) -> None:
    new_run(store)
    with pytest.raises(ValueError):
        store.commit(
            "r1", None, [RecordWrite("clock", {"ms": 1}), intent(key(), {"x": float("nan")})]
        )
    assert store.load_journal("r1").items() == []


def test_committed_writes_survive_reopening(backend: Backend, store: Store) -> None:
    new_run(store)
    store.commit("r1", None, [intent(key()), checkpoint(1, {"n": 1})])
    store.close()
    again = backend.open()
    try:
        assert len(again.load_journal("r1").intents) == 1
        meta = again.latest_checkpoint("r1")
        assert meta is not None
        assert again.read_checkpoint("r1", meta.seq) == checkpoint(1, {"n": 1}).data
    finally:
        again.close()


# --- checkpoints ---


def test_checkpoints_read_back_their_exact_bytes(store: Store) -> None:
    new_run(store)
    assert store.latest_checkpoint("r1") is None
    rng = random.Random(5)
    first = checkpoint(1, {"context": {"t": "ünïcode", "f": 2.0, "i": 2}})
    second = checkpoint(2, {"context": {"docs": [random_text(rng, 600) for _ in range(40)]}})
    store.commit("r1", None, [first, RecordWrite("clock", {"ms": 3}), second])
    assert store.read_checkpoint("r1", 1) == first.data
    assert store.read_checkpoint("r1", 3) == second.data
    assert store.latest_checkpoint("r1") == CheckpointMeta(
        3, 2, digest(second.data), len(second.data)
    )
    assert store.load_journal("r1").checkpoints == [
        CheckpointMeta(1, 1, digest(first.data), len(first.data)),
        CheckpointMeta(3, 2, digest(second.data), len(second.data)),
    ]


def test_checkpoints_of_a_run_read_back_together_by_seq(store: Store) -> None:
    """One call for a range of a run's checkpoints (what verify compares), small ones kept
    whole and large ones cut into nodes alike; other runs and other items are left out."""
    new_run(store)
    new_run(store, "r2")
    rng = random.Random(7)
    small = checkpoint(1, {"context": {"t": "ünïcode", "f": 2.0}})
    large = checkpoint(2, {"context": {"docs": [random_text(rng, 600) for _ in range(40)]}})
    last = checkpoint(3, {"context": {"n": 3}})
    store.commit("r1", None, [small, RecordWrite("clock", {"ms": 3}), large, last])
    store.commit("r2", None, [checkpoint(1, {"other": True})])
    assert store.read_checkpoints("r1", 1, 4) == {1: small.data, 3: large.data, 4: last.data}
    assert store.read_checkpoints("r1", 2, 3) == {3: large.data}
    assert store.read_checkpoints("r1", 5, 9) == {}
    expect("E017", lambda: store.read_checkpoints("nope", 1, 9))


def test_checkpoints_read_together_are_checked_against_their_hash(
    backend: Backend, store: Store
) -> None:
    """The batch read takes a small checkpoint's bytes straight from its row, and still
    refuses bytes that are not the ones the row's SHA-256 names; a cut one whose node was
    altered is refused as by ``read_checkpoint``."""
    new_run(store)
    store.commit("r1", None, [checkpoint(1, {"n": 1}), checkpoint(2, {"n": 2})])
    backend.tamper_checkpoint_payload("r1", 2, '"n":2', '"n":7')
    error = expect("E010", lambda: store.read_checkpoints("r1", 1, 2))
    assert str(error) == "PLAIT-E010 checkpoint 2 of run r1 is corrupted: sha256 mismatch"
    assert store.read_checkpoints("r1", 1, 1) == {1: checkpoint(1, {"n": 1}).data}
    expect("E010", lambda: store.read_checkpoint("r1", 2))
    store.commit("r1", None, [checkpoint(3, {"context": {"doc": "MARKER" + "x" * 5000}})])
    assert backend.corrupt_nodes(b"MARKER") == 1
    error = expect("E010", lambda: store.read_checkpoints("r1", 3, 3))
    assert "checkpoint 3 of run r1 is corrupted: sha256 mismatch" in str(error)


def test_a_seq_that_is_not_a_checkpoint_is_e010(store: Store) -> None:
    new_run(store)
    store.commit("r1", None, [RecordWrite("clock", {"ms": 3})])
    expect("E010", lambda: store.read_checkpoint("r1", 1))


def test_checkpoint_with_a_tampered_node_is_e010(backend: Backend, store: Store) -> None:
    new_run(store)
    state = {"context": {"doc": "MARKER" + "x" * 5000}}
    store.commit("r1", None, [checkpoint(1, state)])
    assert backend.corrupt_nodes(b"MARKER") == 1
    error = expect("E010", lambda: store.read_checkpoint("r1", 1))
    assert "checkpoint 1 of run r1 is corrupted: sha256 mismatch" in str(error)


def test_a_checkpoint_at_rest_is_stored_deflated_and_reads_back_byte_for_byte(
    backend: Backend, store: Store
) -> None:
    new_run(store, "r1")
    new_run(store, "r2")
    state = {"node_state": ["DoneOk", "AwaitingClient"], "run_id": "r1", "context": {"a": 1}}
    moving, resting = checkpoint(1, state), checkpoint(2, state)
    store.commit("r1", None, [moving])
    store.commit("r2", None, [CheckpointWrite(2, resting.data, at_rest=True)])
    assert store.read_checkpoint("r2", 1) == resting.data
    assert store.read_checkpoints("r2", 1, 1) == {1: resting.data}
    last = store.latest_checkpoint("r2")
    assert last is not None and last.sha256 == digest(resting.data)
    assert last.size == len(resting.data)
    # Stored in less than its canonical bytes (a moving one is stored as them).
    assert store.stored_bytes("r2") < len(resting.data) < store.stored_bytes("r1")
    # A packed payload altered in the database is refused, as any checkpoint's is.
    backend.tamper_checkpoint_payload("r2", 1, '{"z":"', '{"z":"AAAA')
    error = expect("E010", lambda: store.read_checkpoint("r2", 1))
    assert "checkpoint 1 of run r2 is corrupted" in str(error)


def test_checkpoint_whose_recorded_hash_is_wrong_is_e010(backend: Backend, store: Store) -> None:
    new_run(store)
    store.commit("r1", None, [checkpoint(1, {"n": 1})])
    backend.tamper_checkpoint_hash("r1", 1)
    error = expect("E010", lambda: store.read_checkpoint("r1", 1))
    assert str(error) == "PLAIT-E010 checkpoint 1 of run r1 is corrupted: sha256 mismatch"


def test_checkpoint_value_that_does_not_match_its_bytes_is_caught_on_read(store: Store) -> None:
    """Only a large checkpoint is cut from its value; a small one is stored from its bytes."""
    new_run(store)
    big = ["x" * 100] * 100
    write = CheckpointWrite(1, dumpb({"n": 1, "big": big}), value={"n": 2, "big": big})
    store.commit("r1", None, [write])
    expect("E010", lambda: store.read_checkpoint("r1", 1))


def test_checkpoint_storage_per_step_stays_flat_as_the_context_grows(store: Store) -> None:
    """A context that gains 1 KB per step: bytes stored at step 1000 within 2x of step 100."""
    new_run(store)
    rng = random.Random(11)
    docs: list[str] = []
    added: dict[int, int] = {}
    for step in range(1, 1001):
        docs.append(random_text(rng, 1024))
        state = {"context": {"docs": docs, "step": step}, "superstep": step}
        before = store.stored_bytes("r1") if step in (100, 1000) else 0
        write = checkpoint(step, state)
        parsed = CheckpointWrite(
            step, write.data, value={"scheduler": state, "decisions": {"superstep": step}}
        )
        store.commit("r1", None, [parsed, RecordWrite("clock", {"ms": step})])
        if step in (100, 1000):
            added[step] = store.stored_bytes("r1") - before
    assert added[1000] <= 2 * added[100], added
    last = store.latest_checkpoint("r1")
    assert last is not None and last.superstep == 1000
    assert store.read_checkpoint("r1", last.seq) == checkpoint(1000, state).data


# --- leases ---


def test_a_live_lease_refuses_a_second_owner_with_e021(store: Store) -> None:
    new_run(store)
    token = store.acquire_lease("r1", ME, 0, TTL, alive)
    error = expect("E021", lambda: store.acquire_lease("r1", OTHER, 1, TTL, alive))
    assert "pid 100" in str(error) and HOST in str(error)
    store.commit("r1", token, [RecordWrite("clock", {"ms": 1})])


def test_an_expired_lease_is_taken_over_with_a_higher_token(store: Store) -> None:
    new_run(store)
    first = store.acquire_lease("r1", ME, 0, TTL, alive)
    second = store.acquire_lease("r1", OTHER, TTL, TTL, alive)  # expires_ms <= now_ms
    assert second > first


def test_a_dead_owner_on_the_same_host_is_taken_over_at_once(store: Store) -> None:
    new_run(store)
    first = store.acquire_lease("r1", ME, 0, TTL, alive)
    asked: list[LeaseOwner] = []

    def gone(owner: LeaseOwner) -> bool:
        asked.append(owner)
        return False

    assert store.acquire_lease("r1", OTHER, 1, TTL, gone) > first
    assert asked == [ME]


def test_a_holder_on_another_host_is_never_presumed_dead(store: Store) -> None:
    new_run(store)
    store.acquire_lease("r1", ELSEWHERE, 0, TTL, alive)
    expect("E021", lambda: store.acquire_lease("r1", ME, 1, TTL, dead))


def test_a_stale_token_cannot_commit_and_writes_nothing(store: Store) -> None:
    new_run(store)
    stale = store.acquire_lease("r1", ME, 0, TTL, alive)
    fresh = store.acquire_lease("r1", OTHER, 1, TTL, dead)
    error = expect("E021", lambda: store.commit("r1", stale, [intent(key()), checkpoint(1, {})]))
    assert f"token {stale} is not current" in str(error)
    assert store.load_journal("r1").items() == []
    store.commit("r1", fresh, [intent(key())])
    assert len(store.load_journal("r1").intents) == 1


def test_unleased_writes_pass_while_a_lease_is_held(store: Store) -> None:
    new_run(store)
    store.acquire_lease("r1", ME, 0, TTL, alive)
    store.commit("r1", None, [RecordWrite("answer", {"ask_id": "q", "value": 1})])
    assert len(store.load_journal("r1").records) == 1


def test_renewing_extends_the_lease_and_a_stale_token_cannot_renew(store: Store) -> None:
    new_run(store)
    token = store.acquire_lease("r1", ME, 0, TTL, alive)
    store.renew_lease("r1", token, 20_000, TTL)
    expect("E021", lambda: store.acquire_lease("r1", OTHER, TTL, TTL, alive))  # now ends at 50 s
    expect("E021", lambda: store.renew_lease("r1", token + 1, 20_000, TTL))


def test_released_lease_is_free_and_its_token_is_spent(store: Store) -> None:
    new_run(store)
    first = store.acquire_lease("r1", ME, 0, TTL, alive)
    store.release_lease("r1", first + 7)  # not current: nothing happens
    expect("E021", lambda: store.acquire_lease("r1", OTHER, 1, TTL, alive))
    store.release_lease("r1", first)
    expect("E021", lambda: store.commit("r1", first, [RecordWrite("clock", {"ms": 1})]))
    expect("E021", lambda: store.renew_lease("r1", first, 2, TTL))
    second = store.acquire_lease("r1", OTHER, 2, TTL, alive)
    assert second > first


def test_a_run_created_with_a_lease_is_leased_in_the_same_transaction(store: Store) -> None:
    claim = LeaseClaim(ME, 0, TTL, alive)
    token = store.create_run(run_info("r1"), {"plan": {}}, lease=claim)
    assert token == 1
    assert store.create_run(run_info("r2"), {"plan": {}}) is None
    expect("E021", lambda: store.acquire_lease("r1", OTHER, 1, TTL, alive))
    store.commit("r1", token, [RecordWrite("clock", {"ms": 1})])
    assert store.acquire_lease("r2", OTHER, 1, TTL, alive) == 1  # r2 was created unleased
    # A run id that is taken leases nothing (the transaction writes nothing at all).
    expect("E016", lambda: store.create_run(run_info("r2"), {}, lease=claim))
    expect("E021", lambda: store.commit("r2", 2, [RecordWrite("clock", {"ms": 1})]))


def test_a_commit_that_releases_gives_the_lease_up_with_its_writes(store: Store) -> None:
    new_run(store)
    token = store.acquire_lease("r1", ME, 0, TTL, alive)
    store.commit("r1", token, [RecordWrite("clock", {"ms": 1})], release=True)
    assert len(store.load_journal("r1").records) == 1
    expect("E021", lambda: store.commit("r1", token, [RecordWrite("clock", {"ms": 2})]))
    assert store.acquire_lease("r1", OTHER, 1, TTL, alive) == token + 1


def test_a_stale_commit_that_would_release_writes_and_releases_nothing(store: Store) -> None:
    new_run(store)
    stale = store.acquire_lease("r1", ME, 0, TTL, alive)
    fresh = store.acquire_lease("r1", OTHER, TTL, TTL, alive)
    expect("E021", lambda: store.commit("r1", stale, [intent(key())], release=True))
    assert store.load_journal("r1").items() == []
    expect("E021", lambda: store.acquire_lease("r1", ME, TTL + 1, TTL, alive))  # still held
    store.commit("r1", fresh, [intent(key())], release=True)
    assert store.acquire_lease("r1", ME, TTL + 2, TTL, alive) == fresh + 1


# --- the database itself ---


def test_a_schema_newer_than_the_code_is_e020(backend: Backend) -> None:
    backend.claim_newer_schema()
    error = expect("E020", backend.open)
    assert "is newer than this plait" in str(error) and "upgrade plait" in str(error)


def test_a_read_only_database_refuses_writes_with_e020(backend: Backend) -> None:
    writable = backend.open()
    new_run(writable)
    writable.close()
    store = backend.open_read_only()
    try:
        assert store.get_run("r1").run_id == "r1"
        expect("E020", lambda: store.commit("r1", None, [RecordWrite("clock", {"ms": 1})]))
        expect("E020", lambda: new_run(store, "r2"))
    finally:
        store.close()


def test_records_after_sees_what_another_connection_and_this_one_write(
    backend: Backend, store: Store
) -> None:
    """A driver asks between waves; a cancel from anywhere must be seen at the next ask."""
    new_run(store)
    kinds = ("cancel", "inbox")
    assert store.records_after("r1", 0, kinds) == []
    store.commit("r1", None, [RecordWrite("feed", {"events": []})])  # not a watched kind
    assert store.records_after("r1", 0, kinds) == []
    with pytest.raises(ValueError, match="feed records"):  # never indexed, never polled
        store.records_after("r1", 0, ("feed",))
    other = backend.open()
    try:
        other.commit("r1", None, [RecordWrite("cancel", {"by": "bob", "reason": "stop"})])
    finally:
        other.close()
    found = store.records_after("r1", 0, kinds)
    assert found == [Record(2, "cancel", {"by": "bob", "reason": "stop"})]
    assert store.records_after("r1", 2, kinds) == []
    store.commit("r1", None, [RecordWrite("inbox", {"message": "hi"})])
    assert store.records_after("r1", 2, kinds) == [Record(3, "inbox", {"message": "hi"})]
    assert store.records_after("r1", 0, kinds) == [*found, Record(3, "inbox", {"message": "hi"})]
