"""``WorkStore.claimed_run``: what a worker reads of a run it claimed is exactly what
``manifests`` and ``load_journal`` read, on every back end."""

from __future__ import annotations

from typing import Any

import pytest

from plait.core.canonical import dumpb
from plait.core.errors import PlaitError
from plait.core.keys import JournalKey
from plait.store import (
    CheckpointWrite,
    IntentWrite,
    ManifestWrite,
    RecordWrite,
    ResultWrite,
    RunInfo,
    Store,
)
from plait.store.base import WorkStore

BIG = {"nodes": [{"id": f"n{i}", "doc": "x" * 60} for i in range(40)]}
"""A manifest field long enough to be stored as a node of its own."""


def claimed(store: Store, run_id: str) -> tuple[list[Any], list[Any]]:
    assert isinstance(store, WorkStore)
    manifests, journal = store.claimed_run(run_id)
    return manifests, journal.items()


def separately(store: Store, run_id: str) -> tuple[list[Any], list[Any]]:
    return store.manifests(run_id), store.load_journal(run_id).items()


def test_a_queued_run_reads_its_manifest_and_an_empty_journal(store: Store) -> None:
    manifest = {"workflow": BIG, "input": {"n": 1}, "run_id": "r1"}
    store.create_run(RunInfo("r1", "wf", "queued", "alice", None, 1, 1), manifest)
    assert claimed(store, "r1") == ([manifest], []) == separately(store, "r1")


def test_a_run_with_a_journal_and_superseded_manifests_reads_as_separate_reads(
    store: Store,
) -> None:
    store.create_run(RunInfo("r1", "wf", "running", "alice", None, 1, 1), {"workflow": BIG})
    key = JournalKey("r1", "", "a", 1, 0, "tool")
    state = {"scheduler": {"big": "y" * 5_000}, "decisions": {"superstep": 1}}
    store.commit(
        "r1",
        None,
        [
            RecordWrite("feed", {"events": [{"input": "z" * 5_000}]}),
            IntentWrite(key, "tool:t", {"x": "w" * 5_000}, 1, 5, "idem-a"),
            ResultWrite(key, {"Completed": {"result": 1, "usage": {}}}, 7, 42),
            CheckpointWrite(1, dumpb(state)),
            ManifestWrite({"workflow": BIG, "budgets": {"max_supersteps": 2}}),
        ],
    )
    manifests, items = claimed(store, "r1")
    assert (manifests, items) == separately(store, "r1")
    assert [m.get("budgets") for m in manifests] == [None, {"max_supersteps": 2}]
    assert [item.seq for item in items] == [1, 2, 3, 4]


def test_an_unknown_run_is_e017(store: Store) -> None:
    assert isinstance(store, WorkStore)
    with pytest.raises(PlaitError) as caught:
        store.claimed_run("nope")
    assert str(caught.value) == "PLAIT-E017 unknown run id 'nope'"
