"""Turn costs in integer micro-dollars: Decimal arithmetic, half-up per turn (§7)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from plait.core.errors import PlaitError
from plait.models import BUILTIN_PRICES, Price, price_of, reserve_usd_micros, turn_cost_usd_micros


def test_a_turn_costs_input_and_output_tokens_at_their_prices():
    # gpt-4o-mini: 0.15 in, 0.60 out per million tokens = micro-dollars per token
    assert turn_cost_usd_micros("openai:gpt-4o-mini", 1000, 100) == 150 + 60


def test_half_a_micro_dollar_rounds_up():
    assert turn_cost_usd_micros("openai:gpt-4o-mini", 10, 0) == 2  # 1.5
    assert turn_cost_usd_micros("openai:gpt-4o-mini", 30, 0) == 5  # 4.5
    assert turn_cost_usd_micros("openai:gpt-4o-mini", 3, 0) == 0  # 0.45


def test_the_product_is_decimal_not_float():
    # 50 × 0.29 is 14.499999999999998 in binary floating point, exactly 14.5 in decimal
    prices = {"openai:m": {"input_per_mtok": 0.29, "output_per_mtok": 0}}

    assert turn_cost_usd_micros("openai:m", 50, 0, prices) == 15


def test_the_workflow_prices_win_over_the_built_in_table():
    prices = {"openai:gpt-4o-mini": {"input_per_mtok": 1, "output_per_mtok": 2.5}}

    assert turn_cost_usd_micros("openai:gpt-4o-mini", 10, 10, prices) == 35
    assert price_of("openai:gpt-4o-mini", prices) == Price(Decimal(1), Decimal("2.5"))
    assert price_of("openai:gpt-4o", prices) == BUILTIN_PRICES["openai:gpt-4o"]


def test_a_model_without_a_price_costs_none():
    assert turn_cost_usd_micros("openai-compatible:http://h:1/v1:llama3.1", 10, 10) is None
    assert turn_cost_usd_micros("scripted:answers.json", 10, 10) is None
    assert reserve_usd_micros("scripted:answers.json", 1024) is None


def test_a_scripted_model_is_priced_when_the_workflow_names_it():
    prices = {"scripted:answers.json": {"input_per_mtok": 3, "output_per_mtok": 15}}

    assert turn_cost_usd_micros("scripted:answers.json", 12, 5, prices) == 36 + 75


def test_the_reservation_is_max_tokens_at_the_output_price_half_up():
    assert reserve_usd_micros("anthropic:claude-sonnet-4-0", 1024) == 15360
    assert reserve_usd_micros("openai:gpt-4o-mini", 1) == 1  # 0.6
    half = {"openai:m": {"input_per_mtok": 0, "output_per_mtok": 0.5}}
    assert reserve_usd_micros("openai:m", 3, half) == 2  # 1.5


def test_the_built_in_table_holds_the_documented_prices():
    assert {
        spec: (str(p.input_per_mtok), str(p.output_per_mtok)) for spec, p in BUILTIN_PRICES.items()
    } == {
        "openai:gpt-4o-mini": ("0.15", "0.60"),
        "openai:gpt-4o": ("2.50", "10.00"),
        "openai:gpt-4.1-mini": ("0.40", "1.60"),
        "anthropic:claude-3-5-haiku-latest": ("0.80", "4.00"),
        "anthropic:claude-sonnet-4-0": ("3.00", "15.00"),
    }


@pytest.mark.parametrize(
    "price",
    [
        {"input_per_mtok": -1, "output_per_mtok": 1},
        {"input_per_mtok": True, "output_per_mtok": 1},
        {"input_per_mtok": "cheap", "output_per_mtok": 1},
        {"output_per_mtok": 1},
        {"input_per_mtok": float("nan"), "output_per_mtok": 1},
    ],
)
def test_an_invalid_price_is_E019(price):
    with pytest.raises(PlaitError) as caught:
        turn_cost_usd_micros("openai:m", 1, 1, {"openai:m": price})

    assert caught.value.code == "E019"
    assert "price of 'openai:m'" in str(caught.value)
