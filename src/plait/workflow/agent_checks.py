"""What ``plait check`` says about several agents: ``agents:`` and ``handoffs:`` of nodes.

Each name must be another abstract node of the same workflow (PLAIT-E004 otherwise); a
cycle of agents (an agent that can reach itself through agent tools and handoffs) needs
``llm.max_agent_depth`` as its bound (PLAIT-E002 otherwise). Nodes that are only reached
this way (no in-edges) are *detached*: they run as child runs, never as steps of the
graph, so the plan does not require a path to them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # definition.py judges through checks.py, which imports this module
    from plait.workflow.definition import NodeDef, Workflow

AGENT_KEYS = ("agents", "handoffs")


def _names(value: Any) -> list[str]:
    return [n for n in value if isinstance(n, str)] if isinstance(value, list | tuple) else []


def agent_problems(wf: Workflow, node: NodeDef) -> list[tuple[str, str]]:
    """``(message, key)`` for each name of the node's agents/handoffs that is not usable."""
    kinds = {n.id: n.kind for n in wf.nodes if isinstance(n.id, str)}
    found: list[tuple[str, str]] = []
    for key in AGENT_KEYS:
        for name in _names(getattr(node, key)):
            if name not in kinds:
                found.append((f"{key}: unknown node '{name}'", key))
            elif kinds[name] != "abstract":
                why = f"{key}: node '{name}' is a {kinds[name]} node; only abstract (LLM) nodes"
                found.append((why + " can be agents", key))
    return found


def agent_edges(pairs: Iterable[tuple[str, Mapping[str, Any]]]) -> dict[str, list[str]]:
    """Who may call or hand over to whom: node id -> the ids its agents/handoffs name."""
    return {
        node: [*_names(spec.get("agents")), *_names(spec.get("handoffs"))] for node, spec in pairs
    }


def agent_cycle(graph: Mapping[str, Sequence[str]]) -> list[str] | None:
    """One cycle of the agent graph as a path of node ids (first repeated last), or None."""
    done: set[str] = set()
    for root in sorted(graph):
        cycle = _visit(graph, root, [], done)
        if cycle is not None:
            return cycle
    return None


def _visit(
    graph: Mapping[str, Sequence[str]], v: str, path: list[str], done: set[str]
) -> list[str] | None:
    if v in path:
        return [*path[path.index(v) :], v]
    if v in done:
        return None
    path.append(v)
    for w in graph.get(v, ()):
        found = _visit(graph, w, path, done)
        if found is not None:
            return found
    path.pop()
    done.add(v)
    return None


def workflow_cycle(wf: Workflow) -> list[str] | None:
    """A cycle of agents in ``wf`` that no ``llm.max_agent_depth`` bounds, or None."""
    if (wf.llm or {}).get("max_agent_depth") is not None:
        return None
    pairs = [
        (n.id, {k: getattr(n, k) for k in AGENT_KEYS})
        for n in wf.nodes
        if isinstance(n.id, str) and n.kind == "abstract"
    ]
    return agent_cycle(agent_edges(pairs))


def detached(named_by: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """Node ids some node's spec names as an agent or handoff target."""
    return frozenset(n for spec in named_by for key in AGENT_KEYS for n in _names(spec.get(key)))


def agent_workflow(wf: Workflow, node_id: str) -> Workflow:
    """The workflow a child run of agent ``node_id`` runs: that node as its entry, with
    the agents it may call or hand over to (transitively) as detached nodes, and the
    parent's tools, model settings, budgets and reducers."""
    by_id = {n.id: n for n in wf.nodes}
    order: list[str] = []
    todo = [node_id]
    while todo:
        current = todo.pop(0)
        if current in order or current not in by_id:
            continue
        order.append(current)
        node = by_id[current]
        todo += [*(node.agents or ()), *(node.handoffs or ())]
    return dataclasses.replace(
        wf,
        name=f"{wf.name}.{node_id}",
        nodes=tuple(by_id[n] for n in order),
        edges=(),
        schedules=(),
    )
