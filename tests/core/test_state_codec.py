"""The state's JSON form: every checkpoint ever written reads back to the same bytes.

Checkpoints are compared byte for byte by verify (§5.5), so ``from_json(x).to_json()``
must give ``x`` again for every shape the state has ever been written in: optional
features absent or present, every pending-ask variant (an ask with or without the
model's tool-call id, a timer, a child run), every phase. The strategies below write
those shapes as the hand-written encoders before ``core/codec.py`` wrote them.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from plait.core.abstract import AbstractFlow
from plait.core.canonical import dumpb
from plait.core.env import BUDGET_AXES
from plait.core.keys import KINDS, JournalKey
from plait.core.node_states import EdgeRes, NodeState
from plait.core.pending import PendingAsk, SendTask
from plait.core.state import IDLE, DecisionRecord, SchedulerState

small = st.integers(min_value=0, max_value=10**6)
text = st.text(max_size=8)
positive = st.integers(min_value=1, max_value=1000)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
objects = st.dictionaries(text, json_values, max_size=3)
index_keys = small.map(str)  # decimal, as every int key is written


def with_optional(required: dict[str, Any], optional: dict[str, Any]) -> Any:
    return st.fixed_dictionaries(required, optional=optional)


keys = st.builds(
    lambda run, path, node, attempt, seq, kind: JournalKey(
        run, path, node, attempt, seq, kind
    ).to_json(),
    text,
    text,
    text,
    small,
    small,
    st.sampled_from(KINDS),
)

records = with_optional(
    {
        "superstep": small,
        "clock_open_ms": small,
        "clock_close_ms": small,
        "edges": st.lists(st.tuples(small, small, text).map(list), max_size=3),
        "dispatched": st.lists(st.tuples(small, small).map(list), max_size=3),
    },
    {
        "spawns": st.lists(st.tuples(text, small).map(list), min_size=1, max_size=3),
        "task_dispatched": st.lists(st.tuples(text, small).map(list), min_size=1, max_size=3),
        "violations": st.lists(objects, min_size=1, max_size=2),
        "refused": st.lists(objects, min_size=1, max_size=2),
    },
)

outcomes = st.just("Completed") | st.builds(
    lambda tag, body: {tag: body},
    st.sampled_from(["Stalled", "Failed", "Canceled", "BudgetExhausted"]),
    objects,
)

open_bodies = with_optional(
    {
        "outstanding": st.lists(keys, max_size=3).map(
            lambda ks: [
                k.to_json()
                for k in sorted({JournalKey.from_json(k) for k in ks}, key=JournalKey.sort_key)
            ]
        ),
        "results": st.dictionaries(index_keys, json_values, max_size=3),
        "record": records,
    },
    {"send_results": st.dictionaries(text, json_values, min_size=1, max_size=2)},
)

phases = (
    st.just("Idle")
    | outcomes.map(lambda o: {"Finished": o})
    | open_bodies.map(lambda b: {"Open": b})
)

asks = st.fixed_dictionaries(
    {
        "ask_id": text,
        "node": text,
        "tool_name": st.none() | text,
        "prompt": text,
        "input": json_values,
        "expires_at": st.none() | small,
        "approval": st.booleans(),
    }
)
pending_asks = (
    with_optional({"key": keys, "node": small, "ask": asks}, {"tool_call_id": st.none() | text})
    | st.fixed_dictionaries({"key": keys, "node": small, "wake_ms": small})
    | st.fixed_dictionaries({"key": keys, "node": small, "child": text})
)

flows = with_optional(
    {
        "node": small,
        "attempt": small,
        "messages": st.lists(objects, max_size=3),
        "next_effect_seq": small,
        "pending_tools": st.dictionaries(index_keys, objects, max_size=2),
        "round_results": st.dictionaries(index_keys, objects, max_size=2),
        "need": st.none()
        | st.just("NextTurn")
        | st.lists(objects, max_size=2).map(lambda calls: {"Tools": calls}),
        "unknown_strikes": small,
        "last_prompt_tokens": small,
    },
    {
        "task_path": text.filter(bool),
        "folding": objects,
        "fold_forced": st.just(True),
        "folds": positive,
        "deciding": objects,
        "decide_fold_tried": st.just(True),
        "offer": json_values.filter(lambda v: v is not None),
        "response_strikes": positive,
        "tool_log": st.lists(objects, min_size=1, max_size=2),
        "governance": objects,
        "refused": st.lists(objects, min_size=1, max_size=2),
    },
)

send_tasks = st.fixed_dictionaries(
    {
        "node": small,
        "input": json_values,
        "attempt": small,
        "state": st.sampled_from(["Queued", "Running", "Done"]),
    }
)


@st.composite
def states(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(min_value=1, max_value=4))
    e = draw(st.integers(min_value=0, max_value=4))
    ints = st.lists(small, min_size=n, max_size=n)
    value: dict[str, Any] = {
        "run_id": draw(text),
        "superstep": draw(small),
        "phase": draw(phases),
        "node_gen": draw(ints),
        "node_state": draw(st.lists(st.sampled_from(list(NodeState)), min_size=n, max_size=n)),
        "in_res": draw(
            st.lists(
                st.dictionaries(index_keys, st.sampled_from(list(EdgeRes)), max_size=3),
                min_size=n,
                max_size=n,
            )
        ),
        "edge_fired": draw(st.lists(small, min_size=e, max_size=e)),
        "attempt": draw(ints),
        "attempt_base": draw(ints),
        "context": draw(objects),
        "spent": {
            axis: draw(small)
            for axis in (
                "supersteps",
                "input_tokens",
                "output_tokens",
                "usd_micros",
                "wall_ms",
                "storage_bytes",
            )
        },
        "elapsed_ms": draw(small),
        "clock_ms": draw(small),
        "wall_open": draw(st.none() | small),
        "paused_at": draw(st.none() | small),
        "pending_asks": draw(st.dictionaries(text, pending_asks, max_size=3)),
        "abstract_flows": draw(st.dictionaries(index_keys, flows, max_size=2)),
        "announced_asks": sorted(draw(st.sets(text, max_size=3))),
        "cancel": draw(st.none() | st.tuples(text, text).map(list)),
        "exhausted": draw(st.none() | st.sampled_from(BUDGET_AXES)),
        "failed": draw(st.none() | st.tuples(small, text).map(list)),
    }
    optional = {
        "send_tasks": st.dictionaries(text, send_tasks, min_size=1, max_size=2),
        "spawn_counter": st.dictionaries(text, small, min_size=1, max_size=2),
        "inbox": st.lists(json_values, min_size=1, max_size=2),
        "inputs_seen": positive,
        "folds": positive,
    }
    for name, strategy in optional.items():
        if draw(st.booleans()):
            value[name] = draw(strategy)
    # Plain JSON, as a checkpoint is read: enums are their names.
    value["node_state"] = [str(s.value) for s in value["node_state"]]
    value["in_res"] = [{k: str(r.value) for k, r in res.items()} for res in value["in_res"]]
    return value


@settings(max_examples=300, deadline=None)
@given(states())
def test_every_written_state_reads_back_to_the_same_bytes(value: dict[str, Any]):
    state = SchedulerState.from_json(value)
    assert dumpb(state.to_json()) == dumpb(value)
    assert SchedulerState.from_json(state.to_json()) == state


@settings(max_examples=100, deadline=None)
@given(states(), records)
def test_every_checkpoint_reads_back_to_the_same_bytes(
    scheduler: dict[str, Any], decisions: dict[str, Any]
):
    checkpoint = {"scheduler": scheduler, "decisions": decisions}
    again = {
        "scheduler": SchedulerState.from_json(scheduler).to_json(),
        "decisions": DecisionRecord.from_json(decisions).to_json(),
    }
    assert dumpb(again) == dumpb(checkpoint)


@given(pending_asks)
def test_pending_asks_keep_their_variant_and_their_shape(value: dict[str, Any]):
    ask = PendingAsk.from_json(value)
    assert ask.to_json() == value
    assert ask.kind == ("ask" if "ask" in value else "timer" if "wake_ms" in value else "child")
    assert ask.key == JournalKey.from_json(value["key"])
    assert ask.expires_at == (value["ask"]["expires_at"] if "ask" in value else None)


def test_a_tool_call_id_absent_stays_absent_and_a_null_one_stays_null():
    key = JournalKey("r", "", "n", 1, 0, "tool").to_json()
    ask = {"ask_id": "a", "node": "n", "tool_name": "t", "prompt": "p", "input": {}}
    ask |= {"expires_at": None, "approval": True}
    bare = {"key": key, "node": 0, "ask": ask}
    assert "tool_call_id" not in PendingAsk.from_json(bare).to_json()
    assert PendingAsk.from_json({**bare, "tool_call_id": None}).to_json()["tool_call_id"] is None
    assert PendingAsk.from_json({**bare, "tool_call_id": "c1"}).model_call_id == "c1"


@given(send_tasks)
def test_send_tasks_round_trip(value: dict[str, Any]):
    assert SendTask.from_json(value).to_json() == value


@given(flows)
def test_abstract_flows_round_trip_with_every_optional_field(value: dict[str, Any]):
    assert dumpb(AbstractFlow.from_json(value).to_json()) == dumpb(value)


def test_a_flow_of_a_run_without_optional_features_writes_none_of_their_keys():
    assert set(AbstractFlow(node=0, attempt=1).to_json()) == {
        "node",
        "attempt",
        "messages",
        "next_effect_seq",
        "pending_tools",
        "round_results",
        "need",
        "unknown_strikes",
        "last_prompt_tokens",
    }


# --- the compact form (engine epoch 4) ---------------------------------------------

PLAIN_DEFAULTS: list[Any] = [None, 0, False, "", [], {}]


def assert_no_plain_default(
    full: Any, compact: Any, required: set[str], nullable: frozenset[str] = frozenset()
) -> None:
    """Every key the compact form leaves out is at a plain default in the full form, and
    no key it keeps (but a required one) is at its default: None for ``nullable`` ones
    (whose 0 is kept), else 0 or empty."""
    assert set(compact) <= set(full)
    for key, value in full.items():
        if key not in compact:
            assert any(value == d and type(value) is type(d) for d in PLAIN_DEFAULTS), key
        elif key in nullable:
            assert compact[key] is not None, key
        elif key not in required:
            assert compact[key] not in PLAIN_DEFAULTS, key


@settings(max_examples=300, deadline=None)
@given(states())
def test_the_compact_form_reads_back_to_the_same_state_and_bytes(value: dict[str, Any]):
    state = SchedulerState.from_json(value)
    compact = state.to_compact_json()
    again = SchedulerState.from_json(compact)
    assert again == state
    assert dumpb(again.to_compact_json()) == dumpb(compact)
    assert dumpb(again.to_json()) == dumpb(value)  # the full form is not changed by it
    required = {"run_id", "superstep", "phase", "node_gen", "node_state", "in_res"}
    required |= {"edge_fired", "attempt", "attempt_base", "context", "spent"}
    full = state.to_json()
    nullable = frozenset({"wall_open", "paused_at", "cancel", "exhausted", "failed"})
    assert_no_plain_default(full, compact, required, nullable)
    assert_no_plain_default(full["spent"], compact["spent"], set())
    for key, flow in full["abstract_flows"].items():
        kept = {"node", "attempt", "need"}  # no default, or one that is not plain
        nullable = frozenset({"folding", "deciding", "offer", "governance"})
        assert_no_plain_default(flow, compact["abstract_flows"][key], kept, nullable)


@settings(max_examples=100, deadline=None)
@given(records)
def test_a_compact_decision_record_reads_back_and_leaves_empty_lists_out(value: dict[str, Any]):
    record = DecisionRecord.from_json(value)
    compact = record.to_compact_json()
    assert DecisionRecord.from_json(compact) == record
    assert dumpb(DecisionRecord.from_json(compact).to_json()) == dumpb(value)
    assert_no_plain_default(record.to_json(), compact, {"superstep", "clock_open_ms"})


def test_a_fresh_state_in_the_compact_form_holds_only_what_has_no_plain_default():
    state = SchedulerState(
        run_id="r",
        superstep=0,
        phase=IDLE,
        node_gen=[0],
        node_state=[NodeState.WAITING],
        in_res=[{}],
        edge_fired=[],
        attempt=[0],
        attempt_base=[0],
        context={},
    )
    assert dumpb(state.to_compact_json()) == (
        b'{"attempt":[0],"attempt_base":[0],"context":{},"edge_fired":[],"in_res":[{}],'
        b'"node_gen":[0],"node_state":["Waiting"],"phase":"Idle","run_id":"r","spent":{},'
        b'"superstep":0}'
    )
    assert SchedulerState.from_json(state.to_compact_json()) == state
    assert len(state.to_json()) == len(state.to_compact_json()) + 10


def test_a_timestamp_of_zero_is_kept_and_only_none_is_left_out():
    state = SchedulerState(
        run_id="r",
        superstep=0,
        phase=IDLE,
        node_gen=[],
        node_state=[],
        in_res=[],
        edge_fired=[],
        attempt=[],
        attempt_base=[],
        context={},
        wall_open=0,
    )
    compact = state.to_compact_json()
    assert compact["wall_open"] == 0 and "paused_at" not in compact
    assert SchedulerState.from_json(compact).wall_open == 0
