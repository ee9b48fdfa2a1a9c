"""Two agents, one calling the other as a tool, in a process of its own (so a test can
kill it at a journal boundary): ``agents_as_tools.py DB SPEC start|resume|verify RUN_ID``."""

from __future__ import annotations

import json
import sys
from typing import Any

from plait import Agent


def lookup(city: str) -> dict[str, Any]:
    """The weather in a city."""
    return {"city": city, "sky": "clear"}


def agents(db: str, spec: str) -> Agent[Any]:
    settings = {"max_retries": 0}
    researcher = Agent(
        spec, name="researcher", instructions="Look things up.", tools=[lookup],
        model_settings=settings, db=db, telemetry=False,
    )  # fmt: skip
    return Agent(
        spec, name="desk", instructions="Answer; ask the researcher for facts.",
        agents=[researcher], model_settings=settings, db=db, telemetry=False,
        budgets={"max_tokens": 10_000},
    )  # fmt: skip


if __name__ == "__main__":
    db, spec, mode, run_id = sys.argv[1:]
    with agents(db, spec) as desk:
        if mode == "start":
            state = desk.run_sync("Weather in Oslo?", run_id=run_id)
        elif mode == "resume":
            state = desk.resume_sync(run_id)
        else:
            print(json.dumps(desk.verify(run_id).to_json()))
            sys.exit(0)
        spent = desk._open_store().get_run(run_id)
        print(json.dumps({"status": state.status, "output": state.output, "row": spent.status}))
