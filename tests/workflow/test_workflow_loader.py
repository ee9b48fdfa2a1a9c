"""Loading workflow files: the CONTRACT.md shape, and every problem named by file and line."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from plait.core.canonical import dumps
from plait.core.env import NodeExecutor
from plait.workflow import (
    MAX_FILE_BYTES,
    WorkflowError,
    load_workflow,
    manifest_executors,
    manifest_plan,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "workflows"
REFUND = FIXTURES / "refund" / "refund-desk.yaml"
BAD = FIXTURES / "bad"
EXPECTED = {k: v for k, v in json.loads((BAD / "expected.json").read_text()).items() if k[0] != "_"}


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def problems_of(path: Path, **kwargs: object) -> list[str]:
    """The rendered problem lines of a file that must fail to load."""
    with pytest.raises(WorkflowError) as caught:
        load_workflow(path, **kwargs)  # type: ignore[arg-type]
    assert caught.value.source == str(path)
    return caught.value.lines()


# -- a valid file ------------------------------------------------------------


def test_contract_example_loads_with_kinds_derived_from_settings():
    wf = load_workflow(REFUND)

    kinds = {node.id: node.kind for node in wf.nodes}
    assert kinds == {
        "load": "tool",
        "decide": "abstract",
        "approve": "ask",
        "details": "ask",
        "cool_off": "timer",
        "archive": "subgraph",
        "notify": "tool",
        "done": "tool",
    }
    assert wf.name == "refund-desk"
    assert wf.nodes[0].retries == 2 and wf.nodes[1].retries == 0
    assert wf.edges[8].max_cycles == 3 and wf.edges[8].when == "more"
    assert wf.reducers == {"log": "append", "total": "sum"}
    assert wf.base_dir == REFUND.parent


def test_contract_example_plans_with_the_loop_edge_as_back_edge():
    plan = load_workflow(REFUND).plan()

    assert plan.nodes[0].id == "load"
    assert plan.back_edges == frozenset({8})


def test_python_tools_are_imported_at_load_with_schema_and_docstring():
    wf = load_workflow(REFUND)

    load_order = wf.tools["load_order"]
    assert load_order.callable is not None and load_order.callable("A1") == {
        "order": {"id": "A1", "region": "eu"}
    }
    assert load_order.description == "Load an order by its id."
    assert load_order.input_schema is not None
    assert load_order.input_schema["required"] == ["order_id"]
    assert wf.tools["lookup_policy"].description == "Look up the refund policy."
    assert wf.tools["send_email"].command == ("python3", "send_email.py")
    assert wf.tools["send_email"].callable is None


def test_a_flow_path_is_read_relative_to_the_workflow_folder():
    wf = load_workflow(REFUND)

    decide = wf.nodes[1]
    assert isinstance(decide.flow, dict) and decide.flow["steps"][0]["id"] == "verify"


def test_executors_carry_what_each_kind_needs():
    executors = load_workflow(REFUND).executors()

    assert executors[0] == NodeExecutor("tool", "load_order", {})
    assert executors[1].kind == "abstract" and executors[1].name == "decide"
    assert executors[1].spec["tools"] == ["lookup_policy", "issue_refund"]
    assert executors[2] == NodeExecutor(
        "ask", "approve", {"prompt": "Approve this refund?", "approval": True}
    )
    assert executors[3].spec["output_schema"] == {"type": "object", "required": ["account"]}
    assert executors[4] == NodeExecutor("timer", "cool_off", {"sleep_ms": 3_600_000})
    assert executors[5] == NodeExecutor("subgraph", "archive.yaml", {"workflow": "archive.yaml"})


def test_budgets_convert_dollars_to_micros_and_seconds_to_ms():
    budgets = load_workflow(REFUND).to_budgets()

    assert budgets.max_usd_micros == 2_500_000
    assert budgets.max_wall_ms == 900_000
    assert budgets.max_supersteps == 200


def test_manifest_is_canonical_json_without_callables_and_rebuilds_plan_and_executors():
    wf = load_workflow(REFUND)
    manifest = wf.to_manifest()

    text = dumps(manifest)
    assert json.loads(text) == manifest  # a stored manifest compares equal to a fresh one
    assert "<function" not in text
    assert manifest["tools"]["load_order"]["python"] == "refund_desk.tools:load_order"
    assert manifest["tools"]["clock_now"]["kind"] == "mcp"
    assert manifest["budgets"]["max_usd_micros"] == 2_500_000
    assert manifest["asks"] == {"ttl_s": 259200}
    assert manifest_executors(json.loads(text)) == wf.executors()
    assert manifest_plan(json.loads(text)).back_edges == wf.plan().back_edges


def test_manifest_rounds_usd_half_up(tmp_path):
    path = write(
        tmp_path,
        "wf.yaml",
        """
        name: pennies
        nodes: [{id: a, tool: t}]
        tools: {t: {command: ["true"]}}
        budgets: {max_usd: 0.0000005, max_wall_s: 0.0015}
        """,
    )
    manifest = load_workflow(path).to_manifest()

    assert manifest["budgets"]["max_usd_micros"] == 1
    assert manifest["budgets"]["max_wall_ms"] == 2


def test_json_file_loads_like_yaml_with_exponents_and_escaped_emoji():
    wf = load_workflow(FIXTURES / "minimal.json")

    assert wf.nodes[1].instruction == "Say hi 😀"
    assert wf.budgets == {"max_usd": 10.0}
    assert wf.nodes[0].retries == 1


def test_defaults_of_a_minimal_file():
    wf = load_workflow(FIXTURES / "minimal.yaml")

    assert (wf.durability, wf.on_dangling, wf.llm, wf.description) == (
        "normal",
        "redeliver",
        None,
        "",
    )
    assert wf.nodes[0].retries == 0 and wf.nodes[0].writes == ()
    assert wf.edges[0].when is None and wf.edges[0].max_cycles is None


def test_model_override_satisfies_an_abstract_node(tmp_path):
    path = write(tmp_path, "wf.yaml", "name: t\nnodes: [{id: think, instruction: hi}]\n")

    wf = load_workflow(path, model_override="openai:gpt-4o-mini")

    assert wf.llm == {"model": "openai:gpt-4o-mini"}


def test_question_mark_inside_a_flow_mapping_is_text(tmp_path):
    path = write(
        tmp_path,
        "wf.yaml",
        """
        name: ask
        nodes:
          - id: approve
            ask: {prompt: Approve this refund?, approval: true}
        """,
    )

    assert load_workflow(path).nodes[0].ask == {"prompt": "Approve this refund?", "approval": True}


# -- bad files: one error, every problem, each with its line -------------------


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_bad_file_reports_each_problem_with_file_and_line(name):
    path = BAD / name

    lines = problems_of(path)

    expected = [f"{path}:{line}" for line in EXPECTED[name]]
    assert len(lines) == len(expected), lines
    for got, want in zip(lines, expected, strict=True):
        assert got.startswith(want), (got, want)


def test_several_problems_come_in_one_error_led_by_the_first():
    with pytest.raises(WorkflowError) as caught:
        load_workflow(BAD / "many_problems.yaml")

    error = caught.value
    assert len(error.problems) == 7
    assert error.code == error.problems[0].code == "E019"
    assert str(error).startswith("PLAIT-E019 durability must be")
    assert {p.code for p in error.problems} == {"E004", "E005", "E006", "E019"}


def test_problems_name_their_node_or_edge():
    with pytest.raises(WorkflowError) as caught:
        load_workflow(BAD / "many_problems.yaml")

    by_code = {p.code: p for p in caught.value.problems}
    assert by_code["E004"].node == "load"
    assert by_code["E005"].edge == 0


def test_unknown_key_without_a_close_match_lists_the_known_keys(tmp_path):
    path = write(tmp_path, "wf.yaml", "name: x\nnodes: [{id: a, tool: t, colour: red}]\n")

    lines = problems_of(path)

    assert any("unknown key 'colour' (expected one of: id, tool, retries" in x for x in lines)


def test_unknown_top_level_key_suggests_the_right_one(tmp_path):
    path = write(tmp_path, "wf.yaml", "name: x\nnode: []\n")

    lines = problems_of(path)

    assert f"{path}:2: PLAIT-E019 unknown top-level key 'node' (did you mean 'nodes'?)" in lines


def test_missing_name_and_nodes_are_reported(tmp_path):
    path = write(tmp_path, "wf.yaml", "description: nothing\n")

    lines = problems_of(path)

    assert f"{path}:1: PLAIT-E019 missing required key 'name'" in lines
    assert any("the workflow has no nodes" in x for x in lines)


@pytest.mark.parametrize("text", ["", "- a\n- b\n", "just text\n"])
def test_top_level_must_be_a_mapping(tmp_path, text):
    path = write(tmp_path, "wf.yaml", text)

    lines = problems_of(path)

    assert len(lines) == 1 and "the file must hold a mapping" in lines[0]


def test_unquoted_bang_condition_is_explained(tmp_path):
    path = write(
        tmp_path,
        "wf.yaml",
        """
        name: x
        nodes: [{id: a, tool: t}, {id: b, tool: t}]
        edges:
          - {from: a, to: b, when: !approved }
        tools: {t: {command: ["true"]}}
        """,
    )

    lines = problems_of(path)

    assert len(lines) == 1
    assert lines[0].startswith(f"{path}:5: PLAIT-E019 the YAML tag '!approved' is not supported")
    assert "must be quoted" in lines[0]


def test_yaml_boolean_id_is_explained(tmp_path):
    path = write(
        tmp_path, "wf.yaml", "name: x\nnodes: [{id: yes, tool: t}]\ntools: {t: {command: [x]}}\n"
    )

    lines = problems_of(path)

    assert lines == [
        f"{path}:2: PLAIT-E019 node #1: id must be a string, got true"
        " (quote ids like yes, no, on, off)"
    ]


def test_python_unsafe_tags_are_refused_not_run(tmp_path):
    path = write(tmp_path, "wf.yaml", "name: !!python/object/apply:os.getcwd []\nnodes: []\n")

    lines = problems_of(path)

    assert any("YAML tag 'tag:yaml.org,2002:python/object/apply:os.getcwd'" in x for x in lines)


def test_alias_bomb_is_refused_quickly(tmp_path):
    rows = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    rows += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    path = write(tmp_path, "wf.yaml", "\n".join(rows) + "\nname: x\n")

    lines = problems_of(path)

    assert len(lines) == 1 and "more than 1000000 values" in lines[0]


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_deep_nesting_is_refused(tmp_path, suffix):
    path = tmp_path / f"wf{suffix}"
    path.write_text('{"name": "x", "nodes": ' + "[" * 3000 + "]" * 3000 + "}")

    lines = problems_of(path)

    assert len(lines) == 1 and "nested" in lines[0]


def test_files_over_the_size_limit_are_refused_unread(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_bytes(b"#" * (MAX_FILE_BYTES + 1))

    lines = problems_of(path)

    assert lines == [
        f"{path}: PLAIT-E019 the file is larger than 10 MB ({MAX_FILE_BYTES + 1} bytes)"
    ]


def test_a_missing_file_is_a_load_error(tmp_path):
    lines = problems_of(tmp_path / "nope.yaml")

    assert len(lines) == 1 and "PLAIT-E019 cannot read the file" in lines[0]


def test_non_utf8_file_is_refused_with_its_line(tmp_path):
    path = tmp_path / "wf.yaml"
    path.write_bytes(b"name: x\nnodes: \xff\n")

    assert problems_of(path) == [f"{path}:2: PLAIT-E019 the file is not UTF-8 text (byte 15)"]


def test_null_values_are_keys_without_a_value(tmp_path):
    path = write(tmp_path, "wf.yaml", "name: x\nnodes:\n  - id: a\n    tool:\n")

    lines = problems_of(path)

    assert f"{path}:4: PLAIT-E019 node 'a': 'tool' has no value" in lines


def test_node_with_two_kinds_is_refused(tmp_path):
    path = write(
        tmp_path,
        "wf.yaml",
        """
        name: x
        nodes:
          - id: a
            tool: t
            sleep_s: 5
        tools: {t: {command: ["true"]}}
        """,
    )

    lines = problems_of(path)

    assert lines == [
        f"{path}:6: PLAIT-E019 node 'a': sets tool and sleep_s;"
        " a node sets one of tool, ask, sleep_s, workflow"
    ]


def test_abstract_only_settings_on_a_tool_node_are_refused(tmp_path):
    path = write(
        tmp_path,
        "wf.yaml",
        """
        name: x
        nodes:
          - id: a
            tool: t
            instruction: think
        tools: {t: {command: ["true"]}}
        """,
    )

    assert problems_of(path) == [
        f"{path}:6: PLAIT-E019 node 'a': instruction is only for abstract (LLM) nodes;"
        " this is a tool node"
    ]


def test_abstract_node_tools_must_be_defined(tmp_path):
    path = write(
        tmp_path,
        "wf.yaml",
        """
        name: x
        llm: {model: "openai:gpt-4o-mini"}
        nodes:
          - id: think
            tools: [lookup, nope]
        tools: {lookup: {command: ["true"]}}
        """,
    )

    assert problems_of(path) == [
        f"{path}:6: PLAIT-E004 node 'think': unknown tool 'nope' (expected one of: lookup)"
    ]


def test_tool_needs_exactly_one_source(tmp_path):
    path = write(
        tmp_path,
        "wf.yaml",
        """
        name: x
        nodes: [{id: a, tool: t}]
        tools:
          t: {command: ["true"], mcp: {command: [srv], tool: x}}
          u: {description: nothing}
        """,
    )

    lines = problems_of(path)

    assert lines == [
        f"{path}:5: PLAIT-E019 tool 't': give exactly one of python, command or mcp"
        " (got command and mcp)",
        f"{path}:6: PLAIT-E019 tool 'u': give exactly one of python, command or mcp (got none)",
    ]


def test_settings_sections_are_checked_key_by_key(tmp_path):
    path = write(
        tmp_path,
        "wf.yaml",
        """
        name: x
        on_dangling: retry
        nodes: [{id: a, tool: t}]
        tools: {t: {command: ["true"], timeout_s: 0}}
        llm: {model: gpt4, max_token: 5}
        budgets: {max_usd: -1, max_supersteps: 0}
        asks: {ttl_s: 1.5}
        """,
    )

    lines = [line.split(": ", 1)[1] for line in problems_of(path)]

    assert lines == [
        "PLAIT-E019 on_dangling must be 'redeliver' or 'fail', got \"retry\"",
        "PLAIT-E019 tool 't': timeout_s must be a number > 0, got 0",
        "PLAIT-E019 llm: model must be 'provider:model' (e.g. 'openai:gpt-4o-mini'), got \"gpt4\"",
        "PLAIT-E019 llm: unknown key 'max_token' (did you mean 'max_tokens'?)",
        "PLAIT-E019 budgets: max_usd must be a number >= 0, got -1",
        "PLAIT-E019 budgets: max_supersteps must be an integer >= 1, got 0",
        "PLAIT-E019 asks: ttl_s must be an integer >= 1, got 1.5",
    ]


def test_subgraph_and_flow_files_must_exist(tmp_path):
    path = write(
        tmp_path,
        "wf.yaml",
        """
        name: x
        llm: {model: "openai:gpt-4o-mini"}
        nodes:
          - id: think
            flow: flows/missing.yaml
          - id: child
            workflow: child.yaml
        edges: [{from: think, to: child}]
        """,
    )

    assert problems_of(path) == [
        f"{path}:6: PLAIT-E004 node 'think': flow file 'flows/missing.yaml' not found",
        f"{path}:8: PLAIT-E004 node 'child': workflow file 'child.yaml' not found",
    ]


def test_scripted_model_file_must_exist(tmp_path):
    path = write(
        tmp_path, "wf.yaml", "name: x\nnodes: [{id: a}]\nllm: {model: 'scripted:s.json'}\n"
    )

    assert problems_of(path) == [
        f"{path}:3: PLAIT-E004 llm.model: scripted model file 's.json' not found"
    ]


def test_invalid_response_schema_is_refused(tmp_path):
    path = write(
        tmp_path,
        "wf.yaml",
        "name: x\nllm: {model: 'a:b'}\nnodes:\n  - id: a\n    response_schema: {type: 12}\n",
    )

    lines = problems_of(path)

    assert len(lines) == 1
    assert lines[0].startswith(f"{path}:5: PLAIT-E019 node 'a': response_schema is not a valid")


def test_drawing_does_not_need_a_model():
    wf = load_workflow(BAD / "no_model.yaml", require_model=False)

    assert wf.nodes[0].kind == "abstract"


def test_python_tool_in_a_package_next_to_the_file(tmp_path):
    package = tmp_path / "plait_fixture_pkg_a"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "tools.py").write_text("def ping(host: str) -> dict:\n    return {'pong': host}\n")
    path = write(
        tmp_path,
        "wf.yaml",
        """
        name: x
        nodes: [{id: a, tool: ping}]
        tools: {ping: {python: "plait_fixture_pkg_a.tools:ping"}}
        """,
    )

    wf = load_workflow(path)

    assert wf.tools["ping"].callable is not None
    assert wf.tools["ping"].callable("h") == {"pong": "h"}


def test_python_tool_with_a_missing_function_names_it(tmp_path):
    (tmp_path / "plait_fixture_mod_b.py").write_text("x = 1\n")
    path = write(
        tmp_path,
        "wf.yaml",
        """
        name: x
        nodes: [{id: a, tool: ping}]
        tools:
          ping: {python: "plait_fixture_mod_b:ping"}
          x: {python: "plait_fixture_mod_b:x"}
        """,
    )

    assert problems_of(path) == [
        f"{path}:5: PLAIT-E004 tool 'ping': cannot import 'plait_fixture_mod_b:ping':"
        " 'plait_fixture_mod_b' has no attribute 'ping'",
        f"{path}:6: PLAIT-E004 tool 'x': cannot import 'plait_fixture_mod_b:x':"
        " it is a int, not a function",
    ]


def test_python_tool_whose_module_raises_is_reported_not_raised(tmp_path):
    (tmp_path / "plait_fixture_mod_c.py").write_text("raise RuntimeError('boom')\n")
    path = write(
        tmp_path,
        "wf.yaml",
        "name: x\nnodes: [{id: a, tool: t}]\ntools: {t: {python: 'plait_fixture_mod_c:f'}}\n",
    )

    assert problems_of(path) == [
        f"{path}:3: PLAIT-E004 tool 't': cannot import 'plait_fixture_mod_c:f': RuntimeError: boom"
    ]


def test_graph_problems_are_reported_with_the_others(tmp_path):
    # A bad condition, an unreachable node and an unbounded cycle: all three at once.
    path = write(
        tmp_path,
        "wf.yaml",
        "name: x\ntools: {t: {command: [cat]}}\n"
        "nodes:\n  - {id: a, tool: t}\n  - {id: b, tool: t}\n  - {id: c, tool: t}\n"
        "edges:\n  - {from: a, to: b, when: 'x >'}\n  - {from: b, to: b}\n",
    )

    lines = problems_of(path)

    assert any("PLAIT-E005 edge 'a -> b': invalid condition" in x for x in lines), lines
    assert any("PLAIT-E003 node 'c': unreachable from the entry 'a'" in x for x in lines), lines
    assert any("PLAIT-E002 cycle through nodes 'b'" in x for x in lines), lines


def test_a_misspelled_edge_end_is_reported_without_its_consequences(tmp_path):
    path = write(
        tmp_path,
        "wf.yaml",
        "name: x\ntools: {t: {command: [cat]}}\n"
        "nodes:\n  - {id: a, tool: t}\n  - {id: b, tool: t}\n"
        "edges:\n  - {from: a, to: bb}\n",
    )

    lines = problems_of(path)

    assert any("unknown node 'bb' in 'to'" in x for x in lines), lines
    assert not any("E003" in x for x in lines), lines  # b is unreachable only through the typo
