"""Send fan-out (docs/architecture.md §3.8): a result's ``$send`` spawns tasks of a node.

At close, before reducing, each result (static ones by node index, then task
results by path) is checked for the reserved key ``$send``: a list of
``{node, input}``, validated all-or-nothing. Each entry becomes a task at
``parent/NNNNNN`` (a per-parent counter, monotone for the whole run), its target
set to Dispatched. Tasks run with their own input, attempts and retries; when
every task of a target is done, the target is DoneOk and its out-edges evaluate
at that close: the join. A target is a tool node (one effect per task), an abstract
node (one LLM loop per task, its first entry built from the task's input: a fan-out of
agents) or a subgraph (one child run per task, §3.9).
"""

from __future__ import annotations

from typing import Any

from plait.core import llm_loop, retry
from plait.core.asks import SUBGRAPH_PREFIX
from plait.core.canonical import JSON
from plait.core.keys import JournalKey, call_id, child_run_id
from plait.core.machine import StepContext, emit_effect, fail_node, fail_task, finish_task
from plait.core.node_states import Move, move
from plait.core.outcomes import Completed, EffectOutcome
from plait.core.pending import PendingAsk, SendTask, TaskState
from plait.core.state import OpenPhase

SEND_KEY = "$send"
MAX_ENTRIES = 4096
MAX_ORDINAL = 999_999
QUEUED, RUNNING, DONE = TaskState.QUEUED, TaskState.RUNNING, TaskState.DONE
SENDABLE = ("tool", "abstract", "subgraph")


def _problem(s: StepContext, spawner: int, entries: Any) -> str | None:
    plan, executors = s.env.plan, s.env.executors
    if not isinstance(entries, list):
        return "$send must be a list of {node, input}"
    if len(entries) > MAX_ENTRIES:
        return f"$send has {len(entries)} entries (at most {MAX_ENTRIES})"
    for n, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("node"), str):
            return f"$send entry {n} must be an object with a string 'node'"
        unknown = sorted(set(entry) - {"node", "input"})
        if unknown:
            return f"$send entry {n} has unknown key(s) {', '.join(unknown)}"
        target = plan.index.get(entry["node"])
        if target is None:
            return f"$send entry {n} names unknown node '{entry['node']}'"
        if executors[target].kind not in SENDABLE:
            return (
                f"$send entry {n}: target '{entry['node']}' is not a tool, abstract or"
                " subgraph node"
            )
        if target == spawner:
            return f"$send entry {n}: a node cannot send to itself"
    return None


def extract_spawns(s: StepContext, phase: OpenPhase) -> None:
    """Strip ``$send`` from this superstep's results and spawn their tasks (canonical order)."""
    if not phase.send_results:
        for r in phase.results.values():  # a loop: a generator in ``any`` costs a frame
            if isinstance(r, dict) and SEND_KEY in r:
                break
        else:
            return  # no result sends: most supersteps, told without sorting anything
    state = s.state
    spawners: list[tuple[int, str, dict[str, Any]]] = [
        (node, "", result)
        for node, result in sorted(phase.results.items())
        if isinstance(result, dict) and SEND_KEY in result
    ]
    spawners.extend(
        (state.send_tasks[path].node, path, result)
        for path, result in sorted(phase.send_results.items())
        if isinstance(result, dict) and SEND_KEY in result
    )
    for spawner, parent, result in spawners:
        # Never mutate a result: the journal holds the same object. Merge a copy without $send.
        entries = result[SEND_KEY]
        stripped = {k: v for k, v in result.items() if k != SEND_KEY}
        if parent:
            phase.send_results[parent] = stripped
        else:
            phase.results[spawner] = stripped
        problem = _problem(s, spawner, entries)
        start = state.spawn_counter.get(parent, 0)
        if problem is None and start + len(entries) - 1 > MAX_ORDINAL:
            problem = f"$send would exceed {MAX_ORDINAL + 1} tasks spawned from '{parent or '/'}'"
        if problem is not None:  # all or nothing: a refused result merges none of its keys
            if parent:
                del phase.send_results[parent]
            else:
                del phase.results[spawner]
            where = f" (task {parent})" if parent else ""
            node_id = s.env.plan.nodes[spawner].id
            fail_node(state, spawner, f"ExecutorError: node '{node_id}'{where}: {problem}")
            continue
        for offset, entry in enumerate(entries):
            path = f"{parent}/{start + offset:06d}"
            target = s.env.plan.index[entry["node"]]
            value = entry.get("input")
            state.send_tasks[path] = SendTask(target, {} if value is None else value)
            move(state, target, Move.SPAWNED)
            phase.record.spawns.append([path, target])
        state.spawn_counter[parent] = start + len(entries)


def queued(s: StepContext) -> list[str]:
    tasks = s.state.send_tasks
    if not tasks:
        return []  # no Send tasks in flight: every superstep of most workflows
    return sorted(p for p, t in tasks.items() if t.state == QUEUED)


def dispatch_task(s: StepContext, phase: OpenPhase, path: str) -> None:
    state = s.state
    task = state.send_tasks[path]
    task.attempt += 1
    task.state = RUNNING
    node = task.node
    key = JournalKey(state.run_id, path, s.env.plan.nodes[node].id, task.attempt, 0, "tool")
    phase.record.task_dispatched.append([path, task.attempt])
    kind = s.env.executors[node].kind
    if kind == "abstract":
        llm_loop.start_task_flow(s, node, path, task.attempt, task.input)
    elif kind == "subgraph":
        state.pending_asks[call_id(key)] = PendingAsk(
            key, node, child=child_run_id(state.run_id, key)
        )
        emit_effect(s, phase, key, SUBGRAPH_PREFIX + s.env.executors[node].name, task.input)
    else:
        emit_effect(s, phase, key, s.env.executors[node].name, task.input)


def resolve_task(s: StepContext, phase: OpenPhase, key: JournalKey, outcome: EffectOutcome) -> None:
    state = s.state
    task = state.send_tasks.get(key.task_path)
    if task is None or task.state != RUNNING:
        return
    node = task.node
    if isinstance(outcome, Completed):
        finish_task(s, phase, key.task_path, outcome.result)
        return
    if s.env.executors[node].kind == "subgraph":
        task.state = DONE  # a child run is never retried (§3.3)
        fail_task(
            s, node, key.task_path, f"{outcome.cause}: {outcome.detail} (task {key.task_path})"
        )
        return
    if state.cancel is None and (policy := retry.policy_of(s, node)).allows(
        task.attempt, outcome, "tool"
    ):
        # A task-scoped retry, inside this superstep: at once, or after a durable wait
        # (the task stays Running until it elapses, ``retry_task``).
        delay = retry.delay_ms(policy, task.attempt, key)
        if delay:
            timer = key._replace(effect_seq=key.effect_seq + 1)
            retry.wait(s, phase, timer, node, delay, failed=key, failed_attempts=task.attempt)
        else:
            task.state = QUEUED
        return
    else:
        task.state = DONE
        detail = f"{outcome.cause}: {outcome.detail} (task {key.task_path})"
        fail_task(s, node, key.task_path, detail)


def retry_task(s: StepContext, timer: JournalKey) -> None:
    """A task's retry wait elapsed: queue it for its next attempt."""
    task = s.state.send_tasks.get(timer.task_path)
    if task is not None and task.state == RUNNING:
        task.state = QUEUED


def merge_order(phase: OpenPhase) -> list[tuple[str, JSON]]:
    """Task results in path order (merged after every static result)."""
    return sorted(phase.send_results.items())


def forget_done(s: StepContext) -> None:
    """Drop settled tasks once merged: the state keeps only what is still in flight."""
    state = s.state
    if not state.send_tasks:
        return
    for path in [p for p, t in state.send_tasks.items() if t.state == DONE]:
        del state.send_tasks[path]
