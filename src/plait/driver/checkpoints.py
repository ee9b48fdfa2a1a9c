"""Reading checkpoints back: the one place a stored checkpoint is parsed.

A checkpoint is the canonical JSON of ``{"scheduler": <SchedulerState>, "decisions":
<DecisionRecord>}`` (§5.3). Resume, fork, verify and every reader go through these
functions, so a change of the checkpoint's shape is made here once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from plait.core.canonical import dumpb, loads
from plait.core.errors import PlaitError
from plait.core.state import SchedulerState
from plait.store.base import Store


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One checkpoint as stored: the scheduler state and the superstep's decision record."""

    scheduler: SchedulerState
    decisions: dict[str, Any]


def encode_checkpoint(state: SchedulerState, decisions: dict[str, Any]) -> bytes:
    return dumpb({"scheduler": state.to_json(), "decisions": decisions})


def decode_checkpoint(data: bytes, run_id: str = "", seq: int | None = None) -> Checkpoint:
    """``data`` as a ``Checkpoint``; unreadable bytes are PLAIT-E010 naming the run."""
    try:
        value = loads(data)
        return Checkpoint(SchedulerState.from_json(value["scheduler"]), value["decisions"])
    except PlaitError:
        raise
    except Exception as exc:
        raise PlaitError(
            "E010", f"checkpoint {seq} of run '{run_id}' is unreadable: {exc}"
        ) from exc


def read_checkpoint(store: Store, run_id: str, seq: int) -> Checkpoint:
    return decode_checkpoint(store.read_checkpoint(run_id, seq), run_id, seq)


def read_state(store: Store, run_id: str, seq: int) -> SchedulerState:
    """The scheduler state of the checkpoint at journal ``seq``."""
    return read_checkpoint(store, run_id, seq).scheduler


def latest_state(store: Store, run_id: str) -> SchedulerState | None:
    """The state of the run's latest checkpoint; None before its first."""
    meta = store.latest_checkpoint(run_id)
    return None if meta is None else read_state(store, run_id, meta.seq)


def differing_fields(expected: bytes, produced: bytes) -> list[str]:
    """Dotted paths (two levels deep) where two stored checkpoints differ, sorted (what
    verify names when a replay's checkpoint is not the journal's)."""
    a, b = loads(expected), loads(produced)
    fields: list[str] = []
    for part in ("scheduler", "decisions"):
        left, right = a.get(part, {}), b.get(part, {})
        for name in sorted(set(left) | set(right)):
            if left.get(name) != right.get(name) or type(left.get(name)) is not type(
                right.get(name)
            ):
                lv, rv = left.get(name), right.get(name)
                if isinstance(lv, dict) and isinstance(rv, dict):
                    subs = sorted(k for k in set(lv) | set(rv) if lv.get(k) != rv.get(k))
                    fields.extend(f"{part}.{name}.{k}" for k in subs[:5])
                    if not subs:
                        fields.append(f"{part}.{name}")
                else:
                    fields.append(f"{part}.{name}")
    return fields or ["bytes"]


def first_node_differing(
    expected: bytes, produced: bytes, node_ids: list[str], edge_sources: Sequence[int] = ()
) -> str | None:
    """The first node whose state, generation or attempt differs between two stored
    checkpoints, else the node of the first pending ask that differs, else the first node
    whose results the superstep merged when only the context differs (what ``verify
    --workflow`` names where a new version decides otherwise: a changed reducer or
    ``tool_results_into`` changes nothing but the context).

    ``edge_sources``: the source node of each edge, by edge index; a superstep that merged
    Send tasks' results names no node of its own, only the edges it then decided."""
    a = loads(expected).get("scheduler", {})
    b = loads(produced).get("scheduler", {})
    for field in ("node_state", "node_gen", "attempt"):
        left, right = a.get(field) or [], b.get(field) or []
        for i in range(max(len(left), len(right))):
            if i >= len(left) or i >= len(right) or left[i] != right[i]:
                return _node_at(node_ids, i)
    asks_a, asks_b = a.get("pending_asks") or {}, b.get("pending_asks") or {}
    for ask_id in sorted(set(asks_a) | set(asks_b)):
        if asks_a.get(ask_id) != asks_b.get(ask_id):  # an ask of the node differs
            return _node_at(node_ids, (asks_a.get(ask_id) or asks_b.get(ask_id) or {}).get("node"))
    if {**a, "context": None} != {**b, "context": None}:
        return None  # not the context alone (e.g. a plan of another shape): no node to blame
    decisions = loads(expected).get("decisions", {})
    for index, _gen in decisions.get("dispatched") or []:
        return _node_at(node_ids, index)
    for edge, *_ in decisions.get("edges") or []:
        if isinstance(edge, int) and 0 <= edge < len(edge_sources):
            return _node_at(node_ids, edge_sources[edge])
    return None


def _node_at(node_ids: list[str], index: object) -> str | None:
    if isinstance(index, int) and 0 <= index < len(node_ids):
        return str(node_ids[index])
    return None
