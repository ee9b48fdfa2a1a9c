"""Writing the decision tests' workflows and running the CLI on them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from inprocess import run_plait

HERE = Path(__file__).parent
PLAIT = str(Path(sys.executable).parent / "plait")
TOOLS = {
    "lookup_order": "Look up an order: items, shipping status, payment.",
    "issue_refund": "Refund a payment of an order to the customer.",
    "restart_service": "Restart a service (a Kubernetes deployment).",
    "list_files": "List the files and folders in a directory.",
}


def workflow(
    folder: Path,
    answers: list[dict[str, Any]],
    decide: dict[str, Any],
    *,
    tools: list[str] | None = None,
    instruction: str = "The order A-1 arrived broken: refund the customer.",
    **llm: Any,
) -> Path:
    """A one-agent workflow in ``folder`` with ``llm.decide: decide``."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(HERE / "tools.py", folder / "tools.py")
    names = tools or list(TOOLS)
    wf = {
        "name": "desk",
        "nodes": [{"id": "agent", "instruction": instruction, "tools": names}],
        "tools": {n: {"python": f"tools:{n}", "description": TOOLS.get(n, n)} for n in names},
        "llm": {"model": "scripted:answers.json", "decide": decide, **llm},
    }
    (folder / "answers.json").write_text(json.dumps(answers))
    (folder / "workflow.yaml").write_text(yaml.safe_dump(wf, sort_keys=False))
    return folder / "workflow.yaml"


def scores(folder: Path, name: str = "decide.json", **body: Any) -> str:
    (folder / name).write_text(json.dumps(body))
    return f"scripted:{name}"


def plait(folder: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PLAIT_")}
    return run_plait(
        [PLAIT, *args], cwd=folder, capture_output=True, text=True, env={**clean, **env}
    )


def run(folder: Path, run_id: str = "r", **env: str) -> subprocess.CompletedProcess[str]:
    db = f"sqlite:///{folder}/plait.db"
    return plait(folder, "run", "workflow.yaml", "--db", db, "--run-id", run_id, "--json", **env)


def trace(folder: Path, run_id: str = "r") -> list[dict[str, Any]]:
    done = plait(folder, "trace", run_id, "--db", f"sqlite:///{folder}/plait.db", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    entries: list[dict[str, Any]] = json.loads(done.stdout)["entries"]
    return entries


def verify(folder: Path, run_id: str = "r") -> subprocess.CompletedProcess[str]:
    return plait(folder, "verify", run_id, "--db", f"sqlite:///{folder}/plait.db")


def of_kind(entries: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in entries if e["kind"] == kind]
