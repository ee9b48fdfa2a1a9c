"""The flow monitor: which steps are active, what is done, and whether a tool call is admitted.

Rules of this file:
- Every decision the runtime makes about a flow lives here: eligibility, latching,
  resets, admission, the offered tools, the unmet requirements. Other modules render
  (``explain.py``) or store (``runtime.py``) what it decides.
- It is pure: a function of the flow and a ``FlowRuntime`` (plus the call being judged).
  It never mutates a runtime it is handed; it returns a new one.
- It never iterates an unordered collection where order shows: steps go in declaration
  order, constraints in declaration order, tools in the order the caller gives them.
- It does not know the LLM loop. The caller admits each call of a model answer in order
  (``admit_answer`` does it), records each success (``record_success``) and every
  answered ask (``record_answer``), and calls ``latch`` after every turn.

Theory of operation. A step is *eligible* when its ``after`` edges are satisfied (all or
any of them, per ``join``; an edge is satisfied when its source is done and its guard, if
any, holds), every ``before(x, step)`` has ``x`` done, and its gate holds. Eligibility is
evaluated afresh every time (a gate that closes again makes the step ineligible). A step
is *active* when eligible and not done; a terminal step is never active: it is done the
moment it is eligible. *Done* latches: once a step's ``done`` guard held while it was
eligible, it stays done until a reset reopens it.

``_settle`` brings a runtime to rest in one loop, until nothing changes (a fixpoint):
first each reset guard is evaluated, and on a rising edge (false at the last evaluation,
true now) its steps are reopened and the counts of the tools their ``done`` guards call
are cleared (so a ``once`` tool may run again); then every eligible, not-done step whose
``done`` guard holds (or that is terminal) latches, all judged against the marking at the
start of the pass, so one event can cascade through a chain of steps. A reset fires at
most once per settling, which bounds the loop even for a reset whose own guard it undoes.

A call is admitted by the first rule that decides, in this order: ``once`` (already
succeeded, or admitted earlier in the same answer) → ``never``/``until`` (its guard does
not hold) → ``deny`` of an active step → ``ambient`` (admitted) → the union of the allow
lists of the active steps that have one (no such step: admitted). The tools *offered* to
the model are judged the same way without the never/until rule, so a commit tool waiting
for confirmation is still offered. In observe mode every call is admitted and the rule
that would have refused it rides along as ``violation``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from plait.governance.flow import Flow
from plait.governance.guards import Guard, describe, holds, tools_named
from plait.governance.parts import Before, NeverUntil, Once, Require, Reset, Step
from plait.governance.runtime import FlowRuntime

__all__ = [
    "Admission",
    "Rule",
    "active_steps",
    "admit",
    "admit_answer",
    "admitted_tools",
    "latch",
    "missing_required",
    "offered_tools",
    "postures",
    "record_answer",
    "record_success",
    "start",
    "step_tools",
]

Rule: TypeAlias = Literal["once", "never", "deny", "allow"]


@dataclass(frozen=True)
class Admission:
    """Whether a call may run. When refused (enforce mode), ``reason`` says why and
    ``rule`` names the rule. In observe mode ``ok`` is always true; a call enforce mode
    would refuse carries that reason as ``violation`` (and ``rule``) for the caller to
    record."""

    ok: bool
    reason: str | None = None
    rule: Rule | None = None
    violation: str | None = None


# --- evaluation against one marking -------------------------------------------------------


@dataclass(frozen=True)
class _View:
    state: Mapping[str, Any]
    done: Set[str]
    calls: Mapping[str, int]

    def holds(self, guard: Guard) -> bool:
        return holds(guard, self.state, self.done, self.calls)


def _view(rt: FlowRuntime) -> _View:
    return _View(rt.state, rt.done, rt.calls)


def _eligible(flow: Flow, step: Step, view: _View) -> bool:
    if step.after:
        satisfied = (
            e.step in view.done and (e.when is None or view.holds(e.when)) for e in step.after
        )
        if not (any(satisfied) if step.join == "any" else all(satisfied)):
            return False
    for c in flow.constraints:
        if isinstance(c, Before) and c.then == step.id and c.first not in view.done:
            return False
    return step.gate is None or view.holds(step.gate)


def _active(flow: Flow, view: _View) -> list[Step]:
    return [
        s
        for s in flow.steps
        if s.id not in view.done and not s.terminal and _eligible(flow, s, view)
    ]


def _completes(flow: Flow, step: Step, view: _View) -> bool:
    if step.id in view.done or not _eligible(flow, step, view):
        return False
    return step.terminal or (step.done is not None and view.holds(step.done))


# --- settling: resets and latching to a fixpoint ------------------------------------------


def _settle(
    flow: Flow,
    state: Mapping[str, Any],
    done: Set[str],
    calls: Mapping[str, int],
    seen: Sequence[bool],
) -> FlowRuntime:
    resets = [c for c in flow.constraints if isinstance(c, Reset)]
    by_id = {s.id: s for s in reversed(flow.steps)}  # the first of duplicate ids wins
    marked, counts = set(done), dict(calls)
    last = [*seen[: len(resets)], *[False] * (len(resets) - len(seen))]
    fired: set[int] = set()
    while True:
        changed = False
        for i, reset in enumerate(resets):
            now = holds(reset.when, state, marked, counts)
            if now and not last[i] and i not in fired:
                fired.add(i)
                changed = True
                for sid in reset.steps:
                    marked.discard(sid)
                    step = by_id.get(sid)
                    for tool in tools_named(step.done) if step and step.done else []:
                        counts.pop(tool, None)
            last[i] = now
        view = _View(state, marked, counts)
        newly = [s.id for s in flow.steps if _completes(flow, s, view)]
        if newly:
            marked.update(newly)
            changed = True
        if not changed:
            return FlowRuntime(dict(state), frozenset(marked), counts, tuple(last))


def start(flow: Flow, context: Mapping[str, Any]) -> FlowRuntime:
    """The runtime of a node starting with ``context``, latched to rest."""
    return _settle(flow, dict(context), frozenset(), {}, ())


def latch(flow: Flow, rt: FlowRuntime) -> FlowRuntime:
    """Bring ``rt`` to rest (after every turn): fire rising resets, latch what is done."""
    return _settle(flow, rt.state, rt.done, rt.calls, rt.resets)


def record_success(flow: Flow, rt: FlowRuntime, tool: str, result: Any) -> FlowRuntime:
    """After ``tool`` succeeded: count it, merge an object result's top-level keys into
    the state (other results change no key), then latch."""
    calls = {**rt.calls, tool: rt.calls.get(tool, 0) + 1}
    state = {**rt.state, **result} if isinstance(result, dict) else rt.state
    return _settle(flow, state, rt.done, calls, rt.resets)


def record_answer(flow: Flow, rt: FlowRuntime, key_values: Mapping[str, Any]) -> FlowRuntime:
    """After an ask was answered: merge its keys into the state, then latch."""
    return _settle(flow, {**rt.state, **key_values}, rt.done, rt.calls, rt.resets)


# --- reading the runtime ------------------------------------------------------------------


def active_steps(flow: Flow, rt: FlowRuntime) -> list[str]:
    """The ids of the active steps (eligible, not done), in declaration order."""
    return [s.id for s in _active(flow, _view(rt))]


def postures(flow: Flow, rt: FlowRuntime) -> list[str]:
    """The postures of the active steps, for the turn's instructions."""
    return [s.posture for s in _active(flow, _view(rt)) if s.posture]


def step_tools(flow: Flow, rt: FlowRuntime) -> list[str]:
    """The tools the flow needs now: the active steps' own tools and the ambient ones (a
    narrowed offer (§6.6) always keeps them)."""
    names = [t for s in _active(flow, _view(rt)) for t in (s.allow or ())]
    return list(dict.fromkeys([*names, *flow.ambient]))


def missing_required(flow: Flow, rt: FlowRuntime) -> list[str]:
    """Required steps not done yet (a final answer now gets a corrective re-prompt)."""
    wanted = [sid for c in flow.constraints if isinstance(c, Require) for sid in c.steps]
    return [sid for sid in dict.fromkeys(wanted) if sid not in rt.done]


# --- admission ----------------------------------------------------------------------------


def _ticked(names: Iterable[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)


def _refusal(
    flow: Flow, rt: FlowRuntime, tool: str, pending_once: Set[str], with_never: bool
) -> tuple[Rule, str] | None:
    """The rule that refuses ``tool`` now and why, or None: the one admission table."""
    view = _view(rt)
    if any(isinstance(c, Once) and c.tool == tool for c in flow.constraints):
        if rt.calls.get(tool, 0) >= 1:
            return "once", "it has already succeeded and may run only once"
        if tool in pending_once:
            return "once", "it was already called earlier in this answer and may run only once"
    if with_never:
        for c in flow.constraints:
            if isinstance(c, NeverUntil) and c.tool == tool and not view.holds(c.until):
                return "never", f"it is not allowed until {describe(c.until)}"
    active = _active(flow, view)
    for step in active:
        if tool in step.deny:
            return "deny", f"step `{step.id}` does not allow it"
    if tool in flow.ambient:
        return None
    restricting = [s for s in active if s.allow is not None]
    if restricting and not any(tool in (s.allow or ()) for s in restricting):
        noun = "step" if len(restricting) == 1 else "steps"
        ids = _ticked(s.id for s in restricting)
        return "allow", f"it is not one of the tools of the current {noun} ({ids})"
    return None


def admit(
    flow: Flow, rt: FlowRuntime, tool: str, *, pending_once: Set[str] = frozenset()
) -> Admission:
    """Whether a call to ``tool`` may run now. ``pending_once``: tools admitted earlier in
    the same model answer (so one answer never runs a ``once`` tool twice)."""
    refused = _refusal(flow, rt, tool, pending_once, with_never=True)
    if refused is None:
        return Admission(True)
    rule, reason = refused
    if flow.mode == "observe":
        return Admission(True, rule=rule, violation=reason)
    return Admission(False, reason=reason, rule=rule)


def admit_answer(flow: Flow, rt: FlowRuntime, tools: Sequence[str]) -> list[Admission]:
    """Admit the calls of one model answer in order, each admitted call counting as
    pending for the ones after it."""
    pending: set[str] = set()
    found = []
    for tool in tools:
        admission = admit(flow, rt, tool, pending_once=frozenset(pending))
        if admission.ok:
            pending.add(tool)
        found.append(admission)
    return found


def offered_tools(flow: Flow, rt: FlowRuntime, tools: Iterable[str]) -> list[str]:
    """The tools to offer the model now, in the given order: admitted but for the
    never/until rule (a commit tool awaiting confirmation stays offered). Observe mode
    offers every tool."""
    names = list(dict.fromkeys(tools))
    if flow.mode == "observe":
        return names
    return [t for t in names if _refusal(flow, rt, t, frozenset(), with_never=False) is None]


def admitted_tools(flow: Flow, rt: FlowRuntime, tools: Iterable[str]) -> list[str]:
    """The tools a call to which would run now without a violation, in the given order."""
    names = list(dict.fromkeys(tools))
    return [t for t in names if _refusal(flow, rt, t, frozenset(), with_never=True) is None]
