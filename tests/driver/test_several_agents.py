"""Several agents (docs/llm-nodes.md "Several agents"): an agent offered as a tool, a
handoff and a ``$send`` to an abstract node complete, verify, and survive a crash at
every journal boundary of the whole run tree (PLAIT_CRASH_AT=intent:N|result:N, counted
per process across the parent and its child runs), then resume and verify.

Against the same run left uninterrupted: the final context, each run's trace (redelivery
counts aside) and the tokens spent are the same; every tool call ran under the same
idempotency keys, each at most twice (once more only when the crash lost its result);
verify passes on every journal of the tree, to the terminal state.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from inprocess import run_plait
from plait import Runtime
from plait.store import open_store

FLOWS = Path(__file__).parent / "agents"
PLAIT = str(Path(sys.executable).parent / "plait")
KILLED = -signal.SIGKILL
ROOT = "team"


class Case:
    """A copy of agents/ with its own store and count file."""

    def __init__(self, folder: Path) -> None:
        shutil.copytree(FLOWS, folder)
        self.folder = folder
        self.db = f"sqlite:///{folder}/plait.db"
        self.count_file = folder / "count.txt"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PLAIT_")}
        self.env.update(AGENTS_COUNT=str(self.count_file), PLAIT_PRINCIPAL="alice")

    def __call__(self, *args: str, **env: str) -> tuple[int, dict[str, Any]]:
        done = run_plait(
            [PLAIT, *args, "--db", self.db, "--json"],
            cwd=self.folder,
            capture_output=True,
            text=True,
            env={**self.env, **env},
            timeout=120,
        )
        if done.returncode == KILLED:
            return done.returncode, {}
        assert not done.stderr.strip(), done.stderr
        return done.returncode, json.loads(done.stdout)

    def tree(self) -> list[str]:
        with Runtime(self.db) as rt:
            ids = [i.run_id for i in rt.store.list_runs()]
        return sorted(r for r in ids if r == ROOT or r.startswith(ROOT + "~"))

    def intents(self) -> int:
        store = open_store(self.db)
        try:
            return sum(len(store.load_journal(r).intents) for r in self.tree())
        finally:
            store.close()

    def executions(self) -> Counter[str]:
        lines = self.count_file.read_text().splitlines() if self.count_file.exists() else []
        return Counter(lines)

    def outcome(self) -> dict[str, Any]:
        """Each run's trace (redelivery counts aside); every run verifies to its end."""
        with Runtime(self.db) as rt:
            runs = self.tree()
            traces = {
                r: [{k: v for k, v in e.items() if k != "redeliveries"} for e in rt.trace(r)]
                for r in runs
            }
            reports = [rt.verify(r) for r in runs]
        assert [(r.verified, r.up_to) for r in reports] == [(True, "terminal")] * len(runs)
        return traces


def finished(code_and_data: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    code, data = code_and_data
    assert code == 0, data
    assert data["status"] == "completed", data
    return data


def clean_run(case: Case, flow: str) -> dict[str, Any]:
    data = finished(case("run", flow, "--run-id", ROOT))
    executions = case.executions()
    assert set(executions.values()) == {1}
    return {
        "context": data["context"],
        "spent": {k: data["spent"][k] for k in ("input_tokens", "output_tokens")},
        "traces": case.outcome(),
        "executions": executions,
        "intents": case.intents(),
    }


CLEAN: dict[str, dict[str, Any]] = {}


def clean(tmp_path_factory: pytest.TempPathFactory, flow: str) -> dict[str, Any]:
    if flow not in CLEAN:
        CLEAN[flow] = clean_run(Case(tmp_path_factory.mktemp("clean") / "case"), flow)
    return CLEAN[flow]


def test_an_agent_tool_runs_as_a_child_run_charged_to_its_parent(tmp_path: Path) -> None:
    case = Case(tmp_path / "case")
    data = finished(case("run", "agent_tool.yaml", "--run-id", ROOT))
    assert data["context"] == {"lead": "x is 42, says the researcher"}
    # lead's two turns (10+4, 30+6) and the researcher's two (7+3, 11+2), in the parent
    assert (data["spent"]["input_tokens"], data["spent"]["output_tokens"]) == (58, 15)
    [parent, child] = case.tree()
    with Runtime(case.db) as rt:
        call = [e for e in rt.trace(parent) if e["kind"] == "tool"]
        assert [e["input"] for e in call] == [{"input": "what is x?"}]
        assert call[0]["result"] == {"input": "what is x?", "researcher": "42"}
        assert [e["node"] for e in rt.trace(child)] == ["researcher"] * 3
    case.outcome()


def test_a_handoff_passes_the_transcript_and_the_receiver_answers(tmp_path: Path) -> None:
    case = Case(tmp_path / "case")
    data = finished(case("run", "handoff.yaml", "--run-id", ROOT))
    assert data["context"] == {"billing": "refund issued for invoice 7"}
    [_, child] = case.tree()
    with Runtime(case.db) as rt:
        first = rt.trace(child)[0]
    roles = [m["role"] for m in first["input"]["messages"]]
    # billing's instruction (the system text), the input, triage's transfer call, its result
    assert roles == ["system", "user", "assistant", "tool"]
    assert first["input"]["messages"][0]["content"] == "Handle billing questions."
    case.outcome()


def test_send_fans_out_to_agent_loops_and_joins(tmp_path: Path) -> None:
    case = Case(tmp_path / "case")
    data = finished(case("run", "fanout.yaml", "--run-id", ROOT))
    assert data["context"]["writer"] == ["a piece on tides", "a piece on moons"]
    assert data["context"]["pieces"] == 2
    with Runtime(case.db) as rt:
        paths = sorted({e["task_path"] for e in rt.trace(ROOT) if e["node"] == "writer"})
    assert paths == ["/000000", "/000001"]
    case.outcome()


def test_send_fans_out_to_subgraph_child_runs(tmp_path: Path) -> None:
    case = Case(tmp_path / "case")
    data = finished(case("run", "fan_sub.yaml", "--run-id", ROOT))
    assert data["context"]["writer"] == ["a note on tides", "a note on moons"]
    assert len(case.tree()) == 3  # the parent and one child run per task
    case.outcome()


def boundaries(flow: str, intents: int) -> list[Any]:
    return [
        pytest.param(flow, f"{kind}:{n}", id=f"{flow}-{kind}:{n}")
        for n in range(1, intents + 1)
        for kind in ("intent", "result")
    ]


# How many intents each flow journals over its whole tree (asserted against the clean run).
INTENTS = {"agent_tool.yaml": 6, "handoff.yaml": 5, "fanout.yaml": 8, "fan_sub.yaml": 6}


@pytest.mark.parametrize(("flow", "at"), [p for f, n in INTENTS.items() for p in boundaries(f, n)])
def test_a_crash_at_any_boundary_of_an_agent_tree_resumes_and_verifies(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, flow: str, at: str
) -> None:
    expected = clean(tmp_path_factory, flow)
    assert expected["intents"] == INTENTS[flow]
    case = Case(tmp_path / "case")
    code, _ = case("run", flow, "--run-id", ROOT, PLAIT_CRASH_AT=at)
    assert code == KILLED
    data = finished(case("resume", ROOT))
    assert data["context"] == expected["context"]
    assert {k: data["spent"][k] for k in expected["spent"]} == expected["spent"]
    assert case.outcome() == expected["traces"]
    executions = case.executions()
    assert set(executions) == set(expected["executions"])
    assert max(executions.values()) <= 2


def test_a_cycle_of_agents_stops_at_max_agent_depth(tmp_path: Path) -> None:
    case = Case(tmp_path / "case")
    (case.folder / "self.json").write_text(
        json.dumps(
            {
                "solo": [
                    {"tool_calls": [{"name": "solo", "arguments": {"input": "again"}}]},
                    {"text": "done"},
                ]
            }
        )
    )
    (case.folder / "self.yaml").write_text(
        "name: self\nnodes:\n  - {id: solo, instruction: recurse, agents: [solo]}\n"
        "llm: {model: 'scripted:self.json', max_agent_depth: 1}\n"
    )
    data = finished(case("run", "self.yaml", "--run-id", ROOT))
    assert data["context"] == {"solo": "done"}
    [_, child] = case.tree()
    with Runtime(case.db) as rt:
        turns = [e for e in rt.trace(child) if e["kind"] == "llm"]
    refused = turns[1]["input"]["messages"][-1]
    assert refused["is_error"] and "nest at most 1 deep" in refused["content"], refused
    case.outcome()


def lookup(q: str) -> dict:
    """Look something up."""
    return {"found": q}


def test_the_python_builder_offers_agents_and_runs_them_as_child_runs(tmp_path: Path) -> None:
    from plait import Workflow

    wf = (
        Workflow.new("built")
        .node("lead", instruction="Answer.", agents=["researcher"])
        .node("researcher", instruction="Research.", tools=[lookup])
        .model(f"scripted:{FLOWS / 'answers.json'}")
    )
    with Runtime(f"sqlite:///{tmp_path}/p.db", principal="p") as rt:
        result = rt.run_sync(wf, {}, run_id="built")
        assert result.status == "completed"
        assert result.context == {"lead": "x is 42, says the researcher"}
        assert rt.verify("built").verified


def test_a_child_agent_that_parks_parks_its_parent_and_is_answered_through_it(
    tmp_path: Path,
) -> None:
    case = Case(tmp_path / "case")
    text = (case.folder / "agent_tool.yaml").read_text()
    (case.folder / "gated.yaml").write_text(
        text.replace(
            '{python: "agent_tools:lookup"}', '{python: "agent_tools:lookup", approval: true}'
        )
    )
    code, parked = case("run", "gated.yaml", "--run-id", ROOT)
    assert (code, parked["status"]) == (3, "parked"), parked
    [ask] = parked["asks"]
    assert (ask["node"], ask["tool_name"], ask["run_id"].startswith(ROOT + "~")) == (
        "researcher",
        "lookup",
        True,
    )
    code, answered = case("approve", ROOT, ask["ask_id"], PLAIT_PRINCIPAL="bob")
    assert answered["accepted"] is True, answered
    data = finished(case("resume", ROOT))
    assert data["context"] == {"lead": "x is 42, says the researcher"}
    case.outcome()
