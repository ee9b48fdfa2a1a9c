"""Units of LLM runs at their edges (CONTRACT.md "Workflow files" units paragraph, "Scripted
models", `raise-budget`): dollars to micro-dollars half-up on the decimal text, however
large; seconds far in the future; a scripted response whose fields are null.
"""

from __future__ import annotations

import json

import pytest

from contract.support import Cli

AGENT = """
name: priced
nodes:
  - {id: agent, instruction: Find it., tools: [lookup]}
llm:
  model: "scripted:models/turns.json"
  max_tokens: 100
  prices: {"scripted:models/turns.json": {input_per_mtok: PRICE, output_per_mtok: 2.5}}
budgets: BUDGETS
tools:
  lookup: {python: "contract_tools:lookup"}
"""


def write_agent(cli: Cli, *, price: str = "1.5", budgets: str = "{}") -> str:
    (cli.folder / "priced.yaml").write_text(
        AGENT.replace("PRICE", price).replace("BUDGETS", budgets)
    )
    return "priced.yaml"


def test_a_price_past_28_digits_is_charged_exactly(cli: Cli):
    # turns.json: 12 + 20 input tokens, 5 + 3 output tokens
    done = cli.run(write_agent(cli, price="1.0e+30"), "r1")

    assert done.exit_code == 0, done
    # output: 5 x 2.5 = 12.5 and 3 x 2.5 = 7.5, each turn rounded half-up: 13 + 8
    assert done.data["spent"]["usd_micros"] == 32 * 10**30 + 21
    assert cli("verify", "r1").data["verified"] is True


@pytest.mark.parametrize("budgets", ["{max_usd: 1.0e+22}", "{max_wall_s: 1.0e+30}"])
def test_a_ceiling_past_28_digits_runs(cli: Cli, budgets):
    done = cli.run(write_agent(cli, budgets=budgets), "r1")

    assert done.exit_code == 0, done
    assert done.data["status"] == "completed"


def test_a_reservation_past_28_digits_is_refused_not_crashed(cli: Cli):
    flow = write_agent(cli, price="1.0e+30", budgets="{max_usd: 1}")
    text = (cli.folder / flow).read_text().replace("max_tokens: 100", "max_tokens: 10000")
    (cli.folder / flow).write_text(text.replace("output_per_mtok: 2.5", "output_per_mtok: 1.0e+30"))

    done = cli.run(flow, "r1")

    assert done.exit_code == 1, done
    assert done.data["outcome"] == {"kind": "budget_exhausted", "axis": "usd"}


def test_raise_budget_rounds_dollars_half_up_on_their_decimal_text(cli: Cli):
    cli.run("loop.yaml", "r1")

    # 1.0084395 dollars are 1008439.5 micro-dollars: half-up is 1008440 (binary
    # floating point makes it 1008439.4999...)
    done = cli("raise-budget", "r1", "usd=1.0084395", "wall_s=1.0005")

    assert done.exit_code == 0, done
    assert done.data["budgets"] == {"max_usd_micros": 1_008_440, "max_wall_ms": 1001}


def test_raise_budget_keeps_a_huge_count_exact(cli: Cli):
    cli.run("loop.yaml", "r1")

    done = cli("raise-budget", "r1", "tokens=12345678901234567891")

    assert done.data["budgets"] == {"max_tokens": 12345678901234567891}


@pytest.mark.parametrize("node", ["{id: z, sleep_s: 1.0e+20}", "{id: z, ask: {prompt: Which?}}"])
def test_a_wait_far_past_any_clock_parks(cli: Cli, node):
    text = f"name: far\nnodes:\n  - {node}\nasks: {{ttl_s: 100000000000000000000}}\n"
    (cli.folder / "far.yaml").write_text(text)

    done = cli.run("far.yaml", "r1")

    assert done.exit_code == 3, done
    assert done.data["status"] == "parked"
    assert cli("resume", "r1").data["status"] == "parked"
    assert cli("verify", "r1").data["verified"] is True


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
