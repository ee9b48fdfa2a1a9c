"""Calibration files (``plait decide calibrate``): the fitted threshold a manifest pins.

A calibration file is JSON: ``{"backend", "model", "threshold", "max_tools", "precision",
"recall", "examples", "held_out"}``. A workflow names it as ``llm.decide.calibration``;
the manifest pins its sha256 and threshold, and only then is the backend ``calibrated``
(allowed to omit transcript entries, its threshold the offer's default ``min_p``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from plait.core.errors import PlaitError

RECALL_TARGET = 0.95


def read_calibration(path: Path) -> dict[str, Any]:
    """The pinned form of a calibration file: ``{file, sha256, threshold}`` (PLAIT-E038
    when it is missing or not a calibration file)."""
    try:
        raw = path.read_bytes()
        data = json.loads(raw)
    except (OSError, ValueError) as exc:
        raise PlaitError("E038", f"calibration file '{path}': cannot read it: {exc}") from None
    threshold = data.get("threshold") if isinstance(data, dict) else None
    if not isinstance(threshold, int | float) or isinstance(threshold, bool):
        raise PlaitError("E038", f"calibration file '{path}': no numeric 'threshold'")
    if not 0 <= threshold <= 1:
        raise PlaitError("E038", f"calibration file '{path}': threshold {threshold} not in [0, 1]")
    return {
        "file": path.name,
        "sha256": hashlib.sha256(raw).hexdigest(),
        "threshold": float(threshold),
    }


def select(scores: Sequence[float], max_tools: int, threshold: float) -> list[int]:
    """The items an offer keeps: the top ``max_tools`` scoring at least ``threshold``
    (ties by position), as the core's C1 picks them."""
    ranked = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    return sorted(i for i in ranked[:max_tools] if scores[i] >= threshold)


def measure(
    examples: Sequence[tuple[Sequence[float], set[int]]], max_tools: int, threshold: float
) -> dict[str, float]:
    """Micro-averaged precision and recall of ``select`` over labelled examples."""
    hits = chosen = relevant = 0
    for scores, wanted in examples:
        picked = set(select(scores, max_tools, threshold))
        hits += len(picked & wanted)
        chosen += len(picked)
        relevant += len(wanted)
    return {
        "precision": round(hits / chosen, 4) if chosen else 0.0,
        "recall": round(hits / relevant, 4) if relevant else 0.0,
        "mean_offered": round(chosen / len(examples), 2) if examples else 0.0,
    }


def fit(
    examples: Sequence[tuple[Sequence[float], set[int]]], max_tools: int
) -> tuple[float, dict[str, float]]:
    """The highest threshold keeping recall >= RECALL_TARGET on ``examples`` (at most
    ``max_tools`` per offer), and its measurements."""
    candidates = sorted({round(s, 4) for scores, _ in examples for s in scores}, reverse=True)
    best = 0.0
    for threshold in candidates:
        if measure(examples, max_tools, threshold)["recall"] >= RECALL_TARGET:
            best = threshold
            break
    return best, measure(examples, max_tools, best)


def load_examples(path: Path) -> list[dict[str, Any]]:
    """Labelled examples, one JSON object a line: ``instruction``, ``tools`` (a list of
    ``{name, description, input_schema}``) or ``catalogue`` (a JSON file of that list,
    relative to the examples file), and ``relevant`` (tool names). PLAIT-E038 names the
    line of a malformed one."""
    catalogues: dict[str, list[Mapping[str, Any]]] = {}
    found = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise PlaitError("E038", f"examples file '{path}': cannot read it: {exc}") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            example = json.loads(line)
            tools = example.get("tools")
            if tools is None:
                name = str(example["catalogue"])
                if name not in catalogues:
                    catalogues[name] = json.loads((path.parent / name).read_text("utf-8"))
                tools = catalogues[name]
            names = [str(t["name"]) for t in tools]
            relevant = {str(r) for r in example["relevant"]}
            if not relevant <= set(names):
                raise ValueError(f"relevant tools not in its catalogue: {relevant - set(names)}")
            found.append(
                {"instruction": str(example["instruction"]), "tools": tools, "relevant": relevant}
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise PlaitError("E038", f"examples file '{path}': line {number}: {exc}") from None
    if len(found) < 5:
        raise PlaitError("E038", f"examples file '{path}': {len(found)} examples, need 5 or more")
    return found


async def score_examples(
    backend: Any, examples: Sequence[Mapping[str, Any]]
) -> list[tuple[list[float], set[int]]]:
    """Each example's tool scores (in catalogue order) and its relevant tools' indexes."""
    from plait.decide.backends import tool_text

    scored = []
    for example in examples:
        tools = example["tools"]
        texts = [tool_text(t["name"], t.get("description"), t.get("input_schema")) for t in tools]
        scores = await backend.score(example["instruction"], texts)
        wanted = {i for i, t in enumerate(tools) if t["name"] in example["relevant"]}
        scored.append(([float(s) for s in scores], wanted))
    return scored


def calibrate(
    scored: Sequence[tuple[list[float], set[int]]], max_tools: int, backend: str, model: str
) -> dict[str, Any]:
    """Fit the threshold on four fifths of the examples; measure it on the other fifth
    (every fifth example, so the split is the same on every run)."""
    train = [e for i, e in enumerate(scored) if i % 5 != 4]
    held_out = [e for i, e in enumerate(scored) if i % 5 == 4]
    threshold, fitted = fit(train, max_tools)
    return {
        "backend": backend,
        "model": model,
        "threshold": threshold,
        "max_tools": max_tools,
        "examples": len(scored),
        "train": fitted,
        "held_out": {"examples": len(held_out), **measure(held_out, max_tools, threshold)},
    }
