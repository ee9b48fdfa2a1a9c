"""Budget checks (docs/architecture.md §7): pure functions over spent figures and ceilings.

At superstep open every axis with a ceiling must have spent < ceiling, checked
in the order supersteps, tokens, usd, wall_ms, storage_bytes. Before every
dispatch, wall and storage are checked against what is spent (including the
open wall segment).
"""

from __future__ import annotations

from plait.core.env import BudgetAxis, Budgets
from plait.core.state import Spent


def exhausted_at_open(budgets: Budgets, spent: Spent) -> BudgetAxis | None:
    """The first axis whose ceiling is reached, or None if a superstep may open."""
    if spent.supersteps >= budgets.max_supersteps:
        return BudgetAxis.SUPERSTEPS
    if budgets.max_tokens is not None and spent.input_tokens + spent.output_tokens >= (
        budgets.max_tokens
    ):
        return BudgetAxis.TOKENS
    if budgets.max_usd_micros is not None and spent.usd_micros >= budgets.max_usd_micros:
        return BudgetAxis.USD
    if budgets.max_wall_ms is not None and spent.wall_ms >= budgets.max_wall_ms:
        return BudgetAxis.WALL_MS
    if budgets.max_storage_bytes is not None and spent.storage_bytes >= budgets.max_storage_bytes:
        return BudgetAxis.STORAGE_BYTES
    return None


def exhausted_at_dispatch(
    budgets: Budgets, spent: Spent, clock_ms: int, wall_open: int | None
) -> BudgetAxis | None:
    """Wall (counting the open segment) and storage, checked before each dispatch."""
    if budgets.max_wall_ms is not None:
        wall = spent.wall_ms + (clock_ms - wall_open if wall_open is not None else 0)
        if wall >= budgets.max_wall_ms:
            return BudgetAxis.WALL_MS
    if budgets.max_storage_bytes is not None and spent.storage_bytes >= budgets.max_storage_bytes:
        return BudgetAxis.STORAGE_BYTES
    return None
