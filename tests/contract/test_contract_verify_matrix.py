"""`plait verify RUN --workflow FILE` over a matrix (issue #16, part 4, acceptance): for a
plain tool run, an LLM run, a governed run and a Send fan-out run, a change at the start, in
the middle and at the end of the recorded run is found where the new version FIRST decides
otherwise (superstep and node exactly, and what kind of difference), and cosmetic edits
(a description, comments, another layout, YAML turned into JSON) replay identically.

The runs, as recorded here (superstep: node, effects):

- tool, examples/orders: 1 load; 2-5 price_line (four lines, a self-loop); 6 decide; 7 ship.
- LLM, flows/agent.yaml: 1 agent (effect 0 a turn, 1 the lookup tool, 2 a turn); 2 finish.
- governed, examples/support (answers.json follows the flow): 1 agent, effects 0-10,
  turns at even effects (0 in step verify, 4 in offer, 10 the last, after wrap_up), tools
  at odd ones; answers_misbehaving.json: refusals at effects 0, 7, 8 and 11.
- Send, fanout.yaml with n = 3: 1 spawn; 2 square x3 (tasks /000000-/000002); 3 join;
  4 finish.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from contract.support import Cli

ROOT = Path(__file__).resolve().parents[2]
SOURCES = {
    "orders": ROOT / "examples" / "orders",
    "support": ROOT / "examples" / "support",
    "fanout": ROOT / "tests" / "fixtures" / "journals" / "workflows" / "hitl",
}


@dataclass(frozen=True)
class Recorded:
    """A workflow of the matrix and how to record one run of it."""

    file: str  # relative to the test's folder
    args: tuple[str, ...] = ()
    flow: str | None = None  # the governance flow file an edit may change instead


TOOL = Recorded("orders/workflow.yaml")
LLM = Recorded("agent.yaml")
GOVERNED = Recorded("support/workflow.yaml", flow="support/flows/support.yaml")
MISBEHAVING = Recorded(
    "support/workflow.yaml",
    ("--model", "scripted:answers_misbehaving.json"),
    flow="support/flows/support.yaml",
)
SEND = Recorded("fanout/fanout.yaml", ("--input", '{"n": 3}'))


@dataclass(frozen=True)
class Change:
    """One edit of the recorded version and where verify must say it first diverges."""

    run: Recorded
    old: str
    new: str
    superstep: int
    node: str
    what: tuple[str, ...]  # fragments the report's `what` must hold
    in_flow: bool = False  # the edit is in the governance flow file


CHANGES = {
    # --- a plain tool workflow ---------------------------------------------------------
    "tool-start-edge-condition": Change(
        TOOL,
        "{from: load, to: price_line}",
        "{from: load, to: price_line, when: 'remaining > 4'}",
        1,
        "price_line",
        ("checkpoint", "scheduler.node_state", "decisions.edges"),
    ),
    "tool-middle-reducer": Change(
        TOOL,
        "total_cents: sum",
        "total_cents: max",  # 1250 then 4999: the sum and the max part at the second line
        3,
        "price_line",
        ("checkpoint", "scheduler.context.total_cents"),
    ),
    "tool-middle-loop-condition": Change(
        TOOL,
        "when: 'remaining > 0'",
        "when: 'remaining > 1'",  # the fourth pricing leaves 1: no edge fires any more
        4,
        "price_line",
        ("checkpoint", "scheduler.node_state"),
    ),
    "tool-end-tool-of-the-last-node": Change(
        TOOL,
        "    tool: ship\n",
        "    tool: flag_for_review\n",
        7,
        "ship",
        ("tool intent of node 'ship'", "executor ('ship' journaled, 'flag_for_review' replayed)"),
    ),
    # --- an LLM (abstract) node, scripted -------------------------------------------------
    "llm-start-instruction": Change(
        LLM,
        "instruction: Find it.",
        "instruction: Find it now.",
        1,
        "agent",
        ("llm intent of node 'agent' (attempt 1, effect 0)", "input.messages[0].content"),
    ),
    "llm-middle-tool-result-bound": Change(
        LLM,
        'llm: {model: "scripted:models/turns.json"}',
        'llm: {model: "scripted:models/turns.json", tool_result_chars: 5}',
        1,
        "agent",  # the second turn sees the lookup's result cut short
        ("llm intent of node 'agent' (attempt 1, effect 2)", "input.messages[3].content"),
    ),
    "llm-end-results-into-the-context": Change(
        LLM,
        "    tools: [lookup]\n",
        "    tools: [lookup]\n    tool_results_into: log\n",
        1,
        "agent",  # the node's result, merged as the superstep closes
        ("checkpoint", "scheduler.context.log"),
    ),
    "llm-end-tool-of-the-last-node": Change(
        LLM,
        "    tool: finish\n",
        "    tool: lookup\n",
        2,
        "finish",
        ("tool intent of node 'finish'", "executor ('finish' journaled, 'lookup' replayed)"),
    ),
    # --- a governed agent (flows) ---------------------------------------------------------
    "governed-start-first-posture": Change(
        GOVERNED,
        "Verify the customer's identity with lookup_account before anything else.",
        "Verify the customer first.",
        1,
        "agent",
        ("llm intent of node 'agent' (attempt 1, effect 0)", "input.instructions"),
        in_flow=True,
    ),
    "governed-middle-posture-of-offer": Change(
        GOVERNED,
        "Offer a refund the policy allows.",
        "Offer whatever refund you like.",
        1,
        "agent",
        ("llm intent of node 'agent' (attempt 1, effect 4)", "input.instructions"),
        in_flow=True,
    ),
    "governed-end-once-constraint": Change(
        GOVERNED,
        "  - {require: [commit]}\n",
        "  - {require: [commit]}\n  - {once: disclose_policy}\n",
        1,
        "agent",  # only the last turn, after wrap_up, offers disclose_policy again
        ("llm intent of node 'agent' (attempt 1, effect 10)", "input.tools"),
        in_flow=True,
    ),
    "governed-middle-refusal-no-longer-made": Change(
        MISBEHAVING,
        "  - {once: offer_refund}\n",
        "",  # the second offer_refund (effect 7's turn) is admitted, not refused
        1,
        "agent",
        ("llm intent of node 'agent' (attempt 1, effect 8)", "input.messages"),
        in_flow=True,
    ),
    "governed-start-observe-mode": Change(
        MISBEHAVING,
        "steps:\n",
        "mode: observe\nsteps:\n",  # every tool offered from the first turn on
        1,
        "agent",
        ("llm intent of node 'agent' (attempt 1, effect 0)", "input.tools"),
        in_flow=True,
    ),
    # --- a Send fan-out -------------------------------------------------------------------
    "send-start-tool-of-the-spawner": Change(
        SEND,
        "{id: spawn, tool: spawn}",
        "{id: spawn, tool: join}",
        1,
        "spawn",
        ("tool intent of node 'spawn'", "executor ('spawn' journaled, 'join' replayed)"),
    ),
    "send-middle-tool-of-the-tasks": Change(
        SEND,
        "{id: square, tool: square}",
        "{id: square, tool: join}",
        2,
        "square",
        ("tool intent of node 'square' task /000000", "executor ('square' journaled"),
    ),
    "send-middle-reducer-of-the-join": Change(
        SEND,
        "squares: extend",
        "squares: lww",  # the tasks' results merged as one value, not a list
        2,
        "square",
        ("checkpoint", "scheduler.context.squares"),
    ),
    "send-end-edge-condition": Change(
        SEND,
        "{from: join, to: finish}",
        "{from: join, to: finish, when: 'total > 5'}",  # 0 + 1 + 4 = 5: finish never runs
        3,
        "finish",
        ("checkpoint", "scheduler.node_state"),
    ),
}


@pytest.fixture
def matrix(cli: Cli) -> Cli:
    """The test's folder also holds copies of the examples and the fan-out workflow."""
    for name, source in SOURCES.items():
        shutil.copytree(source, cli.folder / name, ignore=shutil.ignore_patterns("__pycache__"))
    return cli


def record(cli: Cli, run: Recorded, run_id: str) -> None:
    done = cli("run", cli.flow(run.file), "--run-id", run_id, *run.args)
    assert done.data["status"] == "completed", done


def edited(cli: Cli, change: Change) -> str:
    """A new version of the run's workflow (and flow) file with the change made, beside it."""
    target = change.run.flow if change.in_flow else change.run.file
    assert target is not None
    source = Path(cli.flow(target))
    text = source.read_text()
    assert text.count(change.old) == 1, f"{change.old!r} is not once in {target}"
    changed = source.with_name("v_" + source.name)
    changed.write_text(text.replace(change.old, change.new))
    workflow = Path(cli.flow(change.run.file))
    if not change.in_flow:
        return str(changed)
    pointing = workflow.read_text().replace(source.name, changed.name)
    version = workflow.with_name("v_" + workflow.name)
    version.write_text(pointing)
    return str(version)


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_verify_workflow_names_the_first_divergence(matrix: Cli, name: str) -> None:
    change = CHANGES[name]
    record(matrix, change.run, "r")
    version = edited(matrix, change)

    done = matrix("verify", "r", "--workflow", version)

    report = done.data
    assert (done.exit_code, report["verified"]) == (1, False), report
    at = report["diverged_at"]
    assert (at["superstep"], at["node"]) == (change.superstep, change.node), report
    for fragment in change.what:
        assert fragment in at["what"], (fragment, report)
    assert report["error"] == f"PLAIT-E009 superstep {change.superstep}: {at['what']}"


# --- cosmetic edits: identical --------------------------------------------------------------


def with_description(path: Path) -> Path:
    data = path.read_text()
    lines = data.splitlines(keepends=True)
    name = next(i for i, line in enumerate(lines) if line.startswith("name:"))
    kept = [line for line in lines if not line.startswith("description:")]
    kept.insert(name + 1, "description: Another description, same meaning.\n")
    return write_beside(path, "described", "".join(kept))


def with_comments(path: Path) -> Path:
    lines = path.read_text().splitlines(keepends=True)
    commented = [  # before each top-level line (a comment inside a block scalar is text)
        line if line[:1].isspace() else f"# a comment before line {i}\n{line}"
        for i, line in enumerate(lines)
    ]
    return write_beside(path, "commented", "# a new header\n" + "".join(commented))


def reformatted(path: Path) -> Path:
    """Another layout: block style throughout, other indentation, keys sorted."""
    value = yaml.safe_load(path.read_text())
    text = yaml.safe_dump(value, default_flow_style=False, indent=4, sort_keys=True, width=60)
    return write_beside(path, "reformatted", text)


def as_json(path: Path) -> Path:
    value = yaml.safe_load(path.read_text())
    target = path.with_name(f"json_{path.stem}.json")
    target.write_text(json.dumps(value, indent=2))
    return target


def write_beside(path: Path, tag: str, text: str) -> Path:
    target = path.with_name(f"{tag}_{path.name}")
    target.write_text(text)
    return target


COSMETIC = {
    "description": with_description,
    "comments": with_comments,
    "reformat": reformatted,
    "yaml-to-json": as_json,
}
RUNS = {"tool": TOOL, "llm": LLM, "governed": GOVERNED, "misbehaving": MISBEHAVING, "send": SEND}


def cosmetic_version(cli: Cli, run: Recorded, edit: str) -> Path:
    """The workflow file edited cosmetically; a governed one's flow file too, and the
    workflow pointed at the edited flow (by its file name, in the same folder)."""
    workflow = Path(cli.flow(run.file))
    if run.flow is None or edit == "description":  # a flow file has no description
        return COSMETIC[edit](workflow)
    flow = COSMETIC[edit](Path(cli.flow(run.flow)))
    value: dict[str, Any] = yaml.safe_load(workflow.read_text())
    for node in value["nodes"]:
        if node.get("flow") == "flows/support.yaml":
            node["flow"] = f"flows/{flow.name}"
    pointed = workflow.with_name("pointed_" + workflow.name)
    pointed.write_text(yaml.safe_dump(value, sort_keys=False))
    return COSMETIC[edit](pointed)


@pytest.mark.parametrize("edit", sorted(COSMETIC))
@pytest.mark.parametrize("kind", sorted(RUNS))
def test_a_cosmetic_edit_replays_identically(matrix: Cli, kind: str, edit: str) -> None:
    run = RUNS[kind]
    record(matrix, run, "r")
    version = cosmetic_version(matrix, run, edit)
    assert version.read_text() != Path(matrix.flow(run.file)).read_text()

    done = matrix("verify", "r", "--workflow", str(version))

    report = done.data
    assert done.exit_code == 0, report
    assert (report["verified"], report["up_to"]) == (True, "terminal"), report
    assert "diverged_at" not in report and "error" not in report
