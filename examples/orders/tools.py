"""Tools of the order pipeline example: plain Python functions.

Each receives the context keys it names as arguments and returns a dict that
merges into the context through the workflow's reducers.
"""

PRICES = {"widget": 1250, "gadget": 4999, "gizmo": 799}


def load_order(order_id: str = "A-1001") -> dict:
    lines = ["widget", "gadget", "widget", "gizmo"]
    return {"order_id": order_id, "lines": lines, "remaining": len(lines), "log": "loaded"}


def price_line(lines: list, remaining: int, attempts: dict | None = None) -> dict:
    item = lines[len(lines) - remaining]
    return {
        "remaining": remaining - 1,
        "total_cents": PRICES[item],
        "log": f"priced {item}",
    }


def decide(total_cents: int) -> dict:
    return {"approved": total_cents < 10_000, "log": "decided"}


def ship(order_id: str, total_cents: int) -> dict:
    return {"shipped": True, "log": f"shipped {order_id} for ${total_cents / 100:.2f}"}


def flag_for_review(order_id: str) -> dict:
    return {"flagged": True, "log": f"flagged {order_id}"}
