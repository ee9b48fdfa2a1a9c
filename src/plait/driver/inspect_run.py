"""Reading a run's effects back (``trace``) and where its governed flows stand (``explain``).

Both answer from a ``RunView`` (the journal and checkpoints read once), shaped as
CONTRACT.md's ``--json`` output.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from plait.core.names import CALL_PREFIX
from plait.core.state import OpenPhase

if TYPE_CHECKING:
    from plait.driver.run_view import RunView


NO_USAGE = {"input_tokens": 0, "output_tokens": 0, "usd_micros": 0}
"""The ``usage`` of a trace entry that charged nothing (pending, failed or refused)."""

CallKey = tuple[str, str, int, str]
"""A model's tool call within one attempt of a loop: (node id, task path, attempt, call id)."""
TurnKey = tuple[str, str, int, int]
"""One turn of a loop: (node id, task path, attempt, effect_seq)."""


def trace(view: RunView) -> list[dict[str, Any]]:
    """Every effect in dispatch order (the order intents were journaled); every entry has
    the fields of CONTRACT.md, ``usage`` included. A refused call follows the turn that
    made it; in observe mode, that turn's entry lists the calls enforce mode would have
    refused under ``violations``."""
    journal = view.journal
    redeliveries: dict[Any, int] = {}
    for record in journal.records:
        if record.kind == "redelivery":
            key = tuple(sorted(record.body["key"].items()))
            redeliveries[key] = redeliveries.get(key, 0) + 1
    notes = _Notes()
    for intent in journal.intents:
        key = intent.key
        if key.kind == "llm" and isinstance(intent.input, dict):
            notes.read(key.node, key.task_path, key.attempt, intent.input.get("messages", ()))
    notes.read_in_flight(view)
    notes.read_decisions(view)
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
            failure = result.outcome["Failed"]  # its cause and detail (CONTRACT.md)
            entry["failure"] = {"cause": failure["cause"], "detail": failure["detail"]}
            entry["usage"] = dict(NO_USAGE)  # a failed effect charges nothing
        _name_what(entry, intent.executor)
        entries.append(entry)
        if key.kind == "llm" and isinstance(entry.get("result"), dict):
            entries += notes.after_turn(entry)
    return entries


def activity(entries: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What a run's effects add up to, read from the journal (so it also counts a loop in
    flight, which the last checkpoint's ``spent`` does not yet): model turns, tool calls
    by tool, tokens and cost. None for a run without model turns (no agent in it)."""
    turns = [e for e in entries if e["kind"] == "llm"]
    calls = [e for e in entries if e["kind"] == "tool"]
    if not turns:
        return None
    by_tool: dict[str, int] = {}
    for call in calls:
        by_tool[call["tool"]] = by_tool.get(call["tool"], 0) + 1
    usage = [e["usage"] for e in entries]
    return {
        "turns": len(turns),
        "tool_calls": len(calls),
        "tools": dict(sorted(by_tool.items())),
        "input_tokens": sum(int(u.get("input_tokens") or 0) for u in usage),
        "output_tokens": sum(int(u.get("output_tokens") or 0) for u in usage),
        "usd_micros": sum(int(u.get("usd_micros") or 0) for u in usage),
    }


def _name_what(entry: dict[str, Any], executor: str) -> None:
    """A tool entry names its tool (``tool``); a model turn carries its text (``text``) and
    the tools it called (``calls``), so a reader need not dig through ``result``."""
    if entry["kind"] == "tool":
        entry["tool"] = executor.removeprefix(CALL_PREFIX)
        return
    result = entry.get("result")
    if entry["kind"] == "llm" and isinstance(result, dict):
        entry["text"] = result.get("text")
        calls = result.get("tool_calls") or ()
        entry["calls"] = [c.get("name") for c in calls if isinstance(c, dict)]


class _Notes:
    """What governance decided about a loop's calls without making an effect: refusals and
    observe-mode violations, gathered from the transcripts the journal holds (every later
    turn's request, every summarizer's) and from the loops in flight at the latest
    checkpoint (a decision no later turn carried yet). Each is listed once."""

    def __init__(self) -> None:
        self.refused: dict[CallKey, dict[str, Any]] = {}
        self.violations: dict[CallKey, dict[str, Any]] = {}
        self.final: dict[TurnKey, list[dict[str, Any]]] = {}

    def read(self, node: str, task_path: str, attempt: int, messages: Any) -> None:
        for message in messages if isinstance(messages, list) else ():
            if not isinstance(message, dict) or message.get("role") != "tool":
                continue
            call: CallKey = (node, task_path, attempt, str(message.get("tool_call_id")))
            if message.get("refused"):
                self.refused.setdefault(call, message)
            violation = message.get("violation")
            if isinstance(violation, dict):
                self.violations.setdefault(call, violation)

    def read_in_flight(self, view: RunView) -> None:
        state = view.state
        if state is None:
            return
        nodes = view.nodes
        for key in sorted(state.abstract_flows):
            flow = state.abstract_flows[key]
            if not 0 <= flow.node < len(nodes):
                continue
            node = str(nodes[flow.node]["id"])
            self.read(node, flow.task_path, flow.attempt, flow.messages)
            violations = (flow.governance or {}).get("violations", ())
            for found in violations:
                if "tool_call_id" in found:
                    call = (node, flow.task_path, flow.attempt, str(found["tool_call_id"]))
                    self.violations.setdefault(call, found)

    def read_decisions(self, view: RunView) -> None:
        """What each superstep's decision record keeps because the node's end took its loop
        state with it: unmet ``require``s of observe-mode flows (the final answer that broke
        one ended the node), and the refusals and violations of a failing loop's last
        answer. Read from the checkpoint that closed the superstep or, while it is open,
        from its phase."""
        if not any(_governed(node) for node in view.nodes):
            return  # no flow: no checkpoint is read
        for meta in view.journal.checkpoints:
            checkpoint = view.checkpoint(meta.seq)
            phase = checkpoint.scheduler.phase
            records = [checkpoint.decisions or {}]
            if isinstance(phase, OpenPhase):
                records.append(phase.record.to_json())
            for record in records:
                for found in record.get("refused", ()):
                    call = _call_of(found)
                    self.refused.setdefault(call, {"content": found.get("why")})
                for found in record.get("violations", ()):
                    if "tool_call_id" in found:
                        self.violations.setdefault(_call_of(found), found)
                        continue
                    turn = (found["node"], found["task_path"], found["attempt"], found["turn"])
                    if found not in self.final.setdefault(turn, []):
                        self.final[turn].append(found)

    def after_turn(self, turn: dict[str, Any]) -> list[dict[str, Any]]:
        """The ``refused`` entries that follow ``turn``, in call order; its observe-mode
        violations go on the turn's own entry (``violations``: CONTRACT.md's trace kinds
        stay as they are, and each violating call did run as an effect of its own)."""
        where = (turn["node"], turn["task_path"], turn["attempt"])
        found: list[dict[str, Any]] = []
        violations: list[dict[str, Any]] = []
        for call in turn["result"].get("tool_calls") or ():
            key: CallKey = (*where, str(call.get("id")))
            refused = self.refused.pop(key, None)
            if refused is not None:
                found.append(_refused_entry(turn, call, refused))
            violation = self.violations.pop(key, None)
            if violation is not None:
                violations.append(_violation_noted(call.get("name"), call.get("id"), violation))
        for violation in self.final.pop((*where, turn["effect_seq"]), ()):
            violations.append(_violation_noted(None, None, violation))
        if violations:
            turn["violations"] = violations
        return found


def _violation_noted(tool: Any, call_id: Any, violation: dict[str, Any]) -> dict[str, Any]:
    """An observe-mode violation as trace lists it: the call (None for an unmet
    ``require``), the rule enforce mode would have applied and why."""
    return {
        "tool": tool,
        "tool_call_id": call_id,
        "rule": violation.get("rule"),
        "reason": violation.get("why"),
    }


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


def explain(view: RunView) -> dict[str, Any]:
    """For each governed abstract node in flight at the latest checkpoint, by node id:
    the active steps, the allowed and offered tools, and why each blocked tool is blocked
    (``plait.governance.explain``). Empty when no governed node is in flight.

    The flow and the node's tools come from the pinned manifest, the flow's runtime from
    the node's ``AbstractFlow`` in the checkpoint; the workflow file is never reread.
    """
    state = view.state
    if state is None:
        return {}
    nodes = view.nodes
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
        from plait.governance import FlowRuntime, flow_from_dict  # a governed node only
        from plait.governance import explain as explain_flow

        tools = [str(t) for t in spec.get("tools", ())]
        shown = explain_flow(
            flow_from_dict(governed),
            FlowRuntime.from_json(flow.governance["rt"]),
            tools,
        )
        if flow.refused:
            shown["refused"] = len(flow.refused)
        violations = flow.governance.get("violations")
        if violations:
            shown["violations"] = [_violation_shown(v) for v in violations]
        found[str(node["id"])] = shown
    return found


def _violation_shown(found: dict[str, Any]) -> dict[str, Any]:
    """An observe-mode violation for ``plait show``: the tool (None for an unmet
    ``require``), its call id, the rule enforce mode would have applied and why."""
    return {
        "tool": found.get("tool"),
        "tool_call_id": found.get("tool_call_id"),
        "rule": found.get("rule"),
        "why": found.get("why"),
    }


def _governed(node: dict[str, Any]) -> bool:
    return isinstance(node.get("executor", {}).get("spec", {}).get("flow"), dict)


def _call_of(found: dict[str, Any]) -> CallKey:
    """The call a decision record's entry is about."""
    return (found["node"], found["task_path"], found["attempt"], str(found["tool_call_id"]))
