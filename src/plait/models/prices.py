"""Model prices and what a turn costs, in integer micro-dollars (docs/architecture.md §7).

Prices are USD per million tokens, which is the same number as micro-dollars per
token, so a turn costs ``input_tokens × input price + output_tokens × output
price`` micro-dollars, rounded half-up once per turn. The product is computed
with ``Decimal`` on the price's decimal text (``0.15`` is exactly 0.15, not the
nearest binary float), so every process charges the same integer. Nothing here
reads the clock or the network; a model without a price costs ``None``, never 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, ROUND_HALF_UP, Context, Decimal, InvalidOperation
from typing import Any

from plait.core.errors import PlaitError


@dataclass(frozen=True)
class Price:
    """USD per million tokens (= micro-dollars per token), input and output."""

    input_per_mtok: Decimal
    output_per_mtok: Decimal


BUILTIN_PRICES: Mapping[str, Price] = {
    spec: Price(Decimal(inp), Decimal(out))
    for spec, (inp, out) in {
        "openai:gpt-4o-mini": ("0.15", "0.60"),
        "openai:gpt-4o": ("2.50", "10.00"),
        "openai:gpt-4.1-mini": ("0.40", "1.60"),
        "anthropic:claude-3-5-haiku-latest": ("0.80", "4.00"),
        "anthropic:claude-sonnet-4-0": ("3.00", "15.00"),
    }.items()
}
"""A convenience, not a source of truth: list prices change, so a workflow that
budgets dollars should state its prices in ``llm.prices``, which win over this table."""

_EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)
"""Arithmetic that never rounds before the one half-up per turn, and never overflows:
a model may report any token count (28 digits would raise mid-run)."""


def price_of(model_spec: str, prices: Mapping[str, Any] | None = None) -> Price | None:
    """The price of a model: the workflow's ``llm.prices`` entry first, then the table."""
    override = (prices or {}).get(model_spec)
    if override is not None:
        if not isinstance(override, Mapping):
            raise PlaitError("E019", f"llm: price of '{model_spec}' must be a mapping")
        return Price(
            _decimal(model_spec, override, "input_per_mtok"),
            _decimal(model_spec, override, "output_per_mtok"),
        )
    return BUILTIN_PRICES.get(model_spec)


def turn_cost_usd_micros(
    model_spec: str,
    input_tokens: int,
    output_tokens: int,
    prices: Mapping[str, Any] | None = None,
) -> int | None:
    """What one turn cost in micro-dollars, rounded half-up; None when the model has no price."""
    price = price_of(model_spec, prices)
    if price is None:
        return None
    cost = _EXACT.add(
        _EXACT.multiply(Decimal(input_tokens), price.input_per_mtok),
        _EXACT.multiply(Decimal(output_tokens), price.output_per_mtok),
    )
    return int(cost.to_integral_value(ROUND_HALF_UP))


def reserve_usd_micros(
    model_spec: str, max_tokens: int, prices: Mapping[str, Any] | None = None
) -> int | None:
    """A turn's dollar reservation: ``max_tokens`` at the output price, rounded half-up."""
    price = price_of(model_spec, prices)
    if price is None:
        return None
    reserve = _EXACT.multiply(Decimal(max_tokens), price.output_per_mtok)
    return int(reserve.to_integral_value(ROUND_HALF_UP))


def _decimal(model_spec: str, price: Mapping[str, Any], key: str) -> Decimal:
    value = price.get(key)
    where = f"llm: price of '{model_spec}': {key}"
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        raise PlaitError("E019", f"{where} must be a number >= 0, got {value!r}")
    try:
        # str() of a float is its shortest round-trip text: 0.15 -> "0.15", exactly
        number = Decimal(value) if isinstance(value, Decimal) else Decimal(str(value))
    except InvalidOperation:
        raise PlaitError("E019", f"{where} must be a number >= 0, got {value!r}") from None
    if not number.is_finite() or number < 0:
        raise PlaitError("E019", f"{where} must be a number >= 0, got {value!r}")
    return number
