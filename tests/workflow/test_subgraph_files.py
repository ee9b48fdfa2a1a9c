"""Subgraph files are judged with their parent: a child's problems, and files that include
each other in a cycle, refuse the parent at load (``check``, ``run``, the Python API),
before anything is written."""

from __future__ import annotations

import asyncio
import textwrap
import uuid
from pathlib import Path

import pytest

from contract.support import Cli
from plait import Runtime, Workflow, load_workflow
from plait.workflow import WorkflowError

TOOLS = "def ping() -> dict:\n    return {'pinged': True}\n"

PARENT = """
name: parent
tools:
  ping: {python: "subgraph_tools:ping"}
nodes:
  - {id: a, tool: ping}
  - {id: c, workflow: bad.yaml}
edges:
  - {from: a, to: c}
"""

LEAF = """
name: leaf
tools:
  ping: {python: "subgraph_tools:ping"}
nodes:
  - {id: p, tool: ping}
"""

UNBOUNDED = """
name: bad
tools:
  ping: {python: "subgraph_tools:ping"}
nodes:
  - {id: x, tool: ping}
  - {id: y, tool: ping}
edges:
  - {from: x, to: y}
  - {from: y, to: x}
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    """The CLI on a fresh store, in a folder holding the tools module the files name."""
    write(tmp_path, "subgraph_tools.py", TOOLS)
    monkeypatch.chdir(tmp_path)
    return Cli(tmp_path)


def refused(cli: Cli, name: str) -> list[dict[str, object]]:
    """``check`` and ``run`` both refuse the file with exit 2 and the same problems; the
    store holds no run afterwards. Returns the problems."""
    checked = cli.raw("check", name, "--json")
    ran = cli("run", name, "--run-id", "r1")

    assert checked.exit_code == 2, checked
    assert ran.exit_code == 2, ran
    assert ran.data == checked.data
    assert cli.run_ids() == []
    problems = checked.data["error"]["problems"]
    assert isinstance(problems, list)
    return problems


def test_a_file_including_itself_is_refused_naming_the_cycle(cli: Cli):
    write(cli.folder, "self.yaml", "name: x\nnodes:\n  - {id: a, workflow: self.yaml}\n")

    problems = refused(cli, "self.yaml")

    assert problems == [
        {
            "code": "PLAIT-E004",
            "line": 3,
            "message": "node 'a': workflow file 'self.yaml' closes a cycle of workflow files:"
            " self.yaml -> self.yaml",
        }
    ]


def test_two_files_including_each_other_are_refused_from_either_end(cli: Cli):
    write(cli.folder, "m1.yaml", "name: m1\nnodes:\n  - {id: a, workflow: m2.yaml}\n")
    write(cli.folder, "m2.yaml", "name: m2\nnodes:\n  - {id: b, workflow: m1.yaml}\n")

    first = refused(cli, "m1.yaml")
    second = refused(cli, "m2.yaml")

    assert [p["code"] for p in first + second] == ["PLAIT-E004", "PLAIT-E004"]
    assert str(first[0]["message"]).startswith("node 'a': workflow file 'm2.yaml' line 3:")
    assert str(first[0]["message"]).endswith("m1.yaml -> m2.yaml -> m1.yaml")
    assert str(second[0]["message"]).endswith("m2.yaml -> m1.yaml -> m2.yaml")


def test_a_cycle_deeper_down_names_its_files_from_the_outer_folder(cli: Cli):
    write(cli.folder, "top.yaml", "name: top\nnodes:\n  - {id: t, workflow: sub/a.yaml}\n")
    write(cli.folder, "sub/a.yaml", "name: a\nnodes:\n  - {id: a, workflow: b.yaml}\n")
    write(cli.folder, "sub/b.yaml", "name: b\nnodes:\n  - {id: b, workflow: a.yaml}\n")

    (problem,) = refused(cli, "top.yaml")

    assert problem["code"] == "PLAIT-E004"
    assert str(problem["message"]).startswith("node 't': workflow file 'sub/a.yaml' line 3:")
    assert str(problem["message"]).endswith("sub/a.yaml -> sub/b.yaml -> sub/a.yaml")


def test_a_child_with_a_problem_refuses_its_parent_naming_node_and_file(cli: Cli):
    write(cli.folder, "parent.yaml", PARENT)
    write(cli.folder, "bad.yaml", UNBOUNDED)

    (problem,) = refused(cli, "parent.yaml")

    assert problem["code"] == "PLAIT-E002"
    assert problem["line"] == 7  # the parent's line holding node c's workflow key
    assert str(problem["message"]).startswith("node 'c': workflow file 'bad.yaml' line 6: ")
    assert "has no edge with max_cycles" in str(problem["message"])


def test_a_child_without_a_model_is_told_to_set_its_own(cli: Cli):
    write(cli.folder, "parent.yaml", PARENT)
    write(cli.folder, "bad.yaml", "name: bad\nnodes:\n  - {id: think, instruction: Think.}\n")

    (problem,) = refused(cli, "parent.yaml")
    with_model = cli("run", "parent.yaml", "--model", "scripted:answers.json")

    assert problem["code"] == "PLAIT-E006"
    assert str(problem["message"]).endswith("set llm.model in that file")
    assert "--model" not in str(problem["message"])  # it names the parent's model only
    assert (with_model.exit_code, with_model.code) == (2, "PLAIT-E006")


def test_check_prints_a_childs_problem_on_the_parents_line(cli: Cli):
    write(cli.folder, "parent.yaml", PARENT)
    write(cli.folder, "bad.yaml", "name: bad\nnodes:\n  - {id: x, tool: nope}\n")

    done = cli.raw("check", "parent.yaml")

    assert done.exit_code == 2, done
    assert done.stderr.splitlines() == [
        "parent.yaml:7: PLAIT-E004 node 'c': workflow file 'bad.yaml' line 3:"
        " node 'x': unknown tool 'nope' (no tools are defined)"
    ]


def test_valid_nested_and_shared_children_pass_and_run(cli: Cli):
    write(cli.folder, "leaf.yaml", LEAF)
    write(cli.folder, "mid.yaml", "name: mid\nnodes:\n  - {id: m, workflow: leaf.yaml}\n")
    diamond = """
    name: top
    nodes:
      - {id: one, workflow: mid.yaml}
      - {id: two, workflow: leaf.yaml}
    edges: [{from: one, to: two}]
    """
    write(cli.folder, "top.yaml", diamond)

    checked = cli.raw("check", "top.yaml", "--json")
    ran = cli("run", "top.yaml", "--run-id", "r1")

    assert checked.exit_code == 0 and checked.data["ok"] is True, checked
    assert ran.exit_code == 0 and ran.data["status"] == "completed", ran
    assert ran.data["context"]["pinged"] is True


def test_load_workflow_refuses_a_file_including_itself(tmp_path: Path):
    path = write(tmp_path, "self.yaml", "name: x\nnodes:\n  - {id: a, workflow: self.yaml}\n")

    with pytest.raises(WorkflowError) as caught:
        load_workflow(path)

    assert caught.value.code == "E004"
    assert caught.value.lines() == [
        f"{path}:3: PLAIT-E004 node 'a': workflow file 'self.yaml' closes a cycle of"
        " workflow files: self.yaml -> self.yaml"
    ]


def test_a_built_workflow_with_a_bad_child_is_refused_before_a_run_is_written(
    cli: Cli,
):
    write(cli.folder, "bad.yaml", UNBOUNDED)
    write(cli.folder, "self.yaml", "name: x\nnodes:\n  - {id: a, workflow: self.yaml}\n")
    bad = Workflow.new("built").node("c", workflow="bad.yaml")
    looping = Workflow.new("built").node("c", workflow="self.yaml")

    with Runtime(cli.db, principal="alice") as rt:
        for wf, code in ((bad, "E002"), (looping, "E004")):
            with pytest.raises(WorkflowError) as caught:
                asyncio.run(rt.start(wf, {}, run_id="r1"))
            assert caught.value.code == code
            assert "node 'c': workflow file" in caught.value.detail
        assert rt.store.list_runs() == []
    assert bad.problems()[0].code == "E002"


def test_a_child_in_its_own_folder_uses_its_own_tools_module_of_the_same_name(cli: Cli):
    name = f"tools_{uuid.uuid4().hex[:8]}"  # each folder has a "tools" module of this name
    write(cli.folder, f"{name}.py", "def ping() -> dict:\n    return {'pinged': True}\n")
    write(cli.folder, f"child/{name}.py", "def work() -> dict:\n    return {'worked': True}\n")
    write(
        cli.folder,
        "child/child.yaml",
        f"name: child\ntools:\n  work: {{python: '{name}:work'}}\n"
        "nodes:\n  - {id: w, tool: work}\n",
    )
    write(
        cli.folder,
        "parent.yaml",
        f"name: parent\ntools:\n  ping: {{python: '{name}:ping'}}\n"
        "nodes:\n  - {id: a, tool: ping}\n  - {id: c, workflow: child/child.yaml}\n"
        "edges:\n  - {from: a, to: c}\n",
    )

    checked = cli.raw("check", "parent.yaml", "--json")
    ran = cli("run", "parent.yaml", "--run-id", "r1")

    assert checked.exit_code == 0, checked
    assert ran.exit_code == 0, ran
    assert ran.data["context"] == {"pinged": True, "worked": True}


def test_a_loaded_file_is_judged_once_its_children_included(tmp_path: Path):
    write(tmp_path, "subgraph_tools.py", TOOLS)
    write(tmp_path, "leaf.yaml", LEAF)
    path = write(tmp_path, "top.yaml", "name: top\nnodes:\n  - {id: one, workflow: leaf.yaml}\n")

    loaded = load_workflow(path)
    (tmp_path / "leaf.yaml").unlink()  # plan() does not read the child file again

    assert [node.id for node in loaded.plan().nodes] == ["one"]
    with pytest.raises(WorkflowError):
        load_workflow(path)  # a new load judges it anew
