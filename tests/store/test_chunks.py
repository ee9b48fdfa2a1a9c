"""Content-addressed JSON trees: exact round trips, and flat bytes per appended element."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plait.core.canonical import CanonicalJSONError, digest, dumps, loads, strict_equal
from plait.store.chunks import (
    INLINE_LIMIT,
    PAGE_SIZE,
    Cut,
    Encoded,
    HashMemo,
    decode,
    decode_row,
    encode,
    encode_text,
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=40) | st.dictionaries(st.text(), children),
    max_leaves=80,
)


def round_trip(value: Any, inline_limit: int = INLINE_LIMIT, page_size: int = PAGE_SIZE) -> Any:
    root, nodes = encode(value, inline_limit=inline_limit, page_size=page_size)
    assert all(digest(data) == h for h, data in nodes.items())
    return decode(root, nodes.__getitem__)


@settings(max_examples=200)
@given(json_values)
def test_every_json_value_round_trips_exactly(value: Any) -> None:
    back = round_trip(value)
    assert dumps(back) == dumps(value)
    assert strict_equal(back, value)  # 1 and 1.0, True and 1 stay apart


@settings(max_examples=200)
@given(json_values, st.integers(0, 64), st.integers(2, 5))
def test_round_trips_when_almost_everything_is_cut(value: Any, limit: int, page: int) -> None:
    back = round_trip(value, inline_limit=limit, page_size=page)
    assert dumps(back) == dumps(value)
    assert strict_equal(back, value)


@pytest.mark.parametrize(
    "value",
    [
        None, True, False, 0, 1, 1.0, -0.0, 2**80, 1e300, "", "é🐎\u0000\"\\", [], {}, [[]], [{}],
        {"r": "0" * 64}, {"t": ["0" * 64]}, {"o": {}}, {"l": []}, ["r"], [[[[1]]], [[2.0]]],
        list(range(1000)), [[i] * 3 for i in range(300)], {"k": "x" * 10_000}, "y" * 300,
    ],
)  # fmt: skip
def test_edge_values_round_trip(value: Any) -> None:
    for limit, page in ((INLINE_LIMIT, PAGE_SIZE), (0, 2), (10, 3)):
        back = round_trip(value, limit, page)
        assert dumps(back) == dumps(value)
        assert strict_equal(back, value)


def test_a_user_value_shaped_like_a_reference_is_never_followed() -> None:
    target = "z" * 500
    (ref, nodes) = encode(target)
    lookalike = {"r": ref["r"]}
    root, more = encode(lookalike)
    assert decode(root, {**nodes, **more}.__getitem__) == lookalike


def test_equal_values_cut_into_equal_nodes() -> None:
    docs = [f"d{i:04d}" * 40 for i in range(100)]
    assert encode({"docs": docs, "n": 1}) == encode({"n": 1, "docs": list(docs)})


def test_tuples_and_str_subclasses_encode_like_json() -> None:
    class Name(str):
        pass

    assert round_trip({"pair": (1, Name("a"))}) == {"pair": [1, "a"]}


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), {1: "int key"}, {"x": object()}])
def test_values_without_a_canonical_form_are_refused(bad: Any) -> None:
    with pytest.raises(CanonicalJSONError):
        encode([bad])


def test_known_nodes_are_left_out_and_the_rest_are_new() -> None:
    rng = random.Random(1)
    docs = [rng.randbytes(512).hex() for _ in range(100)]
    first = encode({"docs": docs})
    docs.append(rng.randbytes(512).hex())
    second = encode({"docs": docs}, known=first.nodes.keys())
    assert set(second.nodes).isdisjoint(first.nodes)
    everything = {**first.nodes, **second.nodes}
    assert decode(second.root, everything.__getitem__) == {"docs": docs}


SHARED_MEMO = HashMemo(max_weight=20_000)


@settings(max_examples=200)
@given(json_values, st.integers(0, 40), st.integers(2, 4))
def test_a_shared_memo_never_changes_what_encode_returns(value: Any, limit: int, page: int) -> None:
    remembered = encode(value, memo=SHARED_MEMO, inline_limit=limit, page_size=page)
    assert remembered == encode(value, inline_limit=limit, page_size=page)


def test_a_memo_saves_hashing_but_never_hides_a_node_that_is_not_known() -> None:
    memo = HashMemo()
    value = {"a": "q" * 1000, "b": ["w" * 700], "pages": [f"{i:0300d}" for i in range(40)]}
    first = encode(value, memo=memo)
    assert len(memo) == 2 + 40 + 3  # two strings, forty page strings, three pages
    again = encode(value, memo=memo)  # memo hits, nothing known: nodes still emitted
    assert again == first
    assert encode(value, memo=memo, known=first.nodes.keys()).nodes == {}


def test_a_remembered_head_still_hands_out_the_pages_the_store_lacks() -> None:
    """A long list's head cut before is not looked at page by page again, but a page whose
    node is not known (a commit that failed, a store that forgot) is handed out again;
    one that is known is left out."""
    memo = HashMemo()
    log = [f"{i:0300d}" for i in range(40)]
    first = encode({"log": log}, memo=memo)
    grown = [*log, "x" * 300]
    assert encode({"log": grown}, memo=memo) == encode({"log": grown})  # nothing known
    more = [*grown, "y" * 300]
    second = encode({"log": more}, memo=memo, known=first.nodes.keys())
    assert set(second.nodes).isdisjoint(first.nodes)
    assert decode(second.root, {**first.nodes, **second.nodes}.__getitem__) == {"log": more}
    changed = [log[0], "changed", *log[2:]]
    assert encode({"log": changed}, memo=memo) == encode({"log": changed})


def test_a_remembered_full_group_is_handed_out_again_when_the_store_lacks_it() -> None:
    """Full groups of page hashes are remembered like full pages: left out when known,
    handed out again when not."""
    memo = HashMemo()
    log = [f"{i:0300d}" for i in range(20)]
    first = encode({"log": log}, memo=memo, page_size=2)
    grown = [*log, "x" * 300]
    assert encode({"log": grown}, memo=memo, page_size=2) == encode({"log": grown}, page_size=2)
    known = encode({"log": grown}, memo=memo, page_size=2, known=first.nodes.keys())
    assert set(known.nodes).isdisjoint(first.nodes)
    assert decode(known.root, {**first.nodes, **known.nodes}.__getitem__) == {"log": grown}


def test_a_full_memo_forgets_and_stays_correct() -> None:
    memo = HashMemo(max_weight=1000)
    values = [c * 600 for c in "abc"]
    for v in values:
        assert round_trip_with_memo(v, memo) == v
    assert len(memo) == 1


def round_trip_with_memo(value: Any, memo: HashMemo) -> Any:
    root, nodes = encode(value, memo=memo)
    return decode(root, nodes.__getitem__)


@pytest.mark.parametrize(
    "root, nodes",
    [
        ([1, 2], {}),  # a bare array is not an encoded form
        ({"o": {}, "l": []}, {}),  # two tags
        ({"x": 1}, {}),  # unknown tag
        ({"r": 5}, {}),  # a reference that is not a hash
        ({"t": ["h"]}, {"h": b'"just a string"'}),  # a tree child that is not a list
        ({"r": "h"}, {"h": b'{"r":"h"}'}),  # a node that is a bare reference
        ({"r": "h"}, {"h": b"{not json"}),
    ],
)
def test_malformed_trees_are_refused(root: Any, nodes: dict[str, bytes]) -> None:
    with pytest.raises(ValueError):
        decode(root, nodes.__getitem__)


@settings(max_examples=200)
@given(json_values)
def test_a_row_payload_decodes_like_its_parsed_encoded_form(value: Any) -> None:
    """``decode_row`` parses a whole value once; cut or whole, it returns what ``decode``
    of the parsed payload returns."""
    text, nodes = encode_text(value)
    back = decode_row(text, nodes.__getitem__)
    assert strict_equal(back, decode(loads(text), nodes.__getitem__))
    assert strict_equal(back, value)


@pytest.mark.parametrize(
    "payload",
    ['{"j":5}', '{"j":"s"}', '{"j":{},"x":1}', '{"j":[1],"l":[]}', '{"j":[1]'],
)
def test_a_row_payload_that_only_looks_whole_is_refused(payload: str) -> None:
    """Not a container kept whole (a scalar, a second key, cut short): the walk refuses it."""
    with pytest.raises(ValueError):
        decode_row(payload, dict[str, bytes]().__getitem__)


def test_a_missing_node_surfaces_the_fetch_error() -> None:
    root, _ = encode("m" * 400)
    with pytest.raises(KeyError):
        decode(root, dict[str, bytes]().__getitem__)


def test_decode_returns_fresh_containers_even_from_a_shared_cache() -> None:
    rng = random.Random(2)
    value = {"docs": [[rng.randbytes(200).hex()] for _ in range(40)]}
    root, nodes = encode(value)
    cache: dict[str, Any] = {}
    first = decode(root, nodes.__getitem__, cache=cache)
    first["docs"][0].append("mutated")
    assert decode(root, nodes.__getitem__, cache=cache) == value


def growth(steps: int, doc_bytes: int = 1024) -> tuple[dict[int, int], dict[int, int]]:
    """Bytes and nodes newly written per step while a list in the context grows by one doc."""
    rng = random.Random(42)
    known: set[str] = set()
    memo = HashMemo()
    docs: list[str] = []
    new_bytes: dict[int, int] = {}
    new_nodes: dict[int, int] = {}
    for step in range(1, steps + 1):
        docs.append(rng.randbytes(doc_bytes // 2).hex())
        state = {
            "scheduler": {"context": {"docs": docs, "last": step}, "superstep": step},
            "decisions": {"superstep": step, "dispatched": [[0, step]]},
        }
        cut: Encoded = encode(state, known=known, memo=memo)
        known.update(cut.nodes)
        new_bytes[step] = sum(len(data) for data in cut.nodes.values())
        new_nodes[step] = len(cut.nodes)
    return new_bytes, new_nodes


def test_bytes_written_per_step_stay_flat_as_a_list_grows() -> None:
    """LangGraph-style full copies would write 10x more at step 1000 than at step 100."""
    new_bytes, new_nodes = growth(1000)
    assert new_bytes[1000] <= 2 * new_bytes[100], (new_bytes[100], new_bytes[1000])
    assert max(new_nodes.values()) <= 6  # the doc, the last page, one node per tree level
    assert max(new_bytes.values()) < 8 * 1024


def test_a_cut_stands_for_its_value_one_to_one_without_serializing_it_again() -> None:
    """The durable driver's idempotency key hashes this identity instead of the whole input."""
    small = {"b": [1, 2.0], "a": "x"}
    assert Cut(*encode_text(small)).identity() == dumps(small)  # the canonical text itself
    transcript = [{"role": "user", "content": f"message {i} " + "y" * 200} for i in range(200)]
    memo = HashMemo()
    first = Cut(*encode_text(transcript, memo=memo)).identity()
    again = Cut(*encode_text(copy.deepcopy(transcript), memo=memo)).identity()
    cold = Cut(*encode_text(copy.deepcopy(transcript))).identity()
    assert first == again == cold  # memo or not, same objects or equal ones
    assert first.startswith("\x00") and len(first) < 200  # never a canonical text; short
    changed = [*transcript[:-1], {"role": "user", "content": "other"}]
    assert Cut(*encode_text(changed, memo=memo)).identity() != first
