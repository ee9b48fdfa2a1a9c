"""Units and scripted responses at their edges (CONTRACT.md "Workflow files" units
paragraph, "Scripted models", `raise-budget`): dollars to micro-dollars half-up on the
decimal text; a scripted response whose fields are null. Values too large to keep are
tests/contract/test_contract_bad_input.py's.
"""

from __future__ import annotations

import json

from contract.support import Cli


def test_raise_budget_rounds_dollars_half_up_on_their_decimal_text(cli: Cli):
    cli.run("loop.yaml", "r1")

    # 1.0084395 dollars are 1008439.5 micro-dollars: half-up is 1008440 (binary
    # floating point makes it 1008439.4999...)
    done = cli("raise-budget", "r1", "usd=1.0084395", "wall_s=1.0005")

    assert done.exit_code == 0, done
    assert done.data["budgets"] == {"max_usd_micros": 1_008_440, "max_wall_ms": 1001}


def test_a_null_field_of_a_scripted_response_is_as_good_as_absent(cli: Cli):
    answers = [
        {
            "text": None,
            "tool_calls": [{"name": "finish", "arguments": None}],
            "usage": {"input_tokens": None, "output_tokens": 2},
            "error": None,
        },
        {"text": "done", "tool_calls": None, "usage": None},
    ]
    (cli.folder / "models" / "nulls.json").write_text(json.dumps(answers))
    flow = "name: nulls\nnodes: [{id: agent, instruction: Go.}]\n"
    flow += 'tools: {finish: {python: "contract_tools:finish"}}\n'
    (cli.folder / "nulls.yaml").write_text(flow)

    done = cli.run("nulls.yaml", "r1", "--model", "scripted:models/nulls.json")

    assert done.exit_code == 0, done
    assert done.data["context"] == {"agent": "done"}
    assert (done.data["spent"]["input_tokens"], done.data["spent"]["output_tokens"]) == (0, 2)
    assert [e["kind"] for e in cli("trace", "r1").data["entries"]] == ["llm", "tool", "llm"]
    assert cli("verify", "r1").data["verified"] is True
