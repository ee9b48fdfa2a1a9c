"""The state's encoder writes two fields without a call in the common case (issue #22):
an empty set of announced asks as ``[]`` (codec skip ``"empty-array"``) and the edge
resolutions by plain loops; both must give what the plain codecs give."""

from __future__ import annotations

from plait.core.canonical import dumps
from plait.core.node_states import EdgeRes
from plait.core.state import IDLE, SchedulerState


def _state() -> SchedulerState:
    return SchedulerState("r", 0, IDLE, node_gen=[0, 0], node_state=[], in_res=[{}, {}],
                          edge_fired=[], attempt=[], attempt_base=[], context={})  # fmt: skip


def test_announced_asks_are_a_sorted_array_empty_or_not() -> None:
    state = _state()
    assert state.to_json()["announced_asks"] == []
    assert dumps(state.to_json()).count('"announced_asks":[]') == 1
    state.announced_asks = {"b", "a"}
    assert state.to_json()["announced_asks"] == ["a", "b"]
    assert SchedulerState.from_json(state.to_json()).announced_asks == {"a", "b"}


def test_edge_resolutions_have_decimal_string_keys_and_read_back() -> None:
    state = _state()
    state.in_res = [{10: EdgeRes.FIRED, 9: EdgeRes.DEAD}, {}]
    encoded = state.to_json()["in_res"]
    assert encoded == [{str(e): r for e, r in res.items()} for res in state.in_res]
    assert dumps(encoded) == '[{"10":"Fired","9":"Dead"},{}]'
    assert SchedulerState.from_json(state.to_json()).in_res == state.in_res


def test_edge_texts_looked_up_are_the_decimal_texts_at_and_past_the_tables_ends() -> None:
    """Edge indexes below the table's end are looked up, the others made by ``str``: both
    give the decimal text, in both forms of the state (a negative index, which no plan
    has, is never looked up from the table's end)."""
    edges = [0, 1, 9, 10, 1022, 1023, 1024, 1025, 100_000, -1, -1024]
    state = _state()
    state.in_res = [{e: EdgeRes.FIRED for e in edges}, {7: EdgeRes.DEAD}]
    expected = [{str(e): "Fired" for e in edges}, {"7": "Dead"}]
    assert state.to_json()["in_res"] == expected
    assert state.to_compact_json()["in_res"] == expected
    assert SchedulerState.from_json(state.to_compact_json()).in_res == state.in_res
