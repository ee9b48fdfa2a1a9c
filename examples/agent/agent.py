"""An agent with two tools and a typed answer, run offline with a scripted model.

    python examples/agent/agent.py

The model answers from answers.json (three turns: look the order up, price its
items in parallel, answer), so this runs without a key or a network. Swap the
model spec for a real provider to run it live (see README.md). The run is
journaled in $PLAIT_DB (default ./.plait/plait.db) and verified from its journal.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from plait import Agent

HERE = Path(__file__).resolve().parent
ORDERS = {"A-1": ["widget", "gadget", "widget"]}
PRICES = {"widget": 1250, "gadget": 4999}


class OrderTotal(BaseModel):
    order_id: str
    total_cents: int
    lines: int


agent = Agent(
    model=f"scripted:{HERE / 'answers.json'}",
    instructions="Find the order, price each of its items, and answer with the order total.",
    output_type=OrderTotal,
    budgets={"max_tokens": 20_000},
)


@agent.tool
def lookup_order(order_id: str) -> dict:
    """Find an order by id; returns its item names, one per line."""
    return {"order_id": order_id, "items": ORDERS[order_id]}


@agent.tool
def unit_price(item: str) -> dict:
    """The unit price of an item, in cents."""
    return {"item": item, "cents": PRICES[item]}


def main() -> None:
    with agent:
        result = agent.run_sync("What is the total of order A-1?")
        print(f"run {result.run_id}: {result.status}")
        print(f"structured output: {result.structured_output!r}")
        usage = result.usage
        print(
            f"usage: {usage.requests} model requests, {usage.tool_calls} tool calls,"
            f" {usage.input_tokens} input + {usage.output_tokens} output tokens"
        )
        print("trace:")
        for entry in agent.trace(result.run_id):
            if entry["kind"] == "llm":
                answer = entry.get("result") or {}
                calls = [c["name"] for c in answer.get("tool_calls") or []]
                what = f"calls {', '.join(calls)}" if calls else f"answers {answer.get('text')}"
            else:
                what = f"{entry['input']} -> {entry.get('result')}"
            print(f"  #{entry['effect_seq']} {entry['kind']:<4} {entry['status']:<9} {what}")
        report = agent.verify(result.run_id)
        verdict = "verified" if report.verified else f"NOT verified: {report.error}"
        print(f"verify: {verdict} ({report.checkpoints} checkpoints, up to {report.up_to})")
        if not report.verified:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
