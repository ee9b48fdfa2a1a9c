"""A PostgreSQL store decodes the part of a manifest that every run of one workflow shares
once (``NodeCache``'s decoded texts), and still hands every caller a value of its own."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from plait.store import RunInfo
from plait.store.node_reads import NodeCache

try:
    import psycopg

    from plait.store.postgres import PostgresStore
except ImportError as missing:  # the optional extra plait[postgres] is not installed
    if os.environ.get("PLAIT_REQUIRE_POSTGRES") == "1":
        raise
    pytest.skip(f"PostgreSQL tests need psycopg: {missing}", allow_module_level=True)

WORKFLOW = {
    "name": "wf",
    "nodes": [{"id": f"n{i}", "doc": "x" * 40} for i in range(8)],
    "limits": {"ratio": 1.0, "count": 1},  # a float stays a float, an int an int
}
"""Long enough to be a node of its own: the part every run of the workflow shares."""


def manifest(run_id: str, workflow: dict[str, Any], n: int) -> dict[str, Any]:
    own = f"{n}" + "y" * 5_000  # past the limit of a value kept whole: a node of its own
    return {"workflow": workflow, "input": {"n": n, "text": own}, "run_id": run_id}


def queue(store: PostgresStore, run_id: str, workflow: dict[str, Any], n: int) -> None:
    store.create_run(
        RunInfo(run_id, "wf", "queued", "a", None, 1, 1), manifest(run_id, workflow, n)
    )


def forget_stored_nodes(url: str, store: PostgresStore) -> None:
    """Delete every node row and the bytes the store holds: only decoded texts are left."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DELETE FROM nodes")
    store._manifest_nodes.nodes.clear()


@pytest.fixture
def writer(postgres_url: str) -> Iterator[PostgresStore]:
    """The store that queues the runs (tests read them through another, which read nothing yet)."""
    store = PostgresStore(postgres_url)
    yield store
    store.close()


def test_runs_of_one_workflow_with_other_inputs_share_only_the_decoded_workflow(
    postgres_url: str, writer: PostgresStore
) -> None:
    queue(writer, "r1", WORKFLOW, 1)
    queue(writer, "r2", WORKFLOW, 2)
    other = PostgresStore(postgres_url)
    try:
        assert other.manifests("r1") == [manifest("r1", WORKFLOW, 1)]
        forget_stored_nodes(postgres_url, other)
        # The workflow comes from its decoded text; r2's own input is a node that is gone.
        with pytest.raises(Exception, match="E010"):
            other.manifests("r2")
    finally:
        other.close()


def test_a_shared_workflow_is_not_read_or_walked_again(
    postgres_url: str, writer: PostgresStore
) -> None:
    queue(writer, "r1", WORKFLOW, 1)
    small = {"workflow": WORKFLOW, "input": {"n": 2}, "run_id": "r2"}
    writer.create_run(RunInfo("r2", "wf", "queued", "a", None, 1, 1), small)
    other = PostgresStore(postgres_url)
    try:
        assert other.manifests("r1") == [manifest("r1", WORKFLOW, 1)]
        forget_stored_nodes(postgres_url, other)
        (read,) = other.manifests("r2")
        assert read == small
        limits = read["workflow"]["limits"]
        assert (type(limits["ratio"]), type(limits["count"])) == (float, int)
    finally:
        other.close()


def test_a_new_version_of_the_workflow_is_decoded_as_it_is(
    postgres_url: str, writer: PostgresStore
) -> None:
    newer = {**WORKFLOW, "nodes": [*WORKFLOW["nodes"], {"id": "last", "doc": "z" * 40}]}
    queue(writer, "r1", WORKFLOW, 1)
    queue(writer, "r2", newer, 2)
    assert writer.manifests("r1") == [manifest("r1", WORKFLOW, 1)]
    assert writer.manifests("r2") == [manifest("r2", newer, 2)]
    assert writer.manifests("r1") == [manifest("r1", WORKFLOW, 1)]


def test_a_caller_changing_its_manifest_changes_nobody_elses(writer: PostgresStore) -> None:
    queue(writer, "r1", WORKFLOW, 1)
    queue(writer, "r2", WORKFLOW, 2)
    first = writer.manifests("r1")[-1]
    first["workflow"]["nodes"][0]["id"] = "changed"
    first["workflow"]["nodes"].append({"id": "added"})
    first["workflow"]["name"] = "renamed"
    assert writer.manifests("r1") == [manifest("r1", WORKFLOW, 1)]
    assert writer.manifests("r2") == [manifest("r2", WORKFLOW, 2)]


def test_decoded_texts_count_towards_the_cache_bound() -> None:
    cache = NodeCache(limit=1_000)
    cache.add({"a" * 64: b"x" * 300}, set())
    cache.keep_text("b" * 64, "t" * 300)
    assert cache.text_of("b" * 64) == "t" * 300
    cache.keep_text("c" * 64, "u" * 300)  # past the limit: everything held is forgotten
    assert (cache.nodes, cache.text_of("b" * 64), cache.text_of("c" * 64)) == ({}, None, "u" * 300)
    for i in range(20):
        cache.keep_text(f"{i:064}", "v" * 200)
        held = sum(len(data) + 64 for data in cache.texts.values()) + sum(
            len(data) for data in cache.nodes.values()
        )
        assert held <= 1_000
