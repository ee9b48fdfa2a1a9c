"""Tools of the scenario; each execution is appended to $SCENARIO_EVENTS."""

import os


def _record(line: str) -> None:
    with open(os.environ["SCENARIO_EVENTS"], "a") as f:
        f.write(line + "\n")


def poll() -> str:
    _record("poll")
    return "still running"
