"""Reading a run back: its current standing (``show``), its effects (``trace``), and where
its governed flows stand (``explain``).

Read-only views over the journal, shaped as CONTRACT.md's ``--json`` output.
"""

from __future__ import annotations

from typing import Any

from plait.core.canonical import loads
from plait.core.state import SchedulerState
from plait.driver.wave import RunResult
from plait.governance import FlowRuntime, flow_from_dict
from plait.governance import explain as explain_flow
from plait.store.base import Store


def show(store: Store, run_id: str) -> RunResult:
    """The run as of its latest checkpoint (a queued run shows its input context)."""
    info = store.get_run(run_id)
    meta = store.latest_checkpoint(run_id)
    if meta is None:
        manifest = store.manifests(run_id)[0]
        value = manifest.get("input")
        context = value if isinstance(value, dict) else ({} if value is None else {"input": value})
        return RunResult(run_id, info.status, None, context, {}, [])
    state = SchedulerState.from_json(loads(store.read_checkpoint(run_id, meta.seq))["scheduler"])
    asks = [entry["ask"] for _, entry in sorted(state.pending_asks.items()) if "ask" in entry]
    result = RunResult.of(state, asks)
    if result.status == "running" and info.status != "running":
        result.status = info.status  # e.g. interrupted: the row knows better than the state
    return result


NO_USAGE = {"input_tokens": 0, "output_tokens": 0, "usd_micros": 0}
"""The ``usage`` of a trace entry that charged nothing (pending, failed or refused)."""


def trace(store: Store, run_id: str) -> list[dict[str, Any]]:
    """Every effect in dispatch order (the order intents were journaled); every entry has
    the fields of CONTRACT.md, ``usage`` included."""
    journal = store.load_journal(run_id)
    redeliveries: dict[Any, int] = {}
    for record in journal.records:
        if record.kind == "redelivery":
            key = tuple(sorted(record.body["key"].items()))
            redeliveries[key] = redeliveries.get(key, 0) + 1
    # Governance refusals make no effect: they live in the transcript the next turn sends.
    refusals: dict[str, dict[str, Any]] = {}
    for intent in journal.intents:
        if intent.key.kind == "llm" and isinstance(intent.input, dict):
            for message in intent.input.get("messages", ()):
                if isinstance(message, dict) and message.get("refused"):
                    refusals.setdefault(str(message.get("tool_call_id")), message)
    entries: list[dict[str, Any]] = []
    for intent in journal.intents:
        key = intent.key
        result = journal.results.get(key)
        entry: dict[str, Any] = {
            "superstep": intent.superstep,
            "node": key.node,
            "task_path": key.task_path,
            "attempt": key.attempt,
            "effect_seq": key.effect_seq,
            "kind": intent.executor if intent.executor in ("ask", "timer") else key.kind,
            "input": intent.input,
            "redeliveries": redeliveries.get(tuple(sorted(key.to_json().items())), 0),
        }
        if result is None:
            entry["status"] = "pending"
            entry["usage"] = dict(NO_USAGE)
        elif "Completed" in result.outcome:
            body = result.outcome["Completed"]
            entry["status"] = "answered" if intent.executor == "ask" else "completed"
            entry["result"] = body.get("result")
            entry["usage"] = body.get("usage") or dict(NO_USAGE)
        else:
            entry["status"] = "failed"
            entry["failure"] = result.outcome["Failed"]
            entry["usage"] = dict(NO_USAGE)  # a failed effect charges nothing
        entries.append(entry)
        if key.kind == "llm" and isinstance(entry.get("result"), dict):
            for call in entry["result"].get("tool_calls") or ():
                refused = refusals.get(str(call.get("id")))
                if refused is not None:
                    entries.append(_refused_entry(entry, call, refused))
    return entries


def _refused_entry(
    turn: dict[str, Any], call: dict[str, Any], refused: dict[str, Any]
) -> dict[str, Any]:
    """A ``refused`` trace entry: follows the turn that made the call; no effect of its own."""
    return {
        "superstep": turn["superstep"],
        "node": turn["node"],
        "task_path": turn["task_path"],
        "attempt": turn["attempt"],
        "effect_seq": turn["effect_seq"],
        "kind": "refused",
        "status": "refused",
        "input": {"tool": call.get("name"), "arguments": call.get("arguments")},
        "result": {"tool_call_id": call.get("id"), "reason": refused.get("content")},
        "usage": dict(NO_USAGE),
        "redeliveries": 0,
    }


def explain(store: Store, run_id: str) -> dict[str, Any]:
    """For each governed abstract node in flight at the latest checkpoint, by node id:
    the active steps, the allowed and offered tools, and why each blocked tool is blocked
    (``plait.governance.explain``). Empty when no governed node is in flight.

    The flow and the node's tools come from the pinned manifest, the flow's runtime from
    the node's ``AbstractFlow`` in the checkpoint; the workflow file is never reread.
    """
    meta = store.latest_checkpoint(run_id)
    if meta is None:
        return {}
    state = SchedulerState.from_json(loads(store.read_checkpoint(run_id, meta.seq))["scheduler"])
    nodes = store.manifests(run_id)[0]["workflow"]["nodes"]
    found: dict[str, Any] = {}
    for key in sorted(state.abstract_flows, key=lambda k: state.abstract_flows[k].node):
        flow = state.abstract_flows[key]
        if flow.governance is None or not 0 <= flow.node < len(nodes):
            continue
        node = nodes[flow.node]
        spec = node["executor"]["spec"]
        governed = spec.get("flow")
        if governed is None:
            continue
        tools = [str(t) for t in spec.get("tools", ())]
        shown = explain_flow(
            flow_from_dict(governed),
            FlowRuntime.from_json(flow.governance["rt"]),
            tools,
        )
        if flow.refused:
            shown["refused"] = len(flow.refused)
        found[str(node["id"])] = shown
    return found
