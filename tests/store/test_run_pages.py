"""Paging runs and journals (``store.run_pages``), on every back end: keyset pages that
cover every run exactly once newest first, filters that combine, and journal pages
newest first before a seq."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from plait.core.errors import PlaitError
from plait.core.keys import JournalKey
from plait.store import Store, open_store
from plait.store.records import IntentWrite, RecordWrite, ResultWrite, RunInfo
from plait.store.run_pages import MAX_PAGE, RunQuery, page_runs
from plait.store.sql import SQLITE


def add_run(store: Store, run_id: str, created_ms: int, **kw: Any) -> None:
    info = RunInfo(
        run_id,
        kw.get("workflow", "wf"),
        kw.get("status", "completed"),
        kw.get("principal", "alice"),
        None,
        created_ms,
        kw.get("updated_ms", created_ms),
    )
    store.create_run(info, {"plan": {"nodes": ["a"]}})


def every_page(store: Store, query: RunQuery) -> list[list[str]]:
    pages = []
    while True:
        page = store.page_runs(query)
        pages.append([info.run_id for info in page.runs])
        if page.next is None:
            return pages
        query = dataclasses.replace(query, after=page.next)


def test_pages_cover_every_run_once_newest_first_with_ties_in_insertion_order(store: Store):
    for i in range(7):
        add_run(store, f"r{i}", 1000 + i // 2)  # pairs share a created_ms

    pages = every_page(store, RunQuery(limit=3))

    assert pages == [["r6", "r5", "r4"], ["r3", "r2", "r1"], ["r0"]]
    assert [i.run_id for i in store.list_runs()] == [run for page in pages for run in page]


def test_filters_combine_status_workflow_text_and_since(store: Store):
    add_run(store, "a-1", 100, workflow="alpha", status="parked")
    add_run(store, "a-2", 200, workflow="alpha", status="completed")
    add_run(store, "b-1", 300, workflow="beta", status="parked", principal="bob_x")
    add_run(store, "b-2", 400, workflow="beta", status="parked")

    def ids(**kw: Any) -> list[str]:
        return [i.run_id for i in store.page_runs(RunQuery(**kw)).runs]

    assert ids(status="parked") == ["b-2", "b-1", "a-1"]
    assert ids(workflow="alpha") == ["a-2", "a-1"]
    assert ids(status="parked", workflow="beta", since_ms=350) == ["b-2"]
    assert ids(text="bob_") == ["b-1"]  # matches the principal
    assert ids(text="b_1") == []  # "_" is a literal underscore: "b-1" does not match
    assert ids(text="%") == []  # so is '%'
    assert ids(text="a-") == ["a-2", "a-1"]


def test_pages_sort_by_created_or_updated_either_way_and_cover_every_run_once(store: Store):
    # created 1000..1006; updated in another order, with ties (insertion order breaks them)
    updated = [50, 10, 30, 10, 70, 30, 20]
    for i, when in enumerate(updated):
        add_run(store, f"r{i}", 1000 + i, updated_ms=when, status="parked" if i % 2 else "failed")

    by_update = every_page(store, RunQuery(limit=3, sort="updated"))
    oldest_update = every_page(store, RunQuery(limit=2, sort="updated", descending=False))
    oldest_created = every_page(store, RunQuery(limit=4, descending=False))

    assert by_update == [["r4", "r0", "r5"], ["r2", "r6", "r3"], ["r1"]]
    assert oldest_update == [["r1", "r3"], ["r6", "r2"], ["r5", "r0"], ["r4"]]
    assert oldest_created == [["r0", "r1", "r2", "r3"], ["r4", "r5", "r6"]]
    parked = every_page(store, RunQuery(limit=2, status="parked", sort="updated"))
    assert parked == [["r5", "r3"], ["r1"]]  # a tie: the later inserted first


def test_updated_since_keeps_runs_updated_at_or_after_it(store: Store):
    add_run(store, "old", 100, updated_ms=150)
    add_run(store, "moved", 110, updated_ms=900)
    add_run(store, "new", 800, updated_ms=800)

    page = store.page_runs(RunQuery(updated_since_ms=800, sort="updated"))

    assert [i.run_id for i in page.runs] == ["moved", "new"]


def test_a_page_holds_at_most_max_page_runs(store: Store):
    add_run(store, "only", 1)
    assert store.page_runs(RunQuery(limit=MAX_PAGE * 10)).next is None


def test_journal_pages_go_back_from_the_newest_item(store: Store):
    add_run(store, "r1", 1, status="running")
    writes: list[Any] = []
    for n in range(5):
        k = JournalKey("r1", "", "a", 1, n, "tool")
        writes += [
            IntentWrite(k, "t", {"n": n}, 1, 10 + n, f"i{n}"),
            ResultWrite(k, {"Completed": {"result": n}}, 11 + n, 4),
        ]
    writes.append(RecordWrite("note", {"last": True}))
    store.commit("r1", None, writes)

    newest = store.journal_page("r1", None, 4)
    older = store.journal_page("r1", newest[-1].seq, 4)
    rest = store.journal_page("r1", older[-1].seq, 100)

    seqs = [item.seq for item in newest + older + rest]
    assert seqs == sorted(seqs, reverse=True) and len(seqs) == 11 and seqs[-1] == 1
    assert [i.seq for i in store.load_journal("r1").items()] == sorted(seqs)
    assert store.journal_page("r1", 1, 10) == []


def test_journal_page_of_an_unknown_run_is_e017(store: Store):
    with pytest.raises(PlaitError) as caught:
        store.journal_page("nope", None, 10)
    assert caught.value.code == "E017"


def test_a_page_sorted_by_update_is_a_range_read_on_its_index(tmp_path: Path):
    open_store(f"sqlite:///{tmp_path / 'runs.db'}").close()  # created at the current schema
    conn = sqlite3.connect(tmp_path / "runs.db")
    plans: list[str] = []

    class Explaining:
        """The real connection, saying how SQLite reads each query before running it."""

        def execute(self, sql: str, params: Any = ()) -> Any:
            plans.append(" ".join(r[-1] for r in conn.execute("EXPLAIN QUERY PLAN " + sql, params)))
            return conn.execute(sql, params)

    page_runs(Explaining(), SQLITE, RunQuery(sort="updated", after=(5, 5)))
    page_runs(Explaining(), SQLITE, RunQuery(sort="updated", status="parked", descending=False))

    assert "USING INDEX runs_by_updated" in plans[0] and "TEMP B-TREE" not in plans[0]
    assert "USING INDEX runs_by_status_updated" in plans[1] and "TEMP B-TREE" not in plans[1]
