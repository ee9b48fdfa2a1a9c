"""Tools of the scenario; each execution is appended to $SCENARIO_EVENTS."""

import asyncio
import os


def _record(line: str) -> None:
    with open(os.environ["SCENARIO_EVENTS"], "a") as f:
        f.write(line + "\n")


# Completion order without sleeping: by default `order` (effect_seq 1) waits until
# `customer` (effect_seq 2) has finished, so the round completes in reverse order;
# SCENARIO_ORDER=in_order makes `customer` wait for `order` instead.
_order_done = asyncio.Event()
_customer_done = asyncio.Event()


def _in_order() -> bool:
    return os.environ.get("SCENARIO_ORDER") == "in_order"


async def order(order_id: int) -> dict:
    if not _in_order():
        await _customer_done.wait()
    _record(f"order {order_id} done")
    _order_done.set()
    return {"order_id": order_id, "total": 42}


async def customer(name: str) -> dict:
    if _in_order():
        await _order_done.wait()
    _record(f"customer {name} done")
    _customer_done.set()
    return {"name": name, "vip": True}
