"""Epoch-3 checkpoint cuts (``core.merkle``): a pure function of the value.

The memo a drive keeps only saves work: whatever checkpoints came before, the same state
cuts to the same root, digest, size and canonical bytes as a cut made from nothing.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from plait.core.canonical import dumpb
from plait.core.merkle import ChunkMemo, cut_checkpoint
from plait.core.transcript import Entry

LONG = st.text(min_size=250, max_size=400)
LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    LONG,
)
JSONS = st.recursive(
    LEAF,
    lambda inner: st.one_of(
        st.lists(inner, max_size=40), st.dictionaries(st.text(max_size=8), inner, max_size=8)
    ),
    max_leaves=60,
)


def checkpoint(context: Any) -> dict[str, Any]:
    return {"scheduler": {"context": context, "superstep": 1}, "decisions": {"superstep": 1}}


def fresh(value: dict[str, Any]) -> tuple[str, str, int, bytes]:
    cut = cut_checkpoint(value)
    return cut.root, cut.digest, cut.size, cut.canonical()


@settings(max_examples=60, deadline=None)
@given(
    history=st.lists(st.lists(st.one_of(LONG, st.text(max_size=5)), max_size=70), max_size=4),
    extra=JSONS,
)
def test_a_state_cuts_the_same_whatever_checkpoints_came_before(
    history: list[list[str]], extra: Any
) -> None:
    """The same state reached two ways (after other checkpoints sharing its strings and
    pages, or from nothing) has the same digest, size and bytes."""
    memo = ChunkMemo()
    seen: dict[str, bytes] = {}
    log: list[Any] = []
    for part in history:  # a log that grows, checkpointed after every append
        log = [*log, *part]
        seen.update(cut_checkpoint(checkpoint({"log": log, "n": len(log)}), memo).nodes)
    value = checkpoint({"log": log, "n": len(log), "extra": extra})
    cut = cut_checkpoint(value, memo)
    root, digest, size, data = fresh(value)
    assert (cut.root, cut.digest, cut.size) == (root, digest, size)
    assert cut.canonical(seen) == data == dumpb(value)
    assert size == len(data)


@settings(max_examples=60, deadline=None)
@given(JSONS)
def test_the_size_is_the_canonical_bytes_length_without_building_them(context: Any) -> None:
    value = checkpoint(context)
    cut = cut_checkpoint(value)
    assert cut.size == len(dumpb(value))
    assert cut.canonical() == dumpb(value)


def test_a_memo_forgotten_or_never_had_gives_the_same_cut() -> None:
    entries = [Entry({"role": "user", "content": "x" * 300 + str(i)}) for i in range(40)]
    value = checkpoint({"transcript": entries, "docs": ["d" * 500 + str(i) for i in range(50)]})
    memo = ChunkMemo()
    first = cut_checkpoint(value, memo)
    again = cut_checkpoint(value, memo)
    memo.clear()
    cleared = cut_checkpoint(value, memo)
    assert first.digest == again.digest == cleared.digest == cut_checkpoint(value).digest
    # strings and full pages were handed out by the first cut; only the few nodes above
    # them (objects, the last page, the trees) are handed out again
    assert set(again.nodes) < set(first.nodes) and len(again.nodes) <= 6
    assert cleared.nodes == first.nodes  # forgetting hands them all out again


def test_a_long_list_whose_head_changed_since_the_last_cut_is_cut_afresh() -> None:
    """The memo keeps the head of a long list of strings it cut; a list starting with the
    same string but differing further on, or holding a non-string that equals the kept
    head (``True == 1``), cuts as from nothing."""
    memo = ChunkMemo()
    log = [f"{i:0300d}" for i in range(40)]

    def same_as_fresh(items: list[Any]) -> bool:
        cut = cut_checkpoint(checkpoint({"log": items}), memo)
        return (cut.root, cut.digest, cut.size) == fresh(checkpoint({"log": items}))[:3]

    assert same_as_fresh(log)
    assert same_as_fresh([*log, "more"])
    assert same_as_fresh([log[0], "changed", *log[2:], "more"])
    assert same_as_fresh([log[0], 1, *log[2:]])  # a page with an int: no head kept
    assert same_as_fresh([log[0], True, *log[2:], "more"])
