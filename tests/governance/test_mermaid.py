"""to_mermaid: steps, edges with guard labels, before arrows and a note of constraints."""

from __future__ import annotations

from plait.governance import Flow, called_ok, edge, eq, is_set, is_true, to_mermaid


def test_the_contract_example_renders_as_a_flowchart(refund_flow):
    assert to_mermaid(refund_flow) == (
        "flowchart TD\n"
        '    s0["verify"]\n'
        "    s1[\"offer<br/>gate: 'account' is set\"]\n"
        '    s2(["wrap_up"])\n'
        "    s0 --> s1\n"
        "    s1 --> s2\n"
        "    s0 -. before .-> s1\n"
        "    constraints[\"once: issue_refund<br/>never: issue_refund until 'confirmed' is true"
        "<br/>require: offer<br/>reset: offer when 'customer_changed_mind' is true"
        '<br/>commit: issue_refund<br/>ambient: escalate_to_human"]\n'
        "    classDef note fill:#fff8c4,stroke:#c9b458\n"
        "    class constraints note\n"
    )


def test_guarded_edges_are_labelled_and_any_joins_are_marked():
    flow = (
        Flow.new(mode="observe")
        .step("triage", done=is_set("severity"))
        .step("call", done=called_ok("phone"))
        .step(
            "schedule",
            after=[edge("triage", when=eq("severity", "routine")), "call"],
            join="any",
            done=called_ok("book"),
        )
        .build()
    )
    assert to_mermaid(flow) == (
        "flowchart TD\n"
        '    s0["triage"]\n'
        '    s1["call"]\n'
        '    s2["schedule<br/>after any"]\n'
        "    s0 -->|\"'severity' is #quot;routine#quot;\"| s2\n"
        "    s1 --> s2\n"
        '    constraints["mode: observe"]\n'
        "    classDef note fill:#fff8c4,stroke:#c9b458\n"
        "    class constraints note\n"
    )


def test_a_flow_without_constraints_has_no_note_and_odd_ids_are_safe():
    flow = Flow.new().step('say "hi" <now> #1', done=is_true("said")).build()
    assert to_mermaid(flow) == ('flowchart TD\n    s0["say #quot;hi#quot; #lt;now#gt; #35;1"]\n')
