"""A context that grows every step: the work on the checkpoint does not grow with it.

Up to epoch 2 every checkpoint's whole canonical bytes were built and hashed (O(state)
per step, issue #22). From epoch 3 (``core.merkle``) a durable run hashes only what
changed: the bytes fed to SHA-256 per checkpoint stay bounded as the list grows. Counted
(bytes, not time) through a real run on a real SQLite file.
"""

from __future__ import annotations

import hashlib
import itertools
from pathlib import Path
from typing import Any

import pytest

import plait.core.merkle as merkle
from plait import Runtime, Workflow

STEPS = 400


def growing(hashed: list[int], counter: list[int]) -> Workflow:
    def grow(i: int) -> dict[str, Any]:
        hashed.append(counter[0])  # bytes hashed for checkpoints before this step
        return {"i": i + 1, "log": f"{i:06d}" * 170}  # about 1 KB more per step

    def done() -> dict[str, Any]:
        return {}

    return (
        Workflow.new("grow")
        .node("grow", tool=grow)
        .node("done", tool=done)
        .edge("grow", "grow", when=f"i < {STEPS}", max_cycles=STEPS)
        .edge("grow", "done", when=f"i >= {STEPS}")
        .reducer("log", "append")
        .budget(max_supersteps=STEPS + 10)
    )


def test_bytes_hashed_per_checkpoint_stay_bounded_as_the_context_grows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = [0]

    def counting(data: bytes) -> Any:
        counter[0] += len(data)
        return hashlib.sha256(data)

    monkeypatch.setattr(merkle, "sha256", counting)
    hashed: list[int] = []
    with Runtime(f"sqlite:///{tmp_path / 'p.db'}", principal="alice") as rt:
        result = rt.run_sync(growing(hashed, counter), {"i": 0})
        assert result.status == "completed"
        assert rt.verify(result.run_id).verified
    per_step = [b - a for a, b in itertools.pairwise(hashed)]
    early = sum(per_step[40:80]) / 40  # the context holds 40-80 KB
    late = sum(per_step[-40:]) / 40  # 360-400 KB
    assert early > 0 and late < 1.5 * early, (early, late)
    assert late < 8_000  # the new string, its page, the trees above it, the small rest
