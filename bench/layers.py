"""How far a call travels: the modules and layers ``Agent.resume`` and ``plait show`` pass.

Not a timing: a count of what the code does, to compare two trees of plait. Every call
into a plait module is recorded (``sys.setprofile``) while one approved ``Agent.resume``
and one ``plait show --json`` run on a fresh SQLite store:

- ``checkpoint_reads``: stored checkpoints read (``SqliteStore.read_checkpoint``);
- ``layer_crossings``: calls from one layer into another;
- ``climbs``: calls from a deeper layer into a shallower one, with which layers;
  the layers, shallow to deep: surfaces (agent, cli, server), workflow, driver,
  models and tools, governance, core, store.

    .venv/bin/python bench/layers.py
    PYTHONPATH=<other tree>/src .venv/bin/python bench/layers.py    # another tree
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable
from types import FrameType
from typing import Any

RANK = {
    "agent": 0,
    "cli": 0,
    "server": 0,
    "workflow": 1,
    "driver": 2,
    "models": 3,
    "tools": 3,
    "governance": 4,
    "core": 5,
    "store": 6,
}


def layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "plait" and len(parts) > 1 else None


def measure(action: Callable[[], Any]) -> dict[str, Any]:
    calls: list[tuple[str, str]] = []
    reads = 0

    def record(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal reads
        module = frame.f_globals.get("__name__", "")
        if event != "call" or not module.startswith("plait"):
            return
        caller = frame.f_back.f_globals.get("__name__", "") if frame.f_back else ""
        calls.append((caller, module))
        if frame.f_code.co_name == "read_checkpoint" and module == "plait.store.sqlite":
            reads += 1

    sys.setprofile(record)
    try:
        action()
    finally:
        sys.setprofile(None)
    crossings = [(layer(a), layer(b)) for a, b in calls if layer(a) in RANK and layer(b) in RANK]
    crossings = [(a, b) for a, b in crossings if a != b]
    climbs = [(a, b) for a, b in crossings if RANK[str(b)] < RANK[str(a)]]
    return {
        "checkpoint_reads": reads,
        "layer_crossings": len(crossings),
        "climbs": len(climbs),
        "climbs_by_layer": sorted({f"{a}->{b}" for a, b in climbs}),
        "modules": len({m for _, m in calls}),
    }


def main() -> None:
    folder = tempfile.mkdtemp()
    os.environ["PLAIT_DB"] = f"sqlite:///{folder}/runs.db"
    os.environ["PLAIT_OTEL"] = "0"
    from typer.testing import CliRunner

    from plait import Agent
    from plait.cli import app

    answers = os.path.join(folder, "answers.json")
    with open(answers, "w") as out:
        calls = [{"name": "refund", "arguments": {"amount": 5}}]
        json.dump([{"tool_calls": calls}, {"text": "done"}], out)
    agent = Agent(f"scripted:{answers}", instructions="Refund.")

    @agent.tool(approval=True)
    def refund(amount: int) -> str:
        return f"refunded {amount}"

    run_id = agent.run_sync("refund 5").run_id
    call = agent.state(run_id).pending_approval_tool_returns[0].tool_call_id
    found = {
        "Agent.resume": measure(
            lambda: agent.resume_sync(run_id, approvals={call: True}, by="bob")
        ),
        "plait show": measure(lambda: CliRunner().invoke(app, ["show", run_id, "--json"])),
    }
    print(json.dumps(found, indent=1))


if __name__ == "__main__":
    main()
