"""What a parked run keeps at rest (issue #22 target 5): its parking checkpoints are
stored deflated, its pinned workflow is shared with other runs of the workflow, and it
resumes and verifies as any run does."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

from plait import Runtime, Workflow


def start() -> dict[str, Any]:
    return {"order": 42, "amount": 1999}


def finish(approved: bool) -> dict[str, Any]:
    return {"shipped": approved}


def _workflow() -> Workflow:
    return (
        Workflow.new("parked")
        .node("start", tool=start)
        .node("approve", ask={"prompt": "Ship order 42?", "approval": True})
        .node("finish", tool=finish)
        .edge("start", "approve")
        .edge("approve", "finish")
    )


def _payloads(db: Path, run_id: str, item: str) -> list[str]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT payload FROM journal WHERE run_id = ? AND item = ? ORDER BY seq",
            (run_id, item),
        ).fetchall()
    return [row[0] for row in rows]


def test_a_parked_run_keeps_its_checkpoints_deflated_and_resumes_and_verifies(
    tmp_path: Path,
) -> None:
    db = tmp_path / "plait.db"
    wf = _workflow()
    with Runtime(f"sqlite:///{db}", principal="owner") as rt:
        parked = [asyncio.run(rt.start(wf, {}, run_id=f"r{i}")) for i in range(2)]
        assert [r.status for r in parked] == ["parked", "parked"]
        at_rest = _payloads(db, "r1", "checkpoint")
        assert at_rest and all(p.startswith('{"z":') for p in at_rest)
        # The second run stores none of the pinned workflow the first one stored.
        assert rt.store.stored_bytes("r1") < 1_600 < rt.store.stored_bytes("r0")

        rt.respond("r1", parked[1].asks[0]["ask_id"], approve=True, by="approver")
        done = asyncio.run(rt.resume("r1", workflow=wf))
        assert done.status == "completed"
        # Checkpoints written while the run moves are kept whole, as before.
        after = _payloads(db, "r1", "checkpoint")[len(at_rest) :]
        assert after and all(p.startswith('{"j":') for p in after)
        assert rt.verify("r1", workflow=wf).verified
        assert rt.verify("r0", workflow=wf).verified
