"""Properties of the runtime over random small flows and random runs of successful calls."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plait.core.canonical import dumps, loads
from plait.governance import (
    After,
    Before,
    Flow,
    FlowRuntime,
    NeverUntil,
    Once,
    Require,
    Reset,
    Step,
    admit,
    admit_answer,
    latch,
    offered_tools,
    record_answer,
    record_success,
    start,
)
from plait.governance.guards import (
    AllOf,
    Always,
    AnyOf,
    CalledOk,
    Captured,
    Done,
    Eq,
    IsSet,
    IsTrue,
    Not,
)

TOOLS = ["t0", "t1", "t2", "t3"]
KEYS = ["k0", "k1", "k2"]
VALUES = st.sampled_from([True, False, 1, 1.0, "x", None])
STEP_IDS = ["s0", "s1", "s2", "s3"]


def guards(step_ids: list[str]):
    atoms = st.one_of(
        st.just(Always()),
        st.sampled_from(KEYS).map(IsTrue),
        st.sampled_from(KEYS).map(IsSet),
        st.builds(Eq, st.sampled_from(KEYS), VALUES),
        st.lists(st.sampled_from(KEYS), min_size=1, max_size=2).map(lambda ks: Captured(tuple(ks))),
        st.sampled_from(TOOLS).map(CalledOk),
        st.sampled_from(step_ids).map(Done),
    )
    return st.recursive(
        atoms,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3).map(lambda gs: AllOf(tuple(gs))),
            st.lists(inner, max_size=3).map(lambda gs: AnyOf(tuple(gs))),
            inner.map(Not),
        ),
        max_leaves=4,
    )


tool_lists = st.lists(st.sampled_from(TOOLS), max_size=3, unique=True).map(tuple)


@st.composite
def flows(draw) -> Flow:
    n = draw(st.integers(1, 4))
    ids = STEP_IDS[:n]
    guard = guards(ids)
    steps = []
    for i, sid in enumerate(ids):
        sources = draw(st.lists(st.sampled_from(ids[:i]), unique=True)) if i else []
        after = tuple(After(s, draw(st.none() | guard)) for s in sources)
        terminal = draw(st.booleans())
        steps.append(
            Step(
                sid,
                after=after,
                join=draw(st.sampled_from(["all", "any"])),
                gate=draw(st.none() | guard),
                done=None if terminal else draw(guard),
                allow=draw(st.none() | tool_lists),
                deny=draw(tool_lists),
                posture=draw(st.none() | st.just(f"posture of {sid}")),
                terminal=terminal,
            )
        )
    constraint = st.one_of(
        st.sampled_from(TOOLS).map(Once),
        st.builds(Before, st.sampled_from(ids), st.sampled_from(ids)),
        st.builds(NeverUntil, st.sampled_from(TOOLS), guard),
        st.lists(st.sampled_from(ids), min_size=1, max_size=2).map(lambda s: Require(tuple(s))),
        st.builds(Reset, st.lists(st.sampled_from(ids), min_size=1, max_size=2).map(tuple), guard),
    )
    return Flow(
        steps=tuple(steps),
        constraints=tuple(draw(st.lists(constraint, max_size=4))),
        ambient=draw(tool_lists),
        mode=draw(st.sampled_from(["enforce", "observe"])),
    )


results = st.one_of(st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=2), VALUES)
events = st.lists(
    st.one_of(
        st.tuples(
            st.just("answer"), st.lists(st.tuples(st.sampled_from(TOOLS), results), max_size=3)
        ),
        st.tuples(st.just("ask"), st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=2)),
        st.tuples(st.just("turn"), st.none()),
    ),
    max_size=8,
)
context = st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=3)
fast = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def run(flow: Flow, ctx: dict, script: list) -> list[tuple[str, object]]:
    """Drive the runtime like the LLM loop does; yields every (kind, value) step taken."""
    rt = start(flow, ctx)
    trail: list[tuple[str, object]] = [("rt", rt)]
    for kind, payload in script:
        if kind == "answer":
            # Every call of one answer is judged against the runtime the answer saw; the
            # calls run (and succeed) afterwards.
            seen, pending = rt, set()
            admissions = admit_answer(flow, rt, [tool for tool, _ in payload])
            for (tool, result), admission in zip(payload, admissions, strict=True):
                trail.append(("admitted", (seen, frozenset(pending), tool, admission)))
                if admission.ok:
                    pending.add(tool)
                    rt = record_success(flow, rt, tool, result)
                    trail.append(("ran", tool))
                    trail.append(("rt", rt))
        elif kind == "ask":
            rt = record_answer(flow, rt, payload)
            trail.append(("rt", rt))
        else:
            rt = latch(flow, rt)
            trail.append(("rt", rt))
    return trail


@fast
@given(flows(), context, events)
def test_admission_is_a_pure_function_of_the_flow_and_the_runtime(flow, ctx, script):
    for kind, value in run(flow, ctx, script):
        if kind == "rt":
            copy = FlowRuntime.from_json(loads(dumps(value.to_json())))
            for tool in TOOLS:
                assert admit(flow, value, tool) == admit(flow, value, tool)
                assert admit(flow, copy, tool) == admit(flow, value, tool)
            assert offered_tools(flow, copy, TOOLS) == offered_tools(flow, value, TOOLS)


@fast
@given(flows(), context, events)
def test_recording_a_success_never_changes_an_earlier_admission(flow, ctx, script):
    trail = run(flow, ctx, script)
    decided = [value for kind, value in trail if kind == "admitted"]
    for rt, pending, tool, admission in decided:
        assert admit(flow, rt, tool, pending_once=pending) == admission


@fast
@given(flows(), context, events)
def test_the_runtime_round_trips_byte_identically_through_canonical_json(flow, ctx, script):
    for kind, value in run(flow, ctx, script):
        if kind == "rt":
            text = dumps(value.to_json())
            again = FlowRuntime.from_json(loads(text))
            assert dumps(again.to_json()) == text
            assert again == value


@fast
@given(flows(), context, events)
def test_latching_a_runtime_at_rest_changes_nothing(flow, ctx, script):
    for kind, value in run(flow, ctx, script):
        if kind == "rt":
            assert latch(flow, value) == value


@fast
@given(flows(), context, events)
def test_a_once_tool_never_runs_twice_until_a_reset_clears_its_count(flow, ctx, script):
    if flow.mode == "observe":
        flow = Flow(flow.steps, flow.constraints, flow.confirm_tools, flow.ambient)
    once = {c.tool for c in flow.constraints if isinstance(c, Once)}
    ran_since_clear = dict.fromkeys(once, 0)
    for kind, value in run(flow, ctx, script):
        if kind == "ran" and value in once:
            ran_since_clear[value] += 1
            assert ran_since_clear[value] <= 1
        elif kind == "rt":
            for tool in once:
                if value.calls.get(tool, 0) == 0:
                    ran_since_clear[tool] = 0
