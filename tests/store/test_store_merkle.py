"""Epoch-3 checkpoints on every back end: cut by the core (``core.merkle``), the row's
digest the SHA-256 of the root that names the nodes (a Merkle root), read back as the
exact canonical bytes, every node and the root checked on read (PLAIT-E010)."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

import pytest

from plait.core.canonical import digest, dumpb
from plait.core.errors import PlaitError
from plait.core.merkle import ChunkMemo, cut_checkpoint
from plait.store import CheckpointMeta, CheckpointWrite, RunInfo, Store

if TYPE_CHECKING:  # the fixture's type only; conftest is not imported at run time
    from conftest import Backend


def new_run(store: Store, run_id: str = "r1") -> None:
    store.create_run(RunInfo(run_id, "wf", "running", "alice", None, 1_000, 1_000), {"v": 1})


def value(superstep: int, context: Any) -> dict[str, Any]:
    return {"scheduler": {"context": context}, "decisions": {"superstep": superstep}}


def write(superstep: int, context: Any, memo: ChunkMemo | None = None) -> CheckpointWrite:
    return CheckpointWrite(superstep, None, cut=cut_checkpoint(value(superstep, context), memo))


def docs(rng: random.Random, n: int) -> list[str]:
    return [rng.randbytes(300).hex() for _ in range(n)]


def test_merkle_checkpoints_read_back_their_exact_bytes(store: Store) -> None:
    new_run(store)
    rng = random.Random(3)
    small = {"t": "ünïcode", "f": 2.0, "i": 2}
    large = {"docs": docs(rng, 40), "t": "ünïcode" * 100}
    first, second = write(1, small), write(2, large)
    store.commit("r1", None, [first, second])
    for seq, (superstep, context, w) in enumerate([(1, small, first), (2, large, second)], 1):
        data = dumpb(value(superstep, context))
        assert store.read_checkpoint("r1", seq) == data
        assert w.cut is not None
        assert store.load_journal("r1").checkpoints[seq - 1] == CheckpointMeta(
            seq, superstep, w.cut.digest, len(data)
        )
    assert store.read_checkpoints("r1", 1, 2) == {
        1: dumpb(value(1, small)),
        2: dumpb(value(2, large)),
    }


def test_a_cut_that_leaves_out_nodes_handed_out_before_reads_back_whole(store: Store) -> None:
    """With a memo a checkpoint carries only its new nodes; the earlier ones were committed
    with the checkpoints before it."""
    new_run(store)
    rng = random.Random(4)
    memo = ChunkMemo()
    log: list[str] = []
    writes = []
    for step in range(1, 41):
        log = [*log, *docs(rng, 1)]
        writes.append(write(step, {"log": log}, memo))
        store.commit("r1", None, writes[-1:])
    assert writes[-1].cut is not None and len(writes[-1].cut.nodes) < 5
    assert store.read_checkpoint("r1", 40) == dumpb(value(40, {"log": log}))


def expect_e010(action: Any) -> str:
    with pytest.raises(PlaitError) as info:
        action()
    assert info.value.code == "E010"
    return str(info.value)


def test_a_merkle_checkpoint_with_a_tampered_node_is_e010(backend: Backend, store: Store) -> None:
    new_run(store)
    store.commit("r1", None, [write(1, {"doc": "MARKER" + "x" * 5000})])
    assert backend.corrupt_nodes(b"MARKER") == 1
    assert "sha256 mismatch" in expect_e010(lambda: store.read_checkpoint("r1", 1))
    assert "sha256 mismatch" in expect_e010(lambda: store.read_checkpoints("r1", 1, 1))


@pytest.mark.parametrize("context", [{"n": 2}, {"docs": ["x" * 300 + str(i) for i in range(20)]}])
def test_a_merkle_checkpoint_whose_root_or_hash_was_altered_is_e010(
    backend: Backend, store: Store, context: Any
) -> None:
    new_run(store)
    store.commit("r1", None, [write(1, context), write(2, context)])
    backend.tamper_checkpoint_payload("r1", 1, '"superstep":1', '"superstep":7')
    backend.tamper_checkpoint_hash("r1", 2)
    assert "sha256 mismatch" in expect_e010(lambda: store.read_checkpoint("r1", 1))
    assert "sha256 mismatch" in expect_e010(lambda: store.read_checkpoint("r1", 2))


def test_the_digest_is_the_root_texts_sha256_not_the_bytes(store: Store) -> None:
    new_run(store)
    w = write(1, {"n": 1})
    store.commit("r1", None, [w])
    data = store.read_checkpoint("r1", 1)
    (meta,) = store.load_journal("r1").checkpoints
    assert w.cut is not None and meta.sha256 == digest(w.cut.root) != digest(data)
