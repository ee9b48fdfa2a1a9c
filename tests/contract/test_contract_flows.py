"""Governance flow files (CONTRACT.md "Governance flow files"), through the CLI: a flow
given as a path or inline, refused calls as `refused` trace entries right after the turn
that made them, observe mode, and bad flow files refused at load with nothing written.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from contract.support import TRACE_KEYS, Cli

TOOLS = """\
tools:
  one: {python: "contract_tools:one"}
  start: {python: "contract_tools:start"}
  finish: {python: "contract_tools:finish"}
"""


def governed(cli: Cli, name: str, flow: str, answers: list[Any], *, llm: str = "") -> str:
    """A one-node workflow ``name``.yaml whose agent calls one/start/finish under ``flow``
    (a path or an inline mapping), scripted by ``answers``."""
    (cli.folder / "models" / f"{name}.json").write_text(json.dumps(answers))
    (cli.folder / f"{name}.yaml").write_text(
        f"name: {name}\n"
        "nodes:\n"
        "  - id: agent\n"
        "    instruction: Go.\n"
        "    tools: [one, start, finish]\n"
        f"    flow: {flow}\n" + TOOLS + f'llm: {{model: "scripted:models/{name}.json"{llm}}}\n'
    )
    return f"{name}.yaml"


def calls(*names: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": n, "arguments": {}} for n in names]}


STEP_BY_STEP = "{steps: [{id: s1, allow: [start], done: {called_ok: start}}]}"


def kinds(cli: Cli, run_id: str) -> list[tuple[str, str, int]]:
    entries = cli("trace", run_id).data["entries"]
    assert all(set(e) >= TRACE_KEYS for e in entries)
    return [(e["kind"], e["status"], e["effect_seq"]) for e in entries]


def test_a_flow_file_path_is_read_relative_to_the_workflow_folder(cli: Cli):
    (cli.folder / "flows").mkdir()
    (cli.folder / "flows" / "steps.yaml").write_text(
        "steps:\n  - {id: s1, allow: [start], done: {called_ok: start}}\n"
    )
    name = governed(cli, "by_path", "flows/steps.yaml", [calls("one"), calls("start"), {}])

    done = cli("run", name, "--run-id", "r1")

    assert done.exit_code == 0, done
    assert kinds(cli, "r1") == [
        ("llm", "completed", 0),
        ("refused", "refused", 0),
        ("llm", "completed", 1),
        ("tool", "completed", 2),
        ("llm", "completed", 3),
    ]
    assert cli("verify", "r1").data["verified"] is True


def test_a_refusal_in_the_last_answer_of_a_failing_loop_is_traced(cli: Cli):
    # The effect bound fails the node before any later turn carries the refusal.
    limit = ", max_effects_per_attempt: 1"
    name = governed(cli, "bound", STEP_BY_STEP, [calls("one"), {}], llm=limit)

    done = cli("run", name, "--run-id", "r1")

    assert done.exit_code == 1 and done.data["outcome"]["kind"] == "failed", done
    entries = cli("trace", "r1").data["entries"]
    assert [(e["kind"], e["status"]) for e in entries] == [
        ("llm", "completed"),
        ("refused", "refused"),
    ]
    refused = entries[1]
    assert refused["input"] == {"tool": "one", "arguments": {}}
    assert "`one` was refused and did not run" in refused["result"]["reason"]
    assert cli("verify", "r1").data["verified"] is True


def test_an_observe_mode_violation_in_the_last_answer_of_a_failing_loop_is_traced(cli: Cli):
    flow = "{mode: observe, steps: [{id: s1, allow: [start], done: {called_ok: start}}]}"
    limit = ", max_effects_per_attempt: 2"
    name = governed(cli, "observed", flow, [calls("one"), {}], llm=limit)

    done = cli("run", name, "--run-id", "r1")

    assert done.exit_code == 1, done
    entries = cli("trace", "r1").data["entries"]
    assert [(e["kind"], e["status"]) for e in entries] == [
        ("llm", "completed"),
        ("tool", "completed"),  # observe mode refuses nothing: the call ran
    ]
    (violation,) = entries[0]["violations"]
    assert (violation["tool"], violation["rule"]) == ("one", "allow")
    assert cli("verify", "r1").data["verified"] is True


@pytest.mark.parametrize("inline", [True, False])
def test_a_flow_with_a_long_chain_of_steps_loads_and_runs(cli: Cli, inline: bool):
    steps = [{"id": "s0", "allow": ["start"], "done": {"called_ok": "start"}}] + [
        {"id": f"s{i}", "after": [f"s{i - 1}"], "done": {"called_ok": "start"}}
        for i in range(1, 1100)
    ]
    flow = json.dumps({"steps": steps})
    if not inline:
        (cli.folder / "chain.json").write_text(flow)
        flow = "chain.json"
    name = governed(cli, "chain", flow, [calls("start"), {"text": "done"}])

    assert cli.raw("check", name, "--json").exit_code == 0
    done = cli("run", name, "--run-id", "r1")

    assert done.exit_code == 0, done
    assert cli("verify", "r1").data["verified"] is True


def test_a_long_chain_of_steps_that_closes_a_cycle_is_e027(cli: Cli):
    steps = [{"id": f"s{i}", "after": [f"s{i - 1}"], "done": "always"} for i in range(1, 1100)]
    steps.insert(0, {"id": "s0", "after": ["s1099"], "done": "always"})
    (cli.folder / "cycle.json").write_text(json.dumps({"steps": steps}))
    name = governed(cli, "cycle", "cycle.json", [{}])

    done = cli("run", name, "--run-id", "r1")

    assert (done.exit_code, done.code) == (2, "PLAIT-E027"), done
    assert "'after' edges form a cycle: s0 -> s1 -> s2" in done.data["error"]["message"]
    assert "(flow file 'cycle.json')" in done.data["error"]["message"]
    assert cli.run_ids() == []


BAD_FLOWS = {
    "missing_file": ("flows/nothere.yaml", None, "PLAIT-E004", "flow file 'flows/nothere.yaml'"),
    "yaml_syntax": ("flows/bad.yaml", "steps: [{id: s}\n  - x: :\n", "PLAIT-E027", "invalid YAML"),
    "unknown_guard": (
        "{steps: [{id: s, done: {is_ture: k}}]}",
        None,
        "PLAIT-E027",
        "unknown guard 'is_ture' (did you mean 'is_true'?)",
    ),
    "unknown_step": (
        "flows/bad.yaml",
        "steps: [{id: s, done: always}]\nconstraints: [{require: [t]}]\n",
        "PLAIT-E027",
        "require('t') names unknown step 't' (flow file 'flows/bad.yaml')",
    ),
    "unknown_tool": (
        "{steps: [{id: s, done: always}], ambient: [nope]}",
        None,
        "PLAIT-E027",
        "ambient names unknown tool 'nope'",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_FLOWS))
def test_a_bad_flow_is_a_load_error_that_writes_nothing(cli: Cli, case: str):
    flow, text, code, words = BAD_FLOWS[case]
    if text is not None:
        (cli.folder / "flows").mkdir()
        (cli.folder / flow).write_text(text)
    name = governed(cli, case, flow, [{}])

    done = cli("run", name, "--run-id", "r1")

    assert (done.exit_code, done.code) == (2, code), done
    error = done.data["error"]
    assert error["file"] == name and error["problems"][0]["line"] == 6
    assert error["message"].startswith("node 'agent': ") and words in error["message"]
    assert cli.run_ids() == []


def test_a_flow_on_a_node_that_is_not_abstract_is_e019(cli: Cli):
    (cli.folder / "asker.yaml").write_text(
        "name: asker\nnodes:\n  - id: q\n    ask: {prompt: Why?}\n"
        "    flow: {steps: [{id: s, done: always}]}\n"
    )

    done = cli("run", "asker.yaml", "--run-id", "r1")

    assert (done.exit_code, done.code) == (2, "PLAIT-E019"), done
    assert (
        "node 'q': flow is only for abstract (LLM) nodes; this is an ask node"
        in (done.data["error"]["message"])
    )
    assert cli.run_ids() == []
