"""What every part of an abstract node's LLM loop (§6) does to a loop: name it, key its
next effect, list the tools it offers, end it with a result or a failure.

The loop is split by what it handles: ``llm_loop.py`` opens loops, serves their turns and
routes each resolution; ``llm_answers.py`` takes a turn's answer; ``llm_tools.py`` runs a
round of tool calls. This module is what the three share.
"""

from __future__ import annotations

from typing import Any

from plait.core import agents, governed
from plait.core.abstract import AbstractFlow
from plait.core.keys import JournalKey
from plait.core.machine import StepContext, fail_node, fail_task, finish_task
from plait.core.node_states import Move, move
from plait.core.pending import TaskState
from plait.core.state import OpenPhase


def flow_key(node: int, task_path: str = "") -> str:
    """A loop's key: its node index, and for a Send task (§3.8) the task's path."""
    return str(node) + task_path


def effect_key(s: StepContext, flow: AbstractFlow, kind: str) -> JournalKey:
    """The key of the loop's next effect (its ``next_effect_seq``), of ``kind``."""
    node_id = s.env.plan.nodes[flow.node].id
    return JournalKey(
        s.state.run_id, flow.task_path, node_id, flow.attempt, flow.next_effect_seq, kind
    )


def fail(s: StepContext, key: str, flow: AbstractFlow, detail: str) -> bool:
    """End loop ``key``: its node (or its Send task) fails with ``detail``."""
    governed.ended(s, flow)
    del s.state.abstract_flows[key]
    if flow.task_path:
        s.state.send_tasks[flow.task_path].state = TaskState.DONE
        fail_task(s, flow.node, flow.task_path, f"{detail} (task {flow.task_path})")
    else:
        fail_node(s.state, flow.node, detail)
    return True


def fail_bound(s: StepContext, key: str, flow: AbstractFlow) -> bool:
    """Fail a loop that reached ``max_effects_per_attempt``, naming its last failed turn."""
    bound = s.env.max_effects_per_attempt
    detail = f"the loop reached max_effects_per_attempt ({bound}) without a final answer"
    last = s.turn_failures.get(key)
    if last is not None:
        detail += f"; its last turn failed with {last}"
    return fail(s, key, flow, f"ExecutorError: {detail}")


def offered_tools(s: StepContext, flow: AbstractFlow) -> list[str]:
    """The tools the node offers its model: its own, then its agents' and handoffs'."""
    spec = s.env.executors[flow.node].spec
    tools: list[str] = list(spec.get("tools", ()))
    if "agents" in spec or "handoffs" in spec:
        tools += [n for n in agents.agent_tools(spec) if n not in tools]
    return tools


def finish(s: StepContext, fkey: str, flow: AbstractFlow, result: Any) -> None:
    """End loop ``fkey`` with ``result``: its node (or its Send task) completes."""
    del s.state.abstract_flows[fkey]
    phase = s.state.phase
    assert isinstance(phase, OpenPhase)
    if flow.task_path:
        finish_task(s, phase, flow.task_path, result)
        return
    move(s.state, flow.node, Move.COMPLETED)
    phase.results[flow.node] = result
