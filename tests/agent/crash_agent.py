"""An agent for the crash tests, run as a script: start, resume or verify one run.

    python crash_agent.py DB LOG_DIR start|resume|verify RUN_ID

Every model turn the agent really sends is logged to LOG_DIR/turns.log (by an
``after_response`` hook: a turn answered from the journal is not logged), every
tool execution to LOG_DIR/tools.log. It prints the run state as JSON.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pydantic import BaseModel

from plait import Agent
from plait.models import ModelRequest, ModelResponse

HERE = Path(__file__).resolve().parent
DB, LOG_DIR, MODE, RUN_ID = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4]
PRICES = {"widget": 1250, "gadget": 4999}


class OrderTotal(BaseModel):
    order_id: str
    total_cents: int


def log(name: str, line: str) -> None:
    with (LOG_DIR / name).open("a") as f:
        f.write(line + "\n")


def count_turn(request: ModelRequest, response: ModelResponse) -> None:
    log("turns.log", str(request.ordinal_in_run))


agent = Agent(
    f"scripted:{HERE / 'crash_answers.json'}",
    instructions="Total the order.",
    output_type=OrderTotal,
    db=DB,
    after_response=count_turn,
)


@agent.tool
def lookup_order(order_id: str) -> dict:
    """Find an order by id."""
    log("tools.log", f"lookup_order {order_id}")
    return {"order_id": order_id, "items": ["widget", "gadget", "widget"]}


@agent.tool
def unit_price(item: str) -> dict:
    """The unit price of an item, in cents."""
    log("tools.log", f"unit_price {item}")
    return {"item": item, "cents": PRICES[item]}


if MODE == "start":
    state = agent.run_sync("What is the total of order A-1?", run_id=RUN_ID)
elif MODE == "resume":
    state = agent.resume_sync(RUN_ID)
else:
    report = agent.verify(RUN_ID)
    print(json.dumps(report.to_json()))
    sys.exit(0 if report.verified else 1)
out = {
    "status": str(state.status),
    "structured_output": state.structured_output.model_dump() if state.structured_output else None,
    "run_step": state.run_step,
    "requests": state.usage.requests,
}
print(json.dumps(out))
