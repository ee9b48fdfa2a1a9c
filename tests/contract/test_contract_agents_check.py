"""``plait check`` of several agents: bad ``agents:``/``handoffs:`` are PLAIT-E codes
naming the node and the field, with the line (docs/errors.md E002, E004)."""

from __future__ import annotations

from contract.support import Cli

HEAD = "name: team\nllm: {model: 'scripted:answers.json'}\nnodes:\n"


def check(cli: Cli, body: str) -> tuple[int, str]:
    path = cli.folder / "team.yaml"
    (cli.folder / "answers.json").write_text("[]")
    path.write_text(HEAD + body)
    done = cli.raw("check", str(path))
    return done.exit_code, done.stderr


def test_a_handoff_to_an_unknown_node_is_e004_naming_node_and_field(cli: Cli):
    code, err = check(cli, "  - {id: triage, instruction: route, handoffs: [biling]}\n")

    assert code == 2
    assert "team.yaml:4: PLAIT-E004 node 'triage': handoffs: unknown node 'biling'" in err, err


def test_an_agent_tool_naming_a_tool_node_is_e004(cli: Cli):
    body = (
        "  - {id: lead, instruction: lead, agents: [fetch]}\n"
        "  - {id: fetch, tool: fetch}\n"
        "edges: [{from: lead, to: fetch}]\n"
        "tools: {fetch: {command: [echo, '{}']}}\n"
    )
    code, err = check(cli, body)

    assert code == 2
    assert "PLAIT-E004 node 'lead': agents: node 'fetch' is a tool node" in err, err


def test_a_cycle_of_agents_without_a_bound_is_e002_and_a_depth_bounds_it(cli: Cli):
    body = "  - {id: a, instruction: a, agents: [b]}\n  - {id: b, instruction: b, handoffs: [a]}\n"
    code, err = check(cli, body)

    assert code == 2
    assert "PLAIT-E002 node 'a': a cycle of agents a -> b -> a has no bound" in err, err
    assert "llm.max_agent_depth" in err

    (cli.folder / "team.yaml").write_text(
        HEAD.replace("answers.json'", "answers.json', max_agent_depth: 3") + body
    )
    assert cli.raw("check", str(cli.folder / "team.yaml")).exit_code == 0


def test_detached_agents_need_no_edge_but_an_orphan_still_does(cli: Cli):
    lead = "  - {id: lead, instruction: lead, agents: [helper]}\n"
    helper = "  - {id: helper, instruction: help}\n"
    assert check(cli, lead + helper)[0] == 0

    code, err = check(cli, "  - {id: lead, instruction: lead}\n" + helper)
    assert code == 2
    assert "PLAIT-E003 node 'helper': unreachable" in err, err
