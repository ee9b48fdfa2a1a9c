"""Several agents (docs/llm-nodes.md "Several agents"): agent tools and handoffs.

An abstract node may offer other abstract nodes as tools (``agents:``) and hand its
conversation to one of them (``handoffs:``). Either way the call runs the other node as
a *child run* (§3.9): a ``tool`` effect, dispatched to ``agent:<node id>`` and also
registered as pending, like a subgraph, so a child that parks parks the parent. An
agent tool's result is a tool result; a handoff's result is the handing node's result
(the receiving agent has the last word). The child's usage comes back with its result,
so budgets are charged to the parent. This module is pure like the rest of the core:
it names the tools, says what they accept and emits the effects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from plait.core.keys import JournalKey, call_id, child_run_id
from plait.core.machine import StepContext, emit_effect
from plait.core.opening import handed_entries
from plait.core.pending import PendingAsk
from plait.core.state import OpenPhase

AGENT_PREFIX = "agent:"
"""Executor of an agent call or a handoff: ``agent:<node id>``; its input is the child's."""
HANDOFF_PREFIX = "transfer_to_"
"""A handoff is offered to the model as the tool ``transfer_to_<node id>``."""
HANDOFF_KEY = "$handoff"
"""The reserved input key that makes a child agent start from a handed-over transcript."""

AGENT_TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"input": {"type": "string", "description": "What to ask the agent."}},
    "required": ["input"],
}
HANDOFF_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


def agent_tools(spec: Mapping[str, Any]) -> list[str]:
    """The tool names an abstract node's spec offers for its agents and handoffs."""
    names = [str(n) for n in spec.get("agents", ())]
    names += [HANDOFF_PREFIX + str(n) for n in spec.get("handoffs", ())]
    return names


def target_of(spec: Mapping[str, Any], tool: str) -> tuple[str, bool] | None:
    """``(node id, is_handoff)`` when ``tool`` is one of the node's agents or handoffs."""
    if tool in spec.get("agents", ()):
        return tool, False
    if tool.startswith(HANDOFF_PREFIX) and tool[len(HANDOFF_PREFIX) :] in spec.get("handoffs", ()):
        return tool[len(HANDOFF_PREFIX) :], True
    return None


def depth(run_id: str) -> int:
    """How deep a run is among child runs: a child's id is ``parent~<hex>`` (§3.4)."""
    return run_id.count("~")


def problem(spec: Mapping[str, Any], run_id: str, tool: str, arguments: Any) -> str | None:
    """Why a call to an agent tool or handoff cannot run (shown to the model), or None."""
    if not isinstance(arguments, dict):
        return "the arguments are not a JSON object"
    handoff = tool.startswith(HANDOFF_PREFIX)
    if not handoff and not isinstance(arguments.get("input"), str):
        return "'input' (a string) is required"
    bound = spec.get("max_depth")
    if bound is not None and depth(run_id) >= int(bound):
        return f"agents may nest at most {bound} deep (llm.max_agent_depth); answer yourself"
    return None


def child_input(
    call: dict[str, Any], handoff: bool, node_id: str, messages: list[dict[str, Any]]
) -> dict[str, Any]:
    """What the child run starts with: the call's arguments, or the handed transcript."""
    if not handoff:
        return dict(call.get("arguments") or {})
    return {HANDOFF_KEY: {"from": node_id, "tool_call_id": call.get("id"), "messages": messages}}


def dispatch_call(
    s: StepContext, phase: OpenPhase, key: JournalKey, node: int, target: str, value: Any
) -> None:
    """Run ``target`` as a child run for the loop of ``node``: dispatched now, and pending
    like a subgraph's child in case it parks (§3.9)."""
    state = s.state
    state.pending_asks[call_id(key)] = PendingAsk(
        key, node, child=child_run_id(state.run_id, key), agent=target
    )
    emit_effect(s, phase, key, AGENT_PREFIX + target, value)


def handed_messages(
    value: dict[str, Any], instruction: str, node_id: str, epoch: int
) -> list[dict[str, Any]]:
    """A receiving agent's first entries: the handed transcript, the transfer call's
    result, and the receiving node's instruction (as its engine epoch places it)."""
    note = {
        "role": "tool",
        "tool_call_id": value.get("tool_call_id"),
        "content": f"Transferred from '{value.get('from')}' to '{node_id}'.",
        "is_error": False,
    }
    return handed_entries(value.get("messages", ()), instruction, note, epoch)


def agent_tool_specs(manifest: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """``name -> (description, input schema)`` of every agent tool and handoff a pinned
    manifest's nodes offer, described by the target node's instruction."""
    nodes = {n["id"]: n for n in manifest.get("nodes", ())}

    def about(node_id: str) -> str:
        spec = nodes.get(node_id, {}).get("executor", {}).get("spec", {})
        return str(spec.get("instruction") or "")[:500]

    found: dict[str, tuple[str, dict[str, Any]]] = {}
    for node in manifest.get("nodes", ()):
        spec = node.get("executor", {}).get("spec", {})
        for target in spec.get("agents", ()):
            found[target] = (f"Ask the agent '{target}': {about(target)}", AGENT_TOOL_SCHEMA)
        for target in spec.get("handoffs", ()):
            text = f"Hand the conversation over to the agent '{target}': {about(target)}"
            found[HANDOFF_PREFIX + target] = (text, HANDOFF_SCHEMA)
    return found
