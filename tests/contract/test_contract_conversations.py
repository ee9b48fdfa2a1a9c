"""`plait run --conversation C` and `plait conversations` (issue #18 part 2): a run goes on
from the conversation's last completed transcript, the list names every conversation's
runs, turns and last status, and a workflow that does not start with an LLM node is
refused (PLAIT-E031) before anything is written."""

from __future__ import annotations

import json
from typing import Any

from contract.support import T0, Cli

CHAT = """name: chat
nodes: [{id: chat, instruction: Answer briefly.}]
llm: {model: scripted:chat.json}
"""


def chat(cli: Cli) -> str:
    (cli.folder / "chat.json").write_text('[{"text": "Noted."}]')
    (cli.folder / "chat.yaml").write_text(CHAT)
    return "chat.yaml"


def sent(cli: Cli, run_id: str) -> list[Any]:
    turns = [e for e in cli("trace", run_id).data["entries"] if e["kind"] == "llm"]
    return list(turns[0]["input"]["messages"])


def test_the_second_run_of_a_conversation_starts_with_the_first_runs_transcript(cli: Cli):
    flow = chat(cli)
    one = cli.run(flow, "t1", "--conversation", "c1", "--input", '{"question": "first?"}')
    two = cli.run(flow, "t2", "--conversation", "c1", "--input", '{"question": "second?"}')

    assert (one.exit_code, two.exit_code) == (0, 0), two
    first, second = sent(cli, "t1"), sent(cli, "t2")
    assert second[: len(first)] == first
    assert second[len(first)] == {"role": "assistant", "text": "Noted.", "tool_calls": []}
    assert second[-1] == {"role": "user", "content": "second?"}
    assert "$history" not in two.data["context"]
    assert cli("verify", "t2").data["verified"] is True


def test_conversations_json_lists_runs_turns_and_last_status(cli: Cli):
    flow = chat(cli)
    cli.run(flow, "t1", "--conversation", "c1")
    cli.run(flow, "t2", "--conversation", "c1", now=T0 + 5000)
    cli.run(flow, "u1", "--conversation", "c2", now=T0 + 1000)
    cli.run(flow, "lone")

    listed = cli("conversations")

    assert listed.exit_code == 0
    assert listed.data == {
        "conversations": [
            {
                "conversation": "c1",
                "runs": ["t1", "t2"],
                "turns": 2,
                "completed": 2,
                "created_ms": T0,
                "updated_ms": T0 + 5000,
                "last_run_id": "t2",
                "last_status": "completed",
            },
            {
                "conversation": "c2",
                "runs": ["u1"],
                "turns": 1,
                "completed": 1,
                "created_ms": T0 + 1000,
                "updated_ms": T0 + 1000,
                "last_run_id": "u1",
                "last_status": "completed",
            },
        ]
    }
    human = cli.raw("conversations", "--db", cli.db)
    assert "c1" in human.stderr and "t2" in human.stderr


def test_a_workflow_that_does_not_start_with_an_llm_node_is_refused(cli: Cli):
    done = cli.run("agent.yaml", "x1", "--conversation", "c1")  # starts with `agent`: fine
    refused = cli.run("question.yaml", "q1", "--conversation", "c1")

    assert done.exit_code == 0, done
    assert (refused.exit_code, refused.code) == (2, "PLAIT-E031"), refused
    assert "q1" not in cli.run_ids()
    assert cli("conversations").data["conversations"][0]["runs"] == ["x1"]


def test_no_conversations_yet(cli: Cli):
    chat(cli)
    cli.run("chat.yaml", "lone")
    assert cli("conversations").data == {"conversations": []}
    assert "no conversations" in cli.raw("conversations", "--db", cli.db).stderr


DESK = """name: desk
nodes:
  - {id: triage, instruction: Route the customer., handoffs: [billing]}
  - {id: billing, instruction: Handle billing.}
llm: {model: scripted:desk.json}
"""


def test_a_turn_after_a_handoff_goes_on_from_the_receiving_agents_transcript(cli: Cli):
    answers = {
        "triage": [{"tool_calls": [{"name": "transfer_to_billing", "arguments": {}}]}],
        "billing": [{"text": "It is paid."}],
    }
    (cli.folder / "desk.json").write_text(json.dumps(answers))
    (cli.folder / "desk.yaml").write_text(DESK)
    cli.run("desk.yaml", "t1", "--conversation", "c1", "--input", '{"q": "paid?"}')
    two = cli.run("desk.yaml", "t2", "--conversation", "c1", "--input", '{"q": "thanks"}')

    messages = sent(cli, "t2")
    calls = [m for m in messages if m["role"] == "assistant" and m["tool_calls"]]
    answered = {m.get("tool_call_id") for m in messages if m["role"] == "tool"}
    assert two.exit_code == 0, two
    assert {"role": "assistant", "text": "It is paid.", "tool_calls": []} in messages
    assert all(c["id"] in answered for m in calls for c in m["tool_calls"])  # none dangles
    assert cli("verify", "t2").data["verified"] is True
