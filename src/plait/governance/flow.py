"""The governance flow model and its fluent builder (docs/architecture.md §9, seed ``Flow.txt``).

A ``Flow`` is a DAG of steps plus cross-cutting constraints that together decide, at
every moment of an LLM loop, which tool calls are admitted. This module holds the flow,
its builder and what ``compile`` makes of it (``CompiledFlow``); the flow's methods are
the seed's surface over the passes that live next to it: the parts are ``parts.py``, the
load-time checks ``validate.py``, the picture ``mermaid.py``, the dict/YAML form
``writer.py`` and ``document.py``, and the runtime ``monitor.py``.

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
from typing import Any

from plait.core.errors import PlaitError, Problem
from plait.governance.guards import Guard
from plait.governance.mermaid import to_mermaid
from plait.governance.parts import (
    After,
    Before,
    Constraint,
    Join,
    Mode,
    NeverUntil,
    Once,
    Require,
    Reset,
    Step,
    edge,
    with_commit,
)
from plait.governance.validate import compile as compile_problems
from plait.governance.validate import compile_with_tools as compile_with_tools_problems
from plait.governance.validate import state_keys_read, tool_universe, validate
from plait.governance.writer import flow_to_dict

__all__ = [
    "After",
    "Before",
    "CompiledFlow",
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


def _refuse(problems: Sequence[Problem]) -> None:
    """PLAIT-E027 carrying every problem, when there is one."""
    if problems:
        raise PlaitError.from_problems(problems)


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
        """The dict (JSON/YAML) form; see ``plait.governance.writer.flow_to_dict``."""
        return flow_to_dict(self)

    def validate(self) -> None:
        """Referential integrity and acyclicity; raises PlaitError (PLAIT-E027) carrying
        every problem found, not just the first (``validate.validate`` lists them)."""
        _refuse(validate(self))

    def state_keys_read(self) -> list[str]:
        """Every state key any guard reads (gates, done, edges, never-until, reset), sorted.

        A key nothing in the run writes can never latch, the dominant silent failure of a
        data-authored flow: ``plait check`` diffs this set against the declared ``writes``.
        """
        return state_keys_read(self)

    def compile(self) -> CompiledFlow:
        """The flow checked as ``validate`` does and more (unreachable steps, an always-true
        commit guard, never-until on unknown steps, after/before ordering cycles), with its
        tool universe precomputed; raises PlaitError (PLAIT-E027) carrying every problem."""
        _refuse(compile_problems(self))
        return CompiledFlow.of(self)

    def compile_with_tools(self, tools: Iterable[str]) -> CompiledFlow:
        """``compile``, plus every tool the flow names (allow, deny, once, never-until,
        ``called_ok``, confirm and ambient tools) must be one of ``tools``:
        ``flow.compile_with_tools(["lookup_account", "charge_card"])``."""
        _refuse(compile_with_tools_problems(self, tools))
        return CompiledFlow.of(self)

    def to_mermaid(self) -> str:
        """The flow as a Mermaid flowchart (the spec is the diagram)."""
        return to_mermaid(self)


@dataclass(frozen=True)
class CompiledFlow:
    """A flow that compiled, and the universe of tool names it refers to.

    ``tools`` is every tool the flow names anywhere, each once, in declaration order
    (``validate.tool_universe`` says where each one is named): the tools a session must
    register for the flow to mean what it says.
    """

    flow: Flow
    tools: tuple[str, ...]

    @staticmethod
    def of(flow: Flow) -> CompiledFlow:
        """The compiled form of ``flow`` (judged already by the caller)."""
        return CompiledFlow(flow, tuple(dict.fromkeys(t for t, _ in tool_universe(flow))))


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
        flow = Flow(self.steps, self.constraints, self.confirm_tools, self.ambient_tools, self.mode)
        flow.validate()
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
