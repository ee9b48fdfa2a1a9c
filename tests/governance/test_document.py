"""The dict (YAML/JSON) form: the CONTRACT example, round trips, the schema, shape errors."""

from __future__ import annotations

import jsonschema
import pytest

from plait.core.canonical import dumps, loads
from plait.core.errors import PlaitError
from plait.governance import (
    FLOW_SCHEMA,
    Flow,
    NeverUntil,
    Once,
    all_of,
    always,
    any_of,
    called_ok,
    captured,
    done,
    edge,
    eq,
    flow_from_dict,
    flow_to_dict,
    guard_from_dict,
    guard_to_dict,
    is_set,
    is_true,
    not_,
)


def everything() -> Flow:
    """A flow using every feature of the format."""
    return (
        Flow.new(mode="observe")
        .step("triage", allow=[], done=captured("severity", "owner"), posture="Ask first.")
        .step(
            "schedule",
            after=[edge("triage", when=eq("severity", {"level": 1, "tags": ["a"]})), "triage"],
            join="any",
            gate=not_(any_of(is_true("blocked"), is_set("hold"))),
            deny=["cancel"],
            done=all_of(called_ok("book"), done("triage")),
        )
        .step("end", after="schedule", terminal=True)
        .once("book")
        .before("triage", "schedule")
        .never("cancel")
        .until(always())
        .require("schedule", "end")
        .reset(["schedule"])
        .when(eq("rebook", 1.5))
        .commit("book", until=is_true("confirmed"))
        .confirm("wire")
        .ambient("escalate", "recall")
        .build()
    )


def problems_of(document) -> list[str]:
    with pytest.raises(PlaitError) as caught:
        flow_from_dict(document)
    assert caught.value.code == "E027"
    return [p.message for p in caught.value.problems]


# --- the contract example ------------------------------------------------------------------


def test_the_contract_example_reads_as_the_flow_the_builder_makes(refund_doc, refund_flow):
    assert flow_from_dict(refund_doc) == refund_flow


def test_commit_expands_to_once_never_until_and_a_confirm_tool_without_duplicates(refund_doc):
    flow = flow_from_dict(refund_doc)
    assert flow.confirm_tools == ("issue_refund",)
    assert flow.constraints.count(Once("issue_refund")) == 1
    assert flow.constraints.count(NeverUntil("issue_refund", is_true("confirmed"))) == 1


def test_the_contract_example_is_valid_under_the_json_schema(refund_doc):
    jsonschema.Draft202012Validator.check_schema(FLOW_SCHEMA)
    jsonschema.validate(refund_doc, FLOW_SCHEMA, cls=jsonschema.Draft202012Validator)


def test_the_normal_form_of_every_flow_is_valid_under_the_json_schema(refund_flow):
    for flow in (refund_flow, everything()):
        jsonschema.validate(flow_to_dict(flow), FLOW_SCHEMA, cls=jsonschema.Draft202012Validator)


@pytest.mark.parametrize(
    "bad",
    [
        {"steps": [{"id": "a", "alow": []}]},
        {"steps": [{"id": "a", "done": {"is_ture": "k"}}]},
        {"steps": [], "constraints": [{"before": ["a"]}]},
        {"steps": [{"id": ""}]},
        {"steps": [{"id": "a", "done": {"is_true": "k", "is_set": "j"}}]},
    ],
)
def test_the_schema_and_the_reader_refuse_the_same_shapes(bad):
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, FLOW_SCHEMA, cls=jsonschema.Draft202012Validator)
    assert problems_of(bad)


# --- round trips ---------------------------------------------------------------------------


def test_flow_to_dict_and_back_is_the_same_flow(refund_flow):
    for flow in (refund_flow, everything()):
        assert flow_from_dict(flow_to_dict(flow)) == flow
        assert flow_from_dict(loads(dumps(flow_to_dict(flow)))) == flow


def test_a_document_read_and_written_once_is_a_fixpoint(refund_doc):
    written = flow_to_dict(flow_from_dict(refund_doc))
    assert flow_to_dict(flow_from_dict(written)) == written
    assert written == {
        "steps": [
            {
                "id": "verify",
                "allow": ["lookup_account"],
                "done": {"called_ok": "lookup_account"},
                "posture": "Verify the customer's identity before anything else.",
            },
            {
                "id": "offer",
                "after": ["verify"],
                "gate": {"is_set": "account"},
                "allow": ["lookup_policy", "confirm_with_customer", "issue_refund"],
                "deny": ["close_account"],
                "done": {"called_ok": "issue_refund"},
            },
            {"id": "wrap_up", "after": ["offer"], "terminal": True},
        ],
        "constraints": [
            {"once": "issue_refund"},
            {"never": "issue_refund", "until": {"is_true": "confirmed"}},
            {"before": ["verify", "offer"]},
            {"require": ["offer"]},
            {"reset": ["offer"], "when": {"is_true": "customer_changed_mind"}},
        ],
        "confirm_tools": ["issue_refund"],
        "ambient": ["escalate_to_human"],
    }


def test_the_normal_form_omits_defaults_and_keeps_unguarded_edges_as_ids():
    written = flow_to_dict(
        flow_from_dict(
            {
                "mode": "enforce",
                "steps": [
                    {"id": "a", "join": "all", "terminal": False, "deny": [], "done": "always"},
                    {"id": "b", "after": [{"step": "a"}], "done": "always"},
                ],
                "constraints": [],
                "ambient": [],
            }
        )
    )
    assert written == {
        "steps": [{"id": "a", "done": "always"}, {"id": "b", "after": ["a"], "done": "always"}]
    }


def test_an_empty_allow_list_is_kept_apart_from_no_allow_list():
    flow = flow_from_dict(
        {"steps": [{"id": "a", "allow": [], "terminal": True}, {"id": "b", "terminal": True}]}
    )
    assert flow.steps[0].allow == ()
    assert flow.steps[1].allow is None
    assert flow_to_dict(flow)["steps"] == [
        {"id": "a", "allow": [], "terminal": True},
        {"id": "b", "terminal": True},
    ]


def test_eq_keeps_ints_and_floats_apart_through_a_round_trip():
    guard = guard_from_dict(loads('{"eq": ["k", 1.0]}'))
    assert guard == eq("k", 1.0) != eq("k", 1)
    assert dumps(guard_to_dict(guard)) == '{"eq":["k",1.0]}'


def test_flow_to_json_is_the_dict_form(refund_flow):
    assert refund_flow.to_json() == flow_to_dict(refund_flow)


def test_flow_to_dict_returns_a_fresh_document():
    flow = everything()
    written = flow_to_dict(flow)
    written["steps"][1]["after"][0]["when"]["eq"][1]["tags"].append("b")
    assert flow_to_dict(flow)["steps"][1]["after"][0]["when"]["eq"][1]["tags"] == ["a"]


def test_an_eq_guard_keeps_its_own_copy_of_the_value():
    value = {"tags": ["a"]}
    guard = eq("k", value)
    value["tags"].append("b")
    assert guard == eq("k", {"tags": ["a"]})
    assert guard.value == {"tags": ["a"]}


# --- shape errors --------------------------------------------------------------------------


def test_unknown_keys_are_named_with_a_suggestion_where_they_sit():
    assert problems_of(
        {
            "steps": [{"id": "verify", "alow": ["x"], "done": {"is_ture": "k"}}],
            "constraint": [],
            "constraints": [{"never_until": {"tool": "x"}}],
        }
    ) == [
        "flow: unknown key 'constraint' (did you mean 'constraints'?)",
        "step 'verify': unknown key 'alow' (did you mean 'allow'?)",
        "step 'verify' done: unknown guard 'is_ture' (did you mean 'is_true'?)",
        "constraints[0]: is none of once, never, before, require, reset (did you mean 'never'?)",
    ]


def test_wrong_types_are_named_with_what_was_expected():
    assert problems_of(
        {
            "mode": "strict",
            "steps": [
                {
                    "after": "verify",
                    "join": "al",
                    "posture": 3,
                    "terminal": "yes",
                    "done": "always",
                },
                {"id": "c", "after": [5], "deny": "x", "gate": {"eq": ["k"]}, "done": "always"},
            ],
            "ambient": "escalate",
        }
    ) == [
        "flow mode: must be 'enforce' or 'observe', not \"strict\"",
        "steps[0]: has no 'id'",
        "steps[0] after: must be a list of edges, not a string",
        "steps[0] join: must be 'all' or 'any', not \"al\" (did you mean 'all'?)",
        "steps[0] posture: must be a string, not a number",
        "steps[0] terminal: must be true or false, not a string",
        "step 'c' after[0]: must be a step id or {step, when}, not a number",
        "step 'c' gate eq: must be a pair [key, value], not [\"k\"]",
        "step 'c' deny: must be a list of tool names, not a string",
        "flow ambient: must be a list of tool names, not a string",
    ]


def test_guard_shape_errors_name_the_guard_by_its_path():
    assert problems_of(
        {
            "steps": [
                {
                    "id": "c",
                    "done": {
                        "all": [
                            {"captured": []},
                            {"not": {"always": True}},
                            {"is_set": "a", "is_true": "b"},
                            "done",
                            {"eq": ["k", float("nan")]},
                            {"any": "x"},
                        ]
                    },
                }
            ]
        }
    ) == [
        "step 'c' done all[0] captured: must name at least one key",
        "step 'c' done all[1] not: unknown guard 'always' (write it as a plain string)",
        "step 'c' done all[2]: a guard is 'always' or a mapping with one key, not a mapping "
        "with several keys",
        "step 'c' done all[3]: guard 'done' needs a value, as in {done: ...}",
        "step 'c' done all[4] eq[1]: must be a JSON value (no NaN or Infinity)",
        "step 'c' done all[5] any: must be a list of guards, not a string",
    ]


def test_constraint_shape_errors_name_the_constraint():
    assert problems_of(
        {
            "steps": [],
            "constraints": [
                {"once": "t", "never": "t"},
                {"before": ["a"]},
                {"reset": ["a"]},
                {"never": "", "until": "sometimes"},
                "once",
                {"require": ["a"], "when": "always"},
            ],
            "commit": [{"tool": "pay"}],
        }
    ) == [
        "constraints[0]: sets once and never; a constraint is one of once, never, before, "
        "require, reset",
        "constraints[1] (before): must name exactly two steps, not 1",
        "constraints[2] (reset): has no 'when'",
        "constraints[3] (never): must be a tool name (a non-empty string), not an empty string",
        "constraints[3] (never) until: unknown guard 'sometimes'",
        "constraints[4]: must be a mapping such as {once: tool}, not a string",
        "constraints[5] (require): unknown key 'when'",
        "commit[0]: has no 'until'",
    ]


def test_a_document_that_is_not_a_mapping_or_has_no_steps_is_refused():
    assert problems_of([]) == ["flow: must be a mapping, not a list"]
    assert problems_of({}) == ["flow: has no 'steps' (a list of steps)"]


def test_deeply_nested_guards_are_refused_at_their_root():
    guard = "always"
    for _ in range(40):
        guard = {"not": guard}
    assert problems_of({"steps": [{"id": "a", "gate": guard, "done": "always"}]}) == [
        "step 'a' gate: guards nest deeper than 32 levels"
    ]
