"""The governance flow model and its fluent builder (ARCHITECTURE.md §9, seed ``Flow.txt``).

A ``Flow`` is a DAG of steps plus cross-cutting constraints that together decide, at
every moment of an LLM loop, which tool calls are admitted. This module only holds the
values and the builder; the dict/YAML form is ``document.py``, load-time checks are
``validate.py`` and the runtime is ``monitor.py``.

    flow = (
        Flow.new()
        .step("verify", allow=["lookup_account"], done=called_ok("lookup_account"),
              posture="Verify the customer's identity before anything else.")
        .step("offer", after=["verify"], gate=is_set("account"),
              allow=["lookup_policy", "issue_refund"], done=called_ok("issue_refund"))
        .step("wrap_up", after=["offer"], terminal=True)
        .commit("issue_refund", until=is_true("confirmed"))
        .reset("offer").when(is_true("customer_changed_mind"))
        .ambient("escalate_to_human")
        .build()
    )

``allow=None`` (the default) leaves a step unrestricted; ``allow=[]`` admits only
ambient tools while the step is active.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeAlias

from plait.core.errors import PlaitError
from plait.governance.guards import Guard

__all__ = [
    "After",
    "Before",
    "Constraint",
    "Flow",
    "FlowBuilder",
    "Join",
    "Mode",
    "NeverUntil",
    "Once",
    "Require",
    "Reset",
    "Step",
    "edge",
    "with_commit",
]

Join: TypeAlias = Literal["all", "any"]
Mode: TypeAlias = Literal["enforce", "observe"]


@dataclass(frozen=True)
class After:
    """An edge into a step: satisfied when ``step`` is done and ``when`` (if any) holds."""

    step: str
    when: Guard | None = None


def edge(step: str, *, when: Guard | None = None) -> After:
    """An ``after`` edge, optionally guarded: ``after=[edge("triage", when=is_true("urgent"))]``."""
    return After(step, when)


@dataclass(frozen=True)
class Step:
    """One step of a flow. Active while not done and eligible; see ``monitor.py``."""

    id: str
    after: tuple[After, ...] = ()
    join: Join = "all"
    gate: Guard | None = None
    done: Guard | None = None
    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] = ()
    posture: str | None = None
    terminal: bool = False


@dataclass(frozen=True)
class Once:
    """``tool`` succeeds at most once (until a reset clears its count)."""

    tool: str


@dataclass(frozen=True)
class Before:
    """Step ``then`` is not eligible until step ``first`` is done."""

    first: str
    then: str


@dataclass(frozen=True)
class NeverUntil:
    """``tool`` is refused while ``until`` does not hold."""

    tool: str
    until: Guard


@dataclass(frozen=True)
class Require:
    """A final answer needs these steps done."""

    steps: tuple[str, ...]


@dataclass(frozen=True)
class Reset:
    """On ``when``'s rising edge, ``steps`` are no longer done and the ``once`` counts of
    the tools their ``done`` guards call are cleared."""

    steps: tuple[str, ...]
    when: Guard


Constraint: TypeAlias = Once | Before | NeverUntil | Require | Reset


@dataclass(frozen=True)
class Flow:
    """A governed tool flow: steps, constraints, confirm tools, ambient tools and a mode.

    ``confirm_tools`` (filled by ``commit``) marks commit tools; it adds no runtime
    behaviour of its own, but ``compile`` checks each is properly guarded. ``ambient``
    tools are exempt from step allow lists (still bound by once, never-until and deny).
    """

    steps: tuple[Step, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    confirm_tools: tuple[str, ...] = ()
    ambient: tuple[str, ...] = ()
    mode: Mode = "enforce"

    @staticmethod
    def new(mode: Mode = "enforce") -> FlowBuilder:
        """Start building a flow."""
        return FlowBuilder(mode=mode)

    def to_json(self) -> dict[str, Any]:
        """The dict (JSON/YAML) form; see ``plait.governance.document.flow_to_dict``."""
        from plait.governance.document import flow_to_dict

        return flow_to_dict(self)


def with_commit(
    constraints: tuple[Constraint, ...], tool: str, until: Guard
) -> tuple[Constraint, ...]:
    """``constraints`` plus what ``commit(tool, until)`` adds (``once`` and never-until),
    leaving out either one when an equal constraint is already there."""
    added = [c for c in (Once(tool), NeverUntil(tool, until)) if c not in constraints]
    return (*constraints, *added)


# --- the builder --------------------------------------------------------------------------


def _names(values: str | Iterable[str]) -> tuple[str, ...]:
    """One name or many; a bare string is one name, never its characters."""
    return (values,) if isinstance(values, str) else tuple(values)


def _flatten(groups: Sequence[str | Iterable[str]]) -> tuple[str, ...]:
    return tuple(name for group in groups for name in _names(group))


def _unique(names: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(names))


@dataclass(frozen=True)
class FlowBuilder:
    """Builds a ``Flow`` one verb at a time; every verb returns a new builder."""

    steps: tuple[Step, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    confirm_tools: tuple[str, ...] = ()
    ambient_tools: tuple[str, ...] = ()
    mode: Mode = "enforce"

    def step(
        self,
        id: str,
        *,
        after: str | Iterable[str | After] = (),
        join: Join = "all",
        gate: Guard | None = None,
        done: Guard | None = None,
        allow: str | Iterable[str] | None = None,
        deny: str | Iterable[str] = (),
        posture: str | None = None,
        terminal: bool = False,
    ) -> FlowBuilder:
        """Add a step. ``after`` takes step ids or ``edge(id, when=guard)`` values."""
        edges = (after,) if isinstance(after, str) else tuple(after)
        step = Step(
            id=id,
            after=tuple(e if isinstance(e, After) else After(e) for e in edges),
            join=join,
            gate=gate,
            done=done,
            allow=None if allow is None else _names(allow),
            deny=_names(deny),
            posture=posture,
            terminal=terminal,
        )
        return replace(self, steps=(*self.steps, step))

    def _constrain(self, *constraints: Constraint) -> FlowBuilder:
        return replace(self, constraints=(*self.constraints, *constraints))

    def once(self, tool: str) -> FlowBuilder:
        """``tool`` may succeed at most once."""
        return self._constrain(Once(tool))

    def before(self, first: str, then: str) -> FlowBuilder:
        """Step ``then`` waits until step ``first`` is done."""
        return self._constrain(Before(first, then))

    def never(self, tool: str) -> NeverClause:
        """``.never(tool).until(guard)``: refuse ``tool`` while ``guard`` does not hold."""
        return NeverClause(self, tool)

    def require(self, *steps: str | Iterable[str]) -> FlowBuilder:
        """A final answer needs these steps done."""
        return self._constrain(Require(_flatten(steps)))

    def reset(self, *steps: str | Iterable[str]) -> ResetClause:
        """``.reset(steps).when(guard)``: reopen the steps on the guard's rising edge."""
        return ResetClause(self, _flatten(steps))

    def commit(self, tool: str, *, until: Guard) -> FlowBuilder:
        """A commit tool: once, never until ``until``, and listed in ``confirm_tools``."""
        return replace(
            self,
            constraints=with_commit(self.constraints, tool, until),
            confirm_tools=_unique((*self.confirm_tools, tool)),
        )

    def confirm(self, *tools: str | Iterable[str]) -> FlowBuilder:
        """Mark tools as commit tools without adding constraints (``commit`` does both)."""
        return replace(self, confirm_tools=_unique((*self.confirm_tools, *_flatten(tools))))

    def ambient(self, *tools: str | Iterable[str]) -> FlowBuilder:
        """Tools no step is about (escalation, memory): exempt from step allow lists."""
        return replace(self, ambient_tools=_unique((*self.ambient_tools, *_flatten(tools))))

    def observe(self) -> FlowBuilder:
        """Observe mode: refuse nothing, report what enforce mode would have refused."""
        return replace(self, mode="observe")

    def build(self) -> Flow:
        """The flow; raises PlaitError (PLAIT-E027) carrying every ``validate`` problem."""
        from plait.governance.validate import validate

        flow = Flow(self.steps, self.constraints, self.confirm_tools, self.ambient_tools, self.mode)
        problems = validate(flow)
        if problems:
            raise PlaitError.from_problems(problems)
        return flow


@dataclass(frozen=True)
class NeverClause:
    """The half-built ``never(tool)``; finish it with ``.until(guard)``."""

    builder: FlowBuilder
    tool: str

    def until(self, guard: Guard) -> FlowBuilder:
        return self.builder._constrain(NeverUntil(self.tool, guard))


@dataclass(frozen=True)
class ResetClause:
    """The half-built ``reset(steps)``; finish it with ``.when(guard)``."""

    builder: FlowBuilder
    steps: tuple[str, ...]

    def when(self, guard: Guard) -> FlowBuilder:
        return self.builder._constrain(Reset(self.steps, guard))
