"""Subgraph nodes (child runs) and Send fan-out as a user sees them through the CLI
(docs/fanout-and-subgraphs.md, docs/architecture.md §3.5 fail-fast, §3.8, §3.9)."""

from __future__ import annotations

from contract.support import Cli

TOOLS = (
    "tools:\n"
    '  one: {python: "contract_tools:one"}\n'
    '  boom: {python: "contract_tools:boom"}\n'
    '  lookup: {python: "contract_tools:lookup"}\n'
)


def _write(cli: Cli, name: str, text: str) -> None:
    (cli.folder / name).write_text(text)


def _children(cli: Cli, parent: str) -> dict[str, str]:
    runs = cli("runs").data["runs"]
    return {r["run_id"]: r["status"] for r in runs if r["run_id"].startswith(parent + "~")}


def test_a_failure_beside_a_parked_child_cancels_the_child_and_asks_nobody(cli: Cli):
    # §3.5 fail-fast: nobody is asked to answer for a run that has failed, and it does not
    # park. The child parked on its ask while `bad` failed beside it, and the ask node
    # `sure` was dispatched in the same wave: the parent fails at once, naming `bad`, the
    # child is canceled, and no ask (its own or the child's) is left pending.
    _write(
        cli,
        "asking.yaml",
        "name: asking\n"
        "nodes:\n"
        "  - {id: q, ask: {prompt: Which account?}}\n"
        "  - {id: after, tool: one}\n"
        "edges: [{from: q, to: after}]\n" + TOOLS,
    )
    _write(
        cli,
        "parent.yaml",
        "name: parent\n"
        "nodes:\n"
        "  - {id: a, tool: one}\n"
        "  - {id: sub, workflow: asking.yaml}\n"
        "  - {id: bad, tool: boom}\n"
        "  - {id: sure, ask: {prompt: Sure?}}\n"
        "edges: [{from: a, to: sub}, {from: a, to: bad}, {from: a, to: sure}]\n" + TOOLS,
    )

    done = cli.run("parent.yaml", "p1")

    assert done.exit_code == 1, done
    assert done.data["status"] == "failed" and done.data["asks"] == []
    assert done.data["outcome"]["node"] == "bad", done
    assert done.data["outcome"]["detail"] == "ExecutorError: ValueError: kaboom"
    assert cli("asks", "p1").data["asks"] == [] and cli("asks").data["asks"] == []
    children = _children(cli, "p1")
    assert list(children.values()) == ["canceled"], children
    child = cli("show", next(iter(children))).data
    assert child["outcome"]["reason"] == "parent run 'p1' failed"
    assert cli("resume", "p1").data["outcome"]["node"] == "bad"
    report = cli("verify", "--all").data
    assert report["failed"] == 0 and report["verified"] == 2, report


def test_a_child_that_fails_names_its_outcome_as_show_words_it(cli: Cli):
    # "fails the node with ExecutorError: child run '<id>' ended <status>: <outcome>" — the
    # outcome's fields as `plait show` prints them, not a Python repr of the core's outcome.
    _write(cli, "failing.yaml", "name: failing\nnodes:\n  - {id: c1, tool: boom}\n" + TOOLS)
    _write(
        cli,
        "parent.yaml",
        "name: parent\n"
        "nodes:\n"
        "  - {id: a, tool: one}\n"
        "  - {id: sub, workflow: failing.yaml}\n"
        "edges: [{from: a, to: sub}]\n" + TOOLS,
    )

    done = cli.run("parent.yaml", "p1")

    assert done.exit_code == 1, done
    (child,) = _children(cli, "p1")
    assert done.data["outcome"] == {
        "kind": "failed",
        "node": "sub",
        "detail": f"ExecutorError: child run '{child}' ended failed:"
        " node=c1, detail=ExecutorError: ValueError: kaboom",
    }


def test_a_canceled_child_is_named_by_its_cancel_detail(cli: Cli):
    _write(
        cli,
        "asking.yaml",
        "name: asking\nnodes:\n  - {id: q, ask: {prompt: Which account?}}\n" + TOOLS,
    )
    _write(
        cli,
        "parent.yaml",
        "name: parent\nnodes:\n  - {id: sub, workflow: asking.yaml}\n" + TOOLS,
    )
    assert cli.run("parent.yaml", "p1").exit_code == 3
    child = cli.only_ask("p1")["run_id"]
    assert cli("cancel", child, "--reason", "not needed").exit_code == 0

    done = cli("resume", "p1")

    assert done.exit_code == 1, done
    assert done.data["outcome"]["detail"] == (
        f"ExecutorError: child run '{child}' ended canceled: detail=canceled by alice: not needed"
    )


def test_a_send_task_with_an_input_that_is_not_an_object_fails_naming_the_tool(cli: Cli):
    # A Python tool's parameters are filled from the task input's keys: a number has none.
    _write(
        cli,
        "fan.yaml",
        "name: fan\n"
        "nodes:\n"
        "  - {id: plan, tool: plan}\n"
        "  - {id: look, tool: lookup}\n"
        "edges: [{from: plan, to: look}]\n" + TOOLS + '  plan: {python: "fan_tools:plan"}\n',
    )
    _write(
        cli,
        "fan_tools.py",
        'def plan() -> dict:\n    return {"$send": [{"node": "look", "input": 5}]}\n',
    )

    done = cli.run("fan.yaml", "f1")

    assert done.exit_code == 1, done
    assert done.data["outcome"] == {
        "kind": "failed",
        "node": "look",
        "detail": "ExecutorError: ToolArgumentError: lookup() takes an object of arguments,"
        " got int (task /000000)",
    }
