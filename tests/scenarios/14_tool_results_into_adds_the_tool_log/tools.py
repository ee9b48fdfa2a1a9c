"""Tools of the scenario; each execution is appended to $SCENARIO_EVENTS."""

import os


def _record(line: str) -> None:
    with open(os.environ["SCENARIO_EVENTS"], "a") as f:
        f.write(line + "\n")


def stock(sku: str) -> dict:
    _record(f"stock {sku}")
    return {"sku": sku, "available": 3, "warehouse": "north-east-1"}


def reserve(sku: str, qty: int) -> dict:
    _record(f"reserve {sku} {qty}")
    raise RuntimeError("reservation service down")
