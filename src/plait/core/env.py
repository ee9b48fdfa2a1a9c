"""The step environment: everything pure the scheduler is handed (seed ``StepEnv``).

The driver builds it once per run from the frozen manifest. Every callable in
it must be pure; replay (``plait verify``) is what enforces that.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from plait.core.canonical import JSON
from plait.core.codec import INT, RecordCodec, json_field
from plait.core.names import CALL_PREFIX as CALL_PREFIX
from plait.core.names import BudgetAxis as BudgetAxis
from plait.core.plan import Plan, PlanEdge
from plait.core.reducers import MISSING, make_reducer

if TYPE_CHECKING:
    from plait.core.merkle import ChunkMemo
    from plait.core.retry import RetryPolicy

DEFAULT_MAX_SUPERSTEPS = 1024
DEFAULT_MAX_EFFECTS_PER_ATTEMPT = 64
DEFAULT_LLM_MAX_TOKENS = 1024
LLM_EXECUTOR = "llm"
"""Executor of a model turn (``core.llm_loop``)."""


BUDGET_AXES: tuple[str, ...] = tuple(axis.value for axis in BudgetAxis)
"""Budget axes in the order they are checked (docs/architecture.md §7)."""


@dataclass(frozen=True, slots=True)
class Budgets:
    """Ceilings per axis; None means no ceiling. usd is integer micro-dollars."""

    max_supersteps: int = json_field(INT, default=DEFAULT_MAX_SUPERSTEPS)
    max_tokens: int | None = None
    max_usd_micros: int | None = None
    max_wall_ms: int | None = None
    max_storage_bytes: int | None = None

    def to_json(self) -> dict[str, Any]:
        return _BUDGETS.encode(self)

    @staticmethod
    def from_json(value: Mapping[str, Any]) -> Budgets:
        """Absent ceilings are none (absent supersteps, the default)."""
        return _BUDGETS.decode(dict(value))


_BUDGETS: RecordCodec[Budgets] = RecordCodec(Budgets)


@dataclass(frozen=True, slots=True)
class NodeExecutor:
    """How a node runs, frozen in the manifest: its kind and what it names.

    ``name`` is the tool name for tool nodes, the child workflow for subgraphs;
    ``spec`` carries kind-specific settings (ask prompt, timer duration, ...).
    """

    kind: str
    name: str = ""
    spec: Mapping[str, Any] = field(default_factory=dict)


def _no_args_check(tool: str, args: JSON) -> str | None:
    return None


def _builtin_condition(edge: PlanEdge, context: JSON) -> bool:
    condition = edge.condition
    return condition is None or condition.holds(context)


Reducer = Callable[[str, Any, JSON], JSON]
"""``(key, old or MISSING, new) -> merged``; pure and batching-invariant."""


@dataclass(frozen=True)
class StepEnv:
    """The injected pure behaviour and the run's frozen settings."""

    plan: Plan
    executors: tuple[NodeExecutor, ...]
    budgets: Budgets = Budgets()
    reduce: Reducer | None = None
    eval_cond: Callable[[PlanEdge, JSON], bool] = _builtin_condition
    ask_ttl_sec: int | None = None
    validate_args: Callable[[str, JSON], str | None] = _no_args_check
    llm_reserve_tokens: int = DEFAULT_LLM_MAX_TOKENS
    llm_reserve_usd_micros: int | None = None
    """The price of ``llm_reserve_tokens`` at the model's output rate (None: unpriced)."""
    max_effects_per_attempt: int = DEFAULT_MAX_EFFECTS_PER_ATTEMPT
    llm_tool_result_chars: int | None = None
    llm_context_tokens: int | None = None
    decide: Mapping[str, Any] | None = None
    validate_response: Callable[[str, JSON], str | None] = _no_args_check
    flows: Mapping[str, Any] = field(default_factory=dict)
    approval_tools: frozenset[str] = frozenset()
    """Tools an abstract node may only call after a second principal approves (§8)."""
    deferred_tools: frozenset[str] = frozenset()
    """Tools whose result a human supplies (the run parks until then)."""
    retry_policies: Mapping[int, RetryPolicy] = field(default_factory=dict)
    """Node index -> its ``retry:`` policy ; a node without
    one retries by its ``retries`` shorthand, at once."""
    engine_epoch: int = 1
    """The engine epoch the run was written by (§5.5): where the journaled behaviour of
    two epochs differs, the core asks this (the driver passes the run's pinned epoch)."""
    checkpoint_memo: ChunkMemo | None = field(default=None, compare=False, repr=False)
    """From epoch 3: what earlier checkpoints of this drive already cut (a cache: the
    digest and bytes do not depend on it). None: every checkpoint hands out all its nodes."""

    def reducer(self) -> Reducer:
        """The reducer to use: the injected one, else the plan's declared table (built
        once per environment, as every step of a run asks for it)."""
        if self.reduce is not None:
            return self.reduce
        return self._declared

    @cached_property
    def _declared(self) -> Reducer:
        return make_reducer(self.plan.reducers)


__all__ = ["BUDGET_AXES", "MISSING", "BudgetAxis", "Budgets", "NodeExecutor", "StepEnv"]
