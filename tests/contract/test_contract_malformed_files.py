"""`plait run` of a malformed workflow or scripted model file: a clear PLAIT-Ennn naming the
file, the line and the node or field, exit 2, and the store exactly as it was.

(`plait check` of the fixture files in tests/fixtures/workflows/bad is pinned in
tests/cli; here the same refusals come from `run`, which must write nothing.)
"""

from __future__ import annotations

import pytest

from contract.support import Cli

TOOLS = 'tools: {one: {python: "contract_tools:one"}}\n'

FILES = {
    "yaml_syntax": ("name: x\nnodes: [\n", "PLAIT-E019", 3, "invalid YAML"),
    "json_syntax": ('{"name": "x", "nodes": [],}', "PLAIT-E019", 1, "invalid JSON"),
    "not_a_mapping": ("- 1\n- 2\n", "PLAIT-E019", 1, "mapping"),
    "wrong_type": (
        "name: x\nnodes: [{id: a, tool: one, retries: two}]\n" + TOOLS,
        "PLAIT-E019",
        2,
        "node 'a': retries",
    ),
    "unknown_key": (
        "name: x\nnodes: [{id: a, tool: one, colour: red}]\n" + TOOLS,
        "PLAIT-E019",
        2,
        "node 'a': unknown key 'colour'",
    ),
    "unknown_node": (
        "name: x\nnodes: [{id: a, tool: one}]\nedges: [{from: a, to: zz}]\n" + TOOLS,
        "PLAIT-E019",
        3,
        "unknown node 'zz'",
    ),
    "unknown_tool": ("name: x\nnodes: [{id: a, tool: two}]\n" + TOOLS, "PLAIT-E004", 2, "'two'"),
    "yes_as_an_id": (
        "name: x\nnodes: [{id: yes, tool: one}]\n" + TOOLS,
        "PLAIT-E019",
        2,
        "quote ids",
    ),
    "control_in_an_id": (
        'name: x\nnodes: [{id: "a\\tb", tool: one}]\n' + TOOLS,
        "PLAIT-E019",
        2,
        "control character",
    ),
    "long_id": (
        f"name: x\nnodes: [{{id: {'n' * 300}, tool: one}}]\n" + TOOLS,
        "PLAIT-E019",
        2,
        "longer than 256 bytes",
    ),
    "bad_condition": (
        "name: x\nnodes: [{id: a, tool: one}, {id: b, tool: one}]\n"
        "edges: [{from: a, to: b, when: 'x =='}]\n" + TOOLS,
        "PLAIT-E005",
        3,
        "'a -> b'",
    ),
    "unbounded_cycle": (
        "name: x\nnodes: [{id: a, tool: one}]\nedges: [{from: a, to: a}]\n" + TOOLS,
        "PLAIT-E002",
        None,
        "max_cycles",
    ),
    "no_model": ("name: x\nnodes: [{id: a, instruction: think}]\n", "PLAIT-E006", 2, "node 'a'"),
    "infinite_budget": (
        "name: x\nnodes: [{id: a, tool: one}]\nbudgets: {max_usd: .inf}\n" + TOOLS,
        "PLAIT-E019",
        3,
        "",
    ),
}


@pytest.mark.parametrize("name", sorted(FILES))
def test_a_malformed_file_is_refused_and_writes_nothing(cli: Cli, name):
    text, code, line, words = FILES[name]
    suffix = ".json" if name.startswith("json") else ".yaml"
    path = cli.folder / f"{name}{suffix}"
    path.write_text(text)
    before = cli.run("approval.yaml", "kept")

    done = cli("run", str(path), "--run-id", "new")

    assert done.exit_code == 2, done
    error = done.data["error"]
    assert error["code"] == code, error
    assert error["file"] == str(path)
    assert words in error["message"]
    if line is not None:
        assert error["problems"][0]["line"] == line, error
    assert cli.run_ids() == ["kept"]
    assert cli("show", "kept").data == before.data  # asks and all, run_id included


SCRIPTS = {
    "not_json": ("{bad", "not valid JSON"),
    "unknown_field": ('[{"txt": "x"}]', "unknown key 'txt'"),
    "unknown_error": ('[{"error": "boom"}]', "error must be one of"),
    "not_a_list": ('"text"', "expected a list of responses or an object"),
    "bad_node_list": ('{"agent": 5}', "node 'agent'"),
    "nameless_call": ('[{"tool_calls": [{"arguments": {}}]}]', "tool_calls[0]: name"),
}


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_a_malformed_scripted_model_file_is_e019_naming_it(cli: Cli, name):
    text, words = SCRIPTS[name]
    (cli.folder / "models" / f"{name}.json").write_text(text)

    done = cli.run("agent.yaml", "a1", "--model", f"scripted:models/{name}.json")

    assert (done.exit_code, done.code) == (2, "PLAIT-E019")
    assert f"{name}.json" in done.data["error"]["message"]
    assert words in done.data["error"]["message"]
    assert cli.run_ids() == []
